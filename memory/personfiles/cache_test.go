package personfiles

import (
	"context"
	"fmt"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
	"go.uber.org/zap"
)

// testCacheBytes is the bound the cache tests use: small, so a few puts fill it.
const testCacheBytes = 8 << 20

func TestFileCacheCopiesAndStaysBounded(t *testing.T) {
	c := newFileCache(testCacheBytes)
	pf := &personFile{Person: people.Person{Facts: []api.Fact{{FactID: "fa", Body: "one"}}}}
	c.put("p-1_2.json", pf, 100)
	got, ok := c.get("p-1_2.json", copied)
	if !ok || got.Facts[0].Body != "one" {
		t.Fatalf("get: %v %v", got, ok)
	}
	got.Facts[0].Body = "changed by a caller"
	got.Facts = append(got.Facts, api.Fact{FactID: "fb"})
	again, _ := c.get("p-1_2.json", copied)
	if again.Facts[0].Body != "one" || len(again.Facts) != 1 {
		t.Fatalf("a caller's change reached the cache: %+v", again.Facts)
	}
	// Taken, the entry is the caller's: the cache holds it no more.
	if got, ok := c.get("p-1_2.json", taken); !ok || got != pf {
		t.Fatalf("take: %v %v", taken, ok)
	}
	if _, ok := c.get("p-1_2.json", copied); ok || c.lru.Bytes() != 0 {
		t.Fatalf("a taken entry is still cached (%d bytes)", c.lru.Bytes())
	}
	c.put("p-1_2.json", pf, 100)
	c.drop("p-1_2.json")
	if _, ok := c.get("p-1_2.json", copied); ok {
		t.Fatal("dropped entry still cached")
	}
	for i := range 100 {
		c.put(fmt.Sprintf("p-%d.json", i), &personFile{}, testCacheBytes/10)
	}
	if c.lru.Bytes() > testCacheBytes || c.lru.Len() != 10 {
		t.Fatalf("cache holds %d bytes in %d entries", c.lru.Bytes(), c.lru.Len())
	}
	if _, ok := c.get("p-99.json", copied); !ok {
		t.Fatal("the most recent entry was evicted")
	}
	if _, ok := c.get("p-0.json", copied); ok {
		t.Fatal("the oldest entry was kept past the bound")
	}
}

// TestFileCacheBoundsBytesInRecencyOrder holds the cache to its byte bound
// after every step of a sequence of puts, gets, takes and drops of people of
// different sizes, and to evicting the least recently used first: the bound
// is ours, not the library's, so a missed subtraction or a count-bounded LRU
// fails here.
func TestFileCacheBoundsBytesInRecencyOrder(t *testing.T) {
	const q = testCacheBytes / 8
	type step struct {
		op   string // put, get, take, drop
		name string
		size int
		// after the step: who is cached, least recently used first, and
		// how many evictions so far
		held      []string
		evictions int64
	}
	steps := []step{
		{"put", "a", 2 * q, []string{"a"}, 0},
		{"put", "b", 2 * q, []string{"a", "b"}, 0},
		{"put", "c", 2 * q, []string{"a", "b", "c"}, 0},
		{"put", "d", q, []string{"a", "b", "c", "d"}, 0},
		{"get", "a", 0, []string{"b", "c", "d", "a"}, 0},      // a is used: b is now the oldest
		{"put", "e", q, []string{"b", "c", "d", "a", "e"}, 0}, // exactly at the bound
		{"put", "f", 1, []string{"c", "d", "a", "e", "f"}, 1}, // one byte over: b goes
		{"put", "c", q, []string{"d", "a", "e", "f", "c"}, 1}, // c shrinks: counted once, at its new size
		{"take", "a", 0, []string{"d", "e", "f", "c"}, 1},
		{"put", "g", 2 * q, []string{"d", "e", "f", "c", "g"}, 1},
		{"put", "h", 2 * q, []string{"d", "e", "f", "c", "g", "h"}, 1},
		{"put", "i", 2 * q, []string{"f", "c", "g", "h", "i"}, 3}, // d and e go, oldest first
		{"drop", "c", 0, []string{"f", "g", "h", "i"}, 3},
		{"put", "g", testCacheBytes/4 + 1, []string{"f", "h", "i"}, 3}, // too big to keep: the old g goes too
	}
	sizes := map[string]int{}
	c := newFileCache(testCacheBytes)
	for i, s := range steps {
		switch s.op {
		case "put":
			c.put(s.name, &personFile{}, s.size)
			sizes[s.name] = s.size
		case "get":
			if _, ok := c.get(s.name, copied); !ok {
				t.Fatalf("step %d: %s not cached", i, s.name)
			}
		case "take":
			if _, ok := c.get(s.name, taken); !ok {
				t.Fatalf("step %d: %s not cached", i, s.name)
			}
		case "drop":
			c.drop(s.name)
		}
		want := 0
		for _, n := range s.held {
			want += sizes[n]
		}
		m := c.metrics()
		if got := c.lru.Keys(); !slices.Equal(got, s.held) || m.Bytes != int64(want) || m.Bytes > testCacheBytes || m.Evictions != s.evictions {
			t.Fatalf("step %d (%s %s): holds %v in %d bytes after %d evictions; want %v in %d bytes after %d (bound %d)",
				i, s.op, s.name, got, m.Bytes, m.Evictions, s.held, want, s.evictions, testCacheBytes)
		}
	}
}

