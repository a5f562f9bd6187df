package bot

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/lang"
)

// Limits of the HTTP interactions endpoint.
const (
	// MaxInteractionBody bounds a request body: an interaction with every
	// option filled and its resolved users and members is a few tens of
	// kilobytes; anything near this is not Discord.
	MaxInteractionBody = 1 << 20
	// MaxSignatureSkew is how far X-Signature-Timestamp may be from our
	// clock: Discord signs each request as it sends it, so a request
	// signed longer ago is a replay, refused however well it is signed.
	MaxSignatureSkew = 60 * time.Second
	// claimDeferAfter is how long the claim of an interaction in the
	// memory service may take before a command is deferred: Discord drops
	// an interaction not answered within 3 s, and the router's own
	// deferral timer starts only after the claim.
	claimDeferAfter = time.Second
	// claimTimeout bounds the claim; a command deferred meanwhile is
	// completed after it.
	claimTimeout = 5 * time.Second
	// refusalLogEvery is how often, at most, refused requests are logged
	// at info (with how many there were since); each is counted in
	// clankie_bridge_interactions_refused_total and logged at debug.
	refusalLogEvery = time.Minute
)

// Claimer claims an interaction id in state every replica shares (the
// memory service's claims, given by bridges), so an interaction is served
// once however many replicas, or restarts, it is sent to. ClaimInteraction
// returns true when this call claimed id, false when it was claimed within
// the last 15 minutes, and an error when it could not ask.
type Claimer interface {
	ClaimInteraction(ctx context.Context, id string) (bool, error)
}

// Endpoint serves Discord's Interactions Endpoint URL. A request without
// well-formed X-Signature-Ed25519 (128 hex digits) and
// X-Signature-Timestamp (decimal digits) headers, or with a timestamp more
// than MaxSignatureSkew off, is refused (401) before its body is read; a
// body over MaxInteractionBody is 413; then the Ed25519 signature over
// timestamp + body is checked against the application's public key (401
// when it does not verify: Discord sends bad signatures on purpose and
// removes an endpoint that accepts them). Every refusal is counted by
// reason and logged at most once per refusalLogEvery at info.
//
// A verified interaction other than a PING is then claimed through Claims
// before anything is done: one already claimed (by another replica, or by
// this one before a restart) is refused with 409 and no content; when the
// claim cannot be made (the memory service unreachable, or no Claims) the
// endpoint fails closed: a command is answered with the ephemeral
// the sentence that memory is out of reach, an autocomplete with no choices, and no
// handler runs. A claimed interaction goes to the same Router entry point
// the gateway feeds: its first answer (PONG, a reply, or a defer) is the
// HTTP response, and anything after it (the edit completing a defer) goes
// through the interaction webhook over REST, exactly as on the gateway.
type Endpoint struct {
	Router *Router
	// REST sends what cannot be the HTTP response (edits after a defer).
	REST Responder
	Key  ed25519.PublicKey
	// Claims is where interactions are claimed (bridges passes the memory
	// client).
	Claims Claimer
	Log    *zap.Logger
	// Now is the clock the timestamp is checked against (time.Now).
	Now func() time.Time

	refusalsOnce sync.Once
	refusals     *refusalLog
}

func (e *Endpoint) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// refuse answers a refused request, counts it and logs it (rate-limited).
func (e *Endpoint) refuse(w http.ResponseWriter, reason Refusal, status int, msg string) {
	e.refusalsOnce.Do(func() { e.refusals = &refusalLog{log: e.Log, every: refusalLogEvery, now: e.now} })
	e.Router.metrics.refusal(reason)
	e.refusals.refused(reason)
	http.Error(w, msg, status)
}

