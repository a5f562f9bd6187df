package voice

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clankie/clankie/voice/audio"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
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
}

// ended accumulates the figures of sessions and connections that ended,
// so the totals never go down. Guarded by Manager.mu.
type ended struct {
	briefings int
	path      audio.PathStats
	noConsent uint64 // the media connections' drops
}

func (e *ended) addPath(ps audio.PathStats, conn media.Stats) {
	e.path.In.AudioIn += ps.In.AudioIn
	e.path.In.DroppedNoConsent += ps.In.DroppedNoConsent
	e.path.Out.AudioOut += ps.Out.AudioOut
	e.path.Out.BargeIns += ps.Out.BargeIns
	e.path.ModelDropped += ps.ModelDropped
	e.noConsent += conn.DroppedNoConsent
}

// Totals returns the bridge's voice figures now.
func (m *Manager) Totals() Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := Totals{Sessions: len(m.sessions), BriefingsDelivered: m.ended.briefings,
		AudioIn: m.ended.path.In.AudioIn, AudioOut: m.ended.path.Out.AudioOut, BargeIns: m.ended.path.Out.BargeIns,
		DroppedNoConsent: m.ended.path.In.DroppedNoConsent + m.ended.noConsent, ModelDropped: m.ended.path.ModelDropped}
	for _, s := range m.sessions {
		if s.model != nil {
			t.BriefingsDelivered += s.model.Stats().BriefingsDelivered
		}
	}
	for l := range m.links {
		if p := l.path.Load(); p != nil {
			ps := p.Stats()
			t.AudioIn += ps.In.AudioIn
			t.AudioOut += ps.Out.AudioOut
			t.BargeIns += ps.Out.BargeIns
			t.DroppedNoConsent += ps.In.DroppedNoConsent
			t.ModelDropped += ps.ModelDropped
		}
		if c := l.conn.Load(); c != nil {
			t.DroppedNoConsent += c.Stats().DroppedNoConsent
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
	m.mu.Lock()
	s := m.sessions[guildID]
	var link *audioLink
	if s != nil {
		link = s.link
	}
	m.mu.Unlock()
	var ac AudioCounters
	if link == nil {
		return ac
	}
	if c := link.conn.Load(); c != nil {
		st := c.Stats()
		ac.Connected, ac.TransportOpens, ac.TransportFailures = true, st.TransportOpens, st.TransportFailures
		ac.DroppedNoConsent, ac.FramesDelivered = st.DroppedNoConsent, st.FramesDelivered
	}
	if p := link.path.Load(); p != nil {
		ac.Path, ac.Listening = p.Stats(), true
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
