package voice

import "time"

// echoes are the bot's own op 4s whose VOICE_STATE_UPDATE has not come
// back, oldest first. Discord answers them in order, but need not answer
// at all (a full channel, a channel the bot may not join, a move to where
// it already is), so each waits only until its deadline: a count that
// waited for Discord would swallow the next real move or disconnect.
type echoes struct{ want []echo }

type echo struct {
	channelID string
	until     time.Time
}

func (e *echoes) expect(channelID string, until time.Time) {
	e.want = append(e.want, echo{channelID, until})
}

// match reports whether an update placing the bot in channelID answers one
// of ours: the oldest still awaited for that channel, dropping it and
// every older one (superseded; Discord answered a later op).
func (e *echoes) match(channelID string, now time.Time) bool {
	live := e.want[:0]
	for _, w := range e.want {
		if now.Before(w.until) {
			live = append(live, w)
		}
	}
	e.want = live
	for i, w := range e.want {
		if w.channelID == channelID {
			e.want = append(e.want[:0], e.want[i+1:]...)
			return true
		}
	}
	return false
}
