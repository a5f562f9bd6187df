package bot

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"
)

// Sentences the router itself says.
const (
	genericFailure = "Something went wrong on my side; nothing was changed. Please try again in a moment."
	staleCommand   = "This command's options don't match what I expect; the command list may be updating. Please try again in a minute."
	notHere        = "I'm not set up to serve this server."
)

// Responder is the part of discordgo's session the router uses to answer.
// It is an interface so the router's timing can be tested, but the bridges
// pass the real *discordgo.Session.
type Responder interface {
	InteractionRespond(interaction *discordgo.Interaction, resp *discordgo.InteractionResponse, options ...discordgo.RequestOption) error
	InteractionResponseEdit(interaction *discordgo.Interaction, newresp *discordgo.WebhookEdit, options ...discordgo.RequestOption) (*discordgo.Message, error)
}

// Router is the one entry point for interactions.
type Router struct {
	commands map[string]Command
	log      *zap.Logger
	// DeferAfter is how long a reply may take before the router defers it
	// (Discord drops an interaction not answered within 3 s).
	DeferAfter time.Duration
	// HandlerTimeout bounds a handler's whole run, deferred or not.
	HandlerTimeout time.Duration
	// Guilds, when not empty, are the only servers served.
	Guilds map[string]bool
	// Metrics, when not nil, counts interactions by command and outcome
	// and times each one's first callback.
	Metrics *Metrics

	answered *answered
	wg       sync.WaitGroup
}

// NewRouter routes to commands by name.
func NewRouter(log *zap.Logger, commands ...Command) *Router {
	r := &Router{commands: map[string]Command{}, log: log, DeferAfter: 1500 * time.Millisecond, HandlerTimeout: 10 * time.Second,
		answered: newAnswered(maxAnswered, time.Now)}
	for _, c := range commands {
		r.commands[c.Definition.Name] = c
	}
	return r
}

// Definitions answers what to register with Discord.
func (r *Router) Definitions() []*discordgo.ApplicationCommand {
	defs := make([]*discordgo.ApplicationCommand, 0, len(r.commands))
	for _, c := range r.commands {
		defs = append(defs, c.Definition)
	}
	return defs
}

// Wait blocks until every interaction in flight has been answered.
func (r *Router) Wait() { r.wg.Wait() }

// Handle is the discordgo event handler for INTERACTION_CREATE. Sessions
// deliver events in order on one goroutine (SyncEvents), so Handle answers
// on a goroutine of its own and the gateway keeps reading.
func (r *Router) Handle(s *discordgo.Session, ic *discordgo.InteractionCreate) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.serve(context.Background(), s, ic.Interaction)
	}()
}

// Serve answers one interaction. It never panics and never leaves an
// interaction unanswered when an answer is possible.
func (r *Router) Serve(ctx context.Context, s Responder, in *discordgo.Interaction) {
	r.wg.Add(1)
	defer r.wg.Done()
	r.serve(ctx, s, in)
}

func (r *Router) serve(ctx context.Context, s Responder, in *discordgo.Interaction) {
	if !r.answered.claim(in.ID) {
		// A redelivery (a resumed gateway replays events): Discord would
		// refuse a second answer with 40060, and the handler must not act
		// twice.
		r.log.Debug("interaction already answered", zap.String("interactionId", in.ID))
		return
	}
	a := &ack{s: s, in: in, log: r.log, start: time.Now(), metrics: r.Metrics, command: r.commandLabel(in), outcome: OutcomeOK}
	defer func() {
		if in.Type == discordgo.InteractionApplicationCommand || in.Type == discordgo.InteractionApplicationCommandAutocomplete {
			r.Metrics.interaction(a.command, in.Type == discordgo.InteractionApplicationCommandAutocomplete, a.outcome)
		}
	}()
	defer func() {
		if p := recover(); p != nil {
			a.outcome = OutcomePanicked
			r.log.Error("interaction handler panicked", zap.String("interactionId", in.ID),
				zap.String("panicType", fmt.Sprintf("%T", p)), zap.String("stack", firstFrames(debug.Stack())))
			if in.Type == discordgo.InteractionApplicationCommandAutocomplete {
				// Discord accepts only choices here; no choices is the answer.
				a.choices(nil)
				return
			}
			a.reply(Reply{Content: genericFailure})
		}
	}()
	switch in.Type {
	case discordgo.InteractionApplicationCommand:
		r.command(ctx, a, in)
	case discordgo.InteractionApplicationCommandAutocomplete:
		r.autocomplete(ctx, a, in)
	case discordgo.InteractionPing:
		a.respond(&discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong})
	default:
		r.log.Debug("ignored interaction type", zap.Int("type", int(in.Type)))
	}
}

