package people

import (
	"context"
	"slices"
	"time"

	"github.com/clankie/clankie/api"
)

// Storer is what the person memory needs of a store: the person's state
// under a lock, made durable as a Change the rules decide, and reads. The
// file engine (Store) and PostgreSQL (pgstore.People) implement it; neither
// knows a rule. Every method's error is the store's own (a fault the
// caller shows as it is, or an I/O error); none holds content.
type Storer interface {
	// Update runs decide on subject's person (empty when nothing is kept
	// about them) under that person's exclusive lock, with the store's
	// clock read under it, and commits the Change decide returns by way:
	// nil commits nothing, an error is returned as it is. decide must not
	// change p or keep it.
	Update(ctx context.Context, subject api.Subject, way Commit, decide func(p *Person, now time.Time) (*Change, error)) error
	// View runs read on subject's facts as last committed, with the
	// store's clock as of the read. read must not change or keep facts.
	View(ctx context.Context, subject api.Subject, read func(facts []api.Fact, now time.Time)) error
	// List returns one page of people with facts in the store's order of
	// its names for them; the cursor is the last name of the previous page
	// (ErrUnknownCursor for one it did not give out; limit is checked).
	List(ctx context.Context, cursor string, limit int) (api.PeopleResponse, error)
	// Each calls fn with a copy of every person who has facts, in name
	// order: what a migration to another store copies.
	Each(ctx context.Context, fn func(*Person) error) error

	// Refresh brings a store whose state is shared with other processes
	// (PostgreSQL) up to date before Stats, and fails when it cannot; the
	// file store, the only writer of its files, is always current.
	Refresh(ctx context.Context) error
	// Stats are the catalog's figures; Metrics the store's running totals.
	Stats() Stats
	Metrics() Metrics
	// Ready reports whether the store can serve, for /readyz: the database
	// answers, or the memory root takes a new file. Its error is a
	// fault.Unavailable whose sentence says which.
	Ready(ctx context.Context) error
}

// Stats are the catalog's figures, from memory.
type Stats struct {
	People, Facts int
	// Store names the store (api.StoreFile or api.StorePostgres), so the
	// catalog says where memory lives without probing the store's type.
	Store string
}

// Metrics are the store's running totals since Open, for a metrics
// exporter: plain numbers, never content.
type Metrics struct {
	People, Facts int
	// JournalSyncs counts the journal's fdatasyncs and JournalChanges the
	// changes they made durable (their ratio is the group-commit factor);
	// JournalSyncTime is the time spent in those fdatasyncs.
	JournalSyncs, JournalChanges int64
	JournalSyncTime              time.Duration
	// CacheHits and CacheMisses count person loads served from memory and
	// from disk.
	CacheHits, CacheMisses int64
	// Compactions counts person logs rewritten because they passed 5/4 of
	// their live size; Checkpoints counts catalog checkpoints.
	Compactions, Checkpoints int64
	// CacheBytes is what the decoded-person cache holds, as counted
	// against its bound; CacheEvictions counts entries dropped to stay
	// within it.
	CacheBytes, CacheEvictions int64
}

// Commit is how a store makes a change durable.
type Commit int

const (
	// Append adds the change to what is kept: what it replaces may stay
	// on disk until the store compacts (a proposal, which removes only
	// what the member's own proposal supersedes or evicts).
	Append Commit = iota
	// Purge leaves nothing on disk of what the change removes or replaces
	// (a forget, an edit, a migration's put, forgetting a person).
	Purge
)

func (c Commit) String() string {
	if c == Purge {
		return "purge"
	}
	return "append"
}

// Memory is the person memory: every rule of the spec about person facts
// (validation, visibility, supersede, eviction, the subject's rights, the
// briefing), each operation orchestrated once over a Storer. It is safe
// for concurrent use as its Storer is.
type Memory struct {
	store Storer
}

// New returns the person memory over store.
func New(store Storer) *Memory { return &Memory{store: store} }

