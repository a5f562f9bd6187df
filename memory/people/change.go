package people

import (
	"slices"

	"github.com/clankie/clankie/api"
)

// LogVersion is the schema of a history's header (Change.SchemaVersion).
const LogVersion = 2

// Change is one line of a person's history: what a rule decided (Memory),
// applied by Apply the same way by every store, and kept as it is by the
// file store (a person log is these lines; see log.go). Which fields are
// set says what it is:
//
//   - a change: Seq, then Remove, ClearDigest, Put and Proposal;
//   - in a compacted history, the header (SchemaVersion, Subject, Seq), then
//     one Fact or one Proposal a line;
//   - Reset, the whole state at Seq as a compacted history's lines, header
//     first (a compaction in the journal, a migration's put);
//   - Erase, never written: everything kept about the person goes, the
//     idempotency records included.
type Change struct {
	SchemaVersion int             `json:"schemaVersion,omitempty"`
	Subject       *api.Subject    `json:"subject,omitempty"`
	Seq           uint64          `json:"seq,omitempty"`
	Fact          *api.Fact       `json:"fact,omitempty"`
	Remove        []string        `json:"remove,omitempty"`
	ClearDigest   []string        `json:"clearDigest,omitempty"`
	Put           []api.Fact      `json:"put,omitempty"`
	Proposal      *ProposalRecord `json:"proposal,omitempty"`
	Reset         []Change        `json:"reset,omitempty"`
	Erase         bool            `json:"-"`
}

// Apply makes one change to the state. A change removes the facts named
// in Remove, clears the digest of the records naming ClearDigest, puts each
// fact of Put (replacing the fact with its id in place, else appending),
// appends its proposal record and then keeps the records as a proposal does
// (every live fact's, and the newest 64 of facts that are gone). A change
// whose seq is not above the state's was applied already and is skipped.
func (p *Person) Apply(l *Change) {
	if l.header() {
		return // a stray header
	}
	if l.Erase {
		*p = Person{Subject: p.Subject, Seq: max(p.Seq, l.Seq), Facts: []api.Fact{}}
		return
	}
	if len(l.Reset) > 0 {
		// A reset is the whole state at its seq. It is applied over a log
		// at the same seq too: a compaction rewrites the log in place, and
		// one a crash cut short may hold a header of that seq over the
		// remains of the lines before.
		if l.Seq < p.Seq {
			return // the log holds a later state
		}
		st := Person{Subject: p.Subject, Facts: []api.Fact{}}
		for i := 1; i < len(l.Reset); i++ {
			st.Apply(&l.Reset[i])
		}
		st.Seq = l.Seq
		*p = st
		return
	}
	if !p.advance(l) {
		return
	}
	for _, id := range l.Remove {
		if i := indexOf(p.Facts, id); i >= 0 {
			p.Facts = append(p.Facts[:i], p.Facts[i+1:]...)
		}
	}
	for _, id := range l.ClearDigest {
		p.clearDigest(id)
	}
	if l.Fact != nil {
		p.put(*l.Fact)
	}
	for _, f := range l.Put {
		p.put(f)
	}
	if l.Proposal != nil {
		p.Proposals = append(p.Proposals, l.Proposal.keyed())
		if l.Seq > 0 {
			p.Proposals = pruneProposals(p.Proposals, p.Facts)
		}
	}
}

// header reports whether l is a history's header, which changes nothing.
func (l *Change) header() bool { return l.Subject != nil || l.SchemaVersion != 0 }

// advance moves the state's seq to l's and reports true, or reports false
// for a change already applied (its seq not above the state's). A line
// without a seq (a compacted history's fact or record) always applies.
func (p *Person) advance(l *Change) bool {
	if l.Seq == 0 {
		return true
	}
	if l.Seq <= p.Seq {
		return false
	}
	p.Seq = l.Seq
	return true
}

// put replaces the fact with f's id in place, else appends f.
func (p *Person) put(f api.Fact) {
	if i := indexOf(p.Facts, f.FactID); i >= 0 {
		p.Facts[i] = f
	} else {
		p.Facts = append(p.Facts, f)
	}
}

func (p *Person) clearDigest(factID string) {
	key := idKey(factID)
	for i := range p.Proposals {
		if p.Proposals[i].isFact(factID, key) {
			p.Proposals[i].Digest = ""
		}
	}
}

// ApplyAll makes changes in order, with the result Apply gives applying
// them one after another, in one pass: the replay of a person's history (a
// log of a few hundred lines, read every time a person not in memory is
// loaded). One at a time, each removal shifts the facts after it and each
// proposal prunes the records again; here a removal leaves a hole that the
// end closes, in order, and the records are pruned once.
//
// Pruning once gives what pruning after each proposal does, provided it
// sees the facts as they stood at the last of those proposals: a fact
// only ever goes (ids are random and never reused), so a record an earlier
// prune dropped is one the last would drop too, and one it keeps, the last
// keeps. So the one prune counts as live the facts left at the end and the
// ones removed after that proposal, and leaves alone the records appended
// after it. When a line does put a new fact under an id older records name
// (all but never), the pending prune is made first, as things stood. A
// reset or an erase, which replace the whole state, are made as Apply
// makes them.
func (p *Person) ApplyAll(changes []Change) {
	// Room for every fact and record the lines put, made once: a replayed
	// log of 128 facts otherwise grew both arrays and the slot map by
	// doubling, a fifth of a cold load's replay.
	facts, records := 0, 0
	for i := range changes {
		if changes[i].Fact != nil {
			facts++
		}
		facts += len(changes[i].Put)
		if changes[i].Proposal != nil {
			records++
		}
	}
	r := p.Replay(facts, records)
	for i := range changes {
		r.Add(&changes[i])
	}
	r.Done()
}

