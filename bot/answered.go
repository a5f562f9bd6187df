package bot

import (
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// interactionTokenLife is how long Discord accepts answers to an
// interaction (its token's life); a redelivery can only matter within it.
const interactionTokenLife = 15 * time.Minute

// maxAnswered bounds how many interaction ids the router remembers; far more
// than a bot is sent in 15 minutes, small next to the process.
const maxAnswered = 50_000

// answered remembers which interactions the router has taken on, so a
// redelivered INTERACTION_CREATE is answered once (Discord refuses a second
// callback with 40060, and a handler must not act twice). Past max ids the
// least recently claimed goes first; an id older than interactionTokenLife
// counts as unseen (its token is dead, so no answer could be a second one).
//
// It is an LRU of claim times rather than hashicorp's expirable LRU: that one
// runs a cleanup goroutine it cannot stop and reads the wall clock, where
// this one takes the router's clock and needs no goroutine.
type answered struct {
	mu  sync.Mutex // makes the look-up and the claim one step
	now func() time.Time
	at  *lru.Cache[string, time.Time]
}

func newAnswered(max int, now func() time.Time) *answered {
	at, err := lru.New[string, time.Time](max)
	if err != nil {
		panic(err) // only for max <= 0, a programming error
	}
	return &answered{now: now, at: at}
}

// claim reports whether id is new, remembering it: true for the first
// delivery of an interaction, false for a redelivery within its token's life.
func (a *answered) claim(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if at, seen := a.at.Peek(id); seen && now.Sub(at) < interactionTokenLife {
		return false
	}
	a.at.Add(id, now)
	return true
}
