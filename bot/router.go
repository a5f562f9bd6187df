package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// Default timing of a Router (Config's zero values).
const (
	// defaultDeferAfter: Discord drops an interaction not answered within
	// 3 s, so a reply slower than this is deferred and completed by an edit.
	defaultDeferAfter = 1500 * time.Millisecond
	// defaultHandlerTimeout bounds a handler's whole run, deferred or not.
	defaultHandlerTimeout = 10 * time.Second
	// autocompleteTimeout: suggestions cannot be deferred.
	autocompleteTimeout = 2500 * time.Millisecond
	// modalTimeout bounds a command that may answer with a modal, which
	// cannot be deferred either.
	modalTimeout = 2500 * time.Millisecond
)

// Responder is the part of discordgo's session the router uses to answer.
// It is an interface so the router's timing can be tested, but the bridges
// pass the real *discordgo.Session.
type Responder interface {
	InteractionRespond(interaction *discordgo.Interaction, resp *discordgo.InteractionResponse, options ...discordgo.RequestOption) error
	InteractionResponseEdit(interaction *discordgo.Interaction, newresp *discordgo.WebhookEdit, options ...discordgo.RequestOption) (*discordgo.Message, error)
}

// Config is how a Router serves, fixed at construction.
type Config struct {
	// Guilds, when not empty, are the only servers served
	// (DISCORD_GUILD_IDS); DMs pass.
	Guilds []string
	// Metrics, when not nil, counts interactions by command and outcome
	// and times each one's first callback.
	Metrics *Metrics
	// DeferAfter is how long a reply may take before it is deferred
	// (1.5 s when zero).
	DeferAfter time.Duration
	// HandlerTimeout bounds a handler's whole run (10 s when zero).
	HandlerTimeout time.Duration
	// Catalog words the router's own sentences (the generic failure, the
	// stale and not-served sentences, memory out of reach) in the
	// invoker's locale; the embedded catalog when nil.
	Catalog *lang.Catalog
}

// Router is the one entry point for interactions: it parses each into an
// interaction.Invocation, runs it through the middleware and the mux, and
// turns the reply or error into Discord's response.
type Router struct {
	commands map[string]interaction.Command
	// components and modals are the declared custom_id prefixes
	// (Command.Components, Command.Modals).
	components, modals map[string]interaction.Handler
	log                *zap.Logger
	metrics            *Metrics
	cat                *lang.Catalog

	// command and suggest serve a parsed invocation; staleCommand and
	// staleSuggest one whose command or options do not match the
	// definitions (it still passes the allow-list first, so an unlisted
	// server hears that it is not served). component serves a button
	// click and modal a modal submit through the commands' middleware;
	// modalCommand a command that may answer with a modal, through the
	// same middleware but the deferral.
	command, staleCommand, suggest, staleSuggest, component, modal, modalCommand interaction.Handler

	answered *answered
	wg       sync.WaitGroup
}

