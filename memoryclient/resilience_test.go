package memoryclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
)

func fmtWrap(err error) error { return fmt.Errorf("bridge: %w", err) }

// closedURL returns the URL of a listener that is already closed, so a dial
// is refused at once.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}

func TestConnectionRefusedIsUnavailableQuickly(t *testing.T) {
	c, err := New(closedURL(t), testBearer)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Recall(context.Background(), "g", "u", api.RecallQuery{ChannelID: "c"})
	elapsed := time.Since(start)
	e, ok := AsError(err)
	if !ok || e.Kind != KindUnavailable || e.Status != 0 {
		t.Fatalf("err = %#v, want unavailable", err)
	}
	if e.Attempts != 1+DefaultRetries {
		t.Errorf("attempts = %d, want %d (a read is retried)", e.Attempts, 1+DefaultRetries)
	}
	if !downOrSlow(err) {
		t.Errorf("downOrSlow = false")
	}
	// two pauses, 50 ms and 150 ms, and three refused dials
	if elapsed > time.Second {
		t.Errorf("took %v", elapsed)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Logf("error does not name the refusal (platform wording?): %v", err)
	}

	// a write is sent once and fails at once
	start = time.Now()
	err = c.Forget(context.Background(), "g", "u", "f", "")
	if e, ok := AsError(err); !ok || e.Kind != KindUnavailable || e.Attempts != 1 {
		t.Fatalf("forget: %#v", err)
	}
	if elapsed := time.Since(start); elapsed > 200*time.Millisecond {
		t.Errorf("a refused write took %v", elapsed)
	}
}

func TestSlowServiceTimesOutWithinDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	const slack = 250 * time.Millisecond
	tests := []struct {
		name string
		opts []Option
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"caller deadline", nil, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), deadline)
		}},
		{"client budget", []Option{WithTimeout(deadline)}, func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}},
		{"caller deadline shorter than budget", []Option{WithTimeout(10 * time.Second)}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), deadline)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f *fake
			f = newFake(t, func(_ http.ResponseWriter, r *http.Request, _ int) { f.hang(r) })
			c := f.client(t, tt.opts...)
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := c.Propose(ctx, api.ProposalRequest{ProposalID: "p"})
			elapsed := time.Since(start)
			if !IsKind(err, KindTimeout) {
				t.Fatalf("err = %v, want timeout", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("errors.Is(err, context.DeadlineExceeded) = false: %v", err)
			}
			if elapsed > deadline+slack {
				t.Errorf("returned after %v, deadline %v", elapsed, deadline)
			}
			if n := len(f.calls()); n != 1 {
				t.Errorf("a call-level timeout was retried: %d calls", n)
			}
		})
	}
}

func TestAttemptTimeoutRetriesReadsOnly(t *testing.T) {
	var f *fake
	f = newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			f.hang(r)
			return
		}
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		reply(w, 200, api.RecallResponse{Total: 1})
	})
	c := f.client(t, WithAttemptTimeout(100*time.Millisecond))
	got, err := c.Recall(context.Background(), "g", "u", api.RecallQuery{ChannelID: "c"})
	if err != nil || got.Total != 1 {
		t.Fatalf("recall after a hung attempt: %+v, %v", got, err)
	}
	if n := len(f.calls()); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}

	var g *fake
	g = newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) { g.hang(r) })
	err = g.client(t, WithAttemptTimeout(100*time.Millisecond)).Forget(context.Background(), "g", "u", "f", "")
	if !IsKind(err, KindTimeout) {
		t.Fatalf("forget: %v, want timeout", err)
	}
	if n := len(g.calls()); n != 1 {
		t.Errorf("a timed-out DELETE was retried: %d calls", n)
	}
}

