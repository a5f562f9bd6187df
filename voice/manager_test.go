package voice

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
)

const (
	guild   = "100000000000000001"
	lounge  = "100000000000000021"
	quiet   = "100000000000000022"
	botUser = "900000000000000001"
	ana     = "200000000000000001"
	ben     = "200000000000000002"
	cal     = "200000000000000003"
)

// gatewayRec records the bot's op 4s and answers them as Discord does, in
// order, on its own goroutine: the bot's VOICE_STATE_UPDATE and, for a
// channel, a VOICE_SERVER_UPDATE whose endpoint, token and session id
// server gives (a placeholder when nil). Silent leaves them unanswered.
type gatewayRec struct {
	mu     sync.Mutex
	moves  []string
	silent bool
	server func() (endpoint, token, sessionID string)
	q      chan [2]string
}

func newGateway() *gatewayRec { return &gatewayRec{q: make(chan [2]string, 1024)} }

func (g *gatewayRec) ChannelVoiceJoinManual(gID, cID string, _, _ bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.moves = append(g.moves, cID)
	if !g.silent {
		g.q <- [2]string{gID, cID}
	}
	return nil
}

func (g *gatewayRec) sent() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.moves)
}

// answer delivers m's answers until stop closes.
func (g *gatewayRec) answer(m *Manager, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case mv := <-g.q:
			endpoint, token, sid := "voice.invalid:443", "token-"+mv[1], "bot-session"
			if g.server != nil && mv[1] != "" {
				endpoint, token, sid = g.server()
			}
			m.OnVoiceStateUpdate(nil, &discordgo.VoiceStateUpdate{VoiceState: &discordgo.VoiceState{GuildID: mv[0], ChannelID: mv[1],
				UserID: botUser, SessionID: sid}})
			if mv[1] != "" {
				m.OnVoiceServerUpdate(nil, &discordgo.VoiceServerUpdate{GuildID: mv[0], Endpoint: endpoint, Token: token})
			}
		}
	}
}

// startManager runs a manager whose bot is botUser, answered by g (a new
// gatewayRec when nil), with gid's voice states loaded as the first
// GUILD_CREATE would. cfg's Memory defaults to a brieferRec and its
// Debounce to 5 ms.
func startManager(t testing.TB, cfg Config, g *gatewayRec, gid string, states ...*discordgo.VoiceState) *Manager {
	t.Helper()
	if g == nil {
		g = newGateway()
	}
	if cfg.Memory == nil {
		cfg.Memory = &brieferRec{}
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = 5 * time.Millisecond
	}
	cfg.Gateway = g
	m := NewManager(cfg)
	stop := make(chan struct{})
	go g.answer(m, stop)
	t.Cleanup(func() { m.Close(); close(stop) })
	m.OnReady(nil, &discordgo.Ready{User: &discordgo.User{ID: botUser}})
	for _, vs := range states {
		vs.GuildID = gid
	}
	m.OnGuildCreate(nil, &discordgo.GuildCreate{Guild: &discordgo.Guild{ID: gid, VoiceStates: states}})
	return m
}

// brieferRec answers every briefing request and records whom it asked about.
type brieferRec struct {
	mu   sync.Mutex
	reqs [][]string
}

func (b *brieferRec) VoiceBriefing(_ context.Context, req api.BriefingRequest) (api.BriefingResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, slices.Clone(req.ConsentedUserIDs))
	return api.BriefingResponse{Briefing: "briefing placeholder"}, nil
}

func (b *brieferRec) last() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.reqs) == 0 {
		return nil
	}
	return b.reqs[len(b.reqs)-1]
}

func voiceStates(channel string, users ...string) []*discordgo.VoiceState {
	var out []*discordgo.VoiceState
	for _, u := range users {
		out = append(out, &discordgo.VoiceState{GuildID: guild, ChannelID: channel, UserID: u})
	}
	return out
}

func guildCreate(states ...*discordgo.VoiceState) *discordgo.GuildCreate {
	return &discordgo.GuildCreate{Guild: &discordgo.Guild{ID: guild, VoiceStates: states}}
}

func voiceUpdate(user, channel string) *discordgo.VoiceStateUpdate {
	return &discordgo.VoiceStateUpdate{VoiceState: &discordgo.VoiceState{GuildID: guild, ChannelID: channel, UserID: user}}
}

// newTestManager runs a manager whose bot is botUser, with states loaded
// as the first GUILD_CREATE would.
func newTestManager(t *testing.T, policy config.ConsentPolicy, states ...*discordgo.VoiceState) (*Manager, *brieferRec, *gatewayRec) {
	t.Helper()
	b, g := &brieferRec{}, newGateway()
	m := startManager(t, Config{Policy: policy, Memory: b}, g, guild, states...)
	return m, b, g
}

