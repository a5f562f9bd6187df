package discordtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// CommandPut is one bulk overwrite (PUT) of application commands.
type CommandPut struct {
	Scope string // GlobalScope ("") or a guild id
	// Commands as the bot sent them (nil if the body did not decode).
	Commands []*discordgo.ApplicationCommand
	Raw      json.RawMessage
	Status   int // 200, or the error status the fake answered
}

// storedCommand is a registered command: what Discord answers for it, and the
// canonical form of what the bot sent, to keep the version stable when an
// overwrite does not change the command.
type storedCommand struct {
	obj  map[string]any
	sent string
}

// CommandPuts returns the bulk overwrites for scope, oldest first, including
// rejected ones (Status 400), so a test can count registrations.
func (f *Fake) CommandPuts(scope string) []CommandPut {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []CommandPut
	for _, p := range f.puts {
		if p.Scope == scope {
			out = append(out, p)
		}
	}
	return out
}

// WaitCommandPuts waits until scope has at least n bulk overwrites (accepted
// or not) and returns them.
func (f *Fake) WaitCommandPuts(ctx context.Context, scope string, n int) ([]CommandPut, error) {
	var out []CommandPut
	err := f.waitFor(ctx, func() bool {
		out = out[:0]
		for _, p := range f.puts {
			if p.Scope == scope {
				out = append(out, p)
			}
		}
		return len(out) >= n
	})
	return slices.Clone(out), err
}

// Commands returns the commands currently registered in scope, with the ids,
// application_id and version the fake assigned.
func (f *Fake) Commands(scope string) []*discordgo.ApplicationCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*discordgo.ApplicationCommand, 0, len(f.commands[scope]))
	for _, c := range f.commands[scope] {
		var ac discordgo.ApplicationCommand
		if err := json.Unmarshal(mustJSON(c.obj), &ac); err == nil {
			out = append(out, &ac)
		}
	}
	return out
}

// commandScope checks the app id and guild of a command route.
func (f *Fake) commandScope(r *http.Request) (string, *reply) {
	if r.PathValue("app") != f.cfg.appID {
		rep := apiError(http.StatusForbidden, CodeMissingAccess, "Missing Access")
		return "", &rep
	}
	guild := r.PathValue("guild")
	if guild != "" {
		if _, ok := f.guilds[guild]; !ok {
			// Discord answers this when the bot is not in the guild.
			rep := apiError(http.StatusForbidden, CodeMissingAccess, "Missing Access")
			return "", &rep
		}
	}
	return guild, nil
}

func (f *Fake) getCommands(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	scope, bad := f.commandScope(r)
	if bad != nil {
		return *bad
	}
	full := r.URL.Query().Get("with_localizations") == "true"
	out := make([]map[string]any, 0, len(f.commands[scope]))
	for _, c := range f.commands[scope] {
		obj := c.obj
		if !full {
			obj = withoutLocalizations(obj)
		}
		out = append(out, obj)
	}
	return okJSON(out)
}

// withoutLocalizations is a stored command as Discord lists it without
// ?with_localizations=true: no localization maps at any depth (a sync that
// compares them must ask for them).
func withoutLocalizations(obj map[string]any) map[string]any {
	var strip func(v any) any
	strip = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				if k != "name_localizations" && k != "description_localizations" {
					out[k] = strip(e)
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = strip(e)
			}
			return out
		}
		return v
	}
	return strip(obj).(map[string]any)
}

func (f *Fake) putCommands(r *http.Request, body []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	scope, bad := f.commandScope(r)
	if bad != nil {
		return *bad
	}
	put := CommandPut{Scope: scope, Raw: append(json.RawMessage(nil), body...)}
	var rep reply
	if bad := invalidReply(r); bad != nil {
		rep = *bad
		var sent []*discordgo.ApplicationCommand
		if json.Unmarshal(body, &sent) == nil {
			put.Commands = sent
		}
	} else {
		rep = f.overwriteLocked(scope, body, &put)
	}
	put.Status = rep.status
	f.puts = append(f.puts, put)
	f.notifyLocked()
	return rep
}

