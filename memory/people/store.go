// Package people is the store of person facts: what Clankie has been told
// about people, one JSON file per (guildId, userId), with the visibility,
// supersede, eviction and subject-rights rules of the spec.
//
// Facts live on disk, one small file per person; the catalog's counts are
// kept in memory from one scan at start, and a bounded cache (8 MiB of
// files) keeps busy people decoded, so the service's memory stays flat
// however many people it knows while a proposal or recall of a busy person
// skips re-reading and re-decoding its file.
package people

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
)

// Dir is the store's directory under the memory root.
const Dir = "discord-people"

// maxGoneRecords bounds the idempotency records kept for facts that are no
// longer stored (forgotten, superseded, evicted). Records of live facts are
// always kept, so a person file holds at most 128 + 64 of them: a retry
// arrives within seconds, and a file rewritten on every proposal must stay
// small.
const maxGoneRecords = 64

// personFile is the on-disk shape of one person.
type personFile struct {
	SchemaVersion int         `json:"schemaVersion"`
	Subject       api.Subject `json:"subject"`
	Facts         []api.Fact  `json:"facts"`
	// Proposals remember which proposal made which fact, so a retry stores
	// nothing new. Digest is a hash of the proposal; it is cleared when the
	// fact is forgotten so nothing derived from a forgotten body remains.
	Proposals []proposalRecord `json:"proposals,omitempty"`
}

type proposalRecord struct {
	ProposalID string `json:"proposalId"`
	Digest     string `json:"digest,omitempty"`
	FactID     string `json:"factId"`
}

type indexEntry struct {
	subject api.Subject
	facts   int
}

// Store is safe for concurrent use: requests for one person are serialised
// by a striped lock, so no update is lost; different people proceed at once.
type Store struct {
	root  *os.Root
	log   *zap.Logger
	now   func() time.Time
	locks [256]sync.Mutex

	mu    sync.Mutex
	index map[string]indexEntry // file name → subject and fact count
	facts int

	cache *fileCache
}

// Open scans the directory once (sweeping temp files, moving unreadable files
// aside) and answers a Store whose counters match the disk.
func Open(root *os.Root, log *zap.Logger, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	s := &Store{root: root, log: log, now: now, index: map[string]indexEntry{}, cache: newFileCache()}
	if err := durable.MkdirAll(root, Dir); err != nil {
		return nil, err
	}
	swept, err := durable.SweepTemp(root, Dir)
	if err != nil {
		return nil, fmt.Errorf("sweep temp files: %w", err)
	}
	if swept > 0 {
		log.Info("swept leftover temp files", zap.String("store", "people"), zap.Int("count", swept))
	}
	d, err := root.Open(Dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if !IsPersonFile(name) {
			continue
		}
		pf, _, err := s.load(name)
		if err != nil {
			return nil, err
		}
		if pf != nil && len(pf.Facts) > 0 {
			s.index[name] = indexEntry{subject: pf.Subject, facts: len(pf.Facts)}
			s.facts += len(pf.Facts)
		}
	}
	return s, nil
}

