package people

import (
	"container/list"
	"slices"
	"sync"
)

// cacheBytes bounds the decoded person files kept in memory, counted by the
// size of their files: a few hundred busy people, while the store's memory
// stays flat however many people it knows.
const cacheBytes = 8 << 20

// fileCache keeps recently used person files decoded, so a proposal or a
// recall of a busy person skips re-reading and re-decoding a file this
// process wrote itself. It is only ever filled from what was durably
// written or read, and the store is the only writer of its root (the LOCK
// file), so the cache cannot disagree with the disk. Entries are never
// handed out: get returns a copy the caller may change.
type fileCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // most recently used at the front; values are *cached
	items map[string]*list.Element
}

type cached struct {
	name string
	pf   *personFile
	size int
}

func newFileCache() *fileCache {
	return &fileCache{order: list.New(), items: map[string]*list.Element{}}
}

// get returns a copy of the cached file, or false. With take it returns
// the cached state itself and forgets it: the caller owns it, and puts it
// back when it is still (or newly) the person's state.
func (c *fileCache) get(name string, take bool) (*personFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[name]
	if !ok {
		return nil, false
	}
	if take {
		pf := el.Value.(*cached).pf
		c.dropLocked(name)
		return pf, true
	}
	c.order.MoveToFront(el)
	pf := *el.Value.(*cached).pf
	pf.Facts = slices.Clone(pf.Facts)
	pf.Proposals = slices.Clone(pf.Proposals)
	return &pf, true
}

// borrow returns the cached state itself, not a copy: the caller holds
// the person's lock (so no change replaces it meanwhile) and must not
// change it.
func (c *fileCache) borrow(name string) (*personFile, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[name]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cached).pf, true
}

// put keeps pf as the current contents of name; the caller must not change
// pf afterwards.
func (c *fileCache) put(name string, pf *personFile, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(name)
	if size > cacheBytes/4 {
		return
	}
	if pf.enc == nil {
		pf.enc = &factJSON{m: map[string][]byte{}} // shared by the copies get returns
	}
	c.items[name] = c.order.PushFront(&cached{name: name, pf: pf, size: size})
	c.size += size
	for c.size > cacheBytes {
		c.dropLocked(c.order.Back().Value.(*cached).name)
	}
}

// drop forgets name (removed, moved aside, or a write that failed).
func (c *fileCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(name)
}

func (c *fileCache) dropLocked(name string) {
	if el, ok := c.items[name]; ok {
		c.size -= el.Value.(*cached).size
		c.order.Remove(el)
		delete(c.items, name)
	}
}
