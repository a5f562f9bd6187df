package personfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

// TestDecodeLogFactsIsDecodeLog: a read of the facts alone gives the facts
// and seq a whole read gives, and no records, for random histories written
// as the store writes them and with lines it does not write: changes whose
// record comes first (not skipped: they change facts), record lines with
// an escaped quote (read), and record lines the codec refuses (skipped
// either way).
func TestDecodeLogFactsIsDecodeLog(t *testing.T) {
	for seed := range 200 {
		rng := rand.New(rand.NewPCG(uint64(seed), 17))
		var log []byte
		for i, ch := range randomHistory(seed) {
			line, err := encodeLine(&ch)
			if err != nil {
				t.Fatal(err)
			}
			if ch.Proposal != nil && ch.Seq > 0 && rng.IntN(3) == 0 {
				// {"proposal":{…},"seq":…}: the record first.
				record, _ := json.Marshal(ch.Proposal)
				ch.Proposal = nil
				rest, err := encodeLine(&ch)
				if err != nil {
					t.Fatal(err)
				}
				line = append(append(append([]byte(`{"proposal":`), record...), ','), rest[1:]...)
			}
			log = append(log, line...)
			switch rng.IntN(20) {
			case 0:
				log = append(log, fmt.Sprintf(`{"proposal":{"proposalId":"q\"%d","factId":"f%07d"}}`+"\n", i, rng.IntN(40))...)
			case 1:
				log = append(log, fmt.Sprintf("{\"proposal\":{\"proposalId\":\"q\x01%d\",\"factId\":\"f%07d\"}}\n", i, rng.IntN(40))...)
			}
		}
		whole, good, err := decodeLog(bytes.Clone(log))
		if err != nil || good != len(log) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		facts, good, err := decodeLogFacts(log)
		if err != nil || good != len(log) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(facts.Facts, whole.Facts) || facts.Seq != whole.Seq || facts.Subject != whole.Subject {
			t.Fatalf("seed %d: the facts alone\n%+v\nread whole\n%+v", seed, facts.Facts, whole.Facts)
		}
		if len(facts.Proposals) != 0 || !facts.factsOnly || whole.factsOnly {
			t.Fatalf("seed %d: facts alone hold %d records (factsOnly %v); whole: factsOnly %v", seed, len(facts.Proposals), facts.factsOnly, whole.factsOnly)
		}
	}
}

// A line recordLine skips is one the store would read as a record and
// nothing else, or refuse: checkDecodeLine holds every line it reads (and
// the fuzz target every line it makes) to that; these are the shapes it
// must and must not skip.
func TestRecordLineSkipsOnlyRecords(t *testing.T) {
	for _, tc := range []struct {
		line string
		skip bool
	}{
		{`{"proposal":{"proposalId":"discord-interaction-1","digest":"0123456789abcdef0123456789abcdef","factId":"f0000001"}}`, true},
		{`{"proposal":{"proposalId":"p","factId":"f"}}`, true},
		{`{"proposal":{"proposalId":"","digest":"","factId":""}}`, true},
		{"{\"proposal\":{\"proposalId\":\"p\x01\",\"factId\":\"\xff\"}}", true}, // refused by the codec: changes nothing either
		{`{"proposal":{"proposalId":"p\"q","factId":"f"}}`, false},
		{`{"proposal":{"proposalId":"p\\","factId":"f"}}`, false},
		{`{"proposal":{"proposalId":"p","factId":"f"},"seq":3,"remove":["f"]}`, false},
		{`{"proposal":{"proposalId":"p","factId":"f","x":1}}`, false},
		{`{"proposal":{"factId":"f","proposalId":"p"}}`, false},
		{`{"proposal":{"proposalId":"p","factId":"f"}} `, false},
		{`{"proposal":{"proposalId":"p","factId":"f"}}}`, false},
		{`{"proposal":{"proposalId":"p","factId":"f"`, false},
		{`{"fact":{"factId":"f"}}`, false},
	} {
		if got := recordLine([]byte(tc.line)); got != tc.skip {
			t.Errorf("%q: skipped %v, want %v", tc.line, got, tc.skip)
		}
		checkDecodeLine(t, []byte(tc.line))
	}
}

// TestARetryAfterARecallIsStillARetry: a recall of a person not in memory
// reads their facts alone and the cache keeps them so; what follows must
// still find the person's records. A retry answers the fact it made, the
// id used again for another fact is refused, nothing is stored twice, and
// an export (the way to PostgreSQL) carries the records.
func TestARetryAfterARecallIsStillARetry(t *testing.T) {
	s, root, c := newStore(t)
	subject := api.Subject{GuildID: "g", UserID: "u"}
	first := mustPropose(t, s, text, proposal("p1", "g", "u", "u", "c", "plays bass"))
	mustPropose(t, s, text, proposal("p2", "g", "u", "u", "c", "likes tea"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, then := range []string{"retry", "reuse", "export"} {
		t.Run(then, func(t *testing.T) {
			s, err := Open(root, zap.NewNop(), c.now, durable.Disk{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			recall := func() int {
				r, err := s.Recall(subject, people.RecallQuery{Who: operator})
				if err != nil {
					t.Fatal(err)
				}
				return len(r.Facts)
			}
			if n := recall(); n != 2 {
				t.Fatalf("recalled %d facts", n)
			}
			if pf, ok := s.cache.get(FileName(subject), viewed); !ok || !pf.factsOnly {
				t.Fatalf("the recall kept the person: %v, facts alone: %v", ok, ok && pf.factsOnly)
			}
			switch then {
			case "retry":
				r := mustPropose(t, s, text, proposal("p1", "g", "u", "u", "c", "plays bass"))
				if !r.Replayed || r.Fact == nil || r.Fact.FactID != first.Fact.FactID {
					t.Fatalf("a retry after a recall answered %+v", r)
				}
			case "reuse":
				_, _, err := s.Propose(text, proposal("p2", "g", "u", "u", "c", "likes coffee"))
				if fe, ok := fault.As(err); !ok || fe.Kind != fault.Conflict {
					t.Fatalf("p2 used again for another fact after a recall: %v", err)
				}
			case "export":
				p, err := s.person(FileName(subject), subject)
				if err != nil || len(p.Proposals) != 2 {
					t.Fatalf("exported %d records after a recall, %v", len(p.Proposals), err)
				}
			}
			if n := recall(); n != 2 {
				t.Fatalf("%s after a recall: %d facts", then, n)
			}
		})
	}
}

// A state read for its facts alone is never written: the log would lose
// its records.
func TestAFactsOnlyStateIsNeverWritten(t *testing.T) {
	log, _ := steadyLog(t)
	pf, _, err := decodeLogFacts(log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := encodeSnapshot(pf); !errors.Is(err, errFactsOnly) {
		t.Fatalf("encodeSnapshot of the facts alone: %v", err)
	}
}

// A read of the facts alone allocates less than a whole read of the same
// log: the room it makes for facts is the whole read's (a first version
// sized it from the fact lines alone, and grew and copied the facts of
// every steady log, 198 KB a read against 123 KB whole).
func TestAFactsOnlyReadAllocatesLess(t *testing.T) {
	log, _ := steadyLog(t)
	allocated := func(decode func([]byte) (*personFile, int, error)) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 20 {
			if _, _, err := decode(log); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 20
	}
	whole, facts := allocated(decodeLog), allocated(decodeLogFacts)
	t.Logf("bytes allocated a read: %d whole, %d for the facts alone", whole, facts)
	if facts >= whole*3/4 {
		t.Fatalf("a read of the facts alone allocates %d bytes, a whole read %d", facts, whole)
	}
}