// ServeHTTP handles one POST from Discord.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// Everything that needs no body is decided before reading it, so an
	// unsigned flood costs neither the read nor the hash.
	sig, stamp, reason := signatureHeaders(r.Header)
	if reason == "" && !e.fresh(stamp) {
		reason = RefusedStaleTimestamp
	}
	if reason != "" {
		e.refuse(w, reason, http.StatusUnauthorized, "invalid request signature")
		return
	}
	if r.ContentLength > MaxInteractionBody {
		e.refuse(w, RefusedTooLarge, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInteractionBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			e.refuse(w, RefusedTooLarge, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return
	}
	msg := make([]byte, 0, len(stamp)+len(body))
	msg = append(append(msg, stamp...), body...)
	if len(e.Key) != ed25519.PublicKeySize || !ed25519.Verify(e.Key, msg, sig) {
		e.refuse(w, RefusedBadSignature, http.StatusUnauthorized, "invalid request signature")
		return
	}
	var in discordgo.Interaction
	if err := json.Unmarshal(body, &in); err != nil || in.ID == "" || in.Token == "" {
		http.Error(w, "not an interaction", http.StatusBadRequest)
		return
	}
	serve := func(ctx context.Context, resp Responder) { e.Router.Serve(ctx, resp, &in) }
	if in.Type != discordgo.InteractionPing {
		// A PING acts on nothing and must be answered for Discord to
		// accept the endpoint, memory or not.
		var done bool
		if serve, done = e.claimFirst(w, r, &in); done {
			return
		}
	}
	resp := &httpResponder{rest: e.REST, first: make(chan *discordgo.InteractionResponse), sent: make(chan error, 1), gone: make(chan struct{})}
	defer close(resp.gone)
	served := make(chan struct{})
	go func() {
		defer close(served)
		// The request's context ends with this response; completing a
		// deferred reply outlives it (the router's timeout bounds it).
		serve(context.WithoutCancel(r.Context()), resp)
	}()
	select {
	case ir := <-resp.first:
		b, err := json.Marshal(ir)
		if err != nil {
			resp.sent <- err
			http.Error(w, "could not encode the response", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, err = w.Write(b)
		if f, ok := w.(http.Flusher); ok && err == nil {
			f.Flush()
		}
		resp.sent <- err
	case <-served:
		// Nothing to answer: a redelivery this process already answered,
		// or a type the router does not handle.
		http.Error(w, "interaction not handled", http.StatusBadRequest)
	case <-r.Context().Done():
	}
}

type claimResult struct {
	claimed bool
	err     error
}

// claimFirst claims the interaction before anything acts on it. Answered
// within claimDeferAfter, the claim decides at once: claimed, serve
// returns the router's entry point; replayed, the request is refused (409,
// done); not made, serve answers that memory is out of reach. A command, a click or a
// modal submit whose claim is slower is deferred (an ephemeral "thinking",
// the HTTP response, done) and served later through REST once claimed, as
// a slow reply is; if that claim fails or finds a replay nothing more is
// sent, since without a claim the deferred reply may be someone else's. An
// autocomplete cannot be deferred: a slow claim gets no choices; nor can a
// command that answers with a modal (OpensModal): a slow claim gets
// the out-of-reach sentence.
func (e *Endpoint) claimFirst(w http.ResponseWriter, r *http.Request, in *discordgo.Interaction) (serve func(context.Context, Responder), done bool) {
	result := make(chan claimResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), claimTimeout)
		defer cancel()
		var res claimResult
		if e.Claims == nil {
			res.err = errNoClaims
		} else {
			res.claimed, res.err = e.Claims.ClaimInteraction(ctx, in.ID)
		}
		result <- res
	}()
	unreachable := func(ctx context.Context, resp Responder) { e.Router.unreachable(resp, in) }
	wait := time.NewTimer(claimDeferAfter)
	defer wait.Stop()
	select {
	case res := <-result:
		switch {
		case res.err != nil:
			e.claimFailed(in, res.err)
			return unreachable, false
		case !res.claimed:
			e.refuse(w, RefusedReplayed, http.StatusConflict, "interaction already answered")
			return nil, true
		}
		return func(ctx context.Context, resp Responder) { e.Router.Serve(ctx, resp, in) }, false
	case <-wait.C:
	}
	deferrable := in.Type == discordgo.InteractionMessageComponent || in.Type == discordgo.InteractionModalSubmit ||
		in.Type == discordgo.InteractionApplicationCommand && !e.Router.opensModal(in)
	if !deferrable {
		// An autocomplete, or a command that answers with a modal:
		// neither can be deferred.
		e.Log.Warn("interaction not served: its claim took too long", zap.String("interactionId", in.ID))
		return unreachable, false
	}
	b, _ := json.Marshal(&discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
	e.Router.wg.Add(1)
	go func() {
		defer e.Router.wg.Done()
		switch res := <-result; {
		case res.err != nil:
			e.claimFailed(in, res.err)
		case !res.claimed:
			e.Router.metrics.refusal(RefusedReplayed)
		default:
			e.Router.Serve(context.WithoutCancel(r.Context()), &deferredResponder{rest: e.REST}, in)
		}
	}()
	return nil, true
}

func (e *Endpoint) claimFailed(in *discordgo.Interaction, err error) {
	e.Log.Warn("interaction not served: its claim could not be made", zap.String("interactionId", in.ID),
		zap.String("errorType", fmt.Sprintf("%T", err)))
}

// deferredResponder answers an interaction the endpoint already deferred:
// the router's own deferral is a no-op and its reply the edit completing
// the deferral.
type deferredResponder struct{ rest Responder }

func (d *deferredResponder) InteractionRespond(in *discordgo.Interaction, resp *discordgo.InteractionResponse, options ...discordgo.RequestOption) error {
	switch {
	case resp.Type == discordgo.InteractionResponseDeferredChannelMessageWithSource:
		return nil
	case resp.Type == discordgo.InteractionResponseChannelMessageWithSource && resp.Data != nil:
		_, err := d.rest.InteractionResponseEdit(in, asEdit(resp.Data), options...)
		return err
	}
	return d.rest.InteractionRespond(in, resp, options...)
}

func (d *deferredResponder) InteractionResponseEdit(in *discordgo.Interaction, edit *discordgo.WebhookEdit, options ...discordgo.RequestOption) (*discordgo.Message, error) {
	return d.rest.InteractionResponseEdit(in, edit, options...)
}

// asEdit is a message callback's data as the edit of a deferred response:
// the same content, mentions and files.
func asEdit(d *discordgo.InteractionResponseData) *discordgo.WebhookEdit {
	return &discordgo.WebhookEdit{Content: &d.Content, AllowedMentions: d.AllowedMentions, Files: d.Files, Attachments: d.Attachments}
}

var errNoClaims = errors.New("the endpoint has no claims store")

// signatureHeaders returns the decoded signature and the timestamp of a
// request, or why they are refused: missing, or not 128 hex digits and
// 1–19 decimal digits. It looks at the headers only.
func signatureHeaders(h http.Header) (sig []byte, stamp string, reason Refusal) {
	sigHex, stamp := h.Get("X-Signature-Ed25519"), h.Get("X-Signature-Timestamp")
	if sigHex == "" || stamp == "" {
		return nil, "", RefusedMissingSignature
	}
	if len(sigHex) != 2*ed25519.SignatureSize || len(stamp) > 19 || !digits(stamp) {
		return nil, "", RefusedMalformedSignature
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil {
		return nil, "", RefusedMalformedSignature
	}
	return sig, stamp, ""
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// fresh reports whether a timestamp of decimal digits is within
// MaxSignatureSkew of now.
func (e *Endpoint) fresh(stamp string) bool {
	secs, err := strconv.ParseInt(stamp, 10, 64)
	if err != nil {
		return false
	}
	skew := e.now().Sub(time.Unix(secs, 0))
	return skew <= MaxSignatureSkew && skew >= -MaxSignatureSkew
}

// refusalLog logs refused requests at info at most once per every, saying
// how many were refused since the last line and why, so a flood of
// unsigned requests is a line a minute, not a line a request.
type refusalLog struct {
	log   *zap.Logger
	every time.Duration
	now   func() time.Time

	mu       sync.Mutex
	last     time.Time // when the last line was written; zero: never
	pending  int
	byReason map[Refusal]int
}

func (l *refusalLog) refused(reason Refusal) {
	l.log.Debug("interaction refused", zap.String("reason", string(reason)))
	l.mu.Lock()
	if l.byReason == nil {
		l.byReason = map[Refusal]int{}
	}
	l.pending++
	l.byReason[reason]++
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every && !now.Before(l.last) {
		l.mu.Unlock()
		return
	}
	fields := []zap.Field{zap.Int("refused", l.pending)}
	if !l.last.IsZero() {
		fields = append(fields, zap.Duration("since", now.Sub(l.last)))
	}
	for _, r := range refusals {
		if n := l.byReason[r]; n > 0 {
			fields = append(fields, zap.Int(string(r), n))
		}
	}
	l.pending, l.byReason, l.last = 0, nil, now
	l.mu.Unlock()
	l.log.Info("interactions refused", fields...)
}

// httpResponder turns the router's first answer into the HTTP response and
// sends the rest over REST.
type httpResponder struct {
	rest  Responder
	first chan *discordgo.InteractionResponse
	sent  chan error
	gone  chan struct{}

	mu   sync.Mutex
	used bool
}

var errRequestGone = errors.New("discord closed the interaction request before it was answered")

// InteractionRespond hands the first answer to the HTTP response and waits
// until it is written, so an edit that follows a defer never overtakes it.
// A reply with files cannot be the JSON the endpoint writes: it is
// answered with a deferral (ephemeral as the reply is), completed at once
// by an edit that uploads the files over REST.
func (h *httpResponder) InteractionRespond(in *discordgo.Interaction, resp *discordgo.InteractionResponse, options ...discordgo.RequestOption) error {
	h.mu.Lock()
	used := h.used
	h.used = true
	h.mu.Unlock()
	if used {
		return h.rest.InteractionRespond(in, resp, options...)
	}
	first := resp
	withFiles := resp.Type == discordgo.InteractionResponseChannelMessageWithSource && resp.Data != nil && len(resp.Data.Files) > 0
	if withFiles {
		first = &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Flags: resp.Data.Flags & discordgo.MessageFlagsEphemeral}}
	}
	select {
	case h.first <- first:
	case <-h.gone:
		return errRequestGone
	}
	if err := <-h.sent; err != nil || !withFiles {
		return err
	}
	_, err := h.rest.InteractionResponseEdit(in, asEdit(resp.Data), options...)
	return err
}

func (h *httpResponder) InteractionResponseEdit(in *discordgo.Interaction, edit *discordgo.WebhookEdit, options ...discordgo.RequestOption) (*discordgo.Message, error) {
	return h.rest.InteractionResponseEdit(in, edit, options...)
}

// HTTPBot is the text bridge without a gateway: it serves interactions over
// HTTP on Addr and answers through REST.
type HTTPBot struct {
	REST   *discordgo.Session
	Router *Router
	Key    ed25519.PublicKey
	// Claims is where the endpoint claims each interaction before serving
	// it (the memory client); without it every interaction fails closed.
	Claims   Claimer
	Addr     string
	GuildIDs []string
	// SyncCommands registers the commands at start; one replica (or
	// `clankie bridge text sync`) does it, the others only serve.
	SyncCommands bool
	Log          *zap.Logger

	mu sync.Mutex
	ln net.Listener
}

// Listen binds Addr (Run does it when not done yet) and returns the
// address bound, which differs from Addr for port 0.
func (b *HTTPBot) Listen() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ln == nil {
		ln, err := net.Listen("tcp", b.Addr)
		if err != nil {
			return "", fmt.Errorf("DISCORD_INTERACTIONS_ADDR: listen: %w", err)
		}
		b.ln = ln
	}
	return b.ln.Addr().String(), nil
}

// Run checks the token, syncs commands when asked, and serves interactions
// until ctx is done; then it stops accepting, lets answers in flight finish
// and waits for deferred replies to be completed.
func (b *HTTPBot) Run(ctx context.Context) error {
	if _, err := CheckToken(ctx, b.REST); err != nil {
		return err
	}
	if b.SyncCommands {
		if err := SyncAll(ctx, b.REST, b.GuildIDs, b.Router.Definitions(), b.Log); err != nil {
			return err
		}
	}
	addr, err := b.Listen()
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           &Endpoint{Router: b.Router, REST: b.REST, Key: b.Key, Claims: b.Claims, Log: b.Log},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(b.ln) }()
	b.Log.Info("interactions endpoint listening", zap.String("addr", addr))
	select {
	case err := <-done:
		b.Router.Wait()
		return fmt.Errorf("interactions endpoint: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	b.Router.Wait()
	return nil
}

// SyncAll registers defs for the application the REST session's token
// belongs to (in each of guildIDs, or globally) and logs what it wrote.
func SyncAll(ctx context.Context, rest *discordgo.Session, guildIDs []string, defs []*discordgo.ApplicationCommand, log *zap.Logger) error {
	appID, err := applicationID(rest)
	if err != nil {
		return err
	}
	return syncLogged(ctx, rest, appID, guildIDs, defs, log)
}

// syncLogged is SyncCommands for appID, logging what it wrote.
func syncLogged(ctx context.Context, rest *discordgo.Session, appID string, guildIDs []string, defs []*discordgo.ApplicationCommand, log *zap.Logger) error {
	synced, err := SyncCommands(ctx, rest, appID, guildIDs, defs)
	if err != nil {
		return err
	}
	for scope, wrote := range synced {
		log.Info("commands synced", zap.String("scope", scopeName(scope)), zap.Bool("registered", wrote))
	}
	return nil
}

// applicationID asks Discord which application rest's token belongs to.
func applicationID(rest *discordgo.Session) (string, error) {
	app, err := rest.Application("@me")
	if err != nil {
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
			return "", ErrTokenRejected
		}
		return "", fmt.Errorf("ask discord which application this is: %s", restError(err))
	}
	return app.ID, nil
}

// unreachable answers an interaction that could not be claimed, without
// running its handler: a command or a click hears that memory is out of reach (ephemeral), an
// autocomplete gets no choices, anything else no answer. It is counted as
// failed.
func (r *Router) unreachable(s Responder, in *discordgo.Interaction) {
	r.wg.Add(1)
	defer r.wg.Done()
	a := r.newAck(s, in, OutcomeFailed)
	switch in.Type {
	case discordgo.InteractionApplicationCommand, discordgo.InteractionMessageComponent, discordgo.InteractionModalSubmit:
		// The memory service could not be asked whether the interaction
		// was already answered: nothing was done.
		a.reply(a.say.Say(lang.MemoryUnreachable, nil), nil)
	case discordgo.InteractionApplicationCommandAutocomplete:
		a.choices(nil)
	default:
		return
	}
	r.metrics.interaction(a.command, kindOf(in), a.outcome)
}
