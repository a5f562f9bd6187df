package audio

import (
	"slices"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
)

// Utterance is one speaker's stretch of speech, kept apart from everyone
// else's (InboundConfig.Utterances): what a group call's model is sent
// under that speaker's label.
type Utterance struct {
	UserID string
	// PCM is 24 kHz mono PCM16 little-endian: the speech, the pauses
	// within it, and at most utteranceContext of the silence before and
	// after it.
	PCM []byte
	// Start is when the first frame in PCM arrived, on the Inbound's
	// clock. Utterances are handed over in the order of Start.
	Start time.Time
}

// The utterance mode's bounds.
const (
	// MaxUtterance bounds one utterance: a monologue is handed over in
	// pieces of this length, each a new utterance, so the model hears a
	// long speaker before they finish and no buffer grows without end.
	MaxUtterance = 30 * time.Second
	// MaxUtteranceWaiting bounds the audio gathered and not yet handed
	// over, across all speakers (about 2.9 MB). An utterance that would
	// take it past this is dropped whole, and so is the rest of it until
	// its speaker falls silent: a partial utterance would put words in
	// their mouth. It is reached only when many talk at once for long.
	MaxUtteranceWaiting = 60 * time.Second
	// BargeInSpeech is how much voiced audio an utterance needs before
	// Speaking is called: more than a cough, a click or a short
	// "mm-hm", less than a sentence.
	BargeInSpeech = 300 * time.Millisecond

	// utteranceContext is the silence kept before and after the speech,
	// so a transcriber hears the first and last phonemes whole.
	utteranceContext = 100 * time.Millisecond
	// gapFill is the longest gap between a speaker's frames taken for
	// network jitter. A longer one within an utterance is a pause in which
	// their client stopped sending (Discord clients do, after five silence
	// frames) and is filled with silence, so the utterance keeps its
	// timing; before the speech it makes the lead context stale.
	gapFill = 100 * time.Millisecond
	// voiceFloorRMS is the level (RMS of a decoded frame, of 32768) below
	// which a frame counts as silence: about −40 dBFS. Conversational
	// speech into a headset sits around −30 to −15 dBFS; what Discord's
	// noise suppression lets through of a quiet room and comfort noise
	// sit well below −50 dBFS. (The Opus silence frame is silence
	// whatever its decode: see voiced.)
	voiceFloorRMS = 330
)

// pcmBytes is the size of d of 24 kHz mono PCM16.
func pcmBytes(d time.Duration) int {
	return int(int64(d)*ModelRate/int64(time.Second)) * 2
}

// pcmDuration is the length of n bytes of 24 kHz mono PCM16.
func pcmDuration(n int) time.Duration { return samplesToDuration(int64(n/2), ModelRate) }

// voiced reports whether a frame is speech: its decoded level reaches
// voiceFloorRMS and it is not the Opus silence frame, whose decode still
// carries the codec's overlap tail of the frame before (loud enough, after
// speech, to pass the floor).
func voiced(frame []byte, mono []int16) bool {
	if opus.IsSilence(frame) {
		return false
	}
	var sum int64
	for _, v := range mono {
		sum += int64(v) * int64(v)
	}
	return len(mono) > 0 && sum >= voiceFloorRMS*voiceFloorRMS*int64(len(mono))
}

// utterance is one speaker's audio being gathered, or ended and waiting
// for an earlier-started one to end. Until its first voiced frame it is
// only lead context: at most utteranceContext long, neither ordered nor
// ever handed over on its own.
type utterance struct {
	userID      string
	pcm         []byte // 24 kHz mono PCM16 LE
	start       time.Time
	seq         uint64 // orders utterances with the same start
	voicedEnd   int    // bytes of pcm to the end of its last voiced frame; 0: not started
	voicedBytes int    // bytes of voiced frames in pcm
}

func (u *utterance) started() bool { return u.voicedEnd > 0 }

// before reports whether u is to be handed over before o.
func (u *utterance) before(o *utterance) bool {
	return u.start.Before(o.start) || u.start.Equal(o.start) && u.seq < o.seq
}

