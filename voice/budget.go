package voice

import (
	"sync"
	"time"

	"github.com/clankie/clankie/voice/voiceapi"
)

// budget is each server's voice time per UTC day (CLANKIE_VOICE_DAILY_BUDGET),
// counted in memory: the time its sessions were in a channel, summed. A
// zero limit counts and never refuses.
type budget struct {
	limit time.Duration
	mu    sync.Mutex
	days  map[string]*day // guild → today's use
}

type day struct {
	midnight time.Time     // the UTC midnight that began the day counted
	used     time.Duration // ended sessions' time that day
	since    time.Time     // a live session's start; zero when none
}

func newBudget(limit time.Duration) *budget { return &budget{limit: limit, days: map[string]*day{}} }

func midnightOf(t time.Time) time.Time {
	u := t.UTC()
	return time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
}

// todayLocked returns the guild's day as of now, starting a new one at
// midnight. b.mu is held.
func (b *budget) todayLocked(guildID string, now time.Time) *day {
	m := midnightOf(now)
	d := b.days[guildID]
	if d == nil {
		d = &day{midnight: m}
		b.days[guildID] = d
	}
	if d.midnight.Before(m) {
		d.midnight, d.used = m, 0
	}
	return d
}

// usedLocked is the day's use including a live session's time since the
// later of its start and midnight. b.mu is held.
func (d *day) usedAt(now time.Time) time.Duration {
	u := d.used
	if !d.since.IsZero() {
		from := d.since
		if from.Before(d.midnight) {
			from = d.midnight
		}
		if now.After(from) {
			u += now.Sub(from)
		}
	}
	return u
}

// start records a session going into a channel at now.
func (b *budget) start(guildID string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.todayLocked(guildID, now).since = now
}

// stop adds a session's time (today's part of it) and reports how long the
// whole session lasted.
func (b *budget) stop(guildID string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.todayLocked(guildID, now)
	if d.since.IsZero() {
		return 0
	}
	d.used = d.usedAt(now)
	lasted := now.Sub(d.since)
	d.since = time.Time{}
	return lasted
}

// left is how much of today's budget remains at now; a very long time when
// there is no limit.
func (b *budget) left(guildID string, now time.Time) time.Duration {
	if b.limit <= 0 {
		return 1<<63 - 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, b.limit-b.todayLocked(guildID, now).usedAt(now))
}

// status is the day's figures for /voice status.
func (b *budget) status(guildID string, now time.Time) voiceapi.Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.todayLocked(guildID, now)
	return voiceapi.Budget{Limit: b.limit, Used: d.usedAt(now), ResetsAt: d.midnight.Add(24 * time.Hour)}
}
