// Package interaction is what a slash-command (or button) handler sees and returns, with
// neither the Discord transport (package bot) nor any service client in it:
// an Invocation in, a Reply or an error out, a UserError for a sentence the
// person should read. It also holds the middleware every invocation passes
// through (recovery, the guild allow-list, deferral, timeouts) and the Mux
// that routes an invocation by its path ("person-memory/propose"). A
// button click is an Invocation too, routed by its custom_id's prefix
// (ComponentPrefix) to the Command that declared it.
//
// Handlers never call Discord; package bot parses Discord's interaction
// into an Invocation and turns the Reply into Discord's response, so the
// commands are tested without a gateway.
package interaction

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

// User is a Discord user as a handler needs it: an id, and whether it is a bot.
type User struct {
	ID  string
	Bot bool
}

// Message is the message a message command was invoked on, as Discord
// resolves it. Content is what someone wrote: it reaches the handler
// (Discord sends it to a message command without the Message Content
// intent) and never a log line.
type Message struct {
	ID        string
	ChannelID string
	Author    User
	// Webhook is set for a message a webhook posted (its author is not a
	// person, whatever its bot flag says).
	Webhook bool
	Content string
}

// Invocation is one slash-command, context-menu, autocomplete, button or
// modal-submit interaction,
// stripped of the Discord client so handlers can be tested without one.
type Invocation struct {
	// ID is the interaction id, unique per invocation and stable across a
	// redelivery; handlers derive idempotency keys from it.
	ID        string
	GuildID   string // empty in a DM
	ChannelID string
	User      User
	// RoleIDs and Permissions are the invoker's in this guild and channel.
	RoleIDs     []string
	Permissions int64
	Command     string
	Subcommand  string
	Options     Options
	// Focused names the option being typed, for autocomplete.
	Focused string
	// CustomID is a clicked button's or a submitted modal's whole
	// custom_id ("voice-consent:vs-0123abcd:in"), empty for a command;
	// Command and Subcommand are empty for a click or a submit.
	// The router only checked its shape and that its prefix is declared:
	// Discord sends back whatever a client puts there, so a handler parses
	// the rest itself and trusts nothing in it (check the clicker's rights
	// and the state it names as for a command's options). A modal submit's
	// text inputs are its Options, strings keyed by each input's custom_id.
	CustomID string
	// TargetID is what a context-menu command was invoked on (Discord's
	// target_id): a user for a user command, a message for a message
	// command; empty otherwise. TargetUser or TargetMessage is its
	// resolved data, which the router requires.
	TargetID      string
	TargetUser    *User
	TargetMessage *Message
	// Locale is the invoker's Discord locale ("de", "en-US", "pt-BR"),
	// which every ephemeral reply is written in; GuildLocale is the
	// server's ("" in a DM), for a message everyone in a channel reads.
	// Both are as Discord sent them: a handler picks its printer with
	// them and trusts them for nothing else.
	Locale      string
	GuildLocale string
	// Defer, when not nil, acknowledges the interaction now and promises
	// the reply later (Discord drops an interaction not acknowledged within
	// 3 s). It is safe to call from any goroutine, more than once, and after
	// the reply; only the first call before the reply does anything.
	Defer func()
}

// MaxCustomID is Discord's limit on a component's custom_id, in characters.
const MaxCustomID = 100

// ComponentPrefix returns the part of customID before its first ':' (all
// of it without one): the Components key a click is routed by. ok is false
// for a custom_id Discord would not have accepted on a message (empty, over
// MaxCustomID characters, or holding a control character) or an empty
// prefix, which no command can declare.
func ComponentPrefix(customID string) (prefix string, ok bool) {
	if customID == "" || utf8.RuneCountInString(customID) > MaxCustomID || !utf8.ValidString(customID) ||
		strings.ContainsFunc(customID, unicode.IsControl) {
		return "", false
	}
	prefix, _, _ = strings.Cut(customID, ":")
	return prefix, prefix != ""
}

// Path returns where the invocation is routed: "command/subcommand", or the
// command's name alone when it has no subcommands.
func (inv Invocation) Path() string { return Path(inv.Command, inv.Subcommand) }

// Path joins a command's name and a subcommand's into a route path.
func Path(command, subcommand string) string {
	if subcommand == "" {
		return command
	}
	return command + "/" + subcommand
}

// HasPermission reports whether the invoker holds perm (Administrator
// implies every permission, as in Discord).
func (inv Invocation) HasPermission(perm int64) bool {
	return inv.Permissions&discordgo.PermissionAdministrator != 0 || inv.Permissions&perm == perm
}

// HasRole reports whether the invoker holds any of roles.
func (inv Invocation) HasRole(roles []string) bool {
	for _, have := range inv.RoleIDs {
		for _, want := range roles {
			if have == want {
				return true
			}
		}
	}
	return false
}

// Options are an invocation's option values by name, already type-checked
// against the command's definition.
type Options struct {
	values map[string]any
}

// NewOptions holds values by option name: a string, an int64, a bool or a
// User, as the command's definition declares them.
func NewOptions(values map[string]any) Options { return Options{values: values} }

// String returns a string option, and whether it was given.
func (o Options) String(name string) (string, bool) {
	v, ok := o.values[name].(string)
	return v, ok
}

// Int returns an integer option, and whether it was given.
func (o Options) Int(name string) (int64, bool) {
	v, ok := o.values[name].(int64)
	return v, ok
}

// User returns a user option, with the bot flag from the resolved data, and
// whether it was given.
func (o Options) User(name string) (User, bool) {
	v, ok := o.values[name].(User)
	return v, ok
}
