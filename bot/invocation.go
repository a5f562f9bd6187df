// Package bot knows Discord and nothing of memory. It builds the discordgo
// session, syncs slash commands, and routes every interaction through one
// entry point that recovers panics, checks option types, acknowledges in
// time (deferring when a reply is slow) and turns errors into sentences.
// Command handlers get an Invocation and return a Reply; they never call
// Discord themselves.
package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// User is a Discord user as a handler needs it: an id, and whether it is a bot.
type User struct {
	ID  string
	Bot bool
}

// Invocation is one slash-command or autocomplete interaction, stripped of
// the Discord client so handlers can be tested without one.
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

// String answers a string option.
func (o Options) String(name string) (string, bool) {
	v, ok := o.values[name].(string)
	return v, ok
}

// Int answers an integer option.
func (o Options) Int(name string) (int64, bool) {
	v, ok := o.values[name].(int64)
	return v, ok
}

// User answers a user option, with the bot flag from the resolved data.
func (o Options) User(name string) (User, bool) {
	v, ok := o.values[name].(User)
	return v, ok
}

// NewOptions builds Options for handler tests.
func NewOptions(values map[string]any) Options { return Options{values: values} }

// Reply is what a handler answers. Every reply is ephemeral and mentions
// nobody; the router fits Content within Discord's 2000 characters.
type Reply struct {
	Content string
}

// Choice is one autocomplete suggestion.
type Choice struct {
	Name  string
	Value string
}

// Handler answers a command invocation.
type Handler func(ctx context.Context, inv Invocation) (Reply, error)

// Autocompleter answers suggestions for the focused option.
type Autocompleter func(ctx context.Context, inv Invocation) ([]Choice, error)

// Command is a slash command: its definition (what is registered) and its
// handlers.
type Command struct {
	Definition   *discordgo.ApplicationCommand
	Handle       Handler
	Autocomplete Autocompleter
}

// UserError is a refusal or failure whose message is a sentence for the
// person who invoked the command. Any other error becomes a generic sentence
// and a content-free log line.
type UserError struct{ Sentence string }

func (e *UserError) Error() string { return e.Sentence }

// Sorry answers a UserError with a formatted sentence.
func Sorry(format string, args ...any) error {
	return &UserError{Sentence: fmt.Sprintf(format, args...)}
}

// AsUserError answers the UserError in err, if any.
func AsUserError(err error) (*UserError, bool) {
	var ue *UserError
	ok := errors.As(err, &ue)
	return ue, ok
}