func (f *Fake) overwriteLocked(scope string, body []byte, put *CommandPut) reply {
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return apiError(http.StatusBadRequest, CodeInvalidJSON, "The request body contains invalid JSON.")
	}
	var sent []*discordgo.ApplicationCommand
	if json.Unmarshal(body, &sent) == nil {
		put.Commands = sent
	}
	ins := make([]cmdIn, len(raws))
	objs := make([]map[string]any, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &ins[i]); err != nil {
			return formError([]fieldError{{path: []string{strconv.Itoa(i)}, code: "MODEL_TYPE_CONVERT", message: "Only dictionaries may be used in a ModelType"}})
		}
		if err := json.Unmarshal(raw, &objs[i]); err != nil {
			return apiError(http.StatusBadRequest, CodeInvalidJSON, "The request body contains invalid JSON.")
		}
	}
	if errs := validateCommands(ins, f.locales()); len(errs) > 0 {
		return formError(errs)
	}

	prev := map[string]storedCommand{}
	for _, c := range f.commands[scope] {
		prev[commandKey(c.obj)] = c
	}
	stored := make([]storedCommand, len(objs))
	out := make([]map[string]any, len(objs))
	for i, obj := range objs {
		canon := string(mustJSON(obj))
		if _, ok := obj["type"]; !ok || obj["type"] == nil {
			obj["type"] = 1
		}
		for _, k := range []string{"id", "application_id", "version", "guild_id"} {
			delete(obj, k)
		}
		id, version := f.ids.next(), ""
		if p, ok := prev[commandKey(obj)]; ok {
			id = p.obj["id"].(string)
			if p.sent == canon {
				version = p.obj["version"].(string)
			}
		}
		if version == "" {
			version = f.ids.next()
		}
		obj["id"] = id
		obj["application_id"] = f.cfg.appID
		obj["version"] = version
		if scope != GlobalScope {
			obj["guild_id"] = scope
		}
		if _, ok := obj["default_member_permissions"]; !ok {
			obj["default_member_permissions"] = nil
		}
		if _, ok := obj["nsfw"]; !ok {
			obj["nsfw"] = false
		}
		if _, ok := obj["integration_types"]; !ok && scope == GlobalScope {
			obj["integration_types"] = []int{0}
		}
		stored[i] = storedCommand{obj: obj, sent: canon}
		out[i] = obj
	}
	f.commands[scope] = stored
	return okJSON(out)
}

// commandKey identifies a command across overwrites: Discord keeps the id of a
// command whose name and type are unchanged.
func commandKey(obj map[string]any) string {
	return fmt.Sprint(obj["name"], "/", obj["type"])
}

// ---- Discord-shaped validation errors ----

type fieldError struct {
	path    []string
	code    string
	message string
}

