package personfiles

import (
	"math"
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// cacheBytes bounds the decoded person files kept in memory, counted by
// entryBytes: a few hundred busy people, while the store's memory stays flat
// however many people it knows.
const cacheBytes = 8 << 20

// entryBytes is what one cached person counts against cacheBytes: the size
// of their file (the log's bytes, as the callers pass it), not the decoded
// state's. Counting the decoded size instead is a change of this one line.
func entryBytes(_ *personFile, fileBytes int) int { return fileBytes }

// fileCache keeps recently used person files decoded, so a proposal or a
// recall of a busy person skips re-reading and re-decoding a file this
// process wrote itself. It is only ever filled from what was durably
// written or read, and the store is the only writer of its root (the LOCK
// file), so the cache cannot disagree with the disk. Entries are never
// handed out: get returns a copy the caller may change.
//
// The recency order is hashicorp's simplelru; the bound is ours, in bytes:
// the library bounds a count, and a person's log runs from a few hundred
// bytes to a megabyte, so no count bounds the memory. The LRU gets no
// practical count cap (math.MaxInt); its eviction callback, which it calls
// on every removal, keeps the byte total; put removes the oldest while over
// cacheBytes. simplelru rather than lru.Cache: fileCache's own mutex already
// makes get-and-take and put-and-trim single steps, so lru.Cache's lock
// would only be taken twice.
type fileCache struct {
	mu        sync.Mutex
	lru       *simplelru.LRU[string, cached]
	bytes     int   // the entries' entryBytes, summed
	evictions int64 // entries removed to stay within cacheBytes
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

func newFileCache() *fileCache {
	c := &fileCache{}
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
// cacheBytes. A file of more than a quarter of the bound is not kept: it
// would push out many people to save one read. size is the file's size; the
// caller must not change pf afterwards.
func (c *fileCache) put(name string, pf *personFile, size int) {
	n := entryBytes(pf, size)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Remove(name)
	if n > cacheBytes/4 {
		return
	}
	c.lru.Add(name, cached{pf: pf, bytes: n})
	c.bytes += n
	for c.bytes > cacheBytes {
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
