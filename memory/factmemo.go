package memory

import (
	"bytes"
	"sync"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/bufpool"
)

// factMemo keeps the JSON the codec wrote of the facts of each person's
// last recall answer, so a recall asked again (the bridges ask the same
// person's facts over and over) encodes only its envelope. Each entry
// keeps the fact it encodes and is used only for an equal fact, so a fact
// that changed is encoded afresh and never answered with old bytes. It
// pays: a recall of 128 facts over HTTP, median, 153 µs with the memo
// against 575 µs encoding every fact (BenchmarkRecall128/limit=128, 2
// shared cores); at limit=20, 56 µs against 140 µs. With the answer
// buffers reused as well, the figures match those of the stores' own
// encodings that it replaces (medians of 3 alternating rounds: 173 µs
// against 177 µs at limit=128, 71 µs against 64 µs at limit=20).
//
// It holds fact bodies in memory only, like the stores' own caches: a
// person's entries are replaced by each recall of them, dropped when the
// service forgets or edits their facts, and all of them when they pass
// the byte bound. A recall that read the store before a forget dropped
// the person's entries does not put them back (its epoch is older than
// the forget), so a forgotten fact's body does not stay behind in the
// memo of the service that forgot it.
//
// The bound counts JSON. A fact the file store read from a log has
// strings that are parts of one allocation of their person's own
// (personfiles.ownStrings), which its entry keeps until it is replaced: a
// person with few facts in the memo keeps up to the strings of all of
// them.
type factMemo struct {
	limit int // bytes of JSON kept, over all people

	// answers holds answer buffers for reuse: a recall of 128
	// facts is 75 KiB, and the garbage of one per request made the
	// collector run often enough to slow every recall's copying.
	answers *bufpool.Pool

	mu     sync.Mutex
	size   int
	people map[api.Subject][]memoFact
	// forgets counts forget calls: the epoch a recall reads before it
	// asks the store, and keep refuses entries read before a forget.
	forgets uint64
}

type memoFact struct {
	fact api.Fact
	json []byte
}

func newFactMemo(limit int) *factMemo {
	return &factMemo{limit: limit, people: map[api.Subject][]memoFact{}, answers: bufpool.New(1 << 20)}
}

// factsNull is the facts member of a recall answer encoded without its
// facts: its one place in the envelope (a string holds a quote escaped,
// so the pattern cannot start inside one).
const factsNull = `,"facts":null`

// recallAnswer is a recall's answer, encoded through the memo; epoch is
// the memo's (epoch) from before the store was read.
type recallAnswer struct {
	api.RecallResponse
	epoch uint64
}

// epoch is read before a recall asks the store: entries encoded from what
// it read are kept only if no forget came in between.
func (m *factMemo) epoch() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.forgets
}

// encodeRecall returns encodeAnswer(resp)'s bytes: the envelope and each
// fact encoded by the codec, a fact from the memo when it is the fact the
// memo encoded.
func (m *factMemo) encodeRecall(resp api.RecallResponse, epoch uint64) ([]byte, error) {
	if resp.Facts == nil {
		return encodeAnswer(resp)
	}
	head := resp
	head.Facts = nil
	env, err := encodeAnswer(head)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(env, []byte(factsNull))
	if at < 0 {
		return encodeAnswer(resp)
	}
	encs, same := m.lookup(resp.Subject, resp.Facts)
	size := len(env) + len(resp.Facts)
	for i := range resp.Facts {
		if encs[i] == nil {
			if encs[i], err = encodeAnswer(&resp.Facts[i]); err != nil {
				return nil, err
			}
		}
		size += len(encs[i])
	}
	if !same {
		m.keep(resp.Subject, resp.Facts, encs, epoch)
	}
	b := m.buffer(size + 1) // +1: writeBody's newline
	b = append(b, env[:at]...)
	b = append(b, `,"facts":[`...)
	for i, e := range encs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, ']')
	return append(b, env[at+len(factsNull):]...), nil
}

// buffer returns an empty buffer of at least n bytes' capacity.
func (m *factMemo) buffer(n int) []byte { return m.answers.Get(n) }

// release takes back an answer encodeRecall returned, once it is
// written.
func (m *factMemo) release(b []byte) { m.answers.Put(b) }

// lookup returns the memo's JSON of each fact that it holds unchanged,
// nil for the others, and whether the person's entries are exactly these
// facts in this order (then they need not be kept again). An answer
// usually lists the facts of the last one in the same places, so each is
// looked for there first.
func (m *factMemo) lookup(subject api.Subject, facts []api.Fact) (encs [][]byte, same bool) {
	encs = make([][]byte, len(facts))
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.people[subject]
	same = len(kept) == len(facts)
	for i := range facts {
		j := i
		if j >= len(kept) || kept[j].fact.FactID != facts[i].FactID {
			same = false
			if j = indexOfFact(kept, facts[i].FactID); j < 0 {
				continue
			}
		}
		if sameFact(&kept[j].fact, &facts[i]) {
			encs[i] = kept[j].json
		} else {
			same = false
		}
	}
	return encs, same
}

func indexOfFact(kept []memoFact, id string) int {
	for j := range kept {
		if kept[j].fact.FactID == id {
			return j
		}
	}
	return -1
}

// keep makes facts (with their JSON) the person's entries, unless a
// forget came after epoch (what the recall read may hold what it forgot).
func (m *factMemo) keep(subject api.Subject, facts []api.Fact, encs [][]byte, epoch uint64) {
	entries := make([]memoFact, len(facts))
	size := 0
	for i := range facts {
		entries[i] = memoFact{fact: facts[i], json: encs[i]}
		size += len(encs[i])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.forgets != epoch {
		return
	}
	m.dropLocked(subject)
	if m.size+size > m.limit {
		clear(m.people)
		m.size = 0
		if size > m.limit {
			return
		}
	}
	m.people[subject] = entries
	m.size += size
}

// forget drops a person's entries (a fact of theirs was forgotten or
// edited, or all of them).
func (m *factMemo) forget(subject api.Subject) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgets++
	m.dropLocked(subject)
}

func (m *factMemo) dropLocked(subject api.Subject) {
	for _, e := range m.people[subject] {
		m.size -= len(e.json)
	}
	delete(m.people, subject)
}

// sameFact reports whether a and b encode the same: equal fields, the
// expiry compared by value (and by location, which its JSON shows).
func sameFact(a, b *api.Fact) bool {
	if a.ExpiresAt == b.ExpiresAt {
		return *a == *b // a copy of the same stored fact shares its expiry
	}
	x, y := *a, *b
	x.ExpiresAt, y.ExpiresAt = nil, nil
	if x != y || (a.ExpiresAt == nil) != (b.ExpiresAt == nil) {
		return false
	}
	return a.ExpiresAt == nil || *a.ExpiresAt == *b.ExpiresAt
}