// Replay is ApplyAll a line at a time, for a reader that decodes each
// line into the same Change: Add keeps nothing of the line but copies of
// its values. Person.Replay starts one, Done ends it; the person is not
// to be read in between.
type Replay struct {
	p *Person
	b factBatch
}

// Replay starts replaying lines onto p, with room made for about facts
// and records more (a guess: more only costs growing).
func (p *Person) Replay(facts, records int) *Replay {
	p.Facts = slices.Grow(p.Facts, facts)
	p.Proposals = slices.Grow(p.Proposals, records)
	r := &Replay{p: p}
	r.b.start(p)
	return r
}

// Add makes one change, as Apply would in turn.
func (r *Replay) Add(l *Change) {
	p, b := r.p, &r.b
	if l.header() {
		return // a stray header
	}
	if l.Erase || len(l.Reset) > 0 {
		b.finish(p)
		p.Apply(l)
		b.start(p)
		return
	}
	if !p.advance(l) {
		return
	}
	for _, id := range l.Remove {
		b.remove(id)
	}
	for _, id := range l.ClearDigest {
		p.clearDigest(id)
	}
	if l.Fact != nil {
		b.put(p, l.Fact)
	}
	for i := range l.Put {
		b.put(p, &l.Put[i])
	}
	if l.Proposal != nil {
		p.Proposals = append(p.Proposals, l.Proposal.keyed())
		b.records[l.Proposal.FactID] = true
		if l.Seq > 0 {
			// The prune this proposal makes, made at the end as of now.
			b.pruneAt, b.goneSince = len(p.Proposals), nil
		}
	}
}

// Done makes what the replay left pending: the holes closed, the records
// pruned.
func (r *Replay) Done() { r.b.finish(r.p) }

// factBatch is ApplyAll's view of the facts: a slot per fact ever put,
// holes where one was removed, and the slot of each live id; and the prune
// pending.
type factBatch struct {
	facts   []api.Fact
	gone    []bool
	slot    map[string]int
	holes   int
	records map[string]bool // the fact ids the records name
	// pruneAt is how many records the pending prune covers (0: none
	// pending); goneSince the ids removed after it was asked for, live
	// as far as it is concerned.
	pruneAt   int
	goneSince []string
}

func (b *factBatch) start(p *Person) {
	*b = factBatch{facts: p.Facts, gone: make([]bool, len(p.Facts), cap(p.Facts)),
		slot: make(map[string]int, cap(p.Facts)+8), records: make(map[string]bool, cap(p.Proposals)+8)}
	for i := range p.Facts {
		b.slot[p.Facts[i].FactID] = i
	}
	for i := range p.Proposals {
		b.records[p.Proposals[i].FactID] = true
	}
}

func (b *factBatch) put(p *Person, f *api.Fact) {
	if i, ok := b.slot[f.FactID]; ok {
		b.facts[i] = *f
		return
	}
	if b.pruneAt > 0 && b.records[f.FactID] {
		// A new fact under an id older records name: prune as things
		// stood before it.
		b.finish(p)
		b.start(p)
	}
	b.slot[f.FactID] = len(b.facts)
	b.facts = append(b.facts, *f)
	b.gone = append(b.gone, false)
}

func (b *factBatch) remove(id string) {
	if i, ok := b.slot[id]; ok {
		delete(b.slot, id)
		b.gone[i] = true
		b.facts[i] = api.Fact{} // drop what it held
		b.holes++
		if b.pruneAt > 0 {
			b.goneSince = append(b.goneSince, id)
		}
	}
}

// finish closes the holes, in order, makes the facts p's, and makes the
// pending prune.
func (b *factBatch) finish(p *Person) {
	facts := b.facts
	if b.holes > 0 {
		kept := facts[:0]
		for i := range facts {
			if !b.gone[i] {
				kept = append(kept, facts[i])
			}
		}
		clear(facts[len(kept):])
		facts = kept
	}
	if facts == nil {
		facts = []api.Fact{}
	}
	if cap(facts) > len(facts)+len(facts)/4+8 {
		// A replayed history grew the array well past what is left; a
		// person kept in memory keeps only what it holds.
		facts = append(make([]api.Fact, 0, len(facts)), facts...)
	}
	p.Facts = facts
	if b.pruneAt == 0 {
		return
	}
	live := facts
	if len(b.goneSince) > 0 {
		live = slices.Clone(facts)
		for _, id := range b.goneSince {
			live = append(live, api.Fact{FactID: id})
		}
	}
	head := pruneProposals(p.Proposals[:b.pruneAt:b.pruneAt], live)
	p.Proposals = append(head, p.Proposals[b.pruneAt:]...)
	if cap(p.Proposals) > len(p.Proposals)+len(p.Proposals)/4+8 {
		p.Proposals = append(make([]ProposalRecord, 0, len(p.Proposals)), p.Proposals...)
	}
	b.pruneAt, b.goneSince = 0, nil
}
