package people

import "github.com/clankie/clankie/api"

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
	if l.Subject != nil || l.SchemaVersion != 0 {
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
	if l.Seq > 0 {
		if l.Seq <= p.Seq {
			return
		}
		p.Seq = l.Seq
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
