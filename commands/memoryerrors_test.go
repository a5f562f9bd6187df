package commands

import (
	"errors"
	"fmt"
	"testing"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
	"github.com/clankie/clankie/memoryclient"
)

// memErr is the error memoryclient returns for a failure of kind k: with
// the status the service answered for it (0 when nothing answered).
func memErr(k memoryclient.Kind, msg string) error {
	status := map[memoryclient.Kind]int{
		memoryclient.KindUnavailable:  503,
		memoryclient.KindUnauthorized: 401,
		memoryclient.KindForbidden:    403,
		memoryclient.KindNotFound:     404,
		memoryclient.KindConflict:     409,
		memoryclient.KindInvalid:      400,
		memoryclient.KindInternal:     500,
	}[k]
	return &memoryclient.Error{Op: "test", Kind: k, Status: status, Message: msg}
}

func TestMemoryError(t *testing.T) {
	plain := errors.New("boom")
	tests := []struct {
		name   string
		err    error
		effect effect
		want   string // "" means: returned unchanged
	}{
		{"unavailable write", memErr(memoryclient.KindUnavailable, "x"), writeEffect, "Sorry, memory is unavailable right now; nothing was saved."},
		{"timeout write", memErr(memoryclient.KindTimeout, "x"), writeEffect, "Sorry, memory is unavailable right now; nothing was saved."},
		{"canceled write", memErr(memoryclient.KindCanceled, "x"), writeEffect, "Sorry, memory is unavailable right now; nothing was saved."},
		{"unavailable read", memErr(memoryclient.KindUnavailable, "x"), readEffect, "Sorry, memory is unavailable right now; please try again shortly."},
		{"timeout read", memErr(memoryclient.KindTimeout, "x"), readEffect, "Sorry, memory is unavailable right now; please try again shortly."},
		{"wrapped timeout", fmt.Errorf("call: %w", memErr(memoryclient.KindTimeout, "x")), readEffect, "Sorry, memory is unavailable right now; please try again shortly."},
		{"invalid", memErr(memoryclient.KindInvalid, "expiresAt must be in the future."), writeEffect, "Memory refused that: ExpiresAt must be in the future."},
		{"conflict", memErr(memoryclient.KindConflict, "x"), writeEffect, inEnglish(t, lang.Conflict, nil)},
		{"unauthorized", memErr(memoryclient.KindUnauthorized, "x"), writeEffect, ""},
		{"internal", memErr(memoryclient.KindInternal, "x"), readEffect, ""},
		{"forbidden outside forget", memErr(memoryclient.KindForbidden, "x"), writeEffect, ""},
		{"not ours", plain, writeEffect, ""},
		{"invalid before sending", &memoryclient.Error{Op: "test", Kind: memoryclient.KindInvalid, Message: "factId is empty."}, writeEffect, "Memory refused that: FactId is empty."},
		{"unavailable without an answer", &memoryclient.Error{Op: "test", Kind: memoryclient.KindUnavailable, Message: "x"}, readEffect, inEnglish(t, lang.UnavailableRead, nil)},
		{"outcome unknown write", &memoryclient.Error{Op: "test", Kind: memoryclient.KindUnavailable, Status: 503, Code: "outcome_unknown", Message: "x"}, writeEffect, inEnglish(t, lang.OutcomeUnknown, nil)},
		{"store unavailable write", &memoryclient.Error{Op: "test", Kind: memoryclient.KindUnavailable, Status: 503, Code: "store_unavailable", Message: "x"}, writeEffect, inEnglish(t, lang.UnavailableWrite, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := memoryError(english(t), tt.err, tt.effect)
			if tt.want == "" {
				if got != tt.err {
					t.Fatalf("memoryError = %v; want the error unchanged", got)
				}
				return
			}
			ue, ok := interaction.AsUserError(got)
			if !ok || ue.Sentence != tt.want {
				t.Fatalf("memoryError = %v; want the sentence %q", got, tt.want)
			}
		})
	}
}

func TestForgetError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"403", memErr(memoryclient.KindForbidden, "x"), "You can only forget facts about you or facts you proposed."},
		{"404", memErr(memoryclient.KindNotFound, "x"), "There is no fact with that id about <@" + testOther + ">."},
		{"unavailable", memErr(memoryclient.KindUnavailable, "x"), inEnglish(t, lang.UnavailableWrite, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ue, ok := interaction.AsUserError(forgetError(english(t), tt.err, testOther))
			if !ok || ue.Sentence != tt.want {
				t.Fatalf("forgetError = %v; want %q", ue, tt.want)
			}
		})
	}
}