// NewRouter routes to commands by path ("name/subcommand") through the
// middleware: recovery outermost, then the guild allow-list, deferral and
// the timeout for commands; recovery, the allow-list and a shorter timeout
// for suggestions. A button click or a modal submit goes through the
// commands' middleware to the handler its custom_id's prefix names. A
// command that declares OpensModal is never deferred (a modal cannot follow
// a deferral) and has the suggestions' shorter timeout. A component or modal
// prefix that is not a valid key, declared twice or with a nil handler, and
// a command name declared twice, are programming errors and panic, as a
// route does in interaction.Mux.
func NewRouter(log *zap.Logger, cfg Config, commands ...interaction.Command) *Router {
	if cfg.DeferAfter <= 0 {
		cfg.DeferAfter = defaultDeferAfter
	}
	if cfg.HandlerTimeout <= 0 {
		cfg.HandlerTimeout = defaultHandlerTimeout
	}
	if cfg.Catalog == nil {
		cat, err := lang.Load()
		if err != nil {
			// The catalog is embedded: a broken one is a broken build.
			panic(fmt.Sprintf("bot: %v", err))
		}
		cfg.Catalog = cat
	}
	r := &Router{commands: map[string]interaction.Command{}, components: map[string]interaction.Handler{},
		modals: map[string]interaction.Handler{}, log: log, metrics: cfg.Metrics, cat: cfg.Catalog, answered: newAnswered(maxAnswered, time.Now)}
	handlers, suggestions := interaction.NewMux(), interaction.NewMux()
	for _, c := range commands {
		if _, dup := r.commands[c.Definition.Name]; dup {
			panic(fmt.Sprintf("bot: the command %q is declared twice", c.Definition.Name))
		}
		r.commands[c.Definition.Name] = c
		for sub, h := range c.Handlers {
			handlers.Handle(interaction.Path(c.Definition.Name, sub), h)
		}
		for sub, a := range c.Autocomplete {
			suggestions.Handle(interaction.Path(c.Definition.Name, sub), interaction.Suggest(a))
		}
		declarePrefixes(c.Definition.Name, "component", c.Components, r.components)
		declarePrefixes(c.Definition.Name, "modal", c.Modals, r.modals)
	}
	stale := func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		return interaction.Reply{}, interaction.ErrStale
	}
	// A path without suggestions gets none: Discord only asks for options
	// declared with autocomplete.
	suggest := func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
		if h, ok := suggestions.Handler(inv.Path()); ok {
			return h(ctx, inv)
		}
		return interaction.Reply{}, nil
	}
	commandMW := []interaction.Middleware{interaction.Recover(log), interaction.AllowGuilds(cfg.Guilds),
		interaction.DeferAfter(cfg.DeferAfter), interaction.Timeout(cfg.HandlerTimeout)}
	suggestMW := []interaction.Middleware{interaction.Recover(log), interaction.AllowGuilds(cfg.Guilds),
		interaction.Timeout(autocompleteTimeout)}
	byPrefix := func(declared map[string]interaction.Handler) interaction.Handler {
		return func(ctx context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			prefix, _ := interaction.ComponentPrefix(inv.CustomID)
			h, ok := declared[prefix]
			if !ok {
				return interaction.Reply{}, interaction.ErrStale
			}
			return h(ctx, inv)
		}
	}
	r.command = interaction.Chain(handlers.Serve, commandMW...)
	r.modalCommand = interaction.Chain(handlers.Serve, interaction.Recover(log), interaction.AllowGuilds(cfg.Guilds),
		interaction.Timeout(modalTimeout))
	r.component = interaction.Chain(byPrefix(r.components), commandMW...)
	r.modal = interaction.Chain(byPrefix(r.modals), commandMW...)
	r.staleCommand = interaction.Chain(stale, commandMW...)
	r.suggest = interaction.Chain(suggest, suggestMW...)
	r.staleSuggest = interaction.Chain(stale, suggestMW...)
	return r
}

// declarePrefixes adds a command's custom_id prefixes of one kind
// ("component", "modal") to declared, panicking on a prefix no custom_id
// routes to, a nil handler or a prefix declared twice.
func declarePrefixes(command, kind string, prefixes, declared map[string]interaction.Handler) {
	for prefix, h := range prefixes {
		if p, ok := interaction.ComponentPrefix(prefix); !ok || p != prefix {
			panic(fmt.Sprintf("bot: %s declares the %s prefix %q, which no custom_id routes to", command, kind, prefix))
		}
		if h == nil {
			panic(fmt.Sprintf("bot: %s declares a nil handler for the %s prefix %q", command, kind, prefix))
		}
		if _, dup := declared[prefix]; dup {
			panic(fmt.Sprintf("bot: the %s prefix %q is declared twice", kind, prefix))
		}
		declared[prefix] = h
	}
}

// Definitions returns what to register with Discord.
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
// deliver events in order on one goroutine (SyncEvents), so Handle serves
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
	a := r.newAck(s, in, OutcomeOK)
	defer func() {
		if kind := kindOf(in); kind != "" {
			r.metrics.interaction(a.command, kind, a.outcome)
		}
	}()
	// The middleware recovers handlers' panics; this one is the router's
	// own (a malformed interaction it failed to parse).
	defer func() {
		if p := recover(); p != nil {
			a.outcome = OutcomePanicked
			r.log.Error("interaction handler panicked", zap.String("interactionId", in.ID),
				zap.String("panicType", fmt.Sprintf("%T", p)), zap.String("stack", interaction.FirstFrames(debug.Stack())))
			if in.Type == discordgo.InteractionApplicationCommandAutocomplete {
				// Discord accepts only choices here; no choices is the answer.
				a.choices(nil)
				return
			}
			a.reply(a.say.Say(lang.GenericFailure, nil), nil)
		}
	}()
	switch in.Type {
	case discordgo.InteractionApplicationCommand:
		r.serveCommand(ctx, a, in)
	case discordgo.InteractionApplicationCommandAutocomplete:
		r.serveSuggest(ctx, a, in)
	case discordgo.InteractionMessageComponent:
		r.serveComponent(ctx, a, in)
	case discordgo.InteractionModalSubmit:
		r.serveModal(ctx, a, in)
	case discordgo.InteractionPing:
		a.respond(&discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong})
	default:
		r.log.Debug("ignored interaction type", zap.Int("type", int(in.Type)))
	}
}