// TestCachedReadsSeeEveryWrite goes through the store's paths that change a
// person and reads back after each: the cache must never answer stale.
func TestCachedReadsSeeEveryWrite(t *testing.T) {
	s, _, _ := newStore(t)
	subj := api.Subject{GuildID: "g", UserID: "u"}
	scope := people.RecallQuery{Who: operator, RecallQuery: api.RecallQuery{Limit: 128}}
	a := mustPropose(t, s, text, proposal("a", "g", "u", "u", "c", "one"))
	s.Recall(subj, scope) // cached now
	mustPropose(t, s, text, proposal("b", "g", "u", "u", "c", "two"))
	if r, _ := s.Recall(subj, scope); r.Total != 2 {
		t.Fatalf("after a proposal: %d", r.Total)
	}
	body := "edited"
	if _, err := s.Edit(subj, a.Fact.FactID, api.FactPatch{Body: &body}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, people.RecallQuery{Who: scope.Who, RecallQuery: api.RecallQuery{ChannelID: scope.ChannelID, Query: "edited", Limit: 8}}); r.Total != 1 {
		t.Fatalf("after an edit: %+v", r)
	}
	if _, err := s.Forget(text, subj, a.Fact.FactID, "u"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, scope); r.Total != 1 {
		t.Fatalf("after a forget: %d", r.Total)
	}
	if _, err := s.ForgetPerson(subj); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Recall(subj, scope); r.Total != 0 {
		t.Fatalf("after forget-person: %d", r.Total)
	}
}

// BenchmarkFileCache is the cache's own cost: a reader's copy of a hit, a
// take and put back, and a put of a new person that evicts the oldest, over
// more people than fit.
func BenchmarkFileCache(b *testing.B) {
	const persons, size = 4096, testCacheBytes / 1024 // a quarter of them fit
	names := make([]string, persons)
	for i := range names {
		names[i] = fmt.Sprintf("p-%d.jsonl", i)
	}
	facts := make([]api.Fact, 16)
	c := newFileCache(testCacheBytes)
	for i := 0; b.Loop(); i++ {
		name := names[i%persons]
		how := copied
		if i%2 == 0 {
			how = taken
		}
		pf, ok := c.get(name, how)
		if !ok {
			pf = &personFile{Person: people.Person{Facts: facts}}
		}
		c.put(name, pf, size)
		c.get(names[(i+persons-1)%persons], copied)
	}
}

