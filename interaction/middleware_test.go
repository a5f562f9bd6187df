package interaction

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func reply(content string) Handler {
	return func(context.Context, Invocation) (Reply, error) { return Reply{Content: content}, nil }
}

// trace is middleware that records its name on the way in and out, so a
// test sees the order a chain runs in.
func trace(name string, log *[]string) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, inv Invocation) (Reply, error) {
			*log = append(*log, name+">")
			rep, err := next(ctx, inv)
			*log = append(*log, "<"+name)
			return rep, err
		}
	}
}

func TestChainRunsTheFirstMiddlewareOutermost(t *testing.T) {
	var log []string
	h := Chain(func(context.Context, Invocation) (Reply, error) {
		log = append(log, "handler")
		return Reply{Content: "ok"}, nil
	}, trace("a", &log), trace("b", &log), trace("c", &log))
	if rep, err := h(context.Background(), Invocation{}); err != nil || rep.Content != "ok" {
		t.Fatalf("reply %+v, %v", rep, err)
	}
	if got, want := strings.Join(log, " "), "a> b> c> handler <c <b <a"; got != want {
		t.Fatalf("order %q, want %q", got, want)
	}
}

func TestMiddleware(t *testing.T) {
	panicking := func(context.Context, Invocation) (Reply, error) { panic("secret body text in a panic") }
	failing := func(context.Context, Invocation) (Reply, error) { return Reply{}, errors.New("boom") }
	deadline := func(ctx context.Context, _ Invocation) (Reply, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return Reply{Content: "no deadline"}, nil
		}
		return Reply{Content: "deadline in " + time.Until(d).Round(time.Second).String()}, nil
	}
	guild, dm, other := Invocation{ID: "1", GuildID: "g"}, Invocation{ID: "2"}, Invocation{ID: "3", GuildID: "other"}
	germanDM := Invocation{ID: "4", Locale: "de"}
	notInDMs := GuildOnly(func(locale string) string {
		if locale == "de" {
			return "Nicht in DMs."
		}
		return "Not in DMs."
	})
	for _, tc := range []struct {
		name     string
		mw       []Middleware
		h        Handler
		inv      Invocation
		want     string
		wantErr  error  // compared with errors.Is
		sentence string // the UserError's sentence, when there is one
	}{
		{"recover passes a reply", []Middleware{Recover(zap.NewNop())}, reply("ok"), guild, "ok", nil, ""},
		{"recover passes an error", []Middleware{Recover(zap.NewNop())}, failing, guild, "", nil, ""},
		{"recover turns a panic into ErrPanicked", []Middleware{Recover(zap.NewNop())}, panicking, guild, "", ErrPanicked, ""},
		{"recover outside a deferral still catches", []Middleware{Recover(zap.NewNop()), DeferAfter(time.Hour)},
			panicking, Invocation{GuildID: "g", Defer: func() {}}, "", ErrPanicked, ""},
		{"no allow-list serves every server", []Middleware{AllowGuilds(nil)}, reply("ok"), other, "ok", nil, ""},
		{"allow-list serves a listed server", []Middleware{AllowGuilds([]string{"g"})}, reply("ok"), guild, "ok", nil, ""},
		{"allow-list refuses another server", []Middleware{AllowGuilds([]string{"g"})}, reply("ok"), other, "", ErrNotServed, NotServedSentence},
		{"allow-list lets a DM through", []Middleware{AllowGuilds([]string{"g"})}, reply("ok"), dm, "ok", nil, ""},
		{"allow-list refuses before a panicking handler runs", []Middleware{Recover(zap.NewNop()), AllowGuilds([]string{"g"})},
			panicking, other, "", ErrNotServed, NotServedSentence},
		{"guild-only refuses a DM", []Middleware{notInDMs}, reply("ok"), dm, "", nil, "Not in DMs."},
		{"guild-only refuses in the invoker's language", []Middleware{notInDMs}, reply("ok"), germanDM, "", nil, "Nicht in DMs."},
		{"guild-only serves a server", []Middleware{notInDMs}, reply("ok"), guild, "ok", nil, ""},
		{"timeout sets a deadline", []Middleware{Timeout(10 * time.Second)}, deadline, guild, "deadline in 10s", nil, ""},
		{"the inner timeout wins", []Middleware{Timeout(10 * time.Second), Timeout(3 * time.Second)}, deadline, guild, "deadline in 3s", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Chain(tc.h, tc.mw...)(context.Background(), tc.inv)
			if rep.Content != tc.want {
				t.Fatalf("reply %q, want %q", rep.Content, tc.want)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			ue, ok := AsUserError(err)
			if tc.sentence != "" && (!ok || ue.Sentence != tc.sentence) {
				t.Fatalf("error %v, want the sentence %q", err, tc.sentence)
			}
			if tc.sentence == "" && ok {
				t.Fatalf("unexpected sentence %q", ue.Sentence)
			}
		})
	}
}

// TestRecoverLogsNoPanicValue: a panic's value may quote what a person
// wrote; the log names its type and the stack's functions only.
func TestRecoverLogsNoPanicValue(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	_, err := Recover(zap.New(core))(func(context.Context, Invocation) (Reply, error) {
		panic(errors.New("secret body text"))
	})(context.Background(), Invocation{ID: "7", Command: "person-memory", Subcommand: "propose"})
	if !errors.Is(err, ErrPanicked) {
		t.Fatalf("error %v", err)
	}
	entries := logs.FilterMessage("command handler panicked").All()
	if len(entries) != 1 {
		t.Fatalf("logs %v", logs.All())
	}
	fields := entries[0].ContextMap()
	if fields["command"] != "person-memory/propose" || fields["interactionId"] != "7" || fields["panicType"] != "*errors.errorString" {
		t.Fatalf("fields %v", fields)
	}
	for k, v := range fields {
		if s, _ := v.(string); strings.Contains(s, "secret") {
			t.Fatalf("field %s holds the panic's value: %q", k, s)
		}
	}
}

// TestDeferAfter: a handler slower than the bound is deferred once, while
// it runs; a fast one never is; an invocation without Defer runs as is.
func TestDeferAfter(t *testing.T) {
	for _, tc := range []struct {
		name      string
		work      time.Duration
		withDefer bool
		want      int32
	}{
		{"fast", 0, true, 0},
		{"slow", 60 * time.Millisecond, true, 1},
		{"slow without a transport", 60 * time.Millisecond, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var deferred, deferredWhileRunning atomic.Int32
			var running atomic.Bool
			inv := Invocation{}
			if tc.withDefer {
				inv.Defer = func() {
					deferred.Add(1)
					if running.Load() {
						deferredWhileRunning.Add(1)
					}
				}
			}
			h := DeferAfter(10 * time.Millisecond)(func(context.Context, Invocation) (Reply, error) {
				running.Store(true)
				defer running.Store(false)
				time.Sleep(tc.work)
				return Reply{Content: "done"}, nil
			})
			if rep, _ := h(context.Background(), inv); rep.Content != "done" {
				t.Fatalf("reply %q", rep.Content)
			}
			time.Sleep(30 * time.Millisecond) // a timer left running would fire now
			if deferred.Load() != tc.want || deferredWhileRunning.Load() != tc.want {
				t.Fatalf("deferred %d times (%d while running), want %d", deferred.Load(), deferredWhileRunning.Load(), tc.want)
			}
		})
	}
}
