package bot

import (
	"sync"
	"time"
)

// interactionTokenLife is how long Discord accepts answers to an
// interaction (its token's life); a redelivery can only matter within it.
const interactionTokenLife = 15 * time.Minute

// maxAnswered bounds how many interaction ids the router remembers; far more
// than a bot is sent in 15 minutes, small next to the process.
const maxAnswered = 50_000

// answered remembers which interactions the router has taken on, so a
// redelivered INTERACTION_CREATE is answered once (Discord refuses a second
// callback with 40060, and a handler must not act twice). Ids are forgotten
// after interactionTokenLife and, past max, oldest first.
type answered struct {
	mu    sync.Mutex
	now   func() time.Time
	max   int
	at    map[string]time.Time
	order []string // ids in claim order, oldest first
}

func newAnswered(max int, now func() time.Time) *answered {
	return &answered{now: now, max: max, at: map[string]time.Time{}}
}

// claim reports whether id is new, remembering it: true for the first
// delivery of an interaction, false for a redelivery within its token's life.
func (a *answered) claim(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.expireLocked(now)
	if _, seen := a.at[id]; seen {
		return false
	}
	for len(a.order) >= a.max {
		a.dropOldestLocked()
	}
	a.at[id] = now
	a.order = append(a.order, id)
	return true
}

func (a *answered) expireLocked(now time.Time) {
	for len(a.order) > 0 && now.Sub(a.at[a.order[0]]) >= interactionTokenLife {
		a.dropOldestLocked()
	}
	if cap(a.order) > 2*a.max && len(a.order) < a.max/2 {
		a.order = append([]string(nil), a.order...) // let the dropped head go
	}
}

func (a *answered) dropOldestLocked() {
	delete(a.at, a.order[0])
	a.order[0] = ""
	a.order = a.order[1:]
}
