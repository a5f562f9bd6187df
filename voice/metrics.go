package voice

import (
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clankie/clankie/voice/audio"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/voiceapi"
)

// Totals are a bridge's voice figures since it started: counts and
// durations only, summed over every session, never per person (the
// metrics, like the receipts, hold no ids and no content).
type Totals struct {
	// Sessions is how many voice sessions are live now.
	Sessions int
	// BriefingsDelivered counts briefings a model's server acknowledged.
	BriefingsDelivered int
	// AudioIn is audio handed to the model (the mix of consented
	// speakers); AudioOut is Clankie's audio sent (silence excluded).
	AudioIn, AudioOut time.Duration
	// DroppedNoConsent counts frames dropped, undecrypted or undecoded,
	// because their speaker had not consented.
	DroppedNoConsent uint64
	// BargeIns counts barge-ins that found Clankie talking.
	BargeIns uint64
	// ModelDropped counts 20 ms input chunks the model connection did not
	// take (not open, or reconnecting): paused, never buffered.
	ModelDropped uint64
	// PeerPanics counts inputs from a voice server or a peer whose
	// handling panicked and was recovered (the input dropped, the
	// connection kept); PeerRefused what was refused as hostile.
	PeerPanics  PeerPanics
	PeerRefused PeerRefused
	// OutputOverflow counts 20 ms frames of the model's audio dropped
	// unencoded because the queue to the channel was full.
	OutputOverflow uint64
	// OutputCut is the model's audio dropped because one delta held more
	// than 2 s of it; OversizedEvents counts model events over 1 MiB, each
	// of which closed its connection.
	OutputCut       time.Duration
	OversizedEvents int
	// EndedBy counts the sessions that ended, by why; SessionTime is the
	// time sessions spent in a channel, the live ones' so far included.
	EndedBy     map[voiceapi.EndReason]uint64
	SessionTime time.Duration
	// TurnsAnswered and TurnsSilent count the group call's turns Clankie
	// answered and those he let pass (not addressed, or not transcribed);
	// ToolCalls the voice model's tool calls by tool and outcome.
	TurnsAnswered, TurnsSilent uint64
	ToolCalls                  map[ToolCall]uint64
}

// ToolCall is a tool call's labels: the tool (recall_person,
// recall_episodes, remember_episode, unknown) and its outcome (ok,
// refused, bad_arguments, memory_error, unknown_tool).
type ToolCall struct{ Tool, Outcome string }

// PeerPanics are recovered panics by component, a small fixed set: the
// voice gateway websocket, the media (RTP) path, the DAVE session (mls-go
// and our frame parser), the Opus decoder (pion/opus) and the realtime
// model's server events.
type PeerPanics struct{ Gateway, Media, DAVE, Opus, Realtime uint64 }

// PeerRefused counts a voice server's input refused as hostile: speaking
// ops past the SSRC cap, users past DAVE's recognised-user cap, and moves
// of an end-to-end encrypted call to protocol 0 that are not the
// documented downgrade.
type PeerRefused struct{ SSRCOverCap, DAVEUsersOverCap, DAVEDowngrades uint64 }

// addConn adds one connection's and its DAVE session's counts.
func (t *Totals) addConn(conn media.Stats, d media.DAVE) {
	t.PeerPanics.Gateway += conn.GatewayPanics
	t.PeerPanics.Media += conn.MediaPanics
	t.PeerRefused.SSRCOverCap += conn.SSRCRefused
	if ds, ok := d.(*davemedia.Session); ok {
		r := ds.DAVE().Refusals()
		t.PeerPanics.DAVE += r.Panics
		t.PeerRefused.DAVEUsersOverCap += r.UsersOverCap
		t.PeerRefused.DAVEDowngrades += r.Downgrades
	}
}

// addModel adds a model connection's hostile-input counts to t.
func (t *Totals) addModel(st realtime.Stats) {
	t.OutputCut += pcmDuration(st.AudioBytesCut)
	t.OversizedEvents += st.OversizedEvents
	t.PeerPanics.Realtime += uint64(st.Panics)
}