// formError returns 400 Invalid Form Body with Discord's nested errors object.
func formError(errs []fieldError) reply {
	root := map[string]any{}
	for _, e := range errs {
		m := root
		for _, p := range e.path {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		list, _ := m["_errors"].([]any)
		m["_errors"] = append(list, map[string]any{"code": e.code, "message": e.message})
	}
	return reply{http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": CodeInvalidFormBody, "errors": root}}
}

func sub(path []string, more ...string) []string {
	return append(slices.Clone(path), more...)
}

// ---- application command validation ----

type cmdIn struct {
	Name        string  `json:"name"`
	Type        int     `json:"type"`
	Description string  `json:"description"`
	Options     []optIn `json:"options"`
	localized
}

// localized are a command's or an option's localizations, by locale.
type localized struct {
	NameLocalizations        map[string]string `json:"name_localizations"`
	DescriptionLocalizations map[string]string `json:"description_localizations"`
}

type optIn struct {
	Type        int    `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	localized
	Required     bool       `json:"required"`
	Autocomplete bool       `json:"autocomplete"`
	Choices      []choiceIn `json:"choices"`
	Options      []optIn    `json:"options"`
	MinLength    *int       `json:"min_length"`
	MaxLength    *int       `json:"max_length"`
}

type choiceIn struct {
	Name              string            `json:"name"`
	NameLocalizations map[string]string `json:"name_localizations"`
	Value             any               `json:"value"`
}

// chatNameRE is Discord's rule for CHAT_INPUT command and option names.
var chatNameRE = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

const (
	maxCommands       = 100
	maxOptions        = 25
	maxChoices        = 25
	maxCommandSize    = 8000
	maxDescriptionLen = 100
)

func badLength(path []string, lo, hi int) fieldError {
	return fieldError{path, "BASE_TYPE_BAD_LENGTH", fmt.Sprintf("Must be between %d and %d in length.", lo, hi)}
}

func checkChatName(path []string, name string) []fieldError {
	if !chatNameRE.MatchString(name) || strings.ToLower(name) != name {
		return []fieldError{{path, "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"}}
	}
	return nil
}

func checkDescription(path []string, d string) []fieldError {
	if n := utf8.RuneCountInString(d); n < 1 || n > maxDescriptionLen {
		return []fieldError{badLength(path, 1, maxDescriptionLen)}
	}
	return nil
}

// checkLocales holds a localization map's keys to Discord's locales
// (AvailableLocalesEnum) and each value to check: a name's rule, or a
// description's or a choice's length.
func checkLocales(path []string, m map[string]string, locales map[string]bool, check func([]string, string) []fieldError) []fieldError {
	var errs []fieldError
	for _, l := range slices.Sorted(maps.Keys(m)) {
		p := sub(path, l)
		if !locales[l] {
			errs = append(errs, fieldError{p, "BASE_TYPE_CHOICES", "Value must be one of Discord's locales."})
			continue
		}
		errs = append(errs, check(p, m[l])...)
	}
	return errs
}

// checkLocalized checks a command's or an option's name and description
// localizations; chat is false for a context-menu command, whose names
// only need 1–32 characters and which has no description.
func checkLocalized(path []string, l localized, locales map[string]bool, chat bool) []fieldError {
	name := checkChatName
	if !chat {
		name = func(p []string, n string) []fieldError {
			if c := utf8.RuneCountInString(n); c < 1 || c > 32 {
				return []fieldError{badLength(p, 1, 32)}
			}
			return nil
		}
	}
	errs := checkLocales(sub(path, "name_localizations"), l.NameLocalizations, locales, name)
	return append(errs, checkLocales(sub(path, "description_localizations"), l.DescriptionLocalizations, locales, checkDescription)...)
}

// localNames are the names of one level's commands or options in each
// locale they are localized to, falling back to the default name, as a
// client in that locale shows them; two equal names in one locale are
// refused like two equal default names.
type localNames map[string]map[string]bool

// clash records name as shown in each of locales and reports the first
// locale in which it is already taken, "" when none.
func (ln localNames) clash(name string, l map[string]string, locales map[string]bool) string {
	taken := ""
	for _, loc := range slices.Sorted(maps.Keys(locales)) {
		n := name
		if v, ok := l[loc]; ok {
			n = v
		}
		if ln[loc] == nil {
			ln[loc] = map[string]bool{}
		}
		if ln[loc][n] && taken == "" {
			taken = loc
		}
		ln[loc][n] = true
	}
	return taken
}

// validateCommands applies the rules Discord checks on a bulk overwrite that a
// bot can plausibly break; a violation is a 400 in production too. locales
// are the keys a localization map may have.
func validateCommands(cmds []cmdIn, locales map[string]bool) []fieldError {
	var errs []fieldError
	if len(cmds) > maxCommands {
		errs = append(errs, fieldError{nil, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxCommands)})
	}
	seen := map[string]bool{}
	shown := map[int]localNames{}
	for i, c := range cmds {
		p := []string{strconv.Itoa(i)}
		typ := c.Type
		if typ == 0 {
			typ = int(discordgo.ChatApplicationCommand)
		}
		key := c.Name + "/" + strconv.Itoa(typ)
		if seen[key] {
			errs = append(errs, fieldError{sub(p, "name"), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique"})
		}
		dupDefault := seen[key]
		seen[key] = true
		if shown[typ] == nil {
			shown[typ] = localNames{}
		}
		if loc := shown[typ].clash(c.Name, c.NameLocalizations, locales); loc != "" && !dupDefault {
			errs = append(errs, fieldError{sub(p, "name_localizations", loc), "APPLICATION_COMMANDS_DUPLICATE_NAME", "Application command names must be unique"})
		}
		switch typ {
		case int(discordgo.ChatApplicationCommand):
			errs = append(errs, checkChatName(sub(p, "name"), c.Name)...)
			errs = append(errs, checkDescription(sub(p, "description"), c.Description)...)
			errs = append(errs, checkLocalized(p, c.localized, locales, true)...)
			errs = append(errs, validateOptions(sub(p, "options"), c.Options, optLevelTop, locales)...)
		case int(discordgo.UserApplicationCommand), int(discordgo.MessageApplicationCommand):
			if n := utf8.RuneCountInString(c.Name); n < 1 || n > 32 {
				errs = append(errs, badLength(sub(p, "name"), 1, 32))
			}
			errs = append(errs, checkLocalized(p, c.localized, locales, false)...)
			if c.Description != "" {
				errs = append(errs, fieldError{sub(p, "description"), "APPLICATION_COMMAND_CONTEXT_MENU_DESCRIPTION", "Context menu commands cannot have description"})
			}
			if len(c.Options) > 0 {
				errs = append(errs, fieldError{sub(p, "options"), "APPLICATION_COMMAND_CONTEXT_MENU_OPTIONS", "Context menu commands cannot have options"})
			}
		default:
			errs = append(errs, fieldError{sub(p, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4}."})
		}
		size := utf8.RuneCountInString(c.Name) + utf8.RuneCountInString(c.Description) + optionsSize(c.Options)
		if size > maxCommandSize {
			errs = append(errs, fieldError{p, "APPLICATION_COMMAND_TOO_LARGE", fmt.Sprintf("Command exceeds maximum size (%d)", maxCommandSize)})
		}
	}
	return errs
}

type optLevel int

const (
	optLevelTop optLevel = iota
	optLevelGroup
	optLevelSub
)

func isSub(t int) bool {
	return t == int(discordgo.ApplicationCommandOptionSubCommand) || t == int(discordgo.ApplicationCommandOptionSubCommandGroup)
}

func validateOptions(path []string, opts []optIn, level optLevel, locales map[string]bool) []fieldError {
	var errs []fieldError
	if len(opts) > maxOptions {
		errs = append(errs, fieldError{path, "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxOptions)})
	}
	names := map[string]bool{}
	shown := localNames{}
	hasSub, hasOther, sawOptional := false, false, false
	for i, o := range opts {
		p := sub(path, strconv.Itoa(i))
		if names[o.Name] {
			errs = append(errs, fieldError{sub(p, "name"), "APPLICATION_COMMAND_OPTION_NAME_ALREADY_EXISTS", "Option names must be unique"})
		}
		if loc := shown.clash(o.Name, o.NameLocalizations, locales); loc != "" && !names[o.Name] {
			errs = append(errs, fieldError{sub(p, "name_localizations", loc), "APPLICATION_COMMAND_OPTION_NAME_ALREADY_EXISTS", "Option names must be unique"})
		}
		names[o.Name] = true
		errs = append(errs, checkChatName(sub(p, "name"), o.Name)...)
		errs = append(errs, checkDescription(sub(p, "description"), o.Description)...)
		errs = append(errs, checkLocalized(p, o.localized, locales, true)...)
		if o.Type < 1 || o.Type > 11 {
			errs = append(errs, fieldError{sub(p, "type"), "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}."})
			continue
		}
		if isSub(o.Type) {
			hasSub = true
		} else {
			hasOther = true
			if o.Required && sawOptional {
				errs = append(errs, fieldError{sub(p, "required"), "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", "Required options must be placed before non-required options"})
			}
			if !o.Required {
				sawOptional = true
			}
		}
		switch {
		case level == optLevelGroup && o.Type != int(discordgo.ApplicationCommandOptionSubCommand):
			errs = append(errs, fieldError{sub(p, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command groups can only contain sub-commands"})
		case level == optLevelSub && isSub(o.Type):
			errs = append(errs, fieldError{sub(p, "type"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-commands cannot contain sub-commands"})
		}
		valued := o.Type == int(discordgo.ApplicationCommandOptionString) || o.Type == int(discordgo.ApplicationCommandOptionInteger) || o.Type == int(discordgo.ApplicationCommandOptionNumber)
		if len(o.Choices) > 0 && !valued {
			errs = append(errs, fieldError{sub(p, "choices"), "APPLICATION_COMMAND_OPTION_CHOICES_INVALID", "Choices are only allowed on string, integer and number options"})
		}
		if o.Autocomplete && !valued {
			errs = append(errs, fieldError{sub(p, "autocomplete"), "APPLICATION_COMMAND_OPTION_AUTOCOMPLETE_INVALID", "Autocomplete is only allowed on string, integer and number options"})
		}
		if o.Autocomplete && len(o.Choices) > 0 {
			errs = append(errs, fieldError{sub(p, "autocomplete"), "APPLICATION_COMMAND_AUTOCOMPLETE_INCOMPATIBLE_WITH_CHOICES", "Autocomplete cannot be used with choices"})
		}
		if len(o.Choices) > maxChoices {
			errs = append(errs, fieldError{sub(p, "choices"), "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Must be %d or fewer in length.", maxChoices)})
		}
		for j, ch := range o.Choices {
			errs = append(errs, checkChoice(sub(p, "choices", strconv.Itoa(j)), o.Type, ch)...)
			errs = append(errs, checkLocales(sub(p, "choices", strconv.Itoa(j), "name_localizations"), ch.NameLocalizations, locales, func(q []string, n string) []fieldError {
				if c := utf8.RuneCountInString(n); c < 1 || c > 100 {
					return []fieldError{badLength(q, 1, 100)}
				}
				return nil
			})...)
		}
		if (o.MinLength != nil || o.MaxLength != nil) && o.Type != int(discordgo.ApplicationCommandOptionString) {
			errs = append(errs, fieldError{sub(p, "min_length"), "APPLICATION_COMMAND_OPTION_LENGTH_INVALID", "Length limits are only allowed on string options"})
		}
		for _, l := range []*int{o.MinLength, o.MaxLength} {
			if l != nil && (*l < 0 || *l > 6000) {
				errs = append(errs, fieldError{sub(p, "max_length"), "NUMBER_TYPE_MAX", "int value should be between 0 and 6000."})
			}
		}
		switch o.Type {
		case int(discordgo.ApplicationCommandOptionSubCommandGroup):
			errs = append(errs, validateOptions(sub(p, "options"), o.Options, optLevelGroup, locales)...)
		case int(discordgo.ApplicationCommandOptionSubCommand):
			errs = append(errs, validateOptions(sub(p, "options"), o.Options, optLevelSub, locales)...)
		default:
			if len(o.Options) > 0 {
				errs = append(errs, fieldError{sub(p, "options"), "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Only sub-commands and groups can have options"})
			}
		}
	}
	if level == optLevelTop && hasSub && hasOther {
		errs = append(errs, fieldError{path, "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", "Sub-command and sub-command group option types are mutually exclusive to all other types"})
	}
	return errs
}

func checkChoice(p []string, optType int, ch choiceIn) []fieldError {
	var errs []fieldError
	if n := utf8.RuneCountInString(ch.Name); n < 1 || n > 100 {
		errs = append(errs, badLength(sub(p, "name"), 1, 100))
	}
	switch v := ch.Value.(type) {
	case string:
		if optType != int(discordgo.ApplicationCommandOptionString) {
			errs = append(errs, fieldError{sub(p, "value"), "NUMBER_TYPE_COERCE", "Value \"" + v + "\" is not a number."})
		} else if n := utf8.RuneCountInString(v); n < 1 || n > 100 {
			errs = append(errs, badLength(sub(p, "value"), 1, 100))
		}
	case float64:
		if optType == int(discordgo.ApplicationCommandOptionString) {
			errs = append(errs, fieldError{sub(p, "value"), "STRING_TYPE_CONVERT", "Could not interpret value as string."})
		} else if optType == int(discordgo.ApplicationCommandOptionInteger) && v != float64(int64(v)) {
			errs = append(errs, fieldError{sub(p, "value"), "INTEGER_TYPE_COERCE", "Value is not int."})
		}
	default:
		errs = append(errs, fieldError{sub(p, "value"), "BASE_TYPE_REQUIRED", "This field is required"})
	}
	return errs
}

func optionsSize(opts []optIn) int {
	n := 0
	for _, o := range opts {
		n += utf8.RuneCountInString(o.Name) + utf8.RuneCountInString(o.Description)
		for _, ch := range o.Choices {
			n += utf8.RuneCountInString(ch.Name) + utf8.RuneCountInString(fmt.Sprint(ch.Value))
		}
		n += optionsSize(o.Options)
	}
	return n
}
