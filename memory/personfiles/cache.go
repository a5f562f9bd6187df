package personfiles

import (
	"unsafe"

	"math"
	"sync"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// DefaultCacheBytes is the decoded-person cache's bound when the operator
// sets none (CLANKIE_MEMORY_CACHE_MB): 128 MiB, which holds about 1,500
// people of 128 facts of ordinary length (about 85 KiB each as
// decodedBytes counts them, their idempotency records included; 1,000 of
// them need 83 MiB). An idle service holds none of it: people are loaded
// on first access.
const DefaultCacheBytes = 128 << 20

// decodedBytes is what one cached person counts against the bound: the
// memory their decoded state holds (the slices' backing arrays at their
// capacity and every string's own bytes), so the bound is the cache's memory,
// whatever the log on disk weighs. TestDecodedBytesTracksTheHeap holds the
// estimate to the heap within a quarter.
func decodedBytes(pf *personFile) int {
	n := int(unsafe.Sizeof(*pf)) + shared(pf.Subject.GuildID) + shared(pf.Subject.UserID)
	n += cap(pf.Facts) * int(unsafe.Sizeof(api.Fact{}))
	for i := range pf.Facts {
		f := &pf.Facts[i]
		p := &f.Provenance
		n += own(f.FactID) + own(f.Body) + own(p.SourceEventID) + own(p.CorrelationID) + own(p.SourceMessageID) +
			shared(f.Subject.GuildID) + shared(f.Subject.UserID) + shared(string(f.Kind)) +
			shared(string(f.Visibility.Scope)) + shared(f.Visibility.ChannelID) + shared(f.SupersedesFactID) +
			shared(string(p.SourceSurface)) + shared(p.ProposerUserID) + shared(p.ChannelID)
		if f.ExpiresAt != nil {
			n += int(unsafe.Sizeof(*f.ExpiresAt))
		}
	}
	n += cap(pf.Proposals) * int(unsafe.Sizeof(people.ProposalRecord{}))
	for i := range pf.Proposals {
		r := &pf.Proposals[i]
		n += own(r.ProposalID) + own(r.Digest) + shared(r.FactID)
	}
	return n
}

// own is what a string of its own holds: its bytes, in the allocator's
// 8-byte steps.
func own(s string) int { return (len(s) + 7) &^ 7 }

// shared is what a string the log repeats holds of its own: nothing for
// one of up to internMax bytes, which the log's decoder shares with every
// equal string of the log (ids, kinds, scopes, surfaces; see interner).
func shared(s string) int {
	if len(s) <= internMax {
		return 0
	}
	return own(s)
}

// fileCache keeps recently used person files decoded, so a proposal or a
// recall of a busy person skips re-reading and re-decoding a file this
// process wrote itself. It is only ever filled from what was durably
// written or read, and the store is the only writer of its root (the LOCK
// file), so the cache cannot disagree with the disk. Entries are never
// handed out: get returns a copy the caller may change.
//
// The recency order is hashicorp's simplelru; the bound is ours, in bytes
// (decodedBytes): the library bounds a count, and a person runs from a few
// hundred bytes to a quarter of a megabyte, so no count bounds the memory.
// The LRU gets no practical count cap (math.MaxInt); its eviction
// callback, which it calls on every removal, keeps the byte total; put
// removes the oldest while over the limit. simplelru rather than lru.Cache: fileCache's own mutex already
// makes get-and-take and put-and-trim single steps, so lru.Cache's lock
// would only be taken twice.
type fileCache struct {
	mu        sync.Mutex
	lru       *simplelru.LRU[string, cached]
	limit     int   // the bound, in decodedBytes
	bytes     int   // the entries' decodedBytes, summed
	evictions int64 // entries removed to stay within limit
}

type cached struct {
	pf    *personFile
	bytes int
}

// cacheMetrics is the decoded-person cache's state for the metrics.
type cacheMetrics struct {
	// Bytes is what the cache holds, as counted against its bound;
	// Evictions counts entries dropped to stay within it.
	Bytes, Evictions int64
}

func newFileCache(limit int) *fileCache {
	c := &fileCache{limit: limit}
	lru, err := simplelru.NewLRU(math.MaxInt, func(_ string, e cached) { c.bytes -= e.bytes })
	if err != nil {
		panic(err) // only for a size <= 0
	}
	c.lru = lru
	return c
}

// get returns the cached state as how asks (see access), or false.
func (c *fileCache) get(name string, how access) (*personFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if how == taken {
		e, ok := c.lru.Peek(name)
		if ok {
			c.lru.Remove(name)
		}
		return e.pf, ok
	}
	e, ok := c.lru.Get(name)
	if !ok || how == borrowed {
		return e.pf, ok
	}
	return clonePerson(e.pf), true
}

// put keeps pf as the current contents of name, most recently used, and
// drops the least recently used entries while the cache holds more than
// limit. A person of more than a quarter of the bound is not kept: it
// would push out many people to save one read. n is what pf counts
// (decodedBytes); the caller must not change pf afterwards.
func (c *fileCache) put(name string, pf *personFile, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(name)
	if n > c.limit/4 {
		return
	}
	c.lru.Add(name, cached{pf: pf, bytes: n})
	c.bytes += n
	for c.bytes > c.limit {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break // nothing left: only a broken byte count gets here
		}
		c.evictions++
	}
}

// drop forgets name (removed, moved aside, or a write that failed).
func (c *fileCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(name)
}

func (c *fileCache) metrics() cacheMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cacheMetrics{Bytes: int64(c.bytes), Evictions: c.evictions}
}

// cacheMetrics returns the decoded-person cache's bytes and evictions (the
