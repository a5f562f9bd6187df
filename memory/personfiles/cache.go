package personfiles

import (
	"strings"
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
		for _, s := range factOwn(f) {
			n += own(*s)
		}
		n += shared(f.Subject.GuildID) + shared(f.Subject.UserID) + shared(string(f.Kind)) +
			shared(string(f.Visibility.Scope)) + shared(f.Visibility.ChannelID) +
			shared(string(p.SourceSurface)) + shared(p.ProposerUserID) + shared(p.ChannelID)
		if f.ExpiresAt != nil {
			n += int(unsafe.Sizeof(*f.ExpiresAt))
		}
	}
	n += cap(pf.Proposals) * int(unsafe.Sizeof(people.ProposalRecord{}))
	for i := range pf.Proposals {
		for _, s := range recordOwn(&pf.Proposals[i]) {
			n += own(*s)
		}
	}
	return n
}

// factOwn and recordOwn are a fact's and a record's own strings (ids,
// bodies, digests): the ones decodedBytes counts whole and ownStrings
// copies. The others, which facts repeat, the log's interner shares.
func factOwn(f *api.Fact) [6]*string {
	p := &f.Provenance
	return [6]*string{&f.FactID, &f.Body, &f.SupersedesFactID, &p.SourceEventID, &p.CorrelationID, &p.SourceMessageID}
}

func recordOwn(r *people.ProposalRecord) [3]*string {
	return [3]*string{&r.ProposalID, &r.Digest, &r.FactID}
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

// ownStrings gives a state decodeLog read strings of their own, as
// decodedBytes counts them. While a log's lines are read, a fact's or a
// record's own strings (ids, bodies, digests) are parts of the read buffer
// seen as one string: no allocation per string, and no copy of the whole
// log. Once the replay is done, what is left of them (removed facts' and
// pruned records' are not) is copied into one allocation, and the buffer
// goes back to be read into again. The strings facts repeat are the
// interner's copies already.
func ownStrings(pf *personFile) {
	size := 0
	for i := range pf.Facts {
		for _, s := range factOwn(&pf.Facts[i]) {
			size += len(*s)
		}
	}
	for i := range pf.Proposals {
		for _, s := range recordOwn(&pf.Proposals[i]) {
			size += len(*s)
		}
	}
	var o owner
	o.Grow(size) // one allocation, not cleared first as a make would be
	for i := range pf.Facts {
		for _, s := range factOwn(&pf.Facts[i]) {
			o.own(s)
		}
	}
	for i := range pf.Proposals {
		for _, s := range recordOwn(&pf.Proposals[i]) {
			o.own(s)
		}
	}
}

// owner is the one allocation ownStrings copies strings into: a Builder
// never changes what it has written, and never moves it within the room
// Grow made, so each string made from it stays put.
type owner struct{ strings.Builder }

func (o *owner) own(s *string) {
	if *s == "" {
		return
	}
	at := o.Len()
	o.WriteString(*s)
	*s = o.String()[at:]
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

// get returns the cached state as how asks (see access), or false. A state
// read for its facts alone (factsOnly) is only ever given to viewed: any
// other access reads the log whole (taken takes it out; the others' read
// replaces it).
func (c *fileCache) get(name string, how access) (*personFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if how == taken {
		pf, ok := c.lru.Take(name)
		if ok && pf.factsOnly {
			return nil, false // to be read whole
		}
		return pf, ok
	}
	pf, ok := c.lru.Get(name)
	switch {
	case !ok || pf.factsOnly && how != viewed:
		return nil, false // a facts-only state is replaced when the log has been read whole
	case how == borrowed || how == viewed:
		return pf, true
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
