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
)

// Limits of the HTTP interactions endpoint.
const (
	// MaxInteractionBody bounds a request body: an interaction with every
	// option filled and its resolved users and members is a few tens of
	// kilobytes; anything near this is not Discord.
	MaxInteractionBody = 1 << 20
	// MaxSignatureSkew is how far X-Signature-Timestamp may be from our
	// clock: a replayed request older than this is refused however well
	// it is signed.
	MaxSignatureSkew = 5 * time.Minute
)

// Endpoint serves Discord's Interactions Endpoint URL: every request's
// Ed25519 signature over X-Signature-Timestamp + body is checked against the
// application's public key (401 when it does not verify: Discord sends bad
// signatures on purpose and removes an endpoint that accepts them), a
// timestamp more than MaxSignatureSkew off is refused, and the body is
// bounded. A verified interaction goes to the same Router entry point the
// gateway feeds: its first answer (PONG, a reply, or a defer) is the HTTP
// response, and anything after it (the edit completing a defer) goes through
// the interaction webhook over REST, exactly as on the gateway.
//
// It keeps no state between requests beyond the router's redelivery memory,
// so any number of replicas can serve one application.
type Endpoint struct {
	Router *Router
	// REST sends what cannot be the HTTP response (edits after a defer).
	REST Responder
	Key  ed25519.PublicKey
	Log  *zap.Logger
	// Now is the clock the timestamp is checked against (time.Now).
	Now func() time.Time
}

// ServeHTTP handles one POST from Discord.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxInteractionBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "could not read the request body", http.StatusBadRequest)
		return
	}
	if reason := e.verify(r.Header, body); reason != "" {
		e.Log.Info("interaction refused", zap.String("reason", reason))
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return
	}
	var in discordgo.Interaction
	if err := json.Unmarshal(body, &in); err != nil || in.ID == "" || in.Token == "" {
		http.Error(w, "not an interaction", http.StatusBadRequest)
		return
	}
	resp := &httpResponder{rest: e.REST, first: make(chan *discordgo.InteractionResponse), sent: make(chan error, 1), gone: make(chan struct{})}
	defer close(resp.gone)
	served := make(chan struct{})
	go func() {
		defer close(served)
		// The request's context ends with this response; completing a
		// deferred reply outlives it (the router's timeout bounds it).
		e.Router.Serve(context.WithoutCancel(r.Context()), resp, &in)
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
		// Nothing to answer: a redelivery already answered, or a type the
		// router does not handle.
		http.Error(w, "interaction not handled", http.StatusBadRequest)
	case <-r.Context().Done():
	}
}

// verify returns why a request is refused, or "" when its signature holds
// and its timestamp is fresh. The reason is for the log: it never holds
// header values or the body.
func (e *Endpoint) verify(h http.Header, body []byte) string {
	sig, err := hex.DecodeString(h.Get("X-Signature-Ed25519"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "missing or malformed signature"
	}
	ts := h.Get("X-Signature-Timestamp")
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "missing or malformed timestamp"
	}
	msg := make([]byte, 0, len(ts)+len(body))
	msg = append(append(msg, ts...), body...)
	if len(e.Key) != ed25519.PublicKeySize || !ed25519.Verify(e.Key, msg, sig) {
		return "signature does not verify"
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	if skew := now().Sub(time.Unix(secs, 0)); skew > MaxSignatureSkew || skew < -MaxSignatureSkew {
		return "timestamp too far from now"
	}
	return ""
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
func (h *httpResponder) InteractionRespond(in *discordgo.Interaction, resp *discordgo.InteractionResponse, options ...discordgo.RequestOption) error {
	h.mu.Lock()
	used := h.used
	h.used = true
	h.mu.Unlock()
	if used {
		return h.rest.InteractionRespond(in, resp, options...)
	}
	select {
	case h.first <- resp:
	case <-h.gone:
		return errRequestGone
	}
	return <-h.sent
}

func (h *httpResponder) InteractionResponseEdit(in *discordgo.Interaction, edit *discordgo.WebhookEdit, options ...discordgo.RequestOption) (*discordgo.Message, error) {
	return h.rest.InteractionResponseEdit(in, edit, options...)
}

// HTTPBot is the text bridge without a gateway: it serves interactions over
// HTTP on Addr and answers through REST.
type HTTPBot struct {
	REST     *discordgo.Session
	Router   *Router
	Key      ed25519.PublicKey
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
		Handler:           &Endpoint{Router: b.Router, REST: b.REST, Key: b.Key, Log: b.Log},
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
	app, err := rest.Application("@me")
	if err != nil {
		var re *discordgo.RESTError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
			return ErrTokenRejected
		}
		return fmt.Errorf("ask discord which application this is: %s", restError(err))
	}
	synced, err := SyncCommands(ctx, rest, app.ID, guildIDs, defs)
	if err != nil {
		return err
	}
	for scope, wrote := range synced {
		log.Info("commands synced", zap.String("scope", scopeName(scope)), zap.Bool("registered", wrote))
	}
	return nil
}