// pcmDuration is how long n bytes of the model's PCM16 mono audio play.
func pcmDuration(n int64) time.Duration {
	return time.Duration(n) * time.Second / (2 * realtime.SampleRate)
}

// ended accumulates the figures of sessions and connections that ended,
// so the totals never go down. Guarded by Manager.mu.
type ended struct {
	// endedBy counts sessions ended by reason; sessionTime sums their
	// time in a channel.
	endedBy     map[voiceapi.EndReason]uint64
	sessionTime time.Duration
	briefings   int
	model       Totals // OutputCut, OversizedEvents and realtime panics of models closed
	speech      Totals // the audio paths', floors' and tools' figures
	noConsent   uint64 // the media connections' drops
	peers       Totals // only PeerPanics and PeerRefused
}

// addConn keeps an ended connection's figures.
func (e *ended) addConn(conn media.Stats, d media.DAVE) {
	e.peers.addConn(conn, d)
	e.noConsent += conn.DroppedNoConsent
}

// addSpeech adds a session's conversation figures: its audio path's, the
// turns its floor answered or let pass, its tool calls.
func (t *Totals) addSpeech(sp *speech) {
	if sp == nil {
		return
	}
	if sp.path != nil {
		ps := sp.path.Stats()
		t.AudioIn += ps.In.AudioIn
		t.AudioOut += ps.Out.AudioOut
		t.BargeIns += ps.Out.BargeIns
		t.DroppedNoConsent += ps.In.DroppedNoConsent
		t.ModelDropped += ps.ModelDropped
		t.PeerPanics.Opus += ps.In.DecoderPanics
		t.OutputOverflow += ps.Out.DroppedOverflow
	}
	answered, silent := sp.floor.counts()
	t.TurnsAnswered += answered
	t.TurnsSilent += silent
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if t.ToolCalls == nil {
		t.ToolCalls = map[ToolCall]uint64{}
	}
	for k, n := range sp.toolCalls {
		t.ToolCalls[ToolCall{Tool: k.tool, Outcome: string(k.outcome)}] += n
	}
}

// speechEnded keeps an ended session's conversation figures.
func (m *Manager) speechEnded(sp *speech) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended.speech.addSpeech(sp)
}

// Totals returns the bridge's voice figures now.
func (m *Manager) Totals() Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.ended.speech
	t := Totals{Sessions: len(m.sessions), BriefingsDelivered: m.ended.briefings,
		AudioIn: sp.AudioIn, AudioOut: sp.AudioOut, BargeIns: sp.BargeIns,
		DroppedNoConsent: sp.DroppedNoConsent + m.ended.noConsent, ModelDropped: sp.ModelDropped,
		PeerPanics: m.ended.peers.PeerPanics, PeerRefused: m.ended.peers.PeerRefused,
		OutputOverflow: sp.OutputOverflow, OutputCut: m.ended.model.OutputCut, OversizedEvents: m.ended.model.OversizedEvents,
		TurnsAnswered: sp.TurnsAnswered, TurnsSilent: sp.TurnsSilent, ToolCalls: maps.Clone(sp.ToolCalls)}
	t.PeerPanics.Opus += sp.PeerPanics.Opus
	t.PeerPanics.Realtime += m.ended.model.PeerPanics.Realtime
	t.EndedBy = maps.Clone(m.ended.endedBy)
	t.SessionTime = m.ended.sessionTime
	now := m.cfg.Now()
	for _, s := range m.sessions {
		s.mu.Lock()
		if s.model != nil {
			st := s.model.Stats()
			t.BriefingsDelivered += st.BriefingsDelivered
			t.addModel(st)
		}
		if !s.started.IsZero() {
			t.SessionTime += now.Sub(s.started)
		}
		live := s.speech
		s.mu.Unlock()
		t.addSpeech(live)
	}
	for l := range m.links {
		if c := l.conn.Load(); c != nil {
			st := c.Stats()
			t.DroppedNoConsent += st.DroppedNoConsent
			t.addConn(st, l.dave)
		}
	}
	return t
}