// Propose applies a proposal on arrival.
func (m *Memory) Propose(ctx context.Context, who api.Principal, req api.ProposalRequest) (api.ProposalResponse, ProposeInfo, error) {
	digest, err := PrepareProposal(who, &req)
	if err != nil {
		return api.ProposalResponse{}, ProposeInfo{}, err
	}
	var resp api.ProposalResponse
	var info ProposeInfo
	err = m.store.Update(ctx, req.Fact.Subject, Append, func(p *Person, now time.Time) (ch *Change, err error) {
		resp, info, ch, err = proposeOn(p, who, req, digest, now)
		return ch, err
	})
	if err != nil {
		return api.ProposalResponse{}, ProposeInfo{}, err
	}
	return resp, info, nil
}

// Recall returns the facts visible in the read's room, newest first.
func (m *Memory) Recall(ctx context.Context, subject api.Subject, q RecallQuery) (api.RecallResponse, error) {
	if err := PrepareRecall(subject, &q); err != nil {
		return api.RecallResponse{}, err
	}
	var resp api.RecallResponse
	err := m.store.View(ctx, subject, func(facts []api.Fact, now time.Time) {
		resp = RecallView(subject, facts, q, now)
	})
	return resp, err
}

// Mine is the subject's own view: every fact about them in the guild that is
// not operator_private, whatever its room, expired ones marked, so a person
// never needs an operator to see what is kept about them.
func (m *Memory) Mine(ctx context.Context, subject api.Subject, requesterUserID string) (api.RecallResponse, error) {
	if err := PrepareMine(subject, requesterUserID); err != nil {
		return api.RecallResponse{}, err
	}
	facts, now, err := m.facts(ctx, subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	return MineView(subject, facts, now), nil
}

// Export is the operator's view: every fact, operator_private and expired
// included, expired ones marked, with the capacity of both classes
// together (128 Discord-visible and 128 operator-only).
func (m *Memory) Export(ctx context.Context, subject api.Subject) (api.RecallResponse, error) {
	if err := ValidSubject(subject); err != nil {
		return api.RecallResponse{}, err
	}
	facts, now, err := m.facts(ctx, subject)
	if err != nil {
		return api.RecallResponse{}, err
	}
	return ExportView(subject, facts, now), nil
}

// facts returns a copy of a person's facts, which the caller may reorder,
// and the store's clock as of the read.
func (m *Memory) facts(ctx context.Context, subject api.Subject) ([]api.Fact, time.Time, error) {
	var out []api.Fact
	var at time.Time
	err := m.store.View(ctx, subject, func(facts []api.Fact, now time.Time) {
		out, at = slices.Clone(facts), now
	})
	if out == nil {
		out = []api.Fact{} // answers say "facts":[], never null
	}
	return out, at, err
}

// Forget removes one fact. A Discord caller must name the requester, who
// must be the fact's subject or proposer; the operator may remove any.
func (m *Memory) Forget(ctx context.Context, who api.Principal, subject api.Subject, factID, requesterUserID string) (api.Fact, error) {
	if err := PrepareForget(who, subject, factID, requesterUserID); err != nil {
		return api.Fact{}, err
	}
	var f api.Fact
	err := m.store.Update(ctx, subject, Purge, func(p *Person, _ time.Time) (ch *Change, err error) {
		f, ch, err = forgetOn(p, who, factID, requesterUserID)
		return ch, err
	})
	if err != nil {
		return api.Fact{}, err
	}
	return f, nil
}

// Edit is the operator's change of a fact's body, kind, visibility,
// confidence or expiry; identity, createdAt and provenance never change.
func (m *Memory) Edit(ctx context.Context, subject api.Subject, factID string, patch api.FactPatch) (api.Fact, error) {
	if err := PrepareEdit(subject, factID, &patch); err != nil {
		return api.Fact{}, err
	}
	var f api.Fact
	err := m.store.Update(ctx, subject, Purge, func(p *Person, now time.Time) (ch *Change, err error) {
		f, ch, err = editOn(p, factID, patch, now)
		return ch, err
	})
	if err != nil {
		return api.Fact{}, err
	}
	return f, nil
}

// ForgetPerson removes everything kept about a person, the idempotency
// records included, and returns the ids of the facts removed.
func (m *Memory) ForgetPerson(ctx context.Context, subject api.Subject) ([]string, error) {
	if err := ValidSubject(subject); err != nil {
		return nil, err
	}
	var ids []string
	err := m.store.Update(ctx, subject, Purge, func(p *Person, _ time.Time) (*Change, error) {
		ids = make([]string, 0, len(p.Facts))
		for _, f := range p.Facts {
			ids = append(ids, f.FactID)
		}
		return &Change{Seq: p.Seq + 1, Erase: true}, nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// List returns one page of people with their fact counts, ordered by file
// name; the cursor is the last name of the previous page.
func (m *Memory) List(ctx context.Context, cursor string, limit int) (api.PeopleResponse, error) {
	if err := PrepareList(&limit); err != nil {
		return api.PeopleResponse{}, err
	}
	return m.store.List(ctx, cursor, limit)
}

// Briefing composes the voice briefing (composeBriefing): each consented
// speaker's facts visible to the voice lane in the briefing's room, by the
// store's clock as of reading that speaker.
func (m *Memory) Briefing(ctx context.Context, req api.BriefingRequest, notes []api.Episode) (string, api.BriefingCounts, error) {
	if err := ValidateBriefing(req); err != nil {
		return "", api.BriefingCounts{}, err
	}
	return composeBriefing(req, notes, func(subject api.Subject) ([]api.Fact, error) {
		var shown []api.Fact
		err := m.store.View(ctx, subject, func(facts []api.Fact, now time.Time) {
			for i := range facts {
				if Visible(&facts[i], briefingReader, req.ChannelID, now) {
					shown = append(shown, facts[i])
				}
			}
		})
		return shown, err
	})
}

// Put makes a person's whole state p's (a migration from another store),
// durably, and reports whether anything changed; dryRun only reports.
func (m *Memory) Put(ctx context.Context, p *Person, dryRun bool) (bool, error) {
	if err := ValidSubject(p.Subject); err != nil {
		return false, err
	}
	changed := false
	err := m.store.Update(ctx, p.Subject, Purge, func(have *Person, _ time.Time) (*Change, error) {
		if changed = !SameState(have, p); !changed || dryRun {
			return nil, nil
		}
		return resetTo(p, max(have.Seq, p.Seq)+1), nil
	})
	if err != nil {
		return false, err
	}
	return changed, nil
}

// resetTo is the change that makes a person's state p's, at seq.
func resetTo(p *Person, seq uint64) *Change {
	subject := p.Subject
	reset := []Change{{SchemaVersion: LogVersion, Subject: &subject}}
	for i := range p.Facts {
		reset = append(reset, Change{Fact: &p.Facts[i]})
	}
	for i := range p.Proposals {
		reset = append(reset, Change{Proposal: &p.Proposals[i]})
	}
	if len(reset) == 1 {
		reset = append(reset, Change{}) // a reset needs a line after its header
	}
	return &Change{Seq: seq, Reset: reset}
}

// Stats are the store's catalog figures (Storer.Stats).
func (m *Memory) Stats() Stats { return m.store.Stats() }

// Metrics are the store's running totals (Storer.Metrics).
func (m *Memory) Metrics() Metrics { return m.store.Metrics() }

// Refresh brings the store's figures up to date (Storer.Refresh).
func (m *Memory) Refresh(ctx context.Context) error { return m.store.Refresh(ctx) }

// Ready reports whether the store can serve (Storer.Ready).
func (m *Memory) Ready(ctx context.Context) error { return m.store.Ready(ctx) }
