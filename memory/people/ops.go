// Package people is the person memory: what Clankie has been told about
// people, keyed by (guildId, userId), with the visibility, supersede,
// eviction and subject-rights rules of the spec. Memory orchestrates every
// operation once over a Storer, which only persists a Person and the
// Change a rule decided: personfiles.Store is the file engine (one
// append-only JSON-lines log per person behind a group-committed journal),
// pgstore.People the PostgreSQL one. This package reads no file and speaks
// no SQL.
package people

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// MaxGoneRecords bounds the idempotency records kept for facts that are no
// longer stored (forgotten, superseded, evicted). Records of live facts are
// always kept, so a person file holds at most 256 + 64 of them (128
// Discord-visible facts, 128 operator-only notes, 64 gone): a retry
// arrives within seconds, and a file rewritten on every proposal must stay
// small.
const MaxGoneRecords = 64

// ProposeInfo is what a proposal's receipt needs beyond its answer (which
// says whether it was replayed, superseded or evicted): the length of the
// body as stored, once cleaned.
type ProposeInfo struct {
	BodyLength int
}

// PrepareProposal validates a proposal before anything is read or written
// (filling provenance.sourceSurface from the caller) and returns its digest,
// the fingerprint that tells a retry from a different use of the same id.
// The one rule that needs a clock, an expiry in the future, is proposeOn's,
// against the clock the store reads under the person's lock: a store whose
// clock is a database's then needs no round trip of its own to read it.
func PrepareProposal(who api.Principal, req *api.ProposalRequest) (string, error) {
	if err := validateProposal(who, req); err != nil {
		return "", err
	}
	return proposalDigest(*req), nil
}

// proposeOn works out what a prepared proposal does to a person's state:
// the answer, and the change line to apply (nil when nothing is written: a
// replay). It does not change pf; every store applies the line it returns.
func proposeOn(pf *Person, who api.Principal, req api.ProposalRequest, digest string, now time.Time) (api.ProposalResponse, ProposeInfo, *Change, error) {
	in := req.Fact
	info := ProposeInfo{BodyLength: len(in.Body)}
	resp := api.ProposalResponse{SchemaVersion: api.SchemaVersion}
	if err := validExpiry(in.ExpiresAt, now); err != nil {
		return resp, info, nil, err
	}

	key := idKey(req.ProposalID)
	for i := range pf.Proposals {
		p := &pf.Proposals[i]
		if !p.isProposal(req.ProposalID, key) {
			continue
		}
		if p.Digest == "" {
			resp.Replayed = true
			resp.Reason = "this proposal was applied before and its fact has since been forgotten; nothing was stored"
			return resp, info, nil, nil
		}
		if p.Digest != digest {
			return resp, info, nil, fault.New(fault.Conflict, "proposal_conflict", "proposalId %s was already used for a different fact; nothing was changed.", req.ProposalID)
		}
		resp.Replayed = true
		// A replay answers only what a recall from the proposing room would
		// show now (the room rule, Visible): a fact the operator has since
		// moved to another channel or made operator_private, or that has
		// expired, answers as a replaced one, so a retry never reads what
		// the room may not.
		if i := indexOf(pf.Facts, p.FactID); i >= 0 && Visible(&pf.Facts[i], who, in.Provenance.ChannelID, now) {
			f := pf.Facts[i]
			resp.Fact = &f
		} else {
			resp.Reason = "this proposal was applied before and its fact has since been replaced or evicted; nothing was stored"
		}
		return resp, info, nil, nil
	}

	fact := api.Fact{
		FactID:     newFactID(pf.Facts),
		Subject:    in.Subject,
		Kind:       in.Kind,
		Body:       in.Body,
		Visibility: in.Visibility,
		Confidence: in.Confidence,
		CreatedAt:  now,
		UpdatedAt:  now,
		ExpiresAt:  in.ExpiresAt,
		Provenance: in.Provenance,
	}
	// The change is written as one log line; the new state is that line
	// applied to the old, exactly as a replay will apply it.
	ch := &Change{Seq: pf.Seq + 1}
	superseded := -1
	if in.SupersedesFactID != "" {
		if i := indexOf(pf.Facts, in.SupersedesFactID); i < 0 {
			resp.Reason = ReasonNoSuchFact
		} else if ok, why := MaySupersede(who, pf.Facts[i], in.Provenance.ProposerUserID, in.Provenance.ChannelID, now); !ok {
			resp.Reason = why
		} else {
			superseded = i
			fact.SupersedesFactID = in.SupersedesFactID
			resp.Superseded = true
			ch.Remove = append(ch.Remove, in.SupersedesFactID)
			ch.ClearDigest = []string{in.SupersedesFactID}
		}
	}
	// The new fact counts against its own class's bound only (isHidden):
	// Discord-visible facts and operator-only notes are bounded apart, and
	// eviction makes room only among the new fact's class, so a member's
	// proposal never evicts, counts or names an operator-only note, and an
	// operator's note never evicts what members see.
	evicted, total := 0, len(pf.Facts)+1 // facts after the change, before eviction
	if superseded >= 0 {
		total--
	}
	hidden := isHidden(&fact)
	bound := boundOf(hidden)
	// Under the smaller bound in all no class can be over its own, and
	// nothing needs counting.
	if total > min(api.MaxFactsPerPerson, api.MaxHiddenFactsPerPerson) && 1+countClass(pf.Facts, hidden, superseded) > bound {
		// Only a class at its cap needs its facts after the change laid
		// out, to choose what to evict.
		facts := make([]api.Fact, 0, bound+1)
		for i, f := range pf.Facts {
			if i != superseded && isHidden(&f) == hidden {
				facts = append(facts, f)
			}
		}
		facts = append(facts, fact)
		// The lane check is kept as a guard: a Discord lane proposes only
		// visible facts, which its lane can all see.
		var kept []api.Fact
		var ok bool
		kept, evicted, ok = Evict(facts, bound, now, func(f api.Fact) bool {
			return f.FactID != fact.FactID && LaneVisible(who, f)
		})
		if !ok {
			return api.ProposalResponse{}, ProposeInfo{}, nil, fault.New(fault.Unprocessable, CodeAtCapacity,
				"This person's memory is full (at most %d facts of this visibility are kept per person), so nothing was stored; an operator can make room.", bound)
		}
		keep := make(map[string]bool, len(kept))
		for _, f := range kept {
			keep[f.FactID] = true
		}
		for _, f := range facts {
			if !keep[f.FactID] {
				ch.Remove = append(ch.Remove, f.FactID)
			}
		}
	}
	resp.Evicted = evicted
	ch.Put = []api.Fact{fact}
	ch.Proposal = &ProposalRecord{ProposalID: req.ProposalID, Digest: digest, FactID: fact.FactID}
	resp.Fact = &fact
	return resp, info, ch, nil
}