func TestProposeRetriedAfter503WithSameBody(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			reply(w, 503, api.Error{Code: "unavailable", Message: "The memory service is starting."})
			return
		}
		reply(w, 201, api.ProposalResponse{SchemaVersion: 1, Fact: &api.Fact{FactID: "f1"}})
	})
	req := api.ProposalRequest{ProposalID: "interaction-123", Fact: api.FactInput{Body: "likes tea"}}
	got, err := f.client(t).Propose(context.Background(), req)
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	if got.Fact == nil || got.Fact.FactID != "f1" {
		t.Errorf("answer = %+v", got)
	}
	reqs := f.calls()
	if len(reqs) != 2 {
		t.Fatalf("calls = %d, want 2", len(reqs))
	}
	if !bytes.Equal(reqs[0].Body, reqs[1].Body) {
		t.Errorf("retry body differs:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	var sent api.ProposalRequest
	if err := json.Unmarshal(reqs[1].Body, &sent); err != nil || sent.ProposalID != "interaction-123" {
		t.Errorf("retry proposalId = %q (%v)", sent.ProposalID, err)
	}
	for _, r := range reqs {
		if r.Auth != "Bearer "+testBearer {
			t.Errorf("a retry lost the bearer")
		}
	}
}

func TestNoRetryOn500OrClientErrors(t *testing.T) {
	for _, status := range []int{400, 403, 404, 409, 500} {
		f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
			reply(w, status, api.Error{Code: "x", Message: "m"})
		})
		_, _ = f.client(t).Propose(context.Background(), api.ProposalRequest{ProposalID: "p"})
		if n := len(f.calls()); n != 1 {
			t.Errorf("%d: calls = %d, want 1", status, n)
		}
	}
}

func TestWritesNotRetried(t *testing.T) {
	ctx := context.Background()
	tests := map[string]func(c *Client) error{
		"forget":        func(c *Client) error { return c.Forget(ctx, "g", "u", "f", "u") },
		"forget person": func(c *Client) error { _, err := c.ForgetPerson(ctx, "g", "u"); return err },
		"edit fact":     func(c *Client) error { _, err := c.EditFact(ctx, "g", "u", "f", api.FactPatch{}); return err },
		"record episode": func(c *Client) error {
			_, err := c.RecordEpisode(ctx, api.EpisodeRequest{Lane: "gameplay"})
			return err
		},
		"edit episode":   func(c *Client) error { _, err := c.EditEpisode(ctx, "e", api.EpisodePatch{}); return err },
		"forget episode": func(c *Client) error { return c.ForgetEpisode(ctx, "e") },
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
				reply(w, 503, api.Error{Code: "unavailable", Message: "Try later."})
			})
			err := call(f.client(t, WithRetries(5)))
			if e, ok := AsError(err); !ok || e.Kind != KindUnavailable || e.Attempts != 1 {
				t.Fatalf("err = %#v", err)
			}
			if n := len(f.calls()); n != 1 {
				t.Errorf("service saw %d calls, want exactly 1", n)
			}
		})
	}
}

func TestRetriesSafeCallsOn502503504(t *testing.T) {
	ctx := context.Background()
	tests := map[string]func(c *Client) error{
		"recall":  func(c *Client) error { _, err := c.Recall(ctx, "g", "u", api.RecallQuery{}); return err },
		"mine":    func(c *Client) error { _, err := c.Mine(ctx, "g", "u", "u"); return err },
		"catalog": func(c *Client) error { _, err := c.Catalog(ctx); return err },
		"people":  func(c *Client) error { _, err := c.People(ctx, "", 0); return err },
		"export":  func(c *Client) error { _, err := c.Export(ctx, "g", "u"); return err },
		"episodes": func(c *Client) error {
			_, err := c.Episodes(ctx, "", 0)
			return err
		},
		"voice briefing": func(c *Client) error {
			_, err := c.VoiceBriefing(ctx, api.BriefingRequest{GuildID: "1"})
			return err
		},
	}
	statuses := []int{502, 503, 504}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, n int) {
				if n <= len(statuses) {
					reply(w, statuses[n-1], nil)
					return
				}
				reply(w, 200, map[string]any{})
			})
			if err := call(f.client(t, WithRetries(3))); err != nil {
				t.Fatalf("err = %v", err)
			}
			if n := len(f.calls()); n != 4 {
				t.Errorf("calls = %d, want 4", n)
			}
		})
	}
}

func TestRetriesNeverPassTheDeadline(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		reply(w, 503, api.Error{Code: "unavailable", Message: "Try later."})
	})
	c := f.client(t, WithRetries(10))
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := c.Catalog(ctx)
	elapsed := time.Since(start)
	// attempts near 0, 50 and 200 ms; the next pause (450 ms) does not fit, so
	// the last real failure is returned early rather than a timeout at the
	// deadline
	if e, ok := AsError(err); !ok || e.Kind != KindUnavailable || e.Status != 503 || e.Message != "Try later." {
		t.Fatalf("err = %#v", err)
	}
	if elapsed >= deadline {
		t.Errorf("returned after %v, at or past the %v deadline", elapsed, deadline)
	}
	if n := len(f.calls()); n < 2 || n > 3 {
		t.Errorf("calls = %d, want 2 or 3", n)
	}
}

