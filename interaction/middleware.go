package interaction

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Middleware wraps a Handler with one concern (recovery, the allow-list,
// deferral, a timeout), so each is written, tested and ordered on its own.
type Middleware func(Handler) Handler

// Chain wraps h in mw, the first outermost: Chain(h, a, b) runs a, then b,
// then h.
func Chain(h Handler, mw ...Middleware) Handler {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// Recover turns a panic in the handler (or in middleware inside this one)
// into ErrPanicked, logged with the panic's type and the stack's function
// lines: never its value or arguments, which may quote what a person wrote.
func Recover(log *zap.Logger) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, inv Invocation) (rep Reply, err error) {
			defer func() {
				if p := recover(); p != nil {
					log.Error("command handler panicked", zap.String("interactionId", inv.ID), zap.String("command", inv.Path()),
						zap.String("panicType", fmt.Sprintf("%T", p)), zap.String("stack", FirstFrames(debug.Stack())))
					rep, err = Reply{}, ErrPanicked
				}
			}()
			return next(ctx, inv)
		}
	}
}

// AllowGuilds serves only the listed servers, refusing any other with
// ErrNotServed before the handler runs; with no ids it serves every server.
// DMs pass: the commands themselves decide what a DM may do.
func AllowGuilds(ids []string) Middleware {
	allowed := make(map[string]bool, len(ids))
	for _, id := range ids {
		allowed[id] = true
	}
	return func(next Handler) Handler {
		if len(allowed) == 0 {
			return next
		}
		return func(ctx context.Context, inv Invocation) (Reply, error) {
			if inv.GuildID != "" && !allowed[inv.GuildID] {
				return Reply{}, ErrNotServed
			}
			return next(ctx, inv)
		}
	}
}

// GuildOnly refuses an invocation outside a server (a DM, should Discord
// deliver one) with the sentence for the invoker's locale, before the
// handler reads anything.
func GuildOnly(sentence func(locale string) string) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, inv Invocation) (Reply, error) {
			if inv.GuildID == "" {
				return Reply{}, &UserError{Sentence: sentence(inv.Locale)}
			}
			return next(ctx, inv)
		}
	}
}

// DeferAfter calls the invocation's Defer when the handler has not returned
// within after, so a slow reply is still delivered (by editing the deferred
// response). The handler keeps running on the caller's goroutine, so a
// panic reaches any Recover outside this middleware.
func DeferAfter(after time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, inv Invocation) (Reply, error) {
			if inv.Defer == nil {
				return next(ctx, inv)
			}
			t := time.AfterFunc(after, inv.Defer)
			defer t.Stop()
			return next(ctx, inv)
		}
	}
}

// Timeout bounds the handler's context, deferred or not.
func Timeout(d time.Duration) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, inv Invocation) (Reply, error) {
			ctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			return next(ctx, inv)
		}
	}
}

// FirstFrames keeps a stack trace's function lines (no argument values).
func FirstFrames(stack []byte) string {
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