// voice notes one voiced frame of s (samples at 48 kHz) arriving at at,
// and calls Speaking once the current utterance has BargeInSpeech of them.
// A voiced frame after UtteranceSilence without one starts a new
// utterance's count (the utterance mode's split does too).
func (m *mixer) voice(s *speaker, samples int, at time.Time) {
	if at.Sub(s.lastVoiced) >= m.in.cfg.UtteranceSilence {
		s.talk, s.cued = 0, false
	}
	s.lastVoiced = at
	s.talk += samples
	if !s.cued && m.in.cfg.Speaking != nil && s.talk >= int(int64(BargeInSpeech)*48000/int64(time.Second)) {
		s.cued = true
		m.in.cfg.Speaking(s.id)
	}
}

// hear takes one frame in the utterance mode: no queue and no mix step,
// since nobody waits for anyone; consent is asked again before it is
// decoded.
func (m *mixer) hear(ev inEvent) {
	s := m.speakers[ev.userID]
	if s == nil {
		s = &speaker{id: ev.userID, down: pcm.NewDownsampler()}
		m.speakers[ev.userID] = s
		m.order = append(m.order, s)
	}
	s.heard = ev.arrived
	m.in.stats.framesIn.Add(1)
	if !m.in.cfg.Consented(s.id) {
		m.in.stats.noConsent.Add(1)
		m.drop(s)
		m.purge(s.id)
		m.flush()
		m.countActive()
		return
	}
	m.expire(s, ev.arrived) // the silence window may have ended since the last tick
	if mono, ok := m.decode(s, ev.frame); ok {
		loud := voiced(ev.frame, mono)
		m.out = s.down.Append(m.out[:0], mono)
		m.keep(s, m.out, loud, ev.arrived)
		if loud {
			m.voice(s, len(mono), ev.arrived)
		}
	}
	m.flush()
	m.countActive()
}

// keep adds one decoded frame (24 kHz) to s's utterance, starting one if
// needed, within MaxUtterance and MaxUtteranceWaiting.
func (m *mixer) keep(s *speaker, out []int16, loud bool, at time.Time) {
	n := 2 * len(out)
	if s.discard {
		m.in.stats.uttAudioDropped.Add(int64(len(out)))
		return
	}
	u, fill := s.utt, 0
	if u != nil {
		if gap := at.Sub(s.cursor); gap > gapFill {
			if u.started() {
				fill = pcmBytes(gap.Truncate(FrameDuration))
			} else {
				m.waiting -= len(u.pcm)
				s.utt, u = nil, nil
			}
		}
	}
	if u != nil && len(u.pcm)+fill+n > pcmBytes(MaxUtterance) {
		m.finish(s)
		s.talk, s.cued = 0, false
		u, fill = nil, 0
	}
	if u == nil {
		u = &utterance{userID: s.id, start: at}
		s.utt, s.cursor = u, at
	}
	if m.waiting+fill+n > pcmBytes(MaxUtteranceWaiting) {
		if loud || u.started() {
			m.overflow(s, n)
		}
		return // lead context that does not fit is not kept
	}
	u.pcm = append(u.pcm, make([]byte, fill)...)
	u.pcm = pcm.AppendLE(u.pcm, out)
	m.waiting += fill + n
	s.cursor = s.cursor.Add(pcmDuration(fill + n))
	switch {
	case loud:
		if !u.started() {
			m.seq++
			u.seq = m.seq
		}
		u.voicedEnd = len(u.pcm)
		u.voicedBytes += n
	case !u.started() && len(u.pcm) > pcmBytes(utteranceContext):
		cut := len(u.pcm) - pcmBytes(utteranceContext)
		u.pcm = u.pcm[:copy(u.pcm, u.pcm[cut:])]
		u.start = u.start.Add(pcmDuration(cut))
		m.waiting -= cut
	}
}

// overflow drops s's utterance, which would take the audio waiting past
// MaxUtteranceWaiting, with the frame of n bytes that did, and drops what
// s says until they fall silent.
func (m *mixer) overflow(s *speaker, n int) {
	u := s.utt
	s.utt = nil
	m.waiting -= len(u.pcm)
	m.dropUtterance(u, false)
	m.in.stats.uttAudioDropped.Add(int64(n / 2))
	s.discard = true
}

// dropUtterance counts an utterance (no longer in waiting) never handed
// over.
func (m *mixer) dropUtterance(u *utterance, noConsent bool) {
	m.in.stats.uttDropped.Add(1)
	if noConsent {
		m.in.stats.uttNoConsent.Add(1)
	}
	m.in.stats.uttAudioDropped.Add(int64(len(u.pcm) / 2))
}