// invocation parses in against its command's definition; ok is false when
// the command is not one of ours or its options do not match.
func (r *Router) invocation(in *discordgo.Interaction) (inv interaction.Invocation, ok bool) {
	data := in.ApplicationCommandData()
	cmd, known := r.commands[data.Name]
	if !known {
		inv := interaction.Invocation{ID: in.ID, GuildID: in.GuildID, ChannelID: in.ChannelID, Command: data.Name}
		inv.Locale, inv.GuildLocale = locales(in)
		return inv, false
	}
	inv, err := parseInvocation(in, cmd.Definition)
	return inv, err == nil
}

func (r *Router) serveCommand(ctx context.Context, a *ack, in *discordgo.Interaction) {
	inv, ok := r.invocation(in)
	inv.Defer = a.deferReply
	h := r.command
	switch {
	case !ok:
		h = r.staleCommand
	case r.opensModal(in):
		h = r.modalCommand
	}
	rep, err := h(ctx, inv)
	r.answer(a, in, inv, rep, err)
}

// componentData returns a button click's data, and false for any other
// component (a select menu, whose values no handler reads) or none.
func componentData(in *discordgo.Interaction) (discordgo.MessageComponentInteractionData, bool) {
	data, ok := in.Data.(discordgo.MessageComponentInteractionData)
	return data, ok && data.ComponentType == discordgo.ButtonComponent
}

// serveComponent answers a button click as a command is answered: a new
// ephemeral reply (or a deferral completed by an edit of that reply),
// never an edit of the message the button is on. A click that names no
// declared prefix, or is not a button's, hears the stale sentence: the
// message may predate this process's commands.
func (r *Router) serveComponent(ctx context.Context, a *ack, in *discordgo.Interaction) {
	inv, ok := invoker(in)
	data, button := componentData(in)
	inv.CustomID = data.CustomID
	inv.Defer = a.deferReply
	h := r.component
	if !ok || !button {
		h = r.staleCommand
	}
	rep, err := h(ctx, inv)
	r.answer(a, in, inv, rep, err)
}

// opensModal reports whether in is a command declared OpensModal, which
// nothing may defer.
func (r *Router) opensModal(in *discordgo.Interaction) bool {
	if in.Type != discordgo.InteractionApplicationCommand {
		return false
	}
	data, ok := in.Data.(discordgo.ApplicationCommandInteractionData)
	return ok && r.commands[data.Name].OpensModal
}

// serveModal answers a modal submit as a click is answered (a new
// ephemeral reply, deferred when slow). A submit whose custom_id names no
// declared modal prefix hears the stale sentence.
func (r *Router) serveModal(ctx context.Context, a *ack, in *discordgo.Interaction) {
	inv, ok := invoker(in)
	data, _ := in.Data.(discordgo.ModalSubmitInteractionData)
	inv.CustomID = data.CustomID
	inv.Options = interaction.NewOptions(modalValues(data.Components))
	inv.Defer = a.deferReply
	h := r.modal
	if !ok {
		h = r.staleCommand
	}
	rep, err := h(ctx, inv)
	r.answer(a, in, inv, rep, err)
}

// answer turns a command's or a click's reply or error into Discord's
// response, setting the outcome counted. A handler's reply and a
// UserError's sentence are shown as the handler wrote them (in the
// invoker's locale: commands render their own sentences); the router's
// own sentences, and the stale and not-served refusals of the middleware
// and the mux, are rendered here, in the invoker's locale.
func (r *Router) answer(a *ack, in *discordgo.Interaction, inv interaction.Invocation, rep interaction.Reply, err error) {
	switch {
	case err == nil && rep.Modal != nil:
		if !a.modal(rep.Modal) {
			a.outcome = OutcomeFailed
			a.reply(a.say.Say(lang.GenericFailure, nil), nil)
		}
		return
	case err == nil:
		a.reply(rep.Content, rep.Files)
		return
	case errors.Is(err, interaction.ErrPanicked):
		a.outcome = OutcomePanicked // logged by the middleware
		a.reply(a.say.Say(lang.GenericFailure, nil), nil)
		return
	case errors.Is(err, interaction.ErrNotServed):
		a.outcome = OutcomeNotServed
		a.reply(a.say.Say(lang.NotServed, nil), nil)
		return
	case errors.Is(err, interaction.ErrStale):
		a.outcome = OutcomeStale
		a.reply(a.say.Say(lang.Stale, nil), nil)
		return
	default:
		a.outcome = OutcomeRefused
	}
	ue, ok := interaction.AsUserError(err)
	if !ok {
		a.outcome = OutcomeFailed
		r.log.Error("command failed", zap.String("interactionId", in.ID), zap.String("command", a.command), zap.String("errorType", fmt.Sprintf("%T", err)))
		a.reply(a.say.Say(lang.GenericFailure, nil), nil)
		return
	}
	a.reply(ue.Sentence, nil)
}

