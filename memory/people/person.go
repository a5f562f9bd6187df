package people

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/clankie/clankie/api"
)

// Person is one person's state as a store other than the files keeps it
// (the PostgreSQL store): the same facts and idempotency records, changed by
// the same rules and the same change lines (personFile.apply) as a person
// log, so a rule is written once for every store. A Person is not safe for
// concurrent use; its store serialises the changes of one person.
type Person struct{ pf *personFile }

// personState is a Person's encoding: the state a compacted person log
// holds, as one JSON object.
type personState struct {
	Subject   api.Subject      `json:"subject"`
	Seq       uint64           `json:"seq"`
	Facts     []api.Fact       `json:"facts"`
	Proposals []proposalRecord `json:"proposals"`
}

// NewPerson returns an empty person: nothing is kept about them yet.
func NewPerson(subject api.Subject) *Person {
	return &Person{pf: &personFile{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: []api.Fact{}}}
}

// DecodePerson reads what Encode wrote. An empty b is an empty person.
func DecodePerson(subject api.Subject, b []byte) (*Person, error) {
	p := NewPerson(subject)
	if len(b) == 0 {
		return p, nil
	}
	var st personState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("decode person state: %w", err)
	}
	if st.Subject != subject {
		return nil, fmt.Errorf("decode person state: it names another subject than its key")
	}
	p.pf.seq, p.pf.Proposals = st.Seq, st.Proposals
	if st.Facts != nil {
		p.pf.Facts = st.Facts
	}
	return p, nil
}

// Encode returns the person's state as one JSON object.
func (p *Person) Encode() ([]byte, error) {
	return json.Marshal(personState{Subject: p.pf.Subject, Seq: p.pf.seq, Facts: p.pf.Facts, Proposals: p.pf.Proposals})
}

// Subject is who the person is.
func (p *Person) Subject() api.Subject { return p.pf.Subject }

// Facts returns a copy of the person's facts, in stored order.
func (p *Person) Facts() []api.Fact { return slices.Clone(p.pf.Facts) }

// Len is how many facts are kept about the person.
func (p *Person) Len() int { return len(p.pf.Facts) }

// Propose applies a prepared proposal (PrepareProposal gave digest) exactly
// as the file store does, and reports whether the state changed (false for
// a replay or a refusal).
func (p *Person) Propose(who api.Principal, req api.ProposalRequest, digest string, now time.Time) (api.ProposalResponse, ProposeInfo, bool, error) {
	resp, info, ch, err := proposeOn(p.pf, who, req, digest, now)
	if err != nil || ch == nil {
		return resp, info, false, err
	}
	p.pf.apply(ch)
	return resp, info, true, nil
}

// Forget removes one fact by the rules of Store.Forget (PrepareForget
// validated the request) and returns it.
func (p *Person) Forget(who api.Principal, factID, requesterUserID string) (api.Fact, error) {
	f, ch, err := forgetOn(p.pf, who, factID, requesterUserID)
	if err != nil {
		return api.Fact{}, err
	}
	p.pf.apply(ch)
	return f, nil
}

// Edit applies an operator's prepared edit (PrepareEdit) and returns the
// edited fact.
func (p *Person) Edit(factID string, patch api.FactPatch, now time.Time) (api.Fact, error) {
	f, ch, err := editOn(p.pf, factID, patch, now)
	if err != nil {
		return api.Fact{}, err
	}
	p.pf.apply(ch)
	return f, nil
}
