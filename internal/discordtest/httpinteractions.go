package discordtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// UserAgentInteractions is the User-Agent Discord sends interactions with.
const UserAgentInteractions = "Discord-Interactions/1.0 (+https://discord.com)"

// probeEvery is how often InteractHTTP first sends the same request badly
// signed (and on the first request to each endpoint), as Discord does to
// check that an endpoint verifies signatures.
const probeEvery = 10

// httpKeys is the application's Ed25519 key pair, with which the fake signs
// what it POSTs to an interactions endpoint.
type httpKeys struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newHTTPKeys() httpKeys {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic("discordtest: " + err.Error())
	}
	return httpKeys{pub: pub, priv: priv}
}

// PublicKey returns the application's public key as the Developer Portal
// shows it (hex), for DISCORD_PUBLIC_KEY.
func (f *Fake) PublicKey() string { return hex.EncodeToString(f.keys.pub) }

// SignedPost is one request the fake POSTs to an interactions endpoint.
type SignedPost struct {
	Body []byte
	// At is the signed timestamp (default now).
	At time.Time
	// BadSignature signs something else than what is sent.
	BadSignature bool
}

// PostResult is what an endpoint answered.
type PostResult struct {
	Status      int
	ContentType string
	Body        []byte
	// Elapsed runs from sending the request to the end of the response
	// body (Discord's 3 s is to the response).
	Elapsed time.Duration
	// FirstByte runs from sending the request to the response headers.
	FirstByte time.Duration
}

// PostSigned POSTs p to endpoint with Discord's headers and signature, as
// Discord's servers do, and returns the response. Use it for requests a
// test shapes itself (stale timestamps, bad signatures, oversized bodies);
// InteractHTTP for interactions.
func (f *Fake) PostSigned(ctx context.Context, endpoint string, p SignedPost) (PostResult, error) {
	at := p.At
	if at.IsZero() {
		at = time.Now()
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	msg := append([]byte(ts), p.Body...)
	if p.BadSignature {
		msg = append(msg, " tampered"...)
	}
	sig := ed25519.Sign(f.keys.priv, msg)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(p.Body))
	if err != nil {
		return PostResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgentInteractions)
	req.Header.Set("X-Signature-Ed25519", hex.EncodeToString(sig))
	req.Header.Set("X-Signature-Timestamp", ts)
	start := time.Now()
	resp, err := f.httpClient.Do(req)
	if err != nil {
		return PostResult{}, err
	}
	defer resp.Body.Close()
	first := time.Since(start)
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return PostResult{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body,
		FirstByte: first, Elapsed: time.Since(start)}, err
}

// probe sends body badly signed and fails the test unless the endpoint
// answers 401, as Discord removes an endpoint that accepts bad signatures.
func (f *Fake) probe(ctx context.Context, endpoint string, body []byte) {
	res, err := f.PostSigned(ctx, endpoint, SignedPost{Body: body, BadSignature: true})
	if err != nil {
		f.t.Errorf("discordtest: a badly signed request to the interactions endpoint failed: %v", err)
		return
	}
	if res.Status != http.StatusUnauthorized {
		f.t.Errorf("discordtest: the interactions endpoint answered a badly signed request with %d, not 401; Discord would remove it", res.Status)
	}
}

func (f *Fake) probeDue(endpoint string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.httpPosts[endpoint]
	f.httpPosts[endpoint] = n + 1
	return n%probeEvery == 0
}

// PingHTTP does what the Developer Portal does when the Interactions
// Endpoint URL is saved: a PING, badly signed (401 expected) and then
// signed (a PONG expected). It returns an error saying what was wrong.
func (f *Fake) PingHTTP(ctx context.Context, endpoint string) error {
	body := mustJSON(map[string]any{"id": f.ids.next(), "application_id": f.cfg.appID, "type": 1,
		"token": "aW50ZXJhY3Rpb246" + randomHex(40), "version": 1})
	bad, err := f.PostSigned(ctx, endpoint, SignedPost{Body: body, BadSignature: true})
	if err != nil {
		return err
	}
	if bad.Status != http.StatusUnauthorized {
		return fmt.Errorf("a badly signed PING was answered %d, not 401", bad.Status)
	}
	res, err := f.PostSigned(ctx, endpoint, SignedPost{Body: body})
	if err != nil {
		return err
	}
	var pong struct {
		Type *int `json:"type"`
	}
	if res.Status != http.StatusOK || json.Unmarshal(res.Body, &pong) != nil || pong.Type == nil || *pong.Type != 1 {
		return fmt.Errorf("PING was answered %d %q, want 200 {\"type\":1}", res.Status, res.Body)
	}
	return nil
}