// newAck starts answering in, in the invoker's locale.
func (r *Router) newAck(s Responder, in *discordgo.Interaction, outcome Outcome) *ack {
	return &ack{s: s, in: in, log: r.log, start: time.Now(), metrics: r.metrics, command: r.commandLabel(in), outcome: outcome,
		say: r.cat.Printer(string(in.Locale))}
}

// commandLabel names the interaction's command for metrics: a registered
// command's name, "unknown" for any other (a name Discord sends is not a
// closed set); "component:<prefix>" for a click on a declared prefix,
// "component:unknown" for any other (a custom_id is not a closed set
// either); "modal:<prefix>" and "modal:unknown" likewise for a modal submit;
// "" for interactions that are none of these.
func (r *Router) commandLabel(in *discordgo.Interaction) string {
	if in.Type == discordgo.InteractionMessageComponent {
		data, _ := componentData(in)
		if prefix, ok := interaction.ComponentPrefix(data.CustomID); ok && r.components[prefix] != nil {
			return "component:" + prefix
		}
		return "component:unknown"
	}
	if in.Type == discordgo.InteractionModalSubmit {
		data, _ := in.Data.(discordgo.ModalSubmitInteractionData)
		if prefix, ok := interaction.ComponentPrefix(data.CustomID); ok && r.modals[prefix] != nil {
			return "modal:" + prefix
		}
		return "modal:unknown"
	}
	if in.Type != discordgo.InteractionApplicationCommand && in.Type != discordgo.InteractionApplicationCommandAutocomplete {
		return ""
	}
	if _, ok := r.commands[in.ApplicationCommandData().Name]; ok {
		return in.ApplicationCommandData().Name
	}
	return "unknown"
}

// serveSuggest answers an autocomplete. A failure gets no choices (the
// only answer Discord takes here), logged by the error's type.
func (r *Router) serveSuggest(ctx context.Context, a *ack, in *discordgo.Interaction) {
	inv, ok := r.invocation(in)
	h := r.suggest
	if !ok {
		h = r.staleSuggest
	}
	rep, err := h(ctx, inv)
	switch {
	case err == nil:
		a.choices(rep.Choices)
		return
	case errors.Is(err, interaction.ErrPanicked):
		a.outcome = OutcomePanicked
	case errors.Is(err, interaction.ErrNotServed):
		// A server the commands refuse gets no suggestions either.
		a.outcome = OutcomeNotServed
	default:
		a.outcome = OutcomeRefused
		if _, ok := interaction.AsUserError(err); !ok {
			a.outcome = OutcomeFailed
			r.log.Warn("autocomplete failed", zap.String("interactionId", in.ID), zap.String("errorType", fmt.Sprintf("%T", err)))
		}
	}
	a.choices(nil)
}

// ack tracks whether an interaction has been acknowledged, so a reply is a
// callback before and an edit of the original response after. The deferral
// comes from a timer while the handler runs, so every answer holds mu.
type ack struct {
	s   Responder
	in  *discordgo.Interaction
	log *zap.Logger
	// say words the router's own sentences in the invoker's locale.
	say *lang.Printer

	mu       sync.Mutex
	deferred bool
	done     bool

	start   time.Time // when the interaction arrived
	metrics *Metrics
	command string  // the metrics label
	outcome Outcome // set by the router's goroutine only
}

// respond sends a callback; the caller holds mu, or is the only one
// answering (a PING).
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

// choices returns an autocomplete: at most 25 suggestions, each clipped to
// Discord's 100 characters, names neutralised (values are sent back to us,
// never shown).
func (a *ack) choices(choices []interaction.Choice) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return
	}
	out := make([]*discordgo.ApplicationCommandOptionChoice, 0, len(choices))
	for _, c := range choices {
		if len(out) == 25 {
			break
		}
		name := clip(interaction.Neutralize(c.Name), 100)
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

// deferReply acknowledges the interaction and promises the reply later;
// after any answer it does nothing.
func (a *ack) deferReply() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return
	}
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral},
	})
	a.deferred = a.done
}

