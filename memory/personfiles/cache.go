package personfiles

import (
	"unsafe"

	"sync"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"

	"github.com/clankie/clankie/memory/bytelru"
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
			shared(string(f.Visibility.Scope)) + shared(f.Visibility.ChannelID) + own(f.SupersedesFactID) +
			shared(string(p.SourceSurface)) + shared(p.ProposerUserID) + shared(p.ChannelID)
		if f.ExpiresAt != nil {
			n += int(unsafe.Sizeof(*f.ExpiresAt))
		}
	}
	n += cap(pf.Proposals) * int(unsafe.Sizeof(people.ProposalRecord{}))
	for i := range pf.Proposals {
		r := &pf.Proposals[i]
		n += own(r.ProposalID) + own(r.Digest) + own(r.FactID)
	}
	return n
}

// own is what a string of its own holds: its bytes, in the allocator's
// 8-byte steps.
func own(s string) int { return (len(s) + 7) &^ 7 }

// shared is what a string facts repeat holds of its own: nothing for one
// of up to shareMax bytes, which the log's decoder shares with every equal
// string of the log (see interner).
func shared(s string) int {
	if len(s) <= shareMax {
		return 0
	}
	return own(s)
}

// shareMax is the longest string the interner shares: a snowflake's 20
// digits.
const shareMax = 20

// ownStrings gives a state read from a log (decodeLog) strings of their
// own, as decodedBytes counts them. decodeLog's strings of a fact's or a
// record's own (ids, bodies, digests) are parts of the text of the whole
// log, which is what makes a cold load cheap: one copy of its input
// instead of one allocation per string. But a part keeps the whole text
// alive, removed facts and member names included, so a person the cache
// keeps gets those strings copied into one allocation of their own (the
// strings facts repeat are the interner's already).
func ownStrings(pf *personFile) {
	size := 0
	eachOwnString(pf, func(s *string) { size += len(*s) })
	buf := make([]byte, 0, size)
	eachOwnString(pf, func(s *string) {
		at := len(buf)
		buf = append(buf, *s...)
		*s = unsafe.String(unsafe.SliceData(buf[at:]), len(*s)) // buf is never written again
	})
	pf.inLog = false
}

// eachOwnString calls fn with each non-empty string of pf's facts and
// records that is the fact's or record's own: what decodedBytes counts
// with own (the others, which facts repeat, the log's interner shares).
func eachOwnString(pf *personFile, fn func(*string)) {
	for i := range pf.Facts {
		f := &pf.Facts[i]
		p := &f.Provenance
		for _, s := range [...]*string{&f.FactID, &f.Body, &f.SupersedesFactID, &p.SourceEventID, &p.CorrelationID,
			&p.SourceMessageID} {
			if *s != "" {
				fn(s)
			}
		}
	}
	for i := range pf.Proposals {
		r := &pf.Proposals[i]
		for _, s := range [...]*string{&r.ProposalID, &r.Digest, &r.FactID} {
			if *s != "" {
				fn(s)
			}
		}
	}
}

// fileCache keeps recently used person files decoded, so a proposal or a
// recall of a busy person skips re-reading and re-decoding a file this
// process wrote itself. It is only ever filled from what was durably
// written or read, and the store is the only writer of its root (the LOCK
// file), so the cache cannot disagree with the disk. Entries are never
// handed out: get returns a copy the caller may change. The bound is in
// bytes (decodedBytes), the recency order bytelru's.
type fileCache struct {
	mu  sync.Mutex
	lru *bytelru.LRU[*personFile]
}

// cacheMetrics is the decoded-person cache's state for the metrics.
type cacheMetrics struct {
	// Bytes is what the cache holds, as counted against its bound;
	// Evictions counts entries dropped to stay within it.
	Bytes, Evictions int64
}

func newFileCache(limit int) *fileCache {
	return &fileCache{lru: bytelru.New[*personFile](limit)}
}

// get returns the cached state as how asks (see access), or false.
func (c *fileCache) get(name string, how access) (*personFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if how == taken {
		return c.lru.Take(name)
	}
	pf, ok := c.lru.Get(name)
	if !ok || how == borrowed {
		return pf, ok
	}
	return clonePerson(pf), true
}

// put keeps pf as the current contents of name, most recently used, within
// the bound (bytelru.LRU.Put: a person of more than a quarter of it is not
// kept). n is what pf counts (decodedBytes); the caller must not change pf
// afterwards.
func (c *fileCache) put(name string, pf *personFile, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Put(name, pf, n)
}

// admits reports whether put keeps a person who counts n.
func (c *fileCache) admits(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Admits(n)
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
	return cacheMetrics{Bytes: int64(c.lru.Bytes()), Evictions: c.lru.Evictions()}
}

// cacheMetrics returns the decoded-person cache's bytes and evictions (the
