package voice

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// facts is what the memory service knows of each person.
var facts = map[string]string{ana: "Ana (consented) bakes sourdough.", ben: "Ben (consented) keeps a falcon named Pip."}

// factBriefer briefs the facts of the ids asked about. While hold is set,
// a request that includes ben waits for release: a briefing in flight.
type factBriefer struct {
	hold    atomic.Bool
	held    chan struct{}
	release chan struct{}
}

func (b *factBriefer) VoiceBriefing(ctx context.Context, req api.BriefingRequest) (api.BriefingResponse, error) {
	var lines []string
	for _, id := range req.ConsentedUserIDs {
		lines = append(lines, facts[id])
	}
	if b.hold.Load() && slices.Contains(req.ConsentedUserIDs, ben) {
		b.hold.Store(false)
		close(b.held)
		select {
		case <-b.release:
		case <-ctx.Done():
		}
	}
	return api.BriefingResponse{Briefing: strings.Join(lines, "\n")}, nil
}

// heldAgainst records every audio append and briefing the fake receives
// once armed at which it still held anything of ben's: his facts in an
// item (briefing or answer), or audio appended while he was consented
// (byte 0x11) in an item or the input buffer.
type heldAgainst struct {
	fake  atomic.Pointer[realtimetest.Server]
	armed atomic.Bool
	seen  atomic.Int64
	mu    sync.Mutex
	bad   []string
}

func (h *heldAgainst) onFrame(fr realtimetest.Frame) {
	f := h.fake.Load()
	if !h.armed.Load() || f == nil || (fr.Type != "input_audio_buffer.append" && fr.Type != "conversation.item.create") {
		return
	}
	defer h.seen.Add(1)
	items, pending := f.Live()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		if strings.Contains(it.Text, "Pip") || bytes.IndexByte(it.Audio, 0x11) >= 0 {
			h.bad = append(h.bad, fmt.Sprintf("%s arrived while the model's conversation held %s item %s (connection %d)", fr.Type, it.Role, it.ID, it.Conn))
		}
	}
	for _, p := range pending {
		if bytes.IndexByte(p, 0x11) >= 0 {
			h.bad = append(h.bad, fr.Type+" arrived while the model's input buffer held audio from before")
		}
	}
}

func (h *heldAgainst) violations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bad)
}