func (s *Store) lock(name string) func() {
	h := fnv.New32a()
	h.Write([]byte(name))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// load reads a person file. A missing file is nil, nil. A file that cannot be
// parsed, or whose subject does not match its name, is never treated as
// empty and overwritten: it is moved aside and reported content-free, and
// the person starts empty.
//
// It answers the file's size when it was read from disk (0 when it came
// from the cache or is missing), so a request can cache it.
func (s *Store) load(name string) (*personFile, int, error) {
	if pf, ok := s.cache.get(name); ok {
		return pf, 0, nil
	}
	b, err := s.root.ReadFile(path.Join(Dir, name))
	if err != nil {
		if durable.IsNotExist(err) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("read person file: %w", err)
	}
	var pf personFile
	if err := json.Unmarshal(b, &pf); err == nil && FileName(pf.Subject) == name {
		return &pf, len(b), nil
	}
	aside := name + corruptSuffix + strconv.FormatInt(s.now().Unix(), 10)
	if err := durable.Rename(s.root, path.Join(Dir, name), path.Join(Dir, aside)); err != nil {
		return nil, 0, fmt.Errorf("move unreadable person file aside: %w", err)
	}
	_ = s.root.Chmod(path.Join(Dir, aside), durable.FileMode)
	s.log.Warn("person file could not be parsed; moved aside and starting that person empty",
		zap.String("movedTo", path.Join(Dir, aside)))
	return nil, 0, nil
}

// read loads under the caller's lock and keeps the index honest when a file
// turned out to be unreadable.
func (s *Store) read(subject api.Subject) (string, *personFile, error) {
	name := FileName(subject)
	pf, size, err := s.load(name)
	if err != nil {
		return name, nil, err
	}
	if size > 0 {
		s.cache.put(name, clonePerson(pf), size)
	}
	if pf == nil {
		s.setCount(name, subject, 0)
		pf = &personFile{SchemaVersion: api.SchemaVersion, Subject: subject}
	}
	if pf.Facts == nil {
		pf.Facts = []api.Fact{} // answers say "facts":[], never null
	}
	return name, pf, nil
}

func (s *Store) write(name string, pf *personFile) error {
	if len(pf.Facts) == 0 && len(pf.Proposals) == 0 {
		s.cache.drop(name)
		if err := durable.Remove(s.root, path.Join(Dir, name)); err != nil && !durable.IsNotExist(err) {
			return err
		}
		s.setCount(name, pf.Subject, 0)
		return nil
	}
	if pf.Facts == nil {
		pf.Facts = []api.Fact{}
	}
	b, err := json.Marshal(pf)
	if err != nil {
		s.cache.drop(name)
		return err
	}
	if err := durable.WriteFile(s.root, path.Join(Dir, name), b); err != nil {
		s.cache.drop(name) // the disk may hold the old or the new file
		return err
	}
	s.cache.put(name, clonePerson(pf), len(b))
	s.setCount(name, pf.Subject, len(pf.Facts))
	return nil
}

// clonePerson copies a person file so the cache never shares a slice with a
// caller that goes on changing its copy.
func clonePerson(pf *personFile) *personFile {
	c := *pf
	c.Facts = slices.Clone(pf.Facts)
	c.Proposals = slices.Clone(pf.Proposals)
	return &c
}

func (s *Store) setCount(name string, subject api.Subject, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.index[name].facts
	s.facts += n - old
	if n == 0 {
		delete(s.index, name)
		return
	}
	s.index[name] = indexEntry{subject: subject, facts: n}
}

// Stats are the catalog's figures, from memory.
type Stats struct{ People, Facts int }

// Stats answers the counters without touching the disk.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{People: len(s.index), Facts: s.facts}
}

// ProposeInfo says what a proposal did, for the receipt.
type ProposeInfo struct {
	Created, Replayed, Superseded bool
	Evicted                       int
	BodyLength                    int
}

