// Package bytelru is a least-recently-used map bounded by what its entries
// weigh in bytes, as its caller counts them: the decoded-person caches of
// both person stores. hashicorp's simplelru keeps the recency order and
// bounds a count; a person runs from a few hundred bytes to a quarter of a
// megabyte, so no count bounds the memory, and the byte bound is ours. The
// LRU gets no practical count cap (math.MaxInt); its eviction callback,
// which it calls on every removal, keeps the byte total.
//
// An LRU is not safe for concurrent use: each cache holds its own mutex,
// which also makes its get-and-take and put-and-trim single steps (so
// simplelru rather than lru.Cache, whose lock would only be taken twice).
package bytelru

import (
	"math"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// LRU maps string keys to values of V within a bound in bytes.
type LRU[V any] struct {
	lru       *simplelru.LRU[string, entry[V]]
	limit     int   // the bound
	bytes     int   // the entries' weights, summed
	evictions int64 // entries removed to stay within limit
}

type entry[V any] struct {
	v     V
	bytes int
}

// New returns an empty LRU bounded at limit bytes.
func New[V any](limit int) *LRU[V] {
	c := &LRU[V]{limit: limit}
	lru, err := simplelru.NewLRU(math.MaxInt, func(_ string, e entry[V]) { c.bytes -= e.bytes })
	if err != nil {
		panic(err) // only for a size <= 0
	}
	c.lru = lru
	return c
}

// Get returns key's value and marks it most recently used.
func (c *LRU[V]) Get(key string) (V, bool) {
	e, ok := c.lru.Get(key)
	return e.v, ok
}

// Take returns key's value and removes it.
func (c *LRU[V]) Take(key string) (V, bool) {
	e, ok := c.lru.Peek(key)
	if ok {
		c.lru.Remove(key)
	}
	return e.v, ok
}

// Put keeps v, which weighs n bytes, as key's value, most recently used,
// and drops the least recently used entries while the LRU holds more than
// its bound. A value of more than a quarter of the bound is not kept (and
// key's old value is dropped): it would push out many entries to save one
// read.
func (c *LRU[V]) Put(key string, v V, n int) {
	c.lru.Remove(key)
	if n > c.limit/4 {
		return
	}
	c.lru.Add(key, entry[V]{v: v, bytes: n})
	c.bytes += n
	for c.bytes > c.limit {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break // nothing left: only a broken byte count gets here
		}
		c.evictions++
	}
}

// Remove drops key.
func (c *LRU[V]) Remove(key string) { c.lru.Remove(key) }

// Bytes is what the LRU holds, as counted against its bound; Evictions
// counts entries dropped to stay within it.
func (c *LRU[V]) Bytes() int { return c.bytes }

// Evictions counts the entries Put dropped to stay within the bound.
func (c *LRU[V]) Evictions() int64 { return c.evictions }

// Len is the number of entries.
func (c *LRU[V]) Len() int { return c.lru.Len() }

// Keys are the keys, least recently used first.
func (c *LRU[V]) Keys() []string { return c.lru.Keys() }