// proposalDigest fingerprints what a proposal asks for, so a retry can be
// told from a different use of the same id.
func proposalDigest(req api.ProposalRequest) string {
	b, _ := json.Marshal(&req.Fact)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// pruneProposals keeps the record of every live fact and the newest
// MaxGoneRecords records of facts that are gone, in their original order.
func pruneProposals(records []ProposalRecord, facts []api.Fact) []ProposalRecord {
	if len(records) <= MaxGoneRecords {
		return records // every record may be kept, live or gone
	}
	live := newFactSet(facts)
	keep := make([]bool, len(records))
	gone := 0
	for i := len(records) - 1; i >= 0; i-- {
		if live.has(&records[i]) {
			keep[i] = true
		} else if gone < MaxGoneRecords {
			keep[i] = true
			gone++
		}
	}
	out := records[:0]
	for i, r := range records {
		if keep[i] {
			out = append(out, r)
		}
	}
	return out
}

// factSet is the ids of a person's facts: an open-addressed table of their
// idKeys, with the ids beside them, which pruneProposals asks once per
// record instead of building a map on every proposal.
type factSet struct {
	keys []uint64
	ids  []string
}

func newFactSet(facts []api.Fact) factSet {
	n := 4
	for n < 2*len(facts) {
		n *= 2
	}
	s := factSet{keys: make([]uint64, n), ids: make([]string, n)}
	for i := range facts {
		id := facts[i].FactID
		k := idKey(id)
		j := s.first(k)
		for s.keys[j] != 0 && !(s.keys[j] == k && s.ids[j] == id) {
			j = (j + 1) & (n - 1)
		}
		s.keys[j], s.ids[j] = k, id
	}
	return s
}

// first is the slot where key's probe starts. A key's lowest bit is
// always set (idKey), so the slot is taken from the bits above it: every
// slot is used, not every other one.
func (s factSet) first(key uint64) int { return int(key>>1) & (len(s.keys) - 1) }

// has reports whether r's fact is in the set.
func (s factSet) has(r *ProposalRecord) bool {
	k := r.fkey
	if k == 0 {
		k = idKey(r.FactID)
	}
	n := len(s.keys)
	for j := s.first(k); s.keys[j] != 0; j = (j + 1) & (n - 1) {
		if s.keys[j] == k && s.ids[j] == r.FactID {
			return true
		}
	}
	return false
}

func indexOf(facts []api.Fact, id string) int {
	for i, f := range facts {
		if f.FactID == id {
			return i
		}
	}
	return -1
}

var factIDEncoding = base32.NewEncoding("abcdefghijkmnpqrstuvwxyz23456789").WithPadding(base32.NoPadding)

// newFactID returns a short id a person can type: "f" and seven characters
// without look-alikes, unique within the person.
func newFactID(existing []api.Fact) string {
	for {
		var b [5]byte
		_, _ = rand.Read(b[:])
		id := "f" + factIDEncoding.EncodeToString(b[:])[:7]
		if indexOf(existing, id) < 0 {
			return id
		}
	}
}

// RecallQuery is an ambient read of one person.
type RecallQuery struct {
	Who api.Principal
	// The room (a Discord read always names one), the terms, the limit.
	api.RecallQuery
}

// PrepareRecall validates a recall and fills the default limit.
func PrepareRecall(subject api.Subject, q *RecallQuery) error {
	if err := ValidSubject(subject); err != nil {
		return err
	}
	if q.Limit == 0 {
		q.Limit = api.DefaultRecallLimit
	}
	if q.Limit < 1 || q.Limit > api.MaxFactsPerPerson {
		return invalid("limit must be between 1 and %d.", api.MaxFactsPerPerson)
	}
	return nil
}

// RecallView is a prepared recall over a person's facts (which it leaves
// as they are): the facts visible in the read's room that match its query,
// newest first, at most its limit (copies), and how many there were.
func RecallView(subject api.Subject, facts []api.Fact, q RecallQuery, now time.Time) api.RecallResponse {
	match := make([]*api.Fact, 0, len(facts))
	for i := range facts {
		if f := &facts[i]; Visible(f, q.Who, q.ChannelID, now) && api.MatchesQuery(f, q.Query) {
			match = append(match, f)
		}
	}
	newestFirst(match)
	out := make([]api.Fact, min(len(match), q.Limit))
	for i := range out {
		out[i] = *match[i]
	}
	return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Total: len(match), Facts: out}
}