// InteractHTTP delivers an interaction the way Discord does to an
// Interactions Endpoint URL: a signed POST whose response is the
// interaction's callback. The response is checked as the REST callback is
// (Discord's OpenAPI description, the 3 s deadline, the callback rules) and
// recorded on the handle, so WaitCallback and WaitReply work as for a
// gateway interaction; a deferred reply is completed through the webhook
// routes as usual. On the first request to an endpoint and every tenth, the
// same request is first sent badly signed, and anything but 401 fails the
// test.
func (f *Fake) InteractHTTP(ctx context.Context, endpoint string, spec InteractionSpec) *Interaction {
	f.t.Helper()
	in, err := f.newInteraction(spec)
	return f.postInteraction(ctx, "InteractHTTP", endpoint, in, err)
}

// postInteraction delivers in to endpoint as InteractHTTP describes; err,
// from building in, fails the test (caller names the call) and delivers
// nothing.
func (f *Fake) postInteraction(ctx context.Context, caller, endpoint string, in *Interaction, err error) *Interaction {
	f.t.Helper()
	if err != nil {
		err = fmt.Errorf("discordtest: %s: %w", caller, err)
		f.t.Errorf("%v", err)
		return &Interaction{f: f, acked: -1, err: err}
	}
	if f.probeDue(endpoint) {
		f.probe(ctx, endpoint, in.payload)
	}
	f.mu.Lock()
	in.created = time.Now()
	in.deliveries++
	deadline := in.deadline
	f.mu.Unlock()
	pctx := ctx
	if deadline > 0 {
		// Discord stops waiting for the response at the deadline.
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, deadline+500*time.Millisecond)
		defer cancel()
	}
	res, err := f.PostSigned(pctx, endpoint, SignedPost{Body: in.payload})
	f.mu.Lock()
	defer f.mu.Unlock()
	cb := Callback{After: time.Since(in.created)}
	switch {
	case err != nil:
		cb.Answer = mustJSON(map[string]any{"message": "the endpoint did not respond: " + err.Error()})
	case res.Status != http.StatusOK:
		cb.Status = res.Status
		cb.Answer = slices.Clone(json.RawMessage(res.Body))
		f.violations = append(f.violations, Violation{Method: "POST", Path: "(interactions endpoint)", Status: res.Status,
			Answer: fmt.Sprintf("a signed interaction was answered %d; Discord shows the user that the interaction failed", res.Status)})
	default:
		cb.After = res.Elapsed
		cb.Raw = slices.Clone(json.RawMessage(res.Body))
		var invalid *reply
		if ct := res.ContentType; ct != "application/json" && !bytes.HasPrefix([]byte(ct), []byte("application/json;")) {
			bad := formError([]fieldError{{nil, "CONTENT_TYPE_INVALID", "Expected a JSON response"}})
			invalid = &bad
		} else if f.cfg.spec != nil {
			if errs := f.cfg.spec.checkBody(http.MethodPost, "/interactions/"+in.ID+"/"+in.Token+"/callback", res.Body); len(errs) > 0 {
				bad := formError(errs)
				invalid = &bad
			}
		}
		rep := f.callbackLocked(in, res.Body, nil, &cb, invalid)
		cb.Status = rep.status
		if rep.status == http.StatusNoContent {
			cb.Status = http.StatusOK
		}
		if rep.body != nil {
			cb.Answer = mustJSON(rep.body)
		}
		if rep.status == http.StatusBadRequest {
			f.violations = append(f.violations, Violation{Method: "POST", Path: "(interactions endpoint response)", Status: rep.status,
				Answer: string(cb.Answer)})
		}
	}
	in.callbacks = append(in.callbacks, cb)
	if cb.Accepted() {
		in.acked = len(in.callbacks) - 1
	}
	f.notifyLocked()
	return in
}

// BuildInteraction makes an interaction from spec without delivering it,
// for a test that POSTs its Payload itself (PostSigned).
func (f *Fake) BuildInteraction(spec InteractionSpec) (*Interaction, error) {
	return f.newInteraction(spec)
}
