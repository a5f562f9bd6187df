package pgstore

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/clankie/clankie/memory/bytelru"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// personCache keeps people this process read or wrote, each labelled with
// the version their person row had (person.version, from one sequence, new
// at every committed change and for every new row, so no two states of
// anyone ever share one). It is never trusted: every read and every change
// still asks the database for the row's version (in the statement that
// reads the clock, or takes the lock), and reads the facts and records, in
// a second round trip, only when the version differs. Another service on
// the same database, a forget, a failed commit: each leaves a version this
// cache does not hold, and the next access reads the rows. A hit saves sending
// and decoding a person's rows, which was most of a recall's time and a
// third of a proposal's; a miss of a person held costs a round trip more.
//
// An entry labelled with an older version than its state (a read whose
// statements saw a commit land between them) is never used: the row's
// version is by then newer than the label.
//
// The bound is in bytes, estimated (approxBytes), the recency order
// bytelru's, which personfiles' cache also uses.
type personCache struct {
	mu  sync.Mutex
	lru *bytelru.LRU[*stored]

	hits, misses atomic.Int64
}

func newPersonCache(limit int) *personCache {
	return &personCache{lru: bytelru.New[*stored](limit)}
}

// peek returns name's cached state, or nil, without counting a use: what
// a read asks the database to compare with.
func (c *personCache) peek(name string) *stored {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, _ := c.lru.Get(name)
	return st
}

// hit reports whether cached (what peek gave) is the person at version,
// the row's version as the database answered, and counts the hit or the
// miss.
func (c *personCache) hit(cached *stored, version int64) bool {
	if cached == nil || cached.version != version {
		c.miss()
		return false
	}
	c.hits.Add(1)
	return true
}

// miss counts a person read from the database's rows, or found to have none.
func (c *personCache) miss() { c.misses.Add(1) }

// put keeps st, which the caller no longer changes, as name's state at
// st.version, within the bound (bytelru.LRU.Put: a person of more than a
// quarter of it is not kept).
func (c *personCache) put(st *stored) {
	n := approxBytes(st)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Put(st.name, st, n)
}

// drop forgets name: an erase, or a change whose outcome is not known.
func (c *personCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(name)
}

// metrics fills the cache's part of people.Metrics.
func (c *personCache) metrics(m *people.Metrics) {
	c.mu.Lock()
	m.CacheBytes, m.CacheEvictions = int64(c.lru.Bytes()), c.lru.Evictions()
	c.mu.Unlock()
	m.CacheHits, m.CacheMisses = c.hits.Load(), c.misses.Load()
}

// approxBytes estimates what a cached person holds: the facts and records
// as the domain holds them, the rows beside them (which share the facts'
// strings but for the instants' text), and every string's bytes (a row's
// strings share one allocation; their bytes are what it holds).
func approxBytes(st *stored) int {
	const rowExtra = int(unsafe.Sizeof(ordered[factRow]{})) + 3*32 // the row and its instants' text
	p := st.person
	n := int(unsafe.Sizeof(*st)) + int(unsafe.Sizeof(*p)) + len(st.name)
	n += cap(p.Facts) * int(unsafe.Sizeof(api.Fact{}))
	for i := range p.Facts {
		f := &p.Facts[i]
		q := &f.Provenance
		n += len(f.FactID) + len(f.Kind) + len(f.Body) + len(f.Visibility.Scope) + len(f.Visibility.ChannelID) +
			len(f.SupersedesFactID) + len(q.SourceSurface) + len(q.SourceEventID) + len(q.CorrelationID) +
			len(q.ProposerUserID) + len(q.ChannelID) + len(q.SourceMessageID) + rowExtra
		if f.ExpiresAt != nil {
			n += int(unsafe.Sizeof(*f.ExpiresAt))
		}
	}
	n += cap(p.Proposals) * int(unsafe.Sizeof(people.ProposalRecord{}))
	for i := range p.Proposals {
		r := &p.Proposals[i]
		n += 2*(len(r.ProposalID)+len(r.Digest)+len(r.FactID)) + int(unsafe.Sizeof(ordered[recordRow]{}))
	}
	return n
}
