package bufpool

import "testing"

func TestGetIsEmptyAndLargeEnough(t *testing.T) {
	p := New(1 << 10)
	p.Put(make([]byte, 5, 16))
	for _, n := range []int{0, 8, 16, 17, 4096} {
		if b := p.Get(n); len(b) != 0 || cap(b) < n {
			t.Errorf("Get(%d): len %d cap %d", n, len(b), cap(b))
		}
	}
}

// A buffer over the bound is never handed out again.
func TestBuffersOverTheBoundAreNotKept(t *testing.T) {
	p := New(1 << 10)
	p.Put(make([]byte, 0, 1<<10+1))
	if b := p.Get(0); cap(b) != 0 {
		t.Fatalf("Get(0) handed out a kept buffer of %d bytes, over the bound", cap(b))
	}
}