// PrepareMine validates the subject's own view: only the subject may ask.
func PrepareMine(subject api.Subject, requesterUserID string) error {
	if err := ValidSubject(subject); err != nil {
		return err
	}
	if requesterUserID == "" {
		return invalid("requesterUserId is required: the subject's view is shown only to the subject.")
	}
	if requesterUserID != subject.UserID {
		return fault.New(fault.Forbidden, "not_subject", "Only the person these facts are about may see all of them.")
	}
	return nil
}

// MineView is the subject's view of their facts (which it may reorder).
func MineView(subject api.Subject, facts []api.Fact, now time.Time) api.RecallResponse {
	out := facts[:0]
	for _, f := range facts {
		if f.Visibility.Scope == api.ScopeOperatorPrivate {
			continue
		}
		f.Expired = Expired(f, now)
		out = append(out, f)
	}
	NewestFirst(out)
	return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: out, Total: len(out), Capacity: api.MaxFactsPerPerson}
}

// ExportView is the operator's view of a person's facts (which it marks
// and reorders in place).
func ExportView(subject api.Subject, facts []api.Fact, now time.Time) api.RecallResponse {
	for i := range facts {
		facts[i].Expired = Expired(facts[i], now)
	}
	NewestFirst(facts)
	return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts, Total: len(facts), Capacity: MaxFactsStored}
}

// PrepareForget validates a forget before anything is read.
func PrepareForget(who api.Principal, subject api.Subject, factID, requesterUserID string) error {
	if err := ValidSubject(subject); err != nil {
		return err
	}
	if err := validFactID("factId", factID); err != nil {
		return err
	}
	if !who.Operator() {
		if requesterUserID == "" {
			return invalid("requesterUserId is required: a Discord bearer forgets on behalf of a member.")
		}
		if err := api.CheckID(requesterUserID); err != nil {
			return invalid("requesterUserId %v.", err)
		}
	}
	return nil
}