// RegisterMetrics registers the voice figures in reg (a bridge's
// bot.Metrics.Registerer, already labelled bridge="voice"): gauges and
// counters read from Totals at scrape time, with no labels of their own.
func (m *Manager) RegisterMetrics(reg prometheus.Registerer) error {
	type metric struct {
		name, help string
		gauge      bool
		value      func(Totals) float64
	}
	for _, mt := range []metric{
		{"clankie_voice_sessions", "Voice sessions live now.", true, func(t Totals) float64 { return float64(t.Sessions) }},
		{"clankie_voice_briefings_delivered_total", "Briefings the realtime model acknowledged.", false,
			func(t Totals) float64 { return float64(t.BriefingsDelivered) }},
		{"clankie_voice_audio_in_seconds_total", "Seconds of consented speakers' audio handed to the model.", false,
			func(t Totals) float64 { return t.AudioIn.Seconds() }},
		{"clankie_voice_audio_out_seconds_total", "Seconds of Clankie's audio sent to the voice channel.", false,
			func(t Totals) float64 { return t.AudioOut.Seconds() }},
		{"clankie_voice_frames_dropped_no_consent_total", "Audio frames dropped undecrypted because their speaker had not consented.", false,
			func(t Totals) float64 { return float64(t.DroppedNoConsent) }},
		{"clankie_voice_barge_ins_total", "Times someone spoke while Clankie talked and he stopped.", false,
			func(t Totals) float64 { return float64(t.BargeIns) }},
		{"clankie_voice_model_audio_dropped_total", "20 ms input chunks dropped while the model connection was not ready.", false,
			func(t Totals) float64 { return float64(t.ModelDropped) }},
		{"clankie_voice_output_frames_dropped_total", "20 ms frames of the model's audio dropped unencoded because the queue to the channel was full.", false,
			func(t Totals) float64 { return float64(t.OutputOverflow) }},
		{"clankie_voice_model_audio_cut_seconds_total", "Seconds of the model's audio dropped because one delta held more than 2 s.", false,
			func(t Totals) float64 { return t.OutputCut.Seconds() }},
		{"clankie_voice_model_events_oversized_total", "Model events over 1 MiB, each of which closed its connection.", false,
			func(t Totals) float64 { return float64(t.OversizedEvents) }},
		{"clankie_voice_session_seconds_total", "Seconds voice sessions spent in a channel, the live ones' so far included.", false,
			func(t Totals) float64 { return t.SessionTime.Seconds() }},
	} {
		f := func() float64 { return mt.value(m.Totals()) }
		var c prometheus.Collector
		if mt.gauge {
			c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: mt.name, Help: mt.help}, f)
		} else {
			c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: mt.name, Help: mt.help}, f)
		}
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return m.registerPeerMetrics(reg)
}

