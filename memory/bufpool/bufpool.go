// Package bufpool keeps byte buffers for reuse, so a path that needs a
// large buffer per call (a recall's answer, a person log read whole)
// spares the allocator and the collector one each time. A buffer over the
// pool's bound is not kept: one odd request must not pin its size.
package bufpool

import "sync"

// Pool holds buffers of at most max bytes' capacity. Its zero value keeps
// nothing; use New.
type Pool struct {
	max int
	p   sync.Pool // *[]byte
}

// New returns a pool that keeps buffers of up to max bytes' capacity.
func New(max int) *Pool { return &Pool{max: max} }

// Get returns an empty buffer of at least n bytes' capacity: a kept one
// when it is large enough, else a new one.
func (p *Pool) Get(n int) []byte {
	if b, ok := p.p.Get().(*[]byte); ok && cap(*b) >= n {
		return (*b)[:0]
	}
	return make([]byte, 0, n)
}

// Put keeps b for a later Get, unless it is over the bound. The caller
// must hold nothing of b afterwards.
func (p *Pool) Put(b []byte) {
	if cap(b) > 0 && cap(b) <= p.max {
		p.p.Put(&b)
	}
}
