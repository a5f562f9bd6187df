package voice

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
)

// toolMem answers the tools with fixed facts and records what it was asked.
type toolMem struct {
	mu       sync.Mutex
	recalls  []api.RecallQuery
	episodes []api.EpisodeRequest
	facts    map[string][]api.Fact
}

func (m *toolMem) Recall(_ context.Context, _, userID string, q api.RecallQuery) (api.RecallResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recalls = append(m.recalls, q)
	return api.RecallResponse{Facts: m.facts[userID]}, nil
}

func (m *toolMem) Episodes(_ context.Context, q string, limit int) (api.Card, error) {
	return api.Card{Card: "- a note about " + q, Count: 1}, nil
}

func (m *toolMem) RecordEpisode(_ context.Context, req api.EpisodeRequest) (api.EpisodeResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.episodes = append(m.episodes, req)
	return api.EpisodeResponse{}, nil
}

// The tools are scoped by consent, bounded and rate limited, and their
// receipts hold no arguments, output or ids.
func TestToolsScopedByConsentAndBounded(t *testing.T) {
	mem := &toolMem{facts: map[string][]api.Fact{
		ana: {{Body: "Ana plays the cello", Kind: api.KindPersonFact, CreatedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}},
		cal: {{Body: "Cal's secret", Kind: api.KindPersonFact}},
	}}
	core, logs := observer.New(zapcore.InfoLevel)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tl := &tools{mem: mem, guildID: guild, channelID: lounge, session: "s1", consented: func(id string) bool { return id == ana },
		now: func() time.Time { return now }, log: zap.New(core)}
	ctx := context.Background()
	for _, tc := range []struct {
		name, tool, args string
		outcome          toolOutcome
		has, hasNot      string
	}{
		{"a consented speaker", toolRecallPerson, `{"user_id":"` + ana + `","query":"cello"}`, toolOK, `"Ana plays the cello"`, ""},
		{"an unconsented one", toolRecallPerson, `{"user_id":"` + cal + `"}`, toolRefused, "only people in this call who agreed", "secret"},
		{"not an id", toolRecallPerson, `{"user_id":"<@` + ana + `>"}`, toolBadArgs, "user_id", "cello"},
		{"episodes", toolRecallEpisodes, `{"query":"chess"}`, toolOK, "a note about chess", ""},
		{"an empty query", toolRecallEpisodes, `{"query":" "}`, toolBadArgs, "query", ""},
		{"a note", toolRememberEpisode, `{"summary":"We talked about cellos."}`, toolOK, "Kept.", ""},
		{"a note too long", toolRememberEpisode, `{"summary":"` + strings.Repeat("x", 513) + `"}`, toolBadArgs, "512", ""},
		{"no such tool", "write_fact", `{}`, toolUnknown, "no such tool", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, outcome := tl.call(ctx, tc.tool, tc.args)
			if outcome != tc.outcome || !strings.Contains(out, tc.has) || (tc.hasNot != "" && strings.Contains(out, tc.hasNot)) {
				t.Fatalf("%s → %s %q", tc.tool, outcome, out)
			}
		})
	}
	if q := mem.recalls; len(q) != 1 || q[0].ChannelID != lounge || q[0].Limit != toolResults || q[0].Query != "cello" {
		t.Fatalf("recalls %+v: want one, in the session's channel, at most 8", q)
	}
	// 5 notes a minute: the first was kept, 4 more are, the 6th is refused
	// and not stored; a minute later there is room again.
	for i := range 4 {
		if _, o := tl.call(ctx, toolRememberEpisode, `{"summary":"note"}`); o != toolOK {
			t.Fatalf("note %d: %s", i+2, o)
		}
	}
	if out, o := tl.call(ctx, toolRememberEpisode, `{"summary":"note"}`); o != toolRefused || !strings.Contains(out, "at most 5") {
		t.Fatalf("the 6th note: %s %q", o, out)
	}
	if n := len(mem.episodes); n != 5 {
		t.Fatalf("%d notes stored, want 5", n)
	}
	if e := mem.episodes[0]; e.Lane != api.LaneDiscordVoice || e.Room != lounge || !e.Provenance.SelfAuthored {
		t.Fatalf("episode %+v", e)
	}
	now = now.Add(rememberWindow)
	if _, o := tl.call(ctx, toolRememberEpisode, `{"summary":"later"}`); o != toolOK {
		t.Fatalf("a note a minute later: %s", o)
	}
	long := &toolMem{facts: map[string][]api.Fact{ana: {}}}
	for range 20 {
		long.facts[ana] = append(long.facts[ana], api.Fact{Body: strings.Repeat("é", 2000), Kind: api.KindPersonFact})
	}
	tl.mem = long
	if out, _ := tl.call(ctx, toolRecallPerson, `{"user_id":"`+ana+`"}`); len([]rune(out)) != maxToolOutput {
		t.Fatalf("output of %d characters, want it cut to %d", len([]rune(out)), maxToolOutput)
	}
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if s, ok := v.(string); ok && (strings.Contains(s, ana) || strings.Contains(s, "cello") || strings.Contains(s, "note")) {
				t.Fatalf("receipt field %s holds %q", k, s)
			}
		}
	}
	if n := logs.FilterField(zap.String("receipt", "voice.tool_call")).Len(); n != 15 {
		t.Fatalf("%d receipts, want one per call (15)", n)
	}
}