// forgetOn works out a forget against a person's state: the fact removed
// and the change line that removes it.
func forgetOn(pf *Person, who api.Principal, factID, requesterUserID string) (api.Fact, *Change, error) {
	i := indexOf(pf.Facts, factID)
	if i < 0 || (!who.Operator() && pf.Facts[i].Visibility.Scope == api.ScopeOperatorPrivate) {
		return api.Fact{}, nil, fault.New(fault.NotFound, "fact_not_found", "No fact with that id is kept about this person.")
	}
	f := pf.Facts[i]
	if !who.Operator() && !MayForget(f, requesterUserID) {
		return api.Fact{}, nil, fault.New(fault.Forbidden, CodeNotSubjectOrProposer, "Only the person a fact is about or the member who proposed it may forget it.")
	}
	return f, &Change{Seq: pf.Seq + 1, Remove: []string{factID}, ClearDigest: []string{factID}}, nil
}

// PrepareEdit validates an operator's edit (cleaning the body) before
// anything is read.
func PrepareEdit(subject api.Subject, factID string, p *api.FactPatch) error {
	if err := ValidSubject(subject); err != nil {
		return err
	}
	if err := validFactID("factId", factID); err != nil {
		return err
	}
	if p.Body != nil {
		b, err := cleanBody(*p.Body)
		if err != nil {
			return err
		}
		p.Body = &b
	}
	if p.Kind != nil {
		if err := validKind(*p.Kind); err != nil {
			return err
		}
	}
	if p.Visibility != nil {
		if err := validVisibility(api.Principal{Lane: api.LaneOperator}, *p.Visibility); err != nil {
			return err
		}
	}
	if p.Confidence != nil {
		if err := validConfidence(*p.Confidence); err != nil {
			return err
		}
	}
	if p.Body == nil && p.Kind == nil && p.Visibility == nil && p.Confidence == nil && !p.ExpiresAt.Set {
		return invalid("Nothing to change: give body, kind, visibility, confidence or expiresAt.")
	}
	return nil
}

// editOn works out an edit against a person's state: the edited fact and
// the change line that puts it.
func editOn(pf *Person, factID string, p api.FactPatch, now time.Time) (api.Fact, *Change, error) {
	if p.ExpiresAt.Set {
		if err := validExpiry(p.ExpiresAt.Value, now); err != nil {
			return api.Fact{}, nil, err
		}
	}
	i := indexOf(pf.Facts, factID)
	if i < 0 {
		return api.Fact{}, nil, fault.New(fault.NotFound, "fact_not_found", "No fact with that id is kept about this person.")
	}
	f := pf.Facts[i]
	if p.Body != nil {
		f.Body = *p.Body
	}
	if p.Kind != nil {
		f.Kind = *p.Kind
	}
	if p.Visibility != nil {
		f.Visibility = *p.Visibility
	}
	// An edit that moves a fact across the line between Discord-visible
	// and operator-only must find room in the target class: it is refused
	// when that class is at its bound, rather than evict a fact the
	// operator did not name.
	if to := isHidden(&f); to != isHidden(&pf.Facts[i]) && countClass(pf.Facts, to, i) >= boundOf(to) {
		what := "Discord-visible facts"
		if to {
			what = "operator_private notes"
		}
		return api.Fact{}, nil, fault.New(fault.Unprocessable, CodeAtCapacity,
			"This person already has %d %s, the most kept, so nothing was changed; forget one of them first or choose another visibility.", boundOf(to), what)
	}
	if p.Confidence != nil {
		f.Confidence = *p.Confidence
	}
	if p.ExpiresAt.Set {
		f.ExpiresAt = p.ExpiresAt.Value
	}
	f.UpdatedAt = now
	return f, &Change{Seq: pf.Seq + 1, Put: []api.Fact{f}}, nil
}

// PrepareList checks a page size and fills the default.
func PrepareList(limit *int) error {
	if *limit == 0 {
		*limit = 100
	}
	if *limit < 1 || *limit > 1000 {
		return invalid("limit must be between 1 and 1000.")
	}
	return nil
}

// ErrUnknownCursor is a Storer's answer to a List cursor it did not give
// out.
var ErrUnknownCursor = invalid("cursor is not one this service gave out.")
