package people

import (
	"encoding/json"
	"math/bits"
	"slices"

	"github.com/clankie/clankie/api"
)

// Person is one person's state, as every store keeps it: their facts and
// the idempotency records of the proposals that made them. A store only
// persists it; the rules (Memory) decide every change, as a Change that
// Apply makes, so a rule is written once for every store. A Person is not
// safe for concurrent use; its store serialises the changes of one person.
type Person struct {
	Subject api.Subject
	// Seq is the last change applied.
	Seq   uint64
	Facts []api.Fact
	// Proposals remember which proposal made which fact, so a retry stores
	// nothing new. Digest is a hash of the proposal; it is cleared when the
	// fact is forgotten so nothing derived from a forgotten body remains.
	Proposals []ProposalRecord
}

// ProposalRecord is one proposal's idempotency record.
type ProposalRecord struct {
	ProposalID string `json:"proposalId"`
	Digest     string `json:"digest,omitempty"`
	FactID     string `json:"factId"`
	// idKey of ProposalID and of FactID, set by Apply (0 where a record
	// was made another way): a scan for an id compares these first, in
	// the records' own array, before it reads any id's bytes.
	pkey, fkey uint64
}

// NewPerson returns an empty person: nothing is kept about them yet.
func NewPerson(subject api.Subject) *Person {
	return &Person{Subject: subject, Facts: []api.Fact{}}
}

// Clone returns a copy that shares no slice with p.
func (p *Person) Clone() *Person {
	c := *p
	c.Facts = slices.Clone(p.Facts)
	c.Proposals = slices.Clone(p.Proposals)
	return &c
}

// SameState reports whether two people hold the same facts and idempotency
// records (their change counters aside).
func SameState(a, b *Person) bool {
	if a.Subject != b.Subject || len(a.Facts) != len(b.Facts) || len(a.Proposals) != len(b.Proposals) {
		return false
	}
	for i := range a.Facts {
		if !sameFact(&a.Facts[i], &b.Facts[i]) {
			return false
		}
	}
	for i := range a.Proposals {
		x, y := &a.Proposals[i], &b.Proposals[i]
		if x.ProposalID != y.ProposalID || x.Digest != y.Digest || x.FactID != y.FactID {
			return false
		}
	}
	return true
}

// sameFact compares two facts as their JSON would (instants by value, not
// by location).
func sameFact(a, b *api.Fact) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// idKey returns a 64-bit hash of id, never 0: a key a scan compares
// before an id's bytes, kept in memory only, and the slot factSet probes
// first. Ids are tens of bytes (a proposal's is "discord-interaction-" and
// a snowflake), so it takes them eight bytes at a time, then mixes every
// bit into every other (murmur3's finaliser): ids that differ only in
// their last digits must not share low bits, which factSet's slots come
// from.
func idKey(id string) uint64 {
	h := uint64(len(id)) * 0x9e3779b97f4a7c15
	mix := func(w uint64) { h = bits.RotateLeft64((h^w)*0x9e3779b97f4a7c15, 29) }
	for ; len(id) >= 8; id = id[8:] {
		mix(uint64(id[0]) | uint64(id[1])<<8 | uint64(id[2])<<16 | uint64(id[3])<<24 |
			uint64(id[4])<<32 | uint64(id[5])<<40 | uint64(id[6])<<48 | uint64(id[7])<<56)
	}
	if len(id) > 0 {
		var w uint64
		for i := range len(id) {
			w |= uint64(id[i]) << (8 * i)
		}
		mix(w)
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h | 1
}

// keyed returns r with its keys set.
func (r ProposalRecord) keyed() ProposalRecord {
	r.pkey, r.fkey = idKey(r.ProposalID), idKey(r.FactID)
	return r
}

// isProposal reports whether r records proposal id (key is idKey(id)).
func (r *ProposalRecord) isProposal(id string, key uint64) bool {
	return (r.pkey == 0 || r.pkey == key) && r.ProposalID == id
}

// isFact reports whether r names fact id (key is idKey(id)).
func (r *ProposalRecord) isFact(id string, key uint64) bool {
	return (r.fkey == 0 || r.fkey == key) && r.FactID == id
}
