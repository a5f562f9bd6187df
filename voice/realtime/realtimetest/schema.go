package realtimetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// specFile is where OpenAI's Realtime event schemas live, relative to the
// directory that holds the repository (CI clones shared/ beside it).
const specFile = "shared/openai-realtime-spec/openai-realtime.json"

// fallbackSpec is the absolute copy used when ../shared is missing (a
// worktree under /work/wt has no shared/ beside it).
const fallbackSpec = "/work/shared/openai-realtime-spec/openai-realtime.json"

// SpecPath returns the path of openai-realtime.json: <module root>/../shared/…
// when present, else the absolute fallback.
func SpecPath() (string, error) {
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(filepath.Dir(root), specFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if _, err := os.Stat(fallbackSpec); err == nil {
		return fallbackSpec, nil
	}
	return "", errors.New("realtimetest: openai-realtime.json not found beside the module (../" + specFile + ") nor at " + fallbackSpec)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Violation is why a frame does not validate, in the live server's terms:
// the code its error event carries and the parameter it names.
type Violation struct {
	Code    string // unknown_parameter, missing_required_parameter, invalid_value, unknown_event, invalid_json
	Param   string // dotted path of the offending parameter, when one is named
	Message string // for the test's failure message; never sent back with content
}

func (v Violation) String() string {
	if v.Param == "" {
		return v.Code + ": " + v.Message
	}
	return v.Code + " (" + v.Param + "): " + v.Message
}

// Validator checks events against the GA RealtimeClientEvent* and
// RealtimeServerEvent* schemas, strictly: every object schema that lists
// its properties is treated as closed, as the live server answers extra
// fields with unknown_parameter.
type Validator struct {
	client map[string]*jsonschema.Schema // event type → schema
	server map[string]*jsonschema.Schema
}

// NewValidator compiles the schemas in the spec at path.
func NewValidator(path string) (*Validator, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("realtimetest: %s: %w", path, err)
	}
	schemas, _ := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	if len(schemas) == 0 {
		return nil, fmt.Errorf("realtimetest: %s holds no components.schemas", path)
	}
	for _, s := range schemas {
		closeObjects(s)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "urn:openai-realtime.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	v := &Validator{client: map[string]*jsonschema.Schema{}, server: map[string]*jsonschema.Schema{}}
	for name, s := range schemas {
		var into map[string]*jsonschema.Schema
		switch {
		case strings.HasPrefix(name, "RealtimeClientEvent") && name != "RealtimeClientEvent":
			into = v.client
		case strings.HasPrefix(name, "RealtimeServerEvent") && name != "RealtimeServerEvent":
			into = v.server
		default:
			continue
		}
		typ := eventType(s)
		if typ == "" {
			return nil, fmt.Errorf("realtimetest: %s has no single event type", name)
		}
		cs, err := c.Compile(url + "#/components/schemas/" + name)
		if err != nil {
			return nil, fmt.Errorf("realtimetest: compile %s: %w", name, err)
		}
		into[typ] = cs
	}
	if len(v.client) < 10 || v.client["session.update"] == nil || v.server["session.created"] == nil {
		return nil, fmt.Errorf("realtimetest: %s lacks the GA client and server events", path)
	}
	return v, nil
}

// eventType is the single value of a schema's properties.type.enum.
func eventType(s any) string {
	m, _ := s.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	t, _ := props["type"].(map[string]any)
	enum, _ := t["enum"].([]any)
	if len(enum) != 1 {
		return ""
	}
	str, _ := enum[0].(string)
	return str
}

// closeObjects adds additionalProperties: false to every object schema
// under s that lists properties and says nothing about others. It walks
// only the keywords that hold schemas, so a property named "properties" is
// never mistaken for the keyword.
func closeObjects(s any) {
	m, ok := s.(map[string]any)
	if !ok {
		return
	}
	if props, ok := m["properties"].(map[string]any); ok {
		if _, set := m["additionalProperties"]; !set {
			m["additionalProperties"] = false
		}
		for _, p := range props {
			closeObjects(p)
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else"} {
		closeObjects(m[k])
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
		if list, ok := m[k].([]any); ok {
			for _, x := range list {
				closeObjects(x)
			}
		}
	}
	for _, k := range []string{"$defs", "definitions", "patternProperties", "dependentSchemas"} {
		if defs, ok := m[k].(map[string]any); ok {
			for _, x := range defs {
				closeObjects(x)
			}
		}
	}
}

// ClientEvent validates one frame a client sent. It returns nil when the
// frame is a GA client event that validates strictly.
func (v *Validator) ClientEvent(frame []byte) *Violation { return validate(v.client, frame) }

// ServerEvent validates one frame a server sent, so the fake cannot drift
// from what the live server says.
func (v *Validator) ServerEvent(frame []byte) *Violation { return validate(v.server, frame) }

func validate(schemas map[string]*jsonschema.Schema, frame []byte) *Violation {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(frame))
	if err != nil {
		return &Violation{Code: "invalid_json", Message: "the frame is not JSON"}
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return &Violation{Code: "invalid_json", Message: "the frame is not a JSON object"}
	}
	typ, _ := obj["type"].(string)
	s := schemas[typ]
	if s == nil {
		return &Violation{Code: "unknown_event", Param: "type", Message: fmt.Sprintf("no GA event has type %q", typ)}
	}
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Violation{Code: "invalid_value", Message: err.Error()}
	}
	return classify(ve)
}

// classify names a validation failure the way the live server would: a
// missing required field first, then an unknown one, else a bad value.
// Inside anyOf/oneOf only the branches whose discriminators (type, role)
// match the instance are looked at, so an item that is a system message is
// not reported as a function call missing its name.
func classify(ve *jsonschema.ValidationError) *Violation {
	leaves := leavesOf(ve)
	if len(leaves) == 0 {
		return &Violation{Code: "invalid_value", Message: ve.Error()}
	}
	for _, want := range []string{"required", "additional"} {
		for _, e := range leaves {
			switch k := e.ErrorKind.(type) {
			case *kind.Required:
				if want == "required" {
					return &Violation{Code: "missing_required_parameter", Param: join(e.InstanceLocation, k.Missing[0]), Message: e.Error()}
				}
			case *kind.AdditionalProperties:
				if want == "additional" {
					return &Violation{Code: "unknown_parameter", Param: join(e.InstanceLocation, k.Properties[0]), Message: e.Error()}
				}
			}
		}
	}
	e := leaves[0]
	return &Violation{Code: "invalid_value", Param: join(e.InstanceLocation, ""), Message: e.Error()}
}

// leavesOf collects the innermost failures under e, skipping the anyOf and
// oneOf branches whose discriminator does not match (when some do).
func leavesOf(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	causes := e.Causes
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		matching := slices.DeleteFunc(slices.Clone(causes), func(b *jsonschema.ValidationError) bool {
			return mismatchedDiscriminator(b, len(b.InstanceLocation))
		})
		if len(matching) > 0 {
			causes = matching
		}
	}
	var out []*jsonschema.ValidationError
	for _, c := range causes {
		out = append(out, leavesOf(c)...)
	}
	return out
}

// mismatchedDiscriminator reports whether a branch failed because the
// object's own type or role is not the branch's.
func mismatchedDiscriminator(e *jsonschema.ValidationError, depth int) bool {
	if len(e.Causes) == 0 {
		switch e.ErrorKind.(type) {
		case *kind.Enum, *kind.Const:
			loc := e.InstanceLocation
			return len(loc) == depth+1 && (loc[depth] == "type" || loc[depth] == "role")
		}
		return false
	}
	for _, c := range e.Causes {
		if mismatchedDiscriminator(c, depth) {
			return true
		}
	}
	return false
}

func join(loc []string, last string) string {
	parts := slices.Clone(loc)
	if last != "" {
		parts = append(parts, last)
	}
	return strings.Join(parts, ".")
}

// Must is json.Marshal for the fake's own events, which always marshal.
func must(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