// registerPeerMetrics registers the recovered panics by component and the
// refusals by reason: fixed label sets, read from Totals at scrape time.
func (m *Manager) registerPeerMetrics(reg prometheus.Registerer) error {
	type labelled struct {
		name, help, label, value string
		count                    func(Totals) uint64
	}
	const (
		panics  = "clankie_voice_peer_panics_total"
		refused = "clankie_voice_peer_refused_total"
	)
	panicsHelp := "Inputs from a voice server or peer whose handling panicked; each was dropped and the connection kept."
	refusedHelp := "Inputs from a voice server refused as hostile."
	for _, outcome := range []string{"answered", "silent"} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clankie_voice_turns_total",
			Help: "Group-call turns Clankie answered, and those he let pass (not addressed to him, or not transcribed).", ConstLabels: prometheus.Labels{"outcome": outcome}},
			func() float64 {
				t := m.Totals()
				if outcome == "answered" {
					return float64(t.TurnsAnswered)
				}
				return float64(t.TurnsSilent)
			})
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, tool := range []string{toolRecallPerson, toolRecallEpisodes, toolRememberEpisode, "unknown"} {
		for _, outcome := range []toolOutcome{toolOK, toolRefused, toolBadArgs, toolMemoryError, toolUnknown} {
			key := ToolCall{Tool: tool, Outcome: string(outcome)}
			c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clankie_voice_tool_calls_total",
				Help: "The voice model's memory tool calls, by tool and outcome.", ConstLabels: prometheus.Labels{"tool": tool, "outcome": string(outcome)}},
				func() float64 { return float64(m.Totals().ToolCalls[key]) })
			if err := reg.Register(c); err != nil {
				return err
			}
		}
	}
	for _, why := range voiceapi.EndReasons() {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "clankie_voice_sessions_ended_total",
			Help: "Voice sessions ended, by why (leave, empty, idle, max_session, budget, join_timeout, rejoin_failed, disconnected, moved, protocol_error, shutdown).", ConstLabels: prometheus.Labels{"reason": string(why)}},
			func() float64 { return float64(m.Totals().EndedBy[why]) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, l := range []labelled{
		{panics, panicsHelp, "component", "gateway", func(t Totals) uint64 { return t.PeerPanics.Gateway }},
		{panics, panicsHelp, "component", "media", func(t Totals) uint64 { return t.PeerPanics.Media }},
		{panics, panicsHelp, "component", "dave", func(t Totals) uint64 { return t.PeerPanics.DAVE }},
		{panics, panicsHelp, "component", "opus", func(t Totals) uint64 { return t.PeerPanics.Opus }},
		{panics, panicsHelp, "component", "realtime", func(t Totals) uint64 { return t.PeerPanics.Realtime }},
		{refused, refusedHelp, "reason", "ssrc_cap", func(t Totals) uint64 { return t.PeerRefused.SSRCOverCap }},
		{refused, refusedHelp, "reason", "dave_users_cap", func(t Totals) uint64 { return t.PeerRefused.DAVEUsersOverCap }},
		{refused, refusedHelp, "reason", "dave_downgrade", func(t Totals) uint64 { return t.PeerRefused.DAVEDowngrades }},
	} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: l.name, Help: l.help,
			ConstLabels: prometheus.Labels{l.label: l.value}}, func() float64 { return float64(l.count(m.Totals())) })
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// AudioCounters are what a session's voice connection did with one
// speaker's packets, for tests that prove consent is enforced before any
// decryption: counts only.
type AudioCounters struct {
	// Connected reports whether the session has a voice connection.
	Connected bool
	// TransportOpens counts the connection's transport (AEAD) decryptions,
	// every speaker's; DroppedNoConsent its packets dropped undecrypted.
	TransportOpens, TransportFailures, DroppedNoConsent, FramesDelivered uint64
	// DAVE is the end-to-end decryption work done for the speaker asked
	// about (zero without DAVE).
	DAVE dave.DecryptStats
	// DAVEReady reports whether the connection's DAVE session can encrypt
	// and decrypt at the epoch DAVEEpoch with no transition pending.
	DAVEReady bool
	DAVEEpoch uint64
	// Path is the session's audio path counters; Listening reports
	// whether that path runs (the codec is compiled and the model's audio
	// has somewhere to go).
	Path      audio.PathStats
	Listening bool
}

// AudioCounters returns the session's voice connection counters, with the
// DAVE decryption counts for userID. A test hook: nothing logs it.
func (m *Manager) AudioCounters(guildID, userID string) AudioCounters {
	var link *audioLink
	if s := m.Session(guildID); s != nil {
		s.mu.Lock()
		link = s.link
		s.mu.Unlock()
	}
	var ac AudioCounters
	if link == nil {
		return ac
	}
	if c := link.conn.Load(); c != nil {
		st := c.Stats()
		ac.Connected, ac.TransportOpens, ac.TransportFailures = true, st.TransportOpens, st.TransportFailures
		ac.DroppedNoConsent, ac.FramesDelivered = st.DroppedNoConsent, st.FramesDelivered
	}
	if s := m.Session(guildID); s != nil {
		s.mu.Lock()
		sp := s.speech
		s.mu.Unlock()
		if sp != nil && sp.path != nil {
			ac.Path, ac.Listening = sp.path.Stats(), true
		}
	}
	if d, ok := link.dave.(*davemedia.Session); ok {
		if u, err := dave.ParseUserID(userID); err == nil {
			ac.DAVE = d.DAVE().Stats(u)
		}
		ds := d.DAVE()
		ac.DAVEReady, ac.DAVEEpoch = ds.Ready() && !ds.TransitionPending(), ds.Epoch()
	}
	return ac
}