// reply sends content and files: a callback, or the edit completing a
// deferral. Files go as multipart/form-data, each named in attachments by
// its part's index ("0", "1", …), as Discord requires.
func (a *ack) reply(content string, files []interaction.File) {
	a.mu.Lock()
	defer a.mu.Unlock()
	content = Fit(interaction.Neutralize(content), MaxContent)
	if content == "" {
		content = a.say.Say(lang.Done, nil)
	}
	none := &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{}}
	parts, attachments := uploads(files)
	if a.deferred {
		edit := &discordgo.WebhookEdit{Content: &content, AllowedMentions: none, Files: parts, Attachments: attachments}
		if _, err := a.s.InteractionResponseEdit(a.in, edit); err != nil {
			a.log.Warn("editing the deferred reply failed", zap.String("interactionId", a.in.ID), zap.String("error", restError(err)))
		}
		return
	}
	if a.done {
		return
	}
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: content, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: none,
			Files: parts, Attachments: attachments},
	})
}

// uploads turns a reply's files into discordgo's parts and the attachments
// naming them; nil for none.
func uploads(files []interaction.File) ([]*discordgo.File, *[]*discordgo.MessageAttachment) {
	if len(files) == 0 {
		return nil, nil
	}
	parts := make([]*discordgo.File, 0, len(files))
	attachments := make([]*discordgo.MessageAttachment, 0, len(files))
	for i, f := range files {
		ct := f.ContentType
		if ct == "" {
			ct = "application/octet-stream"
		}
		parts = append(parts, &discordgo.File{Name: f.Name, ContentType: ct, Reader: bytes.NewReader(f.Data)})
		attachments = append(attachments, &discordgo.MessageAttachment{ID: strconv.Itoa(i), Filename: f.Name})
	}
	return parts, &attachments
}

// modal answers with m (callback type 9). It returns false, sending
// nothing, when Discord would not take it: after a deferral or any other
// answer, to a modal submit, or with a custom_id no submit could route
// back (a handler's mistake, logged without the form's text). Title,
// labels, placeholders and the prefilled values are cut to Discord's
// limits and neutralised.
func (a *ack) modal(m *interaction.Modal) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	prefix, routable := interaction.ComponentPrefix(m.CustomID)
	switch {
	case a.done || a.deferred:
		a.log.Error("a modal cannot follow another answer", zap.String("interactionId", a.in.ID), zap.String("command", a.command))
		return false
	case a.in.Type == discordgo.InteractionModalSubmit:
		a.log.Error("a modal cannot answer a modal submit", zap.String("interactionId", a.in.ID), zap.String("command", a.command))
		return false
	case !routable || len(m.Inputs) == 0 || len(m.Inputs) > interaction.MaxModalInputs:
		a.log.Error("a modal Discord would refuse", zap.String("interactionId", a.in.ID), zap.String("command", a.command),
			zap.String("prefix", prefix), zap.Int("inputs", len(m.Inputs)))
		return false
	}
	title := clip(interaction.Neutralize(m.Title), interaction.MaxModalTitle)
	if title == "" {
		title = "Clankie"
	}
	rows := make([]discordgo.MessageComponent, 0, len(m.Inputs))
	for _, in := range m.Inputs {
		limit := in.MaxLength
		if limit <= 0 || limit > interaction.MaxInputValue {
			limit = interaction.MaxInputValue
		}
		style := discordgo.TextInputShort
		if in.Style == interaction.TextParagraph {
			style = discordgo.TextInputParagraph
		}
		rows = append(rows, discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{
			CustomID: in.CustomID, Label: clip(interaction.Neutralize(in.Label), interaction.MaxInputLabel), Style: style,
			Placeholder: clip(interaction.Neutralize(in.Placeholder), interaction.MaxInputHolder),
			Value:       cut(interaction.Neutralize(in.Value), limit), Required: in.Required,
			MinLength: min(max(in.MinLength, 0), limit), MaxLength: limit,
		}}})
	}
	a.respond(&discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseModal,
		Data: &discordgo.InteractionResponseData{CustomID: m.CustomID, Title: title, Components: rows},
	})
	return a.done
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

// cut keeps the first n characters of s, with no mark: a prefilled value
// the person edits before sending.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