// forgetRig is a manager whose sessions talk to the realtime fake, with ana
// and ben in the lounge.
func forgetRig(t *testing.T, b *factBriefer) (*Manager, *realtimetest.Server, *heldAgainst, *observer.ObservedLogs) {
	t.Helper()
	h := &heldAgainst{}
	f := realtimetest.New(t, realtimetest.OnFrame(h.onFrame))
	h.fake.Store(f)
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	cfg := realtime.Config{URL: f.URL(), APIKey: realtimetest.DefaultKey, Model: realtimetest.DefaultModel,
		Instructions: "You are Clankie.", MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	opener := func(ctx context.Context, out realtime.Listener) (Model, error) {
		c := cfg
		c.Listener = out
		return realtime.Start(ctx, c, log.Named("realtime"))
	}
	m := startManager(t, Config{Memory: b, Model: opener, Log: log}, nil, guild, voiceStates(lounge, ana, ben)...)
	return m, f, h, logs
}

// lastItem is the text of the last briefing the fake received.
func lastItem(f *realtimetest.Server) string {
	items := f.Items()
	if len(items) == 0 {
		return ""
	}
	return items[len(items)-1]
}

// TestConsentShrinkTakesThePersonOutOfTheModel: after an opt-out, or a
// consented person leaving, the model's server-side conversation holds
// nothing of theirs — not the briefing with their facts, not the audio
// turns their voice was mixed into, not the audio not yet committed, not
// the answers that repeated their facts — and that is already true when
// the model receives the next audio or briefing. The next briefing is for
// those still consented.
func TestConsentShrinkTakesThePersonOutOfTheModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shrink func(m *Manager)
	}{
		{"opt-out", func(m *Manager) {
			if err := m.Consent(context.Background(), guild, ben, false); err != nil {
				t.Fatal(err)
			}
		}},
		{"leave", func(m *Manager) { m.OnVoiceStateUpdate(nil, voiceUpdate(ben, "")) }},
		{"move", func(m *Manager) { m.OnVoiceStateUpdate(nil, voiceUpdate(ben, quiet)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, f, h, _ := forgetRig(t, &factBriefer{})
			if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
				t.Fatal(err)
			}
			if err := m.Consent(context.Background(), guild, ben, true); err != nil {
				t.Fatal(err)
			}
			realtimetest.Eventually(t, "a briefing with ben's facts", func() bool { return strings.Contains(lastItem(f), "Pip") })
			s := m.Session(guild)
			for range 3 {
				if !modelAudio(s).AppendAudio(bytes.Repeat([]byte{0x11}, 960)) {
					t.Fatal("audio refused while ready")
				}
			}
			realtimetest.Eventually(t, "the mix received", func() bool { return len(f.Audio(1)) == 3*960 })
			f.Commit(1)
			f.Respond(1, "Ben, how is Pip the falcon?")
			modelAudio(s).AppendAudio(bytes.Repeat([]byte{0x11}, 960)) // a turn under way
			realtimetest.Eventually(t, "the mix received", func() bool { return len(f.Audio(1)) == 4*960 })

			h.armed.Store(true)
			tc.shrink(m)
			realtimetest.Eventually(t, "a briefing for ana alone and audio after it", func() bool {
				if a := modelAudio(s); a != nil {
					a.AppendAudio(bytes.Repeat([]byte{0x22}, 960)) // ana's voice only now
				}
				last := lastItem(f)
				return strings.Contains(last, "sourdough") && !strings.Contains(last, "Pip") && h.seen.Load() >= 2
			})
			for _, v := range h.violations() {
				t.Error(v)
			}
			items, pending := f.Live()
			for _, it := range items {
				if strings.Contains(it.Text, "Pip") || bytes.IndexByte(it.Audio, 0x11) >= 0 {
					t.Errorf("the model still holds %s item %s of connection %d", it.Role, it.ID, it.Conn)
				}
			}
			for _, p := range pending {
				if bytes.IndexByte(p, 0x11) >= 0 {
					t.Error("the model's input buffer still holds audio from before")
				}
			}
		})
	}
}

// TestBriefingInFlightAtAnOptOutIsNeverSent: a briefing pulled while ben
// was consented, and handed over only after he opted out, would put his
// facts into the conversation that was just made to forget him. It is
// dropped (receipt outcome superseded) and the one for ana alone follows.
func TestBriefingInFlightAtAnOptOutIsNeverSent(t *testing.T) {
	b := &factBriefer{held: make(chan struct{}), release: make(chan struct{})}
	m, f, h, logs := forgetRig(t, b)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	realtimetest.Eventually(t, "ana briefed", func() bool { return strings.Contains(lastItem(f), "sourdough") })
	b.hold.Store(true)
	if err := m.Consent(context.Background(), guild, ben, true); err != nil {
		t.Fatal(err)
	}
	<-b.held // the briefing with ben's facts is being pulled
	h.armed.Store(true)
	if err := m.Consent(context.Background(), guild, ben, false); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	realtimetest.Eventually(t, "the briefing after the opt-out", func() bool { return len(f.Items()) >= 2 })
	time.Sleep(50 * time.Millisecond) // nothing else follows
	for i, it := range f.Items() {
		if strings.Contains(it, "Pip") {
			t.Errorf("briefing %d holds ben's facts after he opted out", i)
		}
	}
	for _, v := range h.violations() {
		t.Error(v)
	}
	if n := logs.FilterField(zap.String("outcome", "superseded")).Len(); n != 1 {
		t.Errorf("%d receipts say superseded, want 1", n)
	}
}

// modelAudio is the session's model connection as something audio can be
// appended to (the mixed stream of a session without group turns), or nil
// before it is open.
func modelAudio(s *Session) interface{ AppendAudio([]byte) bool } {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.model.(interface{ AppendAudio([]byte) bool }); ok {
		return a
	}
	return nil
}
