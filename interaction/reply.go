package interaction

import (
	"context"
	"errors"

	"github.com/bwmarrin/discordgo"
)

// Reply is what a handler returns. Every reply is ephemeral and mentions
// nobody; the transport fits Content within Discord's 2000 characters.
type Reply struct {
	Content string
	// Choices are an autocomplete's suggestions; a command's reply has none.
	Choices []Choice
	// Modal, when not nil, is the answer instead of a message: Discord
	// shows it as a form, and its submit comes back as an invocation
	// routed by its custom_id (Command.Modals). Discord takes a modal only
	// as the first answer to a command or a click, never after a deferral
	// and never to a submit, so a command that may answer with one
	// declares OpensModal (the router then never defers it) and answers
	// within Discord's 3 s.
	Modal *Modal
	// Files are attached to the reply (sent as multipart/form-data).
	Files []File
}

// Modal is a form of text inputs (at most five), answered by a submit.
type Modal struct {
	// CustomID routes the submit (ComponentPrefix); at most MaxCustomID
	// characters, ids only: Discord sends it back as the client says.
	CustomID string
	Title    string // at most MaxModalTitle characters
	Inputs   []TextInput
}

// TextInputStyle is a text input's shape.
type TextInputStyle int

// The text input styles.
const (
	TextShort     TextInputStyle = 1 // one line
	TextParagraph TextInputStyle = 2 // several lines
)

// TextInput is one field of a modal; its value comes back in the submit's
// Options under CustomID.
type TextInput struct {
	CustomID    string
	Label       string // at most MaxInputLabel characters
	Style       TextInputStyle
	Required    bool
	MinLength   int // 0: none
	MaxLength   int // 0: Discord's MaxInputValue
	Value       string
	Placeholder string
}

// Discord's limits on a modal.
const (
	MaxModalTitle  = 45
	MaxModalInputs = 5
	MaxInputLabel  = 45
	MaxInputValue  = 4000
	MaxInputHolder = 100
)

// File is an attachment of a reply.
type File struct {
	Name        string
	ContentType string
	Data        []byte
}

// Choice is one autocomplete suggestion.
type Choice struct {
	Name  string
	Value string
}

// Handler returns the reply to an invocation, or an error: a UserError's
// sentence is shown as it is, any other error as a generic sentence.
type Handler func(ctx context.Context, inv Invocation) (Reply, error)

// Autocompleter returns suggestions for the focused option.
type Autocompleter func(ctx context.Context, inv Invocation) ([]Choice, error)

// Suggest adapts an Autocompleter to a Handler whose Reply carries the
// choices, so suggestions pass through the same middleware as commands.
func Suggest(a Autocompleter) Handler {
	return func(ctx context.Context, inv Invocation) (Reply, error) {
		choices, err := a(ctx, inv)
		return Reply{Choices: choices}, err
	}
}

// Command is a slash command: its definition (what is registered) and its
// handlers. The transport routes each under Path(name, subcommand).
type Command struct {
	Definition *discordgo.ApplicationCommand
	// Handlers reply to the command by subcommand name ("" for a command
	// without subcommands); each declared subcommand needs one.
	Handlers map[string]Handler
	// Autocomplete suggests choices for a subcommand's focused option; a
	// subcommand without one gets no choices.
	Autocomplete map[string]Autocompleter
	// Components reply to clicks on the buttons this command's replies or
	// messages carry, keyed by the custom_id prefix (ComponentPrefix:
	// "voice-consent" for "voice-consent:vs-0123abcd:in"). A click passes
	// through the same middleware as a command and is answered the same
	// way, ephemerally; the message the button is on is never edited.
	// A prefix is declared by one command only.
	Components map[string]Handler
	// Modals reply to the submits of the modals this command's handlers
	// open, keyed by the custom_id prefix as Components are (a prefix is
	// declared by one command only, among modals). A submit passes
	// through the same middleware as a command and is answered the same
	// way; like a click it carries nothing the handler may trust but the
	// submitter, the server and the channel Discord names.
	Modals map[string]Handler
	// OpensModal says the command's handlers may answer with a Modal. The
	// router never defers such a command (a modal cannot follow a
	// deferral), so its handlers must answer within Discord's 3 s:
	// check and build the form, and leave memory calls to the submit.
	OpensModal bool
}

// UserError is a refusal or failure whose message is a sentence for the
// person who invoked the command. Any other error becomes a generic sentence
// and a content-free log line.
type UserError struct{ Sentence string }

func (e *UserError) Error() string { return e.Sentence }

// AsUserError returns the UserError in err, and whether there is one.
func AsUserError(err error) (*UserError, bool) {
	var ue *UserError
	ok := errors.As(err, &ue)
	return ue, ok
}

// Sentences of the middleware and the mux, in English. The transport
// recognises ErrStale and ErrNotServed and shows the catalog's sentence
// in the invoker's language instead (lang.Stale, lang.NotServed).
const (
	// StaleSentence: the command or its options are not what this process
	// registered (Discord may still hold an older registration).
	StaleSentence = "This command's options don't match what I expect; the command list may be updating. Please try again in a minute."
	// NotServedSentence: a server outside the guild allow-list.
	NotServedSentence = "I'm not set up to serve this server."
)

// Errors the transport counts under outcomes of their own. ErrStale and
// ErrNotServed are UserErrors (their sentence is shown); ErrPanicked is
// shown as the generic sentence.
var (
	ErrStale     error = &UserError{Sentence: StaleSentence}
	ErrNotServed error = &UserError{Sentence: NotServedSentence}
	ErrPanicked        = errors.New("handler panicked")
)
