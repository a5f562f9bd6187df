package discordtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/bwmarrin/discordgo"
	"github.com/getkin/kin-openapi/openapi3"
)

// specRelPath is where Discord's OpenAPI description lives beside the
// repository (CI clones the repo with shared/ next to it).
const specRelPath = "shared/discord-api-spec/openapi.json"

// specFallback is the absolute copy on a development machine, used when the
// repository is a worktree without shared/ beside it.
const specFallback = "/work/" + specRelPath

// Spec is Discord's own OpenAPI description of its HTTP API, which the fake
// checks every request body against. Loading it takes a few hundred
// milliseconds, so a test package keeps one Spec and hands it to every fake
// (WithSpec); it loads on first use, once.
type Spec struct {
	path string

	once   sync.Once
	doc    *openapi3.T
	routes []specRoute
	err    error
}

type specRoute struct {
	segments []string // "{…}" matches any one segment
	item     *openapi3.PathItem
}

// NewSpec finds Discord's description at <module root>/../shared/… or, when
// that is missing, at /work/shared/…. It does not read it yet.
func NewSpec() *Spec { return &Spec{path: locateSpec()} }

// NewSpecAt uses the description at path.
func NewSpecAt(path string) *Spec { return &Spec{path: path} }

// Path returns the file the Spec reads.
func (s *Spec) Path() string { return s.path }

// Available reports whether the file exists (without loading it).
func (s *Spec) Available() bool {
	st, err := os.Stat(s.path)
	return err == nil && st.Mode().IsRegular()
}

func locateSpec() string {
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				p := filepath.Join(filepath.Dir(d), specRelPath)
				if _, err := os.Stat(p); err == nil {
					return p
				}
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return specFallback
}

// load reads and checks the description once.
func (s *Spec) load() error {
	s.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(s.path)
		if err != nil {
			s.err = fmt.Errorf("load Discord's OpenAPI description %s: %w", s.path, err)
			return
		}
		if err := doc.Validate(loader.Context); err != nil {
			s.err = fmt.Errorf("check Discord's OpenAPI description %s: %w", s.path, err)
			return
		}
		// Discord's convention is that its anyOf unions (x-discord-union:
		// oneOf) mean "one of them": a body must fit one branch whole,
		// which anyOf already demands. They stay anyOf: some branches
		// overlap (an interaction follow-up fits both webhook shapes), and
		// exclusive oneOf would refuse bodies Discord takes.
		for path, item := range doc.Paths.Map() {
			s.routes = append(s.routes, specRoute{segments: strings.Split(strings.Trim(path, "/"), "/"), item: item})
		}
		s.doc = doc
	})
	return s.err
}

// operation finds the operation for method and path (below the API base),
// preferring literal segments ("@original") over parameters.
func (s *Spec) operation(method, path string) *openapi3.Operation {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var best *openapi3.PathItem
	bestScore := -1
	for _, r := range s.routes {
		if len(r.segments) != len(segs) {
			continue
		}
		score := 0
		for i, seg := range r.segments {
			switch {
			case seg == segs[i]:
				score++
			case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") && segs[i] != "":
			default:
				score = -1
			}
			if score < 0 {
				break
			}
		}
		if score > bestScore {
			best, bestScore = r.item, score
		}
	}
	if best == nil {
		return nil
	}
	return best.GetOperation(method)
}

// checkBody validates a JSON request body against the operation's schema,
// returning Discord-shaped field errors. Discord accepts a string for an
// integer field when it parses as one, so such strings are read as numbers
// first.
func (s *Spec) checkBody(method, path string, body []byte) []fieldError {
	op := s.operation(method, path)
	if op == nil || op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil // not a route with a body in the description
	}
	mt := op.RequestBody.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return []fieldError{{nil, "CONTENT_TYPE_INVALID", "Expected Content-Type other than application/json"}}
	}
	if len(body) == 0 {
		if op.RequestBody.Value.Required {
			return []fieldError{{nil, "BASE_TYPE_REQUIRED", "This field is required"}}
		}
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil // the route answers 50109 itself
	}
	schema := branchForType(mt.Schema.Value, v)
	v = coerceInts([]*openapi3.Schema{schema}, v)
	err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
	if err == nil {
		return nil
	}
	return schemaFieldErrors(err)
}

// branchForType returns, for a union of object shapes told apart by their
// "type" (an interaction callback), the one branch whose type the body
// names, so only that branch is compiled and checked: validating the whole
// union costs several times more, on every callback. Otherwise it returns
// the schema itself.
func branchForType(sc *openapi3.Schema, v any) *openapi3.Schema {
	obj, ok := v.(map[string]any)
	if !ok {
		return sc
	}
	typ, ok := obj["type"].(float64)
	if !ok {
		return sc
	}
	var match *openapi3.Schema
	for _, refs := range []openapi3.SchemaRefs{sc.AnyOf, sc.OneOf} {
		for _, r := range refs {
			if r == nil || r.Value == nil || r.Value.Properties["type"] == nil || r.Value.Properties["type"].Value == nil {
				continue
			}
			if !slices.ContainsFunc(r.Value.Properties["type"].Value.Enum, func(e any) bool { return e == typ }) {
				continue
			}
			if match != nil {
				return sc // two branches take this type: check the union
			}
			match = r.Value
		}
	}
	if match == nil {
		return sc
	}
	return match
}