func (r *Router) invocation(in *discordgo.Interaction) (Command, Invocation, error) {
	data := in.ApplicationCommandData()
	cmd, ok := r.commands[data.Name]
	if !ok {
		return cmd, Invocation{}, Sorry(staleCommand)
	}
	inv, err := parseInvocation(in, cmd.Definition)
	return cmd, inv, err
}

// serves reports whether the router answers interactions from guildID: every
// server when Guilds is empty, else only the listed ones. DMs pass; the
// commands themselves decide what a DM may do.
func (r *Router) serves(guildID string) bool {
	return len(r.Guilds) == 0 || guildID == "" || r.Guilds[guildID]
}

func (r *Router) command(ctx context.Context, a *ack, in *discordgo.Interaction) {
	if !r.serves(in.GuildID) {
		a.outcome = OutcomeNotServed
		a.reply(Reply{Content: notHere})
		return
	}
	cmd, inv, err := r.invocation(in)
	if err != nil {
		a.outcome = OutcomeStale
		a.reply(r.errorReply(in, err))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.HandlerTimeout)
	defer cancel()
	type result struct {
		reply Reply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				r.log.Error("command handler panicked", zap.String("interactionId", in.ID), zap.String("command", inv.Command),
					zap.String("panicType", fmt.Sprintf("%T", p)), zap.String("stack", firstFrames(debug.Stack())))
				done <- result{Reply{Content: genericFailure}, errHandlerPanicked}
			}
		}()
		rep, err := cmd.Handle(ctx, inv)
		done <- result{rep, err}
	}()
	timer := time.NewTimer(r.DeferAfter)
	defer timer.Stop()
	var res result
	select {
	case res = <-done:
	case <-timer.C:
		a.deferReply()
		res = <-done
	}
	switch {
	case res.err == errHandlerPanicked:
		a.outcome = OutcomePanicked
	case res.err != nil:
		a.outcome = OutcomeFailed
		if _, ok := AsUserError(res.err); ok {
			a.outcome = OutcomeRefused
		}
		res.reply = r.errorReply(in, res.err)
	}
	a.reply(res.reply)
}

// errHandlerPanicked marks a command handler's panic, already logged, so
// the reply is the failure sentence and the outcome says why.
var errHandlerPanicked = errors.New("command handler panicked")

// commandLabel names the interaction's command for metrics: a registered
// command's name, "unknown" for any other (a name Discord sends is not a
// closed set), "" for interactions that are not commands.
func (r *Router) commandLabel(in *discordgo.Interaction) string {
	if in.Type != discordgo.InteractionApplicationCommand && in.Type != discordgo.InteractionApplicationCommandAutocomplete {
		return ""
	}
	if _, ok := r.commands[in.ApplicationCommandData().Name]; ok {
		return in.ApplicationCommandData().Name
	}
	return "unknown"
}

func (r *Router) autocomplete(ctx context.Context, a *ack, in *discordgo.Interaction) {
	if !r.serves(in.GuildID) {
		// A server the commands refuse gets no suggestions either: no
		// choices is the only answer Discord takes here.
		a.outcome = OutcomeNotServed
		a.choices(nil)
		return
	}
	cmd, inv, err := r.invocation(in)
	var choices []Choice
	if err == nil && cmd.Autocomplete != nil {
		ctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		choices, err = cmd.Autocomplete(ctx, inv)
		cancel()
	}
	if err != nil {
		a.outcome = OutcomeRefused
		if _, ok := AsUserError(err); !ok {
			a.outcome = OutcomeFailed
			r.log.Warn("autocomplete failed", zap.String("interactionId", in.ID), zap.String("errorType", fmt.Sprintf("%T", err)))
		}
		choices = nil
	}
	a.choices(choices)
}

