package commands

import (
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

func TestVisibilityPhrase(t *testing.T) {
	tests := []struct {
		in   api.Visibility
		want string
	}{
		{api.Visibility{Scope: api.ScopeGuild}, "visible in this server"},
		{api.Visibility{Scope: api.ScopeChannel, ChannelID: "9"}, "visible only in <#9>"},
		{api.Visibility{Scope: api.ScopeOperatorPrivate}, "visible only to the operator"},
		{api.Visibility{Scope: "some_new_scope"}, `visible as some\_new\_scope`},
	}
	for _, tt := range tests {
		if got := visibilityPhrase(english(t), tt.in); got != tt.want {
			t.Errorf("visibilityPhrase(%+v) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestConfidenceWord(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{{1, "high"}, {0.9, "high"}, {0.75, "high"}, {0.7, "medium"}, {0.6, "medium"}, {0.45, "medium"}, {0.3, "low"}, {0, "low"}}
	for _, tt := range tests {
		if got := confidenceWord(english(t), tt.in); got != tt.want+" confidence" {
			t.Errorf("confidenceWord(%v) = %q", tt.in, got)
		}
	}
}

func TestReplayedGoneReply(t *testing.T) {
	got := rememberedReply(english(t), testInvoker, api.ProposalResponse{Replayed: true}, testNow)
	if !strings.Contains(got, "nothing new was stored") || strings.Contains(got, "Remembered ") {
		t.Fatalf("reply %q", got)
	}
	assertNoWorkflowWords(t, got)
}

// TestSupersedesRefusesWhatNamesNoFact: the slash command refuses exactly the
// ids the shared rule (api.ValidFactID) refuses, before calling the service.
func TestSupersedesRefusesWhatNamesNoFact(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"fabc2345", true}, {"f", true}, {strings.Repeat("a", 64), true},
		{"", false}, {".", false}, {"..", false}, {strings.Repeat("a", 65), false},
		{"fabc 2345", false}, {"fabc\t", false}, {"fabc\x7f", false},
	}
	for _, tt := range tests {
		if got := api.ValidFactID(tt.in); got != tt.want {
			t.Errorf("api.ValidFactID(%q) = %v", tt.in, got)
		}
		if tt.in == "" || strings.TrimSpace(tt.in) != tt.in {
			continue // empty means "corrects nothing"; spaces around are trimmed
		}
		id, err := supersedesID(english(t), tt.in)
		if refused := err != nil; refused == tt.want || (tt.want && id != tt.in) {
			t.Errorf("supersedesID(%q) = %q, %v; want refused=%v", tt.in, id, err, !tt.want)
		}
	}
}

func TestServiceSentenceWithoutMessage(t *testing.T) {
	if got := serviceSentence(english(t), api.Error{}); got != "the request was not valid." {
		t.Fatalf("serviceSentence = %q", got)
	}
	if got := serviceSentence(english(t), api.Error{Code: "invalid_request"}); got != "the request was not valid." {
		t.Fatalf("serviceSentence = %q", got)
	}
}

func TestRecallRefusesLongQuery(t *testing.T) {
	mem := &fakeMemory{}
	got, refused := run(t, mem, Policy{}, invocation(subRecall, map[string]any{optQuery: strings.Repeat("a", 201)}))
	if !refused || got != "A search can be at most 200 characters." || mem.calls() != 0 {
		t.Fatalf("reply %q refused %v calls %d", got, refused, mem.calls())
	}
}