// coerceInts turns a string into a number where the schemas at that place
// accept an integer or a number and none accepts a string, as Discord does
// ("our API accepts strings for int fields if they are parseable as ints").
func coerceInts(schemas []*openapi3.Schema, v any) any {
	cands := flatten(schemas)
	switch x := v.(type) {
	case string:
		wantNum, wantStr := false, false
		for _, sc := range cands {
			if sc.Type == nil {
				continue
			}
			wantNum = wantNum || sc.Type.Includes("integer") || sc.Type.Includes("number")
			wantStr = wantStr || sc.Type.Includes("string")
		}
		if wantNum && !wantStr {
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return float64(n)
			}
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			var sub []*openapi3.Schema
			for _, sc := range cands {
				if p := sc.Properties[k]; p != nil && p.Value != nil {
					sub = append(sub, p.Value)
				} else if ap := sc.AdditionalProperties.Schema; ap != nil && ap.Value != nil {
					sub = append(sub, ap.Value)
				}
			}
			out[k] = coerceInts(sub, val)
		}
		return out
	case []any:
		var sub []*openapi3.Schema
		for _, sc := range cands {
			if sc.Items != nil && sc.Items.Value != nil {
				sub = append(sub, sc.Items.Value)
			}
		}
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = coerceInts(sub, val)
		}
		return out
	}
	return v
}

// flatten returns schemas with every schema they combine (allOf, oneOf,
// anyOf), each once.
func flatten(schemas []*openapi3.Schema) []*openapi3.Schema {
	var out []*openapi3.Schema
	seen := map[*openapi3.Schema]bool{}
	var walk func(*openapi3.Schema)
	walk = func(sc *openapi3.Schema) {
		if sc == nil || seen[sc] {
			return
		}
		seen[sc] = true
		out = append(out, sc)
		for _, refs := range []openapi3.SchemaRefs{sc.AllOf, sc.OneOf, sc.AnyOf} {
			for _, r := range refs {
				if r != nil {
					walk(r.Value)
				}
			}
		}
	}
	for _, sc := range schemas {
		walk(sc)
	}
	return out
}

// schemaFieldErrors turns a validation error into Discord's nested field
// errors, at most five. Where a union failed, it reports the branch that came
// closest (its errors lie deepest: the branch whose "type" matched went on to
// the field that is wrong), not every branch.
func schemaFieldErrors(err error) []fieldError {
	leaves := schemaLeaves(err)
	if len(leaves) == 0 {
		return []fieldError{{nil, "BASE_TYPE_INVALID", firstLine(err.Error())}}
	}
	var out []fieldError
	seen := map[string]bool{}
	for _, l := range leaves {
		fe := fieldError{path: l.JSONPointer(), code: schemaCode(l.SchemaField), message: leafMessage(l.Reason)}
		key := strings.Join(fe.path, "/") + "\x00" + fe.message
		if seen[key] || len(out) == 5 {
			continue
		}
		seen[key] = true
		out = append(out, fe)
	}
	return out
}

// schemaLeaves returns the innermost errors of err, choosing one branch at
// each failed union.
func schemaLeaves(err error) []*openapi3.SchemaError {
	switch e := err.(type) {
	case nil:
		return nil
	case openapi3.MultiError:
		var out []*openapi3.SchemaError
		for _, sub := range e {
			out = append(out, schemaLeaves(sub)...)
		}
		return out
	case *openapi3.SchemaError:
		var inner openapi3.MultiError
		if e.Origin == nil || !errors.As(e.Origin, &inner) {
			return []*openapi3.SchemaError{e}
		}
		if e.SchemaField != "anyOf" && e.SchemaField != "oneOf" || len(inner) < 2 {
			return schemaLeaves(inner)
		}
		return closestBranch(inner)
	default:
		return schemaLeaves(errors.Unwrap(err))
	}
}

// closestBranch picks, among a union's failed branches, the one the value
// was meant for: not one whose "type" discriminator differs, then the one
// whose errors lie deepest, then the one with fewest errors.
func closestBranch(branches openapi3.MultiError) []*openapi3.SchemaError {
	var best []*openapi3.SchemaError
	bestRank := [3]int{-1}
	for _, b := range branches {
		leaves := schemaLeaves(b)
		matched, depth := 1, 0
		for _, l := range leaves {
			p := l.JSONPointer()
			depth = max(depth, len(p))
			if (l.SchemaField == "enum" || l.SchemaField == "const") && len(p) > 0 && p[len(p)-1] == "type" {
				matched = 0
			}
		}
		rank := [3]int{matched, depth, -len(leaves)}
		if best == nil || rank[0] > bestRank[0] || rank[0] == bestRank[0] && (rank[1] > bestRank[1] || rank[1] == bestRank[1] && rank[2] > bestRank[2]) {
			best, bestRank = leaves, rank
		}
	}
	return best
}