// errorReply maps an error to what the user sees: a UserError's sentence, or
// a generic sentence with a content-free log line (the error's type and the
// command, never its text, which may quote input).
func (r *Router) errorReply(in *discordgo.Interaction, err error) Reply {
	if ue, ok := AsUserError(err); ok {
		return Reply{Content: ue.Sentence}
	}
	name := ""
	if in.Type == discordgo.InteractionApplicationCommand || in.Type == discordgo.InteractionApplicationCommandAutocomplete {
		name = in.ApplicationCommandData().Name
	}
	r.log.Error("command failed", zap.String("interactionId", in.ID), zap.String("command", name), zap.String("errorType", fmt.Sprintf("%T", err)))
	return Reply{Content: genericFailure}
}

// ack tracks whether an interaction has been acknowledged, so a reply is a
// callback before and an edit of the original response after.
type ack struct {
	s        Responder
	in       *discordgo.Interaction
	log      *zap.Logger
	deferred bool
	done     bool

	start   time.Time // when the interaction arrived
	metrics *Metrics
	command string // the metrics label
	outcome string
}

func (a *ack) respond(resp *discordgo.InteractionResponse) {
	if err := a.s.InteractionRespond(a.in, resp); err != nil {
		a.log.Warn("interaction callback failed", zap.String("interactionId", a.in.ID), zap.String("error", restError(err)))
		return
	}
	if !a.done {
		a.metrics.callback(a.command, time.Since(a.start))
	}
	a.done = true
}

// choices answers an autocomplete: at most 25 suggestions, each clipped to
// Discord's 100 characters, names neutralised (values are sent back to us,
// never shown).
func (a *ack) choices(choices []Choice) {
	if a.done {
		return
	}
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(choices))
	for _, c := range choices {
		if len(out) == 25 {
			break
		}
		name := clip(Neutralize(c.Name), 100)
		if name == "" || c.Value == "" {
			continue // Discord refuses an empty name or value
		}
		out = append(out, &discordgo.ApplicationCommandOptionChoice{Name: name, Value: clip(c.Value, 100)})
	}
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionApplicationCommandAutocompleteResult,
		Data: &discordgo.InteractionResponseData{Choices: out},
	})
}

func (a *ack) deferReply() {
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	})
	a.deferred = a.done
}

func (a *ack) reply(rep Reply) {
	content := Fit(Neutralize(rep.Content), MaxContent)
	if content == "" {
		content = "Done."
	}
	none := &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
	if a.deferred {
		if _, err := a.s.InteractionResponseEdit(a.in, &discordgo.WebhookEdit{Content: &content, AllowedMentions: none}); err != nil {
			a.log.Warn("editing the deferred reply failed", zap.String("interactionId", a.in.ID), zap.String("error", restError(err)))
		}
		return
	}
	if a.done {
		return
	}
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: content, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: none},
	})
}

// restError describes a failed Discord call without its request body (which
// would hold the reply's content) or any token in its URL.
func restError(err error) string {
	if re, ok := err.(*discordgo.RESTError); ok {
		code := 0
		if re.Message != nil {
			code = re.Message.Code
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Sprintf("discord answered %d (code %d)", status, code)
	}
	return NetReason(err)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// firstFrames keeps a stack trace's function lines (no argument values).
func firstFrames(stack []byte) string {
	var out []string
	for _, l := range strings.Split(string(stack), "\n") {
		if strings.HasPrefix(l, "\t") || l == "" {
			continue
		}
		if i := strings.LastIndex(l, "("); i > 0 {
			l = l[:i]
		}
		out = append(out, l)
		if len(out) == 12 {
			break
		}
	}
	return strings.Join(out, " | ")
}