// expire ends s's utterance (or their overflow's discard) once they have
// been silent for UtteranceSilence at now.
func (m *mixer) expire(s *speaker, now time.Time) {
	if now.Sub(s.lastVoiced) < m.in.cfg.UtteranceSilence {
		return
	}
	s.discard = false
	if s.utt != nil && s.utt.started() {
		m.finish(s)
	}
}

// finish ends s's utterance: trailing silence beyond utteranceContext is
// trimmed and it joins the utterances waiting, in start order (flush
// hands them over). Lead context alone is let go.
func (m *mixer) finish(s *speaker) {
	u := s.utt
	s.utt = nil
	if !u.started() {
		m.waiting -= len(u.pcm)
		return
	}
	end := min(len(u.pcm), u.voicedEnd+pcmBytes(utteranceContext))
	m.waiting -= len(u.pcm) - end
	u.pcm = u.pcm[:end:end]
	i, _ := slices.BinarySearchFunc(m.done, u, func(d, u *utterance) int {
		if d.before(u) {
			return -1
		}
		return 1
	})
	m.done = slices.Insert(m.done, i, u)
}

// flush hands over the ended utterances that no earlier-started one under
// way holds back, asking consent once more: the audio leaves the bridge
// now.
func (m *mixer) flush() {
	for len(m.done) > 0 {
		u := m.done[0]
		for _, s := range m.order {
			if s.utt != nil && s.utt.started() && s.utt.before(u) {
				return
			}
		}
		m.done = slices.Delete(m.done, 0, 1)
		m.waiting -= len(u.pcm)
		if !m.in.cfg.Consented(u.userID) {
			m.dropUtterance(u, true)
			continue
		}
		m.in.stats.uttEmitted.Add(1)
		m.in.stats.audioIn.Add(int64(len(u.pcm) / 2))
		m.in.stats.speechIn.Add(int64(u.voicedBytes / 2))
		m.in.cfg.Utterances(Utterance{UserID: u.userID, PCM: u.pcm, Start: u.start})
	}
}

// purge drops the ended utterances of a speaker no longer consented.
func (m *mixer) purge(userID string) {
	m.done = slices.DeleteFunc(m.done, func(u *utterance) bool {
		if u.userID != userID {
			return false
		}
		m.waiting -= len(u.pcm)
		m.dropUtterance(u, true)
		return true
	})
}

// tickUtterances is the utterance mode's 20 ms tick: consent asked for
// every speaker and every utterance waiting, silence windows ended, idle
// speakers forgotten.
func (m *mixer) tickUtterances(now time.Time) {
	for i := len(m.order) - 1; i >= 0; i-- { // backwards: drop and forget remove from m.order
		s := m.order[i]
		if !m.in.cfg.Consented(s.id) {
			m.drop(s)
			continue
		}
		m.expire(s, now)
		if (s.utt == nil || !s.utt.started()) && now.Sub(s.heard) > m.in.cfg.IdleTimeout {
			m.forget(s)
		}
	}
	var gone []string
	for _, u := range m.done {
		if !slices.Contains(gone, u.userID) && !m.in.cfg.Consented(u.userID) {
			gone = append(gone, u.userID)
		}
	}
	for _, id := range gone {
		m.purge(id)
	}
	m.flush()
	m.countActive()
}

// expireAll ends every utterance whose silence window is over at now.
func (m *mixer) expireAll(now time.Time) {
	for _, s := range m.order {
		m.expire(s, now)
	}
	m.flush()
	m.countActive()
}

// deadline is the next moment a silence window ends, if any is running.
func (m *mixer) deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, s := range m.order {
		if s.discard || s.utt != nil && s.utt.started() {
			if t := s.lastVoiced.Add(m.in.cfg.UtteranceSilence); !ok || t.Before(d) {
				d, ok = t, true
			}
		}
	}
	return d, ok
}

// countActive counts the speakers with an utterance under way.
func (m *mixer) countActive() {
	var n int64
	for _, s := range m.order {
		if s.utt != nil && s.utt.started() {
			n++
		}
	}
	m.in.stats.active.Store(n)
	if n > m.in.stats.peak.Load() {
		m.in.stats.peak.Store(n)
	}
}
