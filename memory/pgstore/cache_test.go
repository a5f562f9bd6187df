package pgstore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// person returns a stored person of n facts at version.
func person(name string, version int64, n int) *stored {
	subject := api.Subject{GuildID: "10", UserID: name}
	st := newStored(subject, name, version)
	for i := range n {
		st.person.Facts = append(st.person.Facts, api.Fact{FactID: fmt.Sprintf("f%03d", i), Subject: subject,
			Body: strings.Repeat("x", 200)})
	}
	return st
}

func TestPersonCacheServesOnlyTheVersionItHolds(t *testing.T) {
	c := newPersonCache(1 << 20)
	a := person("a", 7, 4)
	c.put(a)
	for _, tc := range []struct {
		name    string
		version int64 // the row's version as the database answered
		hit     bool
	}{
		{"the version held", 7, true},
		{"another service's change", 8, false},
		{"the person forgotten (no row)", -1, false},
	} {
		got := c.peek("a")
		if hit := c.hit(got, tc.version); hit != tc.hit || got != a {
			t.Errorf("%s: hit %v (entry %p), want %v (entry %p)", tc.name, hit, got, tc.hit, a)
		}
	}
	if got := c.peek("nobody"); got != nil || c.hit(got, 7) {
		t.Errorf("a person never held: %v", got)
	}
	c.drop("a")
	if c.peek("a") != nil {
		t.Error("a dropped person is still held")
	}
	var m people.Metrics
	c.metrics(&m)
	if m.CacheHits != 1 || m.CacheMisses != 3 || m.CacheBytes != 0 {
		t.Errorf("metrics %+v; want 1 hit, 3 misses, 0 bytes", m)
	}
}

func TestPersonCacheStaysWithinItsBytes(t *testing.T) {
	one := approxBytes(person("p00", 1, 16))
	limit := 10 * one
	c := newPersonCache(limit)
	for i := range 25 {
		c.put(person(fmt.Sprintf("p%02d", i), int64(i), 16))
		var m people.Metrics
		c.metrics(&m)
		if m.CacheBytes > int64(limit) {
			t.Fatalf("after %d puts the cache holds %d bytes, over its %d", i+1, m.CacheBytes, limit)
		}
	}
	var m people.Metrics
	c.metrics(&m)
	if m.CacheEvictions != 15 || m.CacheBytes != int64(10*one) {
		t.Errorf("metrics %+v; want 15 evictions and %d bytes", m, 10*one)
	}
	if c.peek("p00") != nil || c.peek("p24") == nil {
		t.Error("the oldest should go first and the newest stay")
	}
	// A person of more than a quarter of the bound is not kept: it would
	// push out many people to save one read.
	c.put(person("big", 1, 64))
	if c.peek("big") != nil {
		t.Error("a person of more than a quarter of the bound was kept")
	}
	// Putting a person again replaces them, and their bytes are counted once.
	c.put(person("p24", 99, 16))
	c.metrics(&m)
	if got := c.peek("p24"); got == nil || got.version != 99 || m.CacheBytes != int64(10*one) {
		t.Errorf("re-put: entry %v, %d bytes; want version 99 and %d bytes", got, m.CacheBytes, 10*one)
	}
}

// TestApproxBytesGrowsWithWhatAPersonHolds keeps the estimate honest in
// shape: more facts and longer bodies count more.
func TestApproxBytesGrowsWithWhatAPersonHolds(t *testing.T) {
	small, many := approxBytes(person("p", 1, 16)), approxBytes(person("p", 1, 128))
	if many < 7*small || small < 16*200 {
		t.Errorf("16 facts count %d bytes, 128 count %d; want at least 16×200 and 7× as many", small, many)
	}
}