// schemaCode names a failed keyword the way Discord's form errors do.
func schemaCode(keyword string) string {
	switch keyword {
	case "maxLength", "maxItems", "maxProperties":
		return "BASE_TYPE_MAX_LENGTH"
	case "minLength", "minItems", "minProperties":
		return "BASE_TYPE_MIN_LENGTH"
	case "required":
		return "BASE_TYPE_REQUIRED"
	case "enum", "const", "oneOf", "anyOf":
		return "BASE_TYPE_CHOICES"
	case "maximum", "exclusiveMaximum":
		return "NUMBER_TYPE_MAX"
	case "minimum", "exclusiveMinimum":
		return "NUMBER_TYPE_MIN"
	case "type":
		return "BASE_TYPE_TYPE"
	case "uniqueItems":
		return "BASE_TYPE_DUPLICATE"
	case "pattern", "format":
		return "BASE_TYPE_FORMAT"
	}
	return "BASE_TYPE_INVALID"
}

// leafMessage keeps the validator's own sentence ("value must be 0") from
// its multi-line reason.
func leafMessage(reason string) string {
	lines := strings.Split(strings.TrimSpace(reason), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if i := strings.LastIndex(last, "': "); i >= 0 {
		last = last[i+3:]
	}
	return last
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// ---- rules the description does not hold ----

// userAgentOK reports whether ua has the form Discord requires of a bot:
// "DiscordBot ($url, $versionNumber)".
func userAgentOK(ua string) bool {
	rest, ok := strings.CutPrefix(ua, "DiscordBot (")
	if !ok {
		return false
	}
	inner, _, ok := strings.Cut(rest, ")")
	if !ok {
		return false
	}
	url, version, ok := strings.Cut(inner, ", ")
	return ok && strings.TrimSpace(url) != "" && strings.TrimSpace(version) != ""
}

// checkHeaders applies Discord's header rules: every request names the bot
// in a "DiscordBot (url, version)" User-Agent, and a body is JSON with a
// Content-Type that says so.
func checkHeaders(h http.Header, body []byte) []fieldError {
	var errs []fieldError
	if !userAgentOK(h.Get("User-Agent")) {
		errs = append(errs, fieldError{[]string{"headers", "User-Agent"}, "USER_AGENT_INVALID",
			`User-Agent must be "DiscordBot ($url, $versionNumber)"`})
	}
	if len(body) > 0 {
		ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
		if !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
			errs = append(errs, fieldError{[]string{"headers", "Content-Type"}, "CONTENT_TYPE_INVALID",
				"Expected Content-Type application/json for a JSON body"})
		}
	}
	return errs
}

// Violation is a request the fake refused as Discord would refuse it: a body
// the spec or a documented limit does not allow, a missing header, an
// interaction answered twice. A bot that sends one would fail in production,
// so a fake's test fails at cleanup unless the test took its violations
// (TakeViolations) to assert them.
type Violation struct {
	Method string
	Path   string // below the API base; interaction tokens are elided
	Route  string
	Status int
	Answer string // Discord's error body
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s answered %d %s", v.Method, v.Path, v.Status, v.Answer)
}

// TakeViolations returns the requests refused so far and forgets them, so a
// test that sends a bad request on purpose can assert the refusal without
// failing at cleanup.
func (f *Fake) TakeViolations() []Violation {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.violations
	f.violations = nil
	return out
}

// Violations returns the requests refused so far, without forgetting them.
func (f *Fake) Violations() []Violation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.violations)
}

// assertNoViolations fails the test for every refusal nobody took.
func (f *Fake) assertNoViolations() {
	for _, v := range f.Violations() {
		f.t.Errorf("discordtest: Discord would refuse this request: %s", v)
	}
}

// redactPath hides interaction and webhook tokens in a recorded path.
func redactPath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if len(s) > 40 {
			segs[i] = "<token>"
		}
	}
	return strings.Join(segs, "/")
}

// locales are the locales Discord's description lists
// (AvailableLocalesEnum): the keys a localization map may have. Nil when
// the description has no such enum.
func (s *Spec) locales() map[string]bool {
	ref := s.doc.Components.Schemas["AvailableLocalesEnum"]
	if ref == nil || ref.Value == nil {
		return nil
	}
	out := map[string]bool{}
	for _, branch := range ref.Value.OneOf {
		if c, ok := branch.Value.Const.(string); ok {
			out[c] = true
		}
	}
	for _, e := range ref.Value.Enum {
		if c, ok := e.(string); ok {
			out[c] = true
		}
	}
	return out
}

// locales are the keys a command's localization map may have: Discord's
// AvailableLocalesEnum from its description, or, when the fake runs
// without it, discordgo's list of the same locales.
func (f *Fake) locales() map[string]bool {
	if f.cfg.spec != nil {
		if l := f.cfg.spec.locales(); len(l) > 0 {
			return l
		}
	}
	out := map[string]bool{}
	for l := range discordgo.Locales {
		out[string(l)] = true
	}
	return out
}