// Propose applies a proposal on arrival.
func (s *Store) Propose(c Caller, req api.ProposalRequest) (api.ProposalResponse, ProposeInfo, error) {
	now := s.now().UTC()
	if err := validateProposal(c, &req, now); err != nil {
		return api.ProposalResponse{}, ProposeInfo{}, err
	}
	in := req.Fact
	if !c.Operator && in.Visibility.Scope == api.ScopeChannel && in.Visibility.ChannelID != in.Provenance.ChannelID {
		return api.ProposalResponse{}, ProposeInfo{}, invalid("A Discord proposal may scope a fact only to the channel it was proposed in.")
	}
	digest := proposalDigest(req)
	name := FileName(in.Subject)
	defer s.lock(name)()
	_, pf, err := s.read(in.Subject)
	if err != nil {
		return api.ProposalResponse{}, ProposeInfo{}, err
	}
	info := ProposeInfo{BodyLength: len(in.Body)}
	resp := api.ProposalResponse{SchemaVersion: api.SchemaVersion}

	for _, p := range pf.Proposals {
		if p.ProposalID != req.ProposalID {
			continue
		}
		if p.Digest == "" {
			info.Replayed = true
			resp.Replayed = true
			resp.Reason = "this proposal was applied before and its fact has since been forgotten; nothing was stored"
			return resp, info, nil
		}
		if p.Digest != digest {
			return resp, info, fault.New(fault.Conflict, "proposal_conflict", "proposalId %s was already used for a different fact; nothing was changed.", req.ProposalID)
		}
		info.Replayed = true
		resp.Replayed = true
		// A replay answers only what the caller may see now: a fact the
		// operator has since made operator_private answers as a replaced one.
		if i := indexOf(pf.Facts, p.FactID); i >= 0 && LaneVisible(c, pf.Facts[i]) {
			f := pf.Facts[i]
			resp.Fact = &f
		} else {
			resp.Reason = "this proposal was applied before and its fact has since been replaced or evicted; nothing was stored"
		}
		return resp, info, nil
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
	if in.SupersedesFactID != "" {
		if i := indexOf(pf.Facts, in.SupersedesFactID); i < 0 {
			resp.Reason = ReasonNoSuchFact
		} else if ok, why := MaySupersede(c, pf.Facts[i], in.Provenance.ProposerUserID, in.Provenance.ChannelID, now); !ok {
			resp.Reason = why
		} else {
			pf.Facts = append(pf.Facts[:i], pf.Facts[i+1:]...)
			fact.SupersedesFactID = in.SupersedesFactID
			resp.Superseded = true
			info.Superseded = true
			clearDigest(pf, in.SupersedesFactID)
		}
	}
	pf.Facts = append(pf.Facts, fact)
	// A Discord proposal makes room only among the facts its lane can see:
	// operator-only notes are never evicted, counted or named to it. When
	// only such notes could make room the proposal is refused and nothing
	// is written.
	kept, evicted, ok := Evict(pf.Facts, api.MaxFactsPerPerson, now, func(f api.Fact) bool {
		return f.FactID != fact.FactID && LaneVisible(c, f)
	})
	if !ok {
		return api.ProposalResponse{}, ProposeInfo{}, fault.New(fault.Unprocessable, "person_at_capacity",
			"This person's memory is full (at most %d facts are kept per person), so nothing was stored; an operator can make room.", api.MaxFactsPerPerson)
	}
	pf.Facts, resp.Evicted = kept, evicted
	info.Evicted = resp.Evicted
	pf.Proposals = pruneProposals(append(pf.Proposals, proposalRecord{ProposalID: req.ProposalID, Digest: digest, FactID: fact.FactID}), pf.Facts)
	if err := s.write(name, pf); err != nil {
		return api.ProposalResponse{}, ProposeInfo{}, err
	}
	info.Created = true
	resp.Fact = &fact
	return resp, info, nil
}

// proposalDigest fingerprints what a proposal asks for, so a retry can be
// told from a different use of the same id.
func proposalDigest(req api.ProposalRequest) string {
	b, _ := json.Marshal(req.Fact)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// pruneProposals keeps the record of every live fact and the newest
// maxGoneRecords records of facts that are gone, in their original order.
func pruneProposals(records []proposalRecord, facts []api.Fact) []proposalRecord {
	live := make(map[string]bool, len(facts))
	for _, f := range facts {
		live[f.FactID] = true
	}
	keep := make([]bool, len(records))
	gone := 0
	for i := len(records) - 1; i >= 0; i-- {
		if live[records[i].FactID] {
			keep[i] = true
		} else if gone < maxGoneRecords {
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

func clearDigest(pf *personFile, factID string) {
	for i := range pf.Proposals {
		if pf.Proposals[i].FactID == factID {
			pf.Proposals[i].Digest = ""
		}
	}
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

// newFactID answers a short id a person can type: "f" and seven characters
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
	Scope ReadScope
	Query string
	Limit int
}

// Recall answers the facts visible in the read's room, newest first.
func (s *Store) Recall(subject api.Subject, q RecallQuery) (api.RecallResponse, error) {
	if err := ValidSubject(subject); err != nil {
		return api.RecallResponse{}, err
	}
	if q.Limit == 0 {
		q.Limit = api.DefaultRecallLimit
	}
	if q.Limit < 1 || q.Limit > api.MaxFactsPerPerson {
		return api.RecallResponse{}, invalid("limit must be between 1 and %d.", api.MaxFactsPerPerson)
	}
	now := s.now()
	facts, err := s.snapshot(subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	out := facts[:0]
	for _, f := range facts {
		if Visible(f, q.Scope, now) && MatchesQuery(f, q.Query) {
			out = append(out, f)
		}
	}
	NewestFirst(out)
	resp := api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Total: len(out), Facts: out}
	if len(out) > q.Limit {
		resp.Facts = out[:q.Limit]
	}
	return resp, nil
}

// snapshot reads a person's facts under its lock.
func (s *Store) snapshot(subject api.Subject) ([]api.Fact, error) {
	name := FileName(subject)
	defer s.lock(name)()
	_, pf, err := s.read(subject)
	if err != nil {
		return nil, err
	}
	return pf.Facts, nil
}

// Mine is the subject's own view: every fact about them in the guild that is
// not operator_private, whatever its room, expired ones marked, so a person
// never needs an operator to see what is kept about them.
func (s *Store) Mine(subject api.Subject, requesterUserID string) (api.RecallResponse, error) {
	if err := ValidSubject(subject); err != nil {
		return api.RecallResponse{}, err
	}
	if requesterUserID == "" {
		return api.RecallResponse{}, invalid("requesterUserId is required: the subject's view is shown only to the subject.")
	}
	if requesterUserID != subject.UserID {
		return api.RecallResponse{}, fault.New(fault.Forbidden, "not_subject", "Only the person these facts are about may see all of them.")
	}
	now := s.now()
	facts, err := s.snapshot(subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	out := facts[:0]
	for _, f := range facts {
		if f.Visibility.Scope == api.ScopeOperatorPrivate {
			continue
		}
		f.Expired = Expired(f, now)
		out = append(out, f)
	}
	NewestFirst(out)
	return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: out, Total: len(out), Capacity: api.MaxFactsPerPerson}, nil
}

// Export is the operator's view: every fact, operator_private and expired
// included, expired ones marked.
func (s *Store) Export(subject api.Subject) (api.RecallResponse, error) {
	if err := ValidSubject(subject); err != nil {
		return api.RecallResponse{}, err
	}
	now := s.now()
	facts, err := s.snapshot(subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	for i := range facts {
		facts[i].Expired = Expired(facts[i], now)
	}
	NewestFirst(facts)
	return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts, Total: len(facts), Capacity: api.MaxFactsPerPerson}, nil
}

// Forget removes one fact. A Discord caller must name the requester, who
// must be the fact's subject or proposer; the operator may remove any.
func (s *Store) Forget(c Caller, subject api.Subject, factID, requesterUserID string) (api.Fact, error) {
	if err := ValidSubject(subject); err != nil {
		return api.Fact{}, err
	}
	if !c.Operator {
		if requesterUserID == "" {
			return api.Fact{}, invalid("requesterUserId is required: a Discord bearer forgets on behalf of a member.")
		}
		if err := ValidID(requesterUserID); err != nil {
			return api.Fact{}, invalid("requesterUserId %v.", err)
		}
	}
	name := FileName(subject)
	defer s.lock(name)()
	_, pf, err := s.read(subject)
	if err != nil {
		return api.Fact{}, err
	}
	i := indexOf(pf.Facts, factID)
	if i < 0 || (!c.Operator && pf.Facts[i].Visibility.Scope == api.ScopeOperatorPrivate) {
		return api.Fact{}, fault.New(fault.NotFound, "fact_not_found", "No fact with that id is kept about this person.")
	}
	f := pf.Facts[i]
	if !c.Operator && !MayForget(f, requesterUserID) {
		return api.Fact{}, fault.New(fault.Forbidden, "not_subject_or_proposer", "Only the person a fact is about or the member who proposed it may forget it.")
	}
	pf.Facts = append(pf.Facts[:i], pf.Facts[i+1:]...)
	clearDigest(pf, factID)
	return f, s.write(name, pf)
}

// Edit is the operator's change of a fact's body, kind, visibility,
// confidence or expiry; identity, createdAt and provenance never change.
func (s *Store) Edit(subject api.Subject, factID string, p api.FactPatch) (api.Fact, error) {
	if err := ValidSubject(subject); err != nil {
		return api.Fact{}, err
	}
	now := s.now().UTC()
	if p.Body != nil {
		b, err := CleanBody(*p.Body)
		if err != nil {
			return api.Fact{}, err
		}
		p.Body = &b
	}
	if p.Kind != nil {
		if err := validKind(*p.Kind); err != nil {
			return api.Fact{}, err
		}
	}
	if p.Visibility != nil {
		if err := validVisibility(Caller{Operator: true}, *p.Visibility); err != nil {
			return api.Fact{}, err
		}
	}
	if p.Confidence != nil {
		if err := validConfidence(*p.Confidence); err != nil {
			return api.Fact{}, err
		}
	}
	if p.ExpiresAt.Set {
		if err := validExpiry(p.ExpiresAt.Value, now); err != nil {
			return api.Fact{}, err
		}
	}
	if p.Body == nil && p.Kind == nil && p.Visibility == nil && p.Confidence == nil && !p.ExpiresAt.Set {
		return api.Fact{}, invalid("Nothing to change: give body, kind, visibility, confidence or expiresAt.")
	}
	name := FileName(subject)
	defer s.lock(name)()
	_, pf, err := s.read(subject)
	if err != nil {
		return api.Fact{}, err
	}
	i := indexOf(pf.Facts, factID)
	if i < 0 {
		return api.Fact{}, fault.New(fault.NotFound, "fact_not_found", "No fact with that id is kept about this person.")
	}
	f := &pf.Facts[i]
	if p.Body != nil {
		f.Body = *p.Body
	}
	if p.Kind != nil {
		f.Kind = *p.Kind
	}
	if p.Visibility != nil {
		f.Visibility = *p.Visibility
	}
	if p.Confidence != nil {
		f.Confidence = *p.Confidence
	}
	if p.ExpiresAt.Set {
		f.ExpiresAt = p.ExpiresAt.Value
	}
	f.UpdatedAt = now
	out := *f
	return out, s.write(name, pf)
}

// ForgetPerson removes everything kept about a person, the idempotency
// records included, and answers the ids of the facts removed.
func (s *Store) ForgetPerson(subject api.Subject) ([]string, error) {
	if err := ValidSubject(subject); err != nil {
		return nil, err
	}
	name := FileName(subject)
	defer s.lock(name)()
	_, pf, err := s.read(subject)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(pf.Facts))
	for _, f := range pf.Facts {
		ids = append(ids, f.FactID)
	}
	s.cache.drop(name)
	if err := durable.Remove(s.root, path.Join(Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	s.setCount(name, subject, 0)
	if err := s.removeCorruptCopies(name); err != nil {
		return nil, err
	}
	return ids, nil
}

// corruptSuffix follows a person file's name when load moves an unreadable
// copy aside: <name>.corrupt-<unix seconds>.
const corruptSuffix = ".corrupt-"

// removeCorruptCopies deletes every copy of name that load moved aside: they
// may hold what was kept about the person, so forgetting the person removes
// them too. It is called under the person's lock.
func (s *Store) removeCorruptCopies(name string) error {
	d, err := s.root.Open(Dir)
	if err != nil {
		return fmt.Errorf("list the people directory: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list the people directory: %w", err)
	}
	removed := false
	for _, n := range names {
		if !strings.HasPrefix(n, name+corruptSuffix) {
			continue
		}
		if err := s.root.Remove(path.Join(Dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove a corrupt copy of a person file: %w", err)
		}
		removed = true
	}
	if removed {
		return durable.SyncDir(s.root, Dir)
	}
	return nil
}

// List answers one page of people with their fact counts, ordered by file
// name; the cursor is the last name of the previous page.
func (s *Store) List(cursor string, limit int) (api.PeopleResponse, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 1000 {
		return api.PeopleResponse{}, invalid("limit must be between 1 and 1000.")
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.index))
	for n := range s.index {
		if n > cursor {
			names = append(names, n)
		}
	}
	total := len(s.index)
	sort.Strings(names)
	resp := api.PeopleResponse{SchemaVersion: api.SchemaVersion, Total: total, People: []api.PersonSummary{}}
	for i, n := range names {
		if i == limit {
			resp.NextCursor = names[i-1]
			break
		}
		e := s.index[n]
		resp.People = append(resp.People, api.PersonSummary{Subject: e.subject, Facts: e.facts})
	}
	s.mu.Unlock()
	return resp, nil
}

// ValidCursor checks a cursor given by a client.
func ValidCursor(c string) error {
	if c != "" && !IsPersonFile(c) {
		return invalid("cursor is not one this service gave out.")
	}
	return nil
}