func consented(t *testing.T, m *Manager) int {
	t.Helper()
	st, ok := m.Status(guild)
	if !ok {
		t.Fatal("no session")
	}
	return st.Consented
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Every way a person stops being in the session's channel drops their
// opt-in through Session.departed: a leave, a move, and a roster rebuilt from
// GUILD_CREATE after a reconnect that no longer holds them (issue 10,
// item 2). Coming back is not consent.
func TestConsentDroppedOnEveryWayOfLeaving(t *testing.T) {
	for _, tc := range []struct {
		name  string
		leave func(m *Manager)
	}{
		{"leave", func(m *Manager) { m.OnVoiceStateUpdate(nil, voiceUpdate(ben, "")) }},
		{"move", func(m *Manager) { m.OnVoiceStateUpdate(nil, voiceUpdate(ben, quiet)) }},
		{"roster rebuilt after a reconnect without them", func(m *Manager) {
			m.OnGuildCreate(nil, guildCreate(voiceStates(lounge, ana, botUser)...))
		}},
		{"roster rebuilt after a reconnect in another channel", func(m *Manager) {
			m.OnGuildCreate(nil, guildCreate(append(voiceStates(lounge, ana, botUser), voiceStates(quiet, ben)...)...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b, _ := newTestManager(t, config.ConsentExplicit, voiceStates(lounge, ana, ben)...)
			if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
				t.Fatal(err)
			}
			if err := m.Consent(context.Background(), guild, ben, true); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a briefing about both", func() bool { return len(b.last()) == 2 })
			tc.leave(m)
			m.OnVoiceStateUpdate(nil, voiceUpdate(ben, lounge)) // back, without opting in
			if n := consented(t, m); n != 1 {
				t.Fatalf("%d consented after ben left and came back, want 1", n)
			}
			eventually(t, "a briefing without ben", func() bool { return slices.Equal(b.last(), []string{ana}) })
		})
	}
}

// A rebuilt roster that still holds a person in the session's channel keeps
// their consent: a reconnect alone is not a leave.
func TestRosterRebuiltWithThemKeepsConsent(t *testing.T) {
	m, b, _ := newTestManager(t, config.ConsentExplicit, voiceStates(lounge, ana, ben)...)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := m.Consent(context.Background(), guild, ben, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a briefing about both", func() bool { return len(b.last()) == 2 })
	m.OnGuildCreate(nil, guildCreate(voiceStates(lounge, ana, ben, botUser)...))
	if n := consented(t, m); n != 2 {
		t.Fatalf("%d consented after a rebuild that kept both, want 2", n)
	}
}

// Consented is what the audio path asks for every speaker of every 20 ms
// frame: it changes the moment the event is handled (no debounce, no
// briefing round trip), never holds the bot, and holds nobody once the
// session ended.
func TestConsentedChangesAtOnceForTheAudioPath(t *testing.T) {
	m, _, _ := newTestManager(t, config.ConsentPresence, voiceStates(lounge, ana, ben, botUser)...)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	s := m.Session(guild)
	if s == nil {
		t.Fatal("no session")
	}
	if !s.Consented(ana) || !s.Consented(ben) || s.Consented(botUser) || s.Consented(cal) {
		t.Fatalf("consented ana %t ben %t bot %t cal %t; want ana and ben only",
			s.Consented(ana), s.Consented(ben), s.Consented(botUser), s.Consented(cal))
	}
	if err := m.Consent(context.Background(), guild, ben, false); err != nil {
		t.Fatal(err)
	}
	if s.Consented(ben) {
		t.Fatal("ben still consented right after opting out")
	}
	m.OnVoiceStateUpdate(nil, voiceUpdate(cal, lounge))
	if !s.Consented(cal) {
		t.Fatal("cal, present under presence, not consented after the event")
	}
	m.OnVoiceStateUpdate(nil, voiceUpdate(cal, quiet))
	if s.Consented(cal) {
		t.Fatal("cal still consented right after moving away")
	}
	m.OnGuildCreate(nil, guildCreate(voiceStates(lounge, ben, botUser)...)) // ana gone after a reconnect
	if s.Consented(ana) {
		t.Fatal("ana still consented right after a rebuilt roster dropped her")
	}
	if err := m.Leave(context.Background(), guild); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after leave")
	}
	if s.Consented(ben) || s.Consented(ana) {
		t.Fatal("someone is consented in an ended session")
	}
}

// The 25-person cap holds for the audio path as for the briefing.
func TestConsentedCapsAt25(t *testing.T) {
	var users []string
	for i := range 30 {
		users = append(users, fmt.Sprintf("2000000000000001%02d", i))
	}
	m, _, _ := newTestManager(t, config.ConsentPresence, voiceStates(lounge, users...)...)
	if _, err := m.Join(context.Background(), guild, users[0], "", ""); err != nil {
		t.Fatal(err)
	}
	s := m.Session(guild)
	n := 0
	for _, u := range users {
		if s.Consented(u) {
			n++
		}
	}
	if n != api.MaxBriefingUsers {
		t.Fatalf("%d consented, want %d", n, api.MaxBriefingUsers)
	}
	if st, _ := m.Status(guild); st.Consented != api.MaxBriefingUsers {
		t.Fatalf("status counts %d", st.Consented)
	}
}

func TestBoundBriefingCutsAtALineThatFits(t *testing.T) {
	short := "Ana likes tea."
	if got, cut := boundBriefing(short); got != short || cut {
		t.Fatalf("short briefing changed: %q %t", got, cut)
	}
	line := strings.Repeat("é", 99) + "\n" // 100 runes, 199 bytes
	long := strings.Repeat(line, 81)       // 8100 runes
	got, cut := boundBriefing(long)
	if !cut || utf8.RuneCountInString(got) > api.MaxBriefingChars || !strings.HasSuffix(got, "é") || strings.Count(got, "\n") != 79 {
		t.Fatalf("cut %t, %d runes, %d lines", cut, utf8.RuneCountInString(got), strings.Count(got, "\n")+1)
	}
}