// TestDecodedBytesTracksTheHeap holds decodedBytes to what decoded people
// really keep on the heap, within a quarter, for people of 16 and 128
// facts of ordinary length with their idempotency records, decoded from
// their logs and given their own strings the way the cache keeps them
// (decodeLog's strings are parts of the log's text: without ownStrings
// each person would keep their whole log).
func TestDecodedBytesTracksTheHeap(t *testing.T) {
	for _, facts := range []int{16, 128} {
		t.Run(fmt.Sprintf("facts=%d", facts), func(t *testing.T) {
			const persons = 200
			logs := make([][]byte, persons)
			at := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
			for p := range logs {
				subject := api.Subject{GuildID: "100000000000000001", UserID: fmt.Sprint(200000000000000000 + p)}
				pf := &personFile{Person: people.Person{Subject: subject, Seq: uint64(facts)}}
				for i := range facts {
					f := api.Fact{FactID: fmt.Sprintf("f%07d", i), Subject: subject, Kind: api.KindPersonFact,
						Body:       fmt.Sprintf("a fact of ordinary length, number %d, about tea and maps and the long walk home", i),
						Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: at, UpdatedAt: at,
						Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: fmt.Sprintf("13%017d", p*1000+i),
							CorrelationID: fmt.Sprintf("%016x", p*1000+i), ProposerUserID: "200000000000000002", ChannelID: "100000000000000011"}}
					pf.Facts = append(pf.Facts, f)
					pf.Proposals = append(pf.Proposals, people.ProposalRecord{ProposalID: fmt.Sprintf("discord-interaction-13000000000%08d", i),
						Digest: "0123456789abcdef0123456789abcdef", FactID: f.FactID})
				}
				b, err := encodeSnapshot(pf)
				if err != nil {
					t.Fatal(err)
				}
				logs[p] = b
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			kept := make([]*personFile, persons)
			counted := 0
			for p, b := range logs {
				pf, _, err := decodeLog(b)
				if err != nil {
					t.Fatal(err)
				}
				kept[p] = pf
				counted += decodedBytes(pf)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int(after.HeapAlloc) - int(before.HeapAlloc) - persons*int(unsafe.Sizeof(kept[0]))
			runtime.KeepAlive(kept)
			runtime.KeepAlive(logs)
			ratio := float64(counted) / float64(heap)
			t.Logf("%d people: decodedBytes %d (%d per person), heap %d: ratio %.2f", persons, counted, counted/persons, heap, ratio)
			if ratio < 0.75 || ratio > 1.25 {
				t.Fatalf("decodedBytes counts %.2f of the heap the people hold", ratio)
			}
		})
	}
}

// TestNothingReadKeepsTheReadBuffer: a log is read into a pooled buffer
// that the next load reads another log into, and decodeLog reads strings
// as parts of it until ownStrings copies them out. Whichever way a person
// comes into the cache (a read, a change, a forget), and when the cache
// keeps nothing and the answer is all that holds them, what was read must
// still be what is on disk after other people's logs were read into the
// same buffer. It fails if decodeLog skips ownStrings.
func TestNothingReadKeepsTheReadBuffer(t *testing.T) {
	subject := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000000"}
	other := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000001"}
	recall := func(m *people.Memory, who api.Subject) ([]api.Fact, error) {
		r, err := m.Recall(context.Background(), who, people.RecallQuery{Who: operator, RecallQuery: api.RecallQuery{Limit: 128}})
		return r.Facts, err
	}
	for _, tc := range []struct {
		way   string
		cache int
		do    func(m *people.Memory) ([]api.Fact, error)
	}{
		{"read", 0, func(m *people.Memory) ([]api.Fact, error) { return recall(m, subject) }},
		{"change", 0, func(m *people.Memory) ([]api.Fact, error) {
			_, _, err := m.Propose(context.Background(), text, proposal("p-new", subject.GuildID, subject.UserID, subject.UserID, "3", "new"))
			return nil, err
		}},
		{"forget", 0, func(m *people.Memory) ([]api.Fact, error) {
			_, err := m.Forget(context.Background(), operator, subject, "f0000100", "")
			return nil, err
		}},
		{"answer", 1, func(m *people.Memory) ([]api.Fact, error) { return recall(m, subject) }},
	} {
		t.Run(tc.way, func(t *testing.T) {
			root, err := os.OpenRoot(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			seedSteadyLogs(t, root, 2)
			s, err := Open(root, zap.NewNop(), time.Now, durable.Disk{}, Options{CacheBytes: tc.cache})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			m := people.New(s)
			answer, err := tc.do(m)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 { // the other person's log, read into the buffer again and again
				if _, err := recall(m, other); err != nil {
					t.Fatal(err)
				}
				s.cache.drop(FileName(other))
			}
			b, err := root.ReadFile(path.Join(Dir, FileName(subject)))
			if err != nil {
				t.Fatal(err)
			}
			_, onDisk, err := DecodeFile(b)
			if err != nil {
				t.Fatal(err)
			}
			if answer != nil {
				if len(answer) != len(onDisk) || len(answer) < 127 {
					t.Fatalf("answered %d facts, %d on disk", len(answer), len(onDisk))
				}
				byID := map[string]api.Fact{}
				for _, f := range onDisk {
					byID[f.FactID] = f
				}
				for _, f := range answer {
					if !reflect.DeepEqual(f, byID[f.FactID]) {
						t.Fatalf("the answer's fact %q changed after other reads:\n%+v\non disk\n%+v", f.FactID, f, byID[f.FactID])
					}
				}
			}
			if tc.cache == 1 {
				return
			}
			pf, ok := s.cache.get(FileName(subject), viewed)
			if !ok || len(pf.Facts) < 127 {
				t.Fatalf("cached: %v", ok)
			}
			if !reflect.DeepEqual(pf.Facts, onDisk) {
				t.Fatal("the cached facts changed after other reads into the buffer they were read from")
			}
		})
	}
}