func TestCanceledContext(t *testing.T) {
	var f *fake
	f = newFake(t, func(_ http.ResponseWriter, r *http.Request, _ int) { f.hang(r) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := f.client(t).Catalog(ctx)
	if !IsKind(err, KindCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if downOrSlow(err) {
		t.Errorf("a cancellation is not the service being down")
	}
}

// secretFake answers every request in a way that tries to leak: it echoes
// the Authorization header and the fact body into its error sentence, which
// the contract forbids and the client redacts.
func secretFake(t *testing.T, status int) *fake {
	return newFake(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		var req api.ProposalRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		reply(w, status, api.Error{Code: "echo",
			Message: "you sent " + r.Header.Get("Authorization") + " with " + req.Fact.Body})
	})
}

func TestBearerNeverInErrors(t *testing.T) {
	const factBody = "BODYTEXT_secret_preference"
	propose := func(c *Client, ctx context.Context) error {
		_, err := c.Propose(ctx, api.ProposalRequest{ProposalID: "p", Fact: api.FactInput{Body: factBody}})
		return err
	}
	var errs []error
	kinds := map[Kind]bool{}
	for _, status := range []int{400, 401, 403, 404, 409, 413, 418, 422, 500, 503} {
		f := secretFake(t, status)
		errs = append(errs, propose(f.client(t, WithRetries(0)), context.Background()))
	}
	// timeout
	var slow *fake
	slow = newFake(t, func(_ http.ResponseWriter, r *http.Request, _ int) { slow.hang(r) })
	errs = append(errs, propose(slow.client(t, WithTimeout(50*time.Millisecond)), context.Background()))
	// canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errs = append(errs, propose(slow.client(t), ctx))
	// refused
	refused, err := New(closedURL(t), testBearer, WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	errs = append(errs, propose(refused, context.Background()))
	// unexpected 2xx body, invalid argument
	bad := newFake(t, replyRaw(201, "text/plain", "ok "+testBearer))
	errs = append(errs, propose(bad.client(t), context.Background()))
	errs = append(errs, bad.client(t).Forget(context.Background(), "", "u", "f", ""))

	for _, err := range errs {
		if err == nil {
			t.Fatal("a leak probe succeeded")
		}
		e, _ := AsError(err)
		kinds[e.Kind] = true
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), e.Message, e.Code} {
			if strings.Contains(s, testBearer) {
				t.Errorf("%v error leaks the bearer: %s", e.Kind, s)
			}
			if strings.Contains(s, factBody) {
				t.Errorf("%v error leaks the request body: %s", e.Kind, s)
			}
		}
		if cause := errors.Unwrap(err); cause != nil && strings.Contains(cause.Error(), testBearer) {
			t.Errorf("%v cause leaks the bearer", e.Kind)
		}
	}
	for k := KindUnavailable; k <= KindUnexpected; k++ {
		if !kinds[k] {
			t.Errorf("kind %v was not probed", k)
		}
	}
}

func TestLogsHoldNoSecretsOrIDs(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	const (
		guild    = "GUILDID_4471"
		user     = "USERID_8812"
		search   = "SEARCHTERM_tea"
		factBody = "BODYTEXT_likes_tea"
	)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n%2 == 1 {
			reply(w, 503, api.Error{Code: "unavailable", Message: "busy " + r.Header.Get("Authorization")})
			return
		}
		reply(w, 403, api.Error{Code: "forbidden", Message: "no " + r.Header.Get("Authorization")})
	})
	c := f.client(t, WithLogger(log))
	ctx := context.Background()
	_, _ = c.Recall(ctx, guild, user, api.RecallQuery{ChannelID: "c", Query: search})
	_, _ = c.Propose(ctx, api.ProposalRequest{ProposalID: "p", Fact: api.FactInput{Body: factBody,
		Subject: api.Subject{GuildID: guild, UserID: user}}})
	_ = c.Forget(ctx, guild, user, "f", user)

	refused, err := New(closedURL(t), testBearer, WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = refused.Mine(ctx, guild, user, user)

	entries := logs.AllUntimed()
	if len(entries) == 0 {
		t.Fatal("no log entries: the test would prove nothing")
	}
	var sawRetry, sawWarn bool
	for _, e := range entries {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, secret := range []string{testBearer, guild, user, search, factBody} {
			if strings.Contains(line, secret) {
				t.Errorf("log line holds %q: %s", secret, line)
			}
		}
		sawRetry = sawRetry || e.Message == "memory call retrying"
		sawWarn = sawWarn || e.Level == zapcore.WarnLevel
	}
	if !sawRetry || !sawWarn {
		t.Errorf("expected a retry entry and a warning, got %d entries", len(entries))
	}
}
