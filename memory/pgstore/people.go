package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
)

// People is the person-fact store in PostgreSQL, a people.Storer: a person
// is a row of person (counts and change counter), a row of person_fact
// per fact and a row of person_proposal per idempotency record, each with
// an ord that keeps people.Person's order. A change is decided by the
// rules of people.Memory under the person row's lock, applied with
// people.Person.Apply, and only the rows it changed are written: the store
// knows no rule.
type People struct {
	db    *DB
	cache *personCache

	mu    sync.Mutex
	stats people.Stats // as of the last Refresh
}

// People returns the person-fact store.
func (db *DB) People() *People {
	return &People{db: db, cache: newPersonCache(db.cacheBytes)}
}

// factColumns are person_fact's columns after name, in factRow's order
// (factRow.args and newFactScanner follow it).
const factColumns = `fact_id, ord, kind, body, scope, channel_id, confidence, created_at, updated_at, expires_at,
	supersedes_fact_id, source_surface, source_event_id, correlation_id, proposer_user_id, source_channel_id, source_message_id`

const (
	insertFact = "INSERT INTO person_fact (name, " + factColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`
	updateFact = `UPDATE person_fact SET ord = $3, kind = $4, body = $5, scope = $6, channel_id = $7, confidence = $8,
		created_at = $9, updated_at = $10, expires_at = $11, supersedes_fact_id = $12, source_surface = $13,
		source_event_id = $14, correlation_id = $15, proposer_user_id = $16, source_channel_id = $17,
		source_message_id = $18 WHERE name = $1 AND fact_id = $2`
	// replaceFact makes a row that a change removes the row of a fact it
	// adds ($19 the id removed): one statement where a DELETE and an
	// INSERT were two. A steady person's proposal (one fact in, the
	// superseded or evicted one out) is most of all changes, and on a
	// small machine PostgreSQL's cost per statement is most of its cost
	// per proposal.
	replaceFact = `UPDATE person_fact SET fact_id = $2, ord = $3, kind = $4, body = $5, scope = $6, channel_id = $7,
		confidence = $8, created_at = $9, updated_at = $10, expires_at = $11, supersedes_fact_id = $12,
		source_surface = $13, source_event_id = $14, correlation_id = $15, proposer_user_id = $16,
		source_channel_id = $17, source_message_id = $18 WHERE name = $1 AND fact_id = $19`
	insertRecord  = "INSERT INTO person_proposal (name, proposal_id, ord, digest, fact_id) VALUES ($1, $2, $3, $4, $5)"
	updateRecord  = "UPDATE person_proposal SET ord = $3, digest = $4, fact_id = $5 WHERE name = $1 AND proposal_id = $2"
	replaceRecord = "UPDATE person_proposal SET proposal_id = $2, ord = $3, digest = $4, fact_id = $5 WHERE name = $1 AND proposal_id = $6"
	deleteFact    = "DELETE FROM person_fact WHERE name = $1 AND fact_id = $2"
	deleteRecord  = "DELETE FROM person_proposal WHERE name = $1 AND proposal_id = $2"
)

// factRow is a fact as person_fact holds it, comparable with ==, so a
// change writes only the facts it changed. Its subject is its person's.
// Instants are kept as the text encoding/json writes for them (RFC 3339
// with up to nanoseconds and the offset the instant was given in), not as
// timestamptz, which keeps microseconds and no offset: a fact read back
// must be the fact written, to the byte.
type factRow struct {
	id, kind, body, scope, channel     string
	confidence                         float64
	created, updated, expires          string
	hasExpiry                          bool
	supersedes, surface, event         string
	correlation, proposer, provChannel string
	message                            string
}

// newFactRow returns f as a row. Its error is encoding/json's for an
// instant it could not encode either (a year outside 0 to 9999).
func newFactRow(f *api.Fact) (factRow, error) {
	r := factRow{
		id: f.FactID, kind: string(f.Kind), body: f.Body, scope: string(f.Visibility.Scope), channel: f.Visibility.ChannelID,
		confidence: f.Confidence, supersedes: f.SupersedesFactID, surface: string(f.Provenance.SourceSurface),
		event: f.Provenance.SourceEventID, correlation: f.Provenance.CorrelationID, proposer: f.Provenance.ProposerUserID,
		provChannel: f.Provenance.ChannelID, message: f.Provenance.SourceMessageID,
	}
	var err error
	if r.created, err = instant(f.CreatedAt); err != nil {
		return factRow{}, err
	}
	if r.updated, err = instant(f.UpdatedAt); err != nil {
		return factRow{}, err
	}
	if f.ExpiresAt != nil {
		r.hasExpiry = true
		if r.expires, err = instant(*f.ExpiresAt); err != nil {
			return factRow{}, err
		}
	}
	return r, nil
}

// instant is t as encoding/json writes it, without the quotes.
func instant(t time.Time) (string, error) {
	b, err := t.MarshalText()
	if err != nil {
		return "", fmt.Errorf("encode a fact's instant: %w", err)
	}
	return string(b), nil
}

// parseInstant reads what instant wrote.
func parseInstant(s string) (time.Time, error) {
	var t time.Time
	if err := t.UnmarshalText([]byte(s)); err != nil {
		return time.Time{}, fmt.Errorf("decode a fact's instant: %w", err)
	}
	return t, nil
}

// fact returns the row as subject's fact.
func (r *factRow) fact(subject api.Subject) (api.Fact, error) {
	f := api.Fact{
		FactID: r.id, Subject: subject, Kind: api.Kind(r.kind), Body: r.body,
		Visibility: api.Visibility{Scope: api.Scope(r.scope), ChannelID: r.channel}, Confidence: r.confidence,
		SupersedesFactID: r.supersedes,
		Provenance: api.Provenance{SourceSurface: api.Surface(r.surface), SourceEventID: r.event, CorrelationID: r.correlation,
			ProposerUserID: r.proposer, ChannelID: r.provChannel, SourceMessageID: r.message},
	}
	var err error
	if f.CreatedAt, err = parseInstant(r.created); err != nil {
		return api.Fact{}, err
	}
	if f.UpdatedAt, err = parseInstant(r.updated); err != nil {
		return api.Fact{}, err
	}
	if r.hasExpiry {
		t, err := parseInstant(r.expires)
		if err != nil {
			return api.Fact{}, err
		}
		f.ExpiresAt = &t
	}
	return f, nil
}

// args are the row's values for insertFact and updateFact.
func (r *factRow) args(name string, ord int64) []any {
	var expires *string
	if r.hasExpiry {
		expires = &r.expires
	}
	return []any{name, r.id, ord, r.kind, r.body, r.scope, r.channel, r.confidence, r.created, r.updated, expires,
		r.supersedes, r.surface, r.event, r.correlation, r.proposer, r.provChannel, r.message}
}

// factScanner reads rows of factColumns (after the columns before it was
// made with) into one set of destinations, made once per query rather than
// once per row: a recall of 128 facts spent a fifth of its time there.
// A row's text columns are scanned as the driver's own bytes and copied
// into one string, which the row's strings share: one allocation per fact
// where there were fourteen, and a cold read of 128 facts spent more time
// collecting their garbage than reading them.
type factScanner struct {
	r       factRow
	ord     int64
	expires *string
	text    [14]pgtype.DriverBytes
	fields  [14]*string // where each of text goes in r
	dest    []any
}

func newFactScanner(before ...any) *factScanner {
	s := &factScanner{}
	r, t := &s.r, &s.text
	s.fields = [14]*string{&r.id, &r.kind, &r.body, &r.scope, &r.channel, &r.created, &r.updated,
		&r.supersedes, &r.surface, &r.event, &r.correlation, &r.proposer, &r.provChannel, &r.message}
	s.dest = append(before, &t[0], &s.ord, &t[1], &t[2], &t[3], &t[4], &r.confidence, &t[5], &t[6], &s.expires,
		&t[7], &t[8], &t[9], &t[10], &t[11], &t[12], &t[13])
	return s
}

// scan reads the current row.
func (s *factScanner) scan(rows pgx.Rows) (factRow, int64, error) {
	s.expires = nil
	if err := rows.Scan(s.dest...); err != nil {
		return factRow{}, 0, err
	}
	shareText(s.text[:], s.fields[:])
	r := s.r
	if s.expires != nil {
		r.hasExpiry, r.expires = true, *s.expires
	}
	return r, s.ord, nil
}

// shareText sets each of into to its text's bytes, all copied into one
// string they share: one allocation for a row's strings, not one each.
// The driver's bytes are valid only until the next row.
func shareText(text []pgtype.DriverBytes, into []*string) {
	n := 0
	for _, b := range text {
		n += len(b)
	}
	var all strings.Builder
	all.Grow(n)
	for _, b := range text {
		all.Write(b)
	}
	s, at := all.String(), 0
	for i, b := range text {
		*into[i] = s[at : at+len(b)]
		at += len(b)
	}
}

// readFacts reads a person's facts in their order (selectFacts' rows).
func readFacts(rows pgx.Rows, subject api.Subject, fn func(r factRow, ord int64, f api.Fact)) error {
	defer rows.Close()
	sc := newFactScanner()
	for rows.Next() {
		r, ord, err := sc.scan(rows)
		if err != nil {
			return err
		}
		f, err := r.fact(subject)
		if err != nil {
			return err
		}
		fn(r, ord, f)
	}
	return rows.Err()
}

// recordRow is an idempotency record as person_proposal holds it.
type recordRow struct{ digest, factID string }

// stored is a person as the database holds them at one version: the
// state, and each fact's and record's row and ord, which a change is
// compared with. factRows[i] is person.Facts[i]'s, recordRows[i]
// person.Proposals[i]'s: a change leaves most of both where they were, so
// save finds each one's old row by walking them side by side, without a
// map to rebuild at every change. Once made it is not changed (the cache
// shares it).
type stored struct {
	name       string
	version    int64 // person.version; -1 for a person with no row
	person     *people.Person
	factRows   []ordered[factRow]
	recordRows []ordered[recordRow]
	// nextFact and nextRecord are above every ord in use.
	nextFact, nextRecord int64
	// factsOnly marks a person read for a recall: their facts without
	// their records (recordRows and person.Proposals are empty, nextRecord
	// is not known). A recall needs no more, and a change reads the
	// records with its lock in any case (tryLockPerson treats such a
	// person as one the cache does not hold).
	factsOnly bool
}

type ordered[T any] struct {
	ord int64
	row T
}

func newStored(subject api.Subject, name string, version int64) *stored {
	return &stored{name: name, version: version, person: people.NewPerson(subject)}
}

const (
	selectFacts     = "SELECT " + factColumns + " FROM person_fact WHERE name = $1 ORDER BY ord"
	selectProposals = "SELECT proposal_id, ord, digest, fact_id FROM person_proposal WHERE name = $1 ORDER BY ord"
)

// queueRows queues the reads of a person's facts and records.
func queueRows(b *pgx.Batch, name string) {
	b.Queue(selectFacts, name)
	b.Queue(selectProposals, name)
}

// readRows reads what queueRows queued into st; facts is the person's
// count of facts as their row says, to size what holds them.
func (st *stored) readRows(br pgx.BatchResults, facts int) error {
	if err := st.readFactRows(br, facts); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var text [3]pgtype.DriverBytes
	var ord int64
	var rec people.ProposalRecord
	into := [3]*string{&rec.ProposalID, &rec.Digest, &rec.FactID}
	for rows.Next() {
		if err := rows.Scan(&text[0], &ord, &text[1], &text[2]); err != nil {
			return err
		}
		shareText(text[:], into[:])
		st.person.Proposals = append(st.person.Proposals, rec)
		st.recordRows = append(st.recordRows, ordered[recordRow]{ord, recordRow{rec.Digest, rec.FactID}})
		st.nextRecord = max(st.nextRecord, ord+1)
	}
	return rows.Err()
}

// readFactRows reads the facts selectFacts queued into st, with room made
// for facts of them.
func (st *stored) readFactRows(br pgx.BatchResults, facts int) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	facts = min(max(facts, 0), api.MaxFactsPerPerson)
	st.person.Facts = make([]api.Fact, 0, facts)
	st.factRows = make([]ordered[factRow], 0, facts)
	return readFacts(rows, st.person.Subject, func(r factRow, ord int64, f api.Fact) {
		st.person.Facts = append(st.person.Facts, f)
		st.factRows = append(st.factRows, ordered[factRow]{ord, r})
		st.nextFact = max(st.nextFact, ord+1)
	})
}

// locked is a person under their row's lock: their state, the version a
// change commits at and the database's clock.
type locked struct {
	st   *stored
	next int64
	now  time.Time
}

// lockPerson creates the person's row when they are new (a concurrent
// creator waits on the same insert; a person the cache holds has a row
// already, or had one: then the lock finds none and this tries again with
// the insert), locks it until the transaction ends, and reads under the
// lock the database's clock and the version a change will commit at, in
// the round trip that begins the transaction (pipeTx). The person's facts
// and records come in the same round trip for a person the cache does not
// hold; for one it holds at the row's version they are not read at all;
// for one it holds at another version (another service's change, a
// forget) they are read in a second round trip, still under the lock.
//
// Every time a person's facts are ordered or expired by comes from the
// database's clock, never the host's: two services on one database with
// skewed clocks then agree on which fact is older and which has expired.
// clock_timestamp(), not now(): now() is when the transaction began, and
// read under a person's lock the clock must follow commit order.
//
// A transaction that writes nothing rolls the new row back with it. A row
// that a concurrent forget deleted while this waited for its lock is
// created again, as often as forgets win that race (each a committed
// forget, so it ends; the operation's deadline bounds it): the person is
// then new.
func (s *People) lockPerson(ctx context.Context, tx *pipeTx, subject api.Subject) (locked, error) {
	name := personfiles.FileName(subject)
	for {
		l, err := s.tryLockPerson(ctx, tx, subject, name)
		if errors.Is(err, pgx.ErrNoRows) && ctx.Err() == nil {
			s.cache.drop(name) // gone: the next try creates the row
			continue
		}
		return l, err
	}
}

// tryLockPerson is lockPerson once; pgx.ErrNoRows says the row went while
// this waited for its lock.
func (s *People) tryLockPerson(ctx context.Context, tx *pipeTx, subject api.Subject, name string) (locked, error) {
	cached := s.cache.peek(name)
	if cached != nil && cached.factsOnly {
		cached = nil // read for a recall: the records come with the lock
	}
	b := tx.batch()
	if cached == nil {
		// A person the cache holds has a row (or had: then the lock
		// below finds none, and the next try comes here).
		b.Queue("INSERT INTO person (name, guild_id, user_id, facts, seq) VALUES ($1, $2, $3, 0, 0) ON CONFLICT (name) DO NOTHING",
			name, subject.GuildID, subject.UserID)
	}
	b.Queue("SELECT seq, version, facts, nextval('person_version'), clock_timestamp() FROM person WHERE name = $1 FOR UPDATE", name)
	if cached == nil {
		queueRows(b, name)
	}
	br, err := tx.send(ctx, b)
	if err != nil {
		return locked{}, err
	}
	defer br.Close()
	if cached == nil {
		if _, err := br.Exec(); err != nil {
			return locked{}, err
		}
	}
	var seq, version int64
	var facts int
	var l locked
	if err := br.QueryRow().Scan(&seq, &version, &facts, &l.next, &l.now); err != nil {
		return locked{}, err
	}
	l.now = l.now.UTC()
	if s.cache.hit(cached, version) {
		l.st = cached
		return l, nil
	}
	l.st = newStored(subject, name, version)
	l.st.person.Seq = uint64(seq)
	if cached == nil { // the rows came with the lock
		err = l.st.readRows(br, facts)
	} else if err = br.Close(); err == nil {
		// Another service changed the person, or forgot them: their rows,
		// in a second round trip, under the lock.
		b = tx.batch()
		queueRows(b, name)
		var rows pgx.BatchResults
		if rows, err = tx.send(ctx, b); err == nil {
			err = l.st.readRows(rows, facts)
			if cerr := rows.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		return locked{}, err
	}
	return l, nil
}

// save queues the writes of what after differs from the state loaded, and
// returns after as stored at version: the facts and records it no longer
// holds are deleted, new ones inserted, changed or moved ones updated (by
// id, with an ord that keeps after's order), and the person's count,
// change counter and version set. While there are both, the row of a fact
// (or record) it no longer holds becomes the row of a new one
// (replaceFact, replaceRecord), in one statement instead of two. A person
// with no facts left keeps their row (their records still answer
// retries) but is not counted.
//
// Each of after's facts and records is looked for in the state loaded from
// just past the last one found (Apply removes, replaces in place and
// appends, so that is where it is), then from the start. A fact found
// there with the same value at an ord still in order is left as it is,
// its row not made again.
func (st *stored) save(b *pgx.Batch, after *people.Person, version int64) (*stored, error) {
	next := &stored{name: st.name, version: version, person: after, nextFact: st.nextFact, nextRecord: st.nextRecord,
		factRows: make([]ordered[factRow], len(after.Facts)), recordRows: make([]ordered[recordRow], len(after.Proposals))}
	before := st.person.Facts
	kept := make([]bool, len(before)+len(st.person.Proposals))
	var added []int // the indexes of after's facts, then records, new to the person
	last, j := int64(-1), 0
	for i := range after.Facts {
		f := &after.Facts[i]
		k := indexFrom(len(before), j, func(k int) bool { return before[k].FactID == f.FactID })
		var old ordered[factRow]
		if k >= 0 {
			old, kept[k], j = st.factRows[k], true, k+1
			if before[k] == *f && old.ord > last {
				next.factRows[i], last = old, old.ord
				continue
			}
		}
		r, err := newFactRow(f)
		if err != nil {
			return nil, err
		}
		ord := old.ord
		if k < 0 || ord <= last {
			ord, next.nextFact = next.nextFact, next.nextFact+1
		}
		switch {
		case k < 0:
			added = append(added, i)
		case ord != old.ord || r != old.row:
			b.Queue(updateFact, r.args(st.name, ord)...)
		}
		next.factRows[i], last = ordered[factRow]{ord, r}, ord
	}
	pairRows(kept[:len(before)], added, func(k, i int) {
		r := &next.factRows[i]
		b.Queue(replaceFact, append(r.row.args(st.name, r.ord), before[k].FactID)...)
	}, func(k int) {
		b.Queue(deleteFact, st.name, before[k].FactID)
	}, func(i int) {
		r := &next.factRows[i]
		b.Queue(insertFact, r.row.args(st.name, r.ord)...)
	})

	records, keptRecord := st.person.Proposals, kept[len(before):]
	last, j, added = -1, 0, added[:0]
	for i := range after.Proposals {
		rec := &after.Proposals[i]
		r := recordRow{rec.Digest, rec.FactID}
		k := indexFrom(len(records), j, func(k int) bool { return records[k].ProposalID == rec.ProposalID })
		var old ordered[recordRow]
		if k >= 0 {
			old, keptRecord[k], j = st.recordRows[k], true, k+1
		}
		ord := old.ord
		if k < 0 || ord <= last {
			ord, next.nextRecord = next.nextRecord, next.nextRecord+1
		}
		switch {
		case k < 0:
			added = append(added, i)
		case ord != old.ord || r != old.row:
			b.Queue(updateRecord, st.name, rec.ProposalID, ord, r.digest, r.factID)
		}
		next.recordRows[i], last = ordered[recordRow]{ord, r}, ord
	}
	pairRows(keptRecord, added, func(k, i int) {
		r := &next.recordRows[i]
		b.Queue(replaceRecord, st.name, after.Proposals[i].ProposalID, r.ord, r.row.digest, r.row.factID, records[k].ProposalID)
	}, func(k int) {
		b.Queue(deleteRecord, st.name, records[k].ProposalID)
	}, func(i int) {
		r := &next.recordRows[i]
		b.Queue(insertRecord, st.name, after.Proposals[i].ProposalID, r.ord, r.row.digest, r.row.factID)
	})
	b.Queue("UPDATE person SET facts = $2, seq = $3, version = $4 WHERE name = $1", st.name, len(after.Facts), int64(after.Seq), version)
	return next, nil
}

// pairRows writes the rows a change no longer holds (the k not kept) and
// the ones it adds (added, indexes of the new state's) in pairs while
// there are both, the old row becoming the new (replace), then deletes or
// inserts what is left of either.
func pairRows(kept []bool, added []int, replace func(k, i int), remove func(k int), insert func(i int)) {
	for k, keep := range kept {
		switch {
		case keep:
		case len(added) == 0:
			remove(k)
		default:
			replace(k, added[0])
			added = added[1:]
		}
	}
	for _, i := range added {
		insert(i)
	}
}

// indexFrom returns the first k of [from, n), else of [0, from), for
// which is(k), or -1.
func indexFrom(n, from int, is func(k int) bool) int {
	for k := from; k < n; k++ {
		if is(k) {
			return k
		}
	}
	for k := range min(from, n) {
		if is(k) {
			return k
		}
	}
	return -1
}

// erase queues the deletion of everything kept about the person, records
// included.
func (st *stored) erase(b *pgx.Batch) {
	b.Queue("DELETE FROM person_fact WHERE name = $1", st.name)
	b.Queue("DELETE FROM person_proposal WHERE name = $1", st.name)
	b.Queue("DELETE FROM person WHERE name = $1", st.name)
}

// Update runs decide on the person under their row's lock, with the
// database's clock read under the lock (so creation order is commit order
// across processes, and eviction keeps the newest), applies the change to
// a copy with people.Person.Apply and writes the difference; forgetting a
// person (an Erase) deletes their rows. Both ways of committing are one
// transaction that leaves no row of what a change removes, in two round
// trips (writePiped): the lock and read, then the writes and the commit.
func (s *People) Update(ctx context.Context, subject api.Subject, _ people.Commit, decide func(*people.Person, time.Time) (*people.Change, error)) error {
	var next *stored // the person as committed, for the cache
	err := s.db.writePiped(ctx, "person.update", func(ctx context.Context, tx *pipeTx) (*pgx.Batch, error) {
		l, err := s.lockPerson(ctx, tx, subject)
		if err != nil {
			return nil, err
		}
		ch, err := decide(l.st.person, l.now)
		if err != nil {
			return nil, err
		}
		if ch == nil {
			if l.st.person.Seq > 0 {
				next = l.st // a person's row this rolls back is no one's state
			}
			return nil, errNoChange
		}
		b := &pgx.Batch{}
		if ch.Erase {
			l.st.erase(b)
			return b, nil
		}
		after := l.st.person.Clone()
		after.Apply(ch)
		next, err = l.st.save(b, after, l.next)
		return b, err
	})
	if err != nil || next == nil {
		s.cache.drop(personfiles.FileName(subject))
		return err
	}
	if next.version >= 0 {
		s.cache.put(next)
	}
	return nil
}

// View runs read on the person's facts as last committed, without a lock,
// with the database's clock as of the read. It first asks for the
// person's version, their count of facts and the clock in one statement;
// when the cache holds that version (personCache), that is the whole
// read. Otherwise a second round trip reads the facts (not the records: a
// recall needs none, and a change reads them with its lock) and the clock
// again after them, so no fact read is newer than it.
func (s *People) View(ctx context.Context, subject api.Subject, read func([]api.Fact, time.Time)) error {
	return s.db.read(ctx, "person.read", func(ctx context.Context) error {
		name := personfiles.FileName(subject)
		cached := s.cache.peek(name)
		var version *int64 // nil: no row, nothing is kept about them
		var count *int
		var now time.Time
		err := s.db.pool.QueryRow(ctx, "SELECT p.version, p.facts, clock_timestamp() FROM (VALUES (1)) one LEFT JOIN person p ON p.name = $1", name).
			Scan(&version, &count, &now)
		if err != nil {
			return err
		}
		var st *stored
		switch {
		case version == nil:
			s.cache.miss() // and nothing to read
			st = newStored(subject, name, -1)
		case s.cache.hit(cached, *version):
			st = cached
		default:
			if st, now, err = s.readPerson(ctx, subject, name, *version, *count); err != nil {
				return err
			}
		}
		facts := st.person.Facts
		if facts == nil {
			facts = []api.Fact{}
		}
		read(facts, now.UTC())
		return nil
	})
}

// readPerson reads a person's facts alone (of which their row counted
// facts), without a lock, and the database's clock after them, and keeps
// the person in the cache labelled version, which was read before: a
// commit between the two leaves a label older than the state, which the
// row's newer version never matches again.
func (s *People) readPerson(ctx context.Context, subject api.Subject, name string, version int64, facts int) (*stored, time.Time, error) {
	b := &pgx.Batch{}
	b.Queue(selectFacts, name)
	b.Queue("SELECT clock_timestamp()")
	br := s.db.pool.SendBatch(ctx, b)
	defer br.Close()
	st := newStored(subject, name, version)
	st.factsOnly = true
	if err := st.readFactRows(br, facts); err != nil {
		return nil, time.Time{}, err
	}
	var now time.Time
	if err := br.QueryRow().Scan(&now); err != nil {
		return nil, time.Time{}, err
	}
	s.cache.put(st)
	return st, now, nil
}

// List returns one page of people with facts, ordered by their file-store
// name; the cursor is the last name of the previous page.
func (s *People) List(ctx context.Context, cursor string, limit int) (api.PeopleResponse, error) {
	if err := personfiles.CheckCursor(cursor); err != nil {
		return api.PeopleResponse{}, err
	}
	resp := api.PeopleResponse{SchemaVersion: api.SchemaVersion, People: []api.PersonSummary{}}
	var names []string
	err := s.db.read(ctx, "person.list", func(ctx context.Context) error {
		if err := s.db.pool.QueryRow(ctx, "SELECT count(*) FROM person WHERE facts > 0").Scan(&resp.Total); err != nil {
			return err
		}
		rows, err := s.db.pool.Query(ctx, `SELECT name, guild_id, user_id, facts FROM person
			WHERE facts > 0 AND name > $1 ORDER BY name LIMIT $2`, cursor, limit+1)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var ps api.PersonSummary
			if err := rows.Scan(&name, &ps.Subject.GuildID, &ps.Subject.UserID, &ps.Facts); err != nil {
				return err
			}
			names = append(names, name)
			resp.People = append(resp.People, ps)
		}
		return rows.Err()
	})
	if err != nil {
		return api.PeopleResponse{}, err
	}
	if len(resp.People) > limit {
		resp.People = resp.People[:limit]
		resp.NextCursor = names[limit-1]
	}
	return resp, nil
}

// Each calls fn with every person who has facts (their facts and records),
// in name order.
func (s *People) Each(ctx context.Context, fn func(*people.Person) error) error {
	all, err := s.readAll(ctx)
	if err != nil {
		return s.db.fail("migrate.read", err)
	}
	for _, p := range all {
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// readAll reads every person who has facts, in name order, in one
// transaction, so the people, facts and records agree.
func (s *People) readAll(ctx context.Context) ([]*people.Person, error) {
	tx, err := s.db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	rows, err := tx.Query(ctx, "SELECT name, guild_id, user_id, seq FROM person WHERE facts > 0 ORDER BY name")
	if err != nil {
		return nil, err
	}
	var all []*people.Person
	byName := map[string]*people.Person{}
	for rows.Next() {
		var name string
		var subject api.Subject
		var seq int64
		if err := rows.Scan(&name, &subject.GuildID, &subject.UserID, &seq); err != nil {
			return nil, err
		}
		p := people.NewPerson(subject)
		p.Seq = uint64(seq)
		all = append(all, p)
		byName[name] = p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if rows, err = tx.Query(ctx, "SELECT name, "+factColumns+" FROM person_fact ORDER BY name, ord"); err != nil {
		return nil, err
	}
	defer rows.Close()
	var name string
	sc := newFactScanner(&name)
	for rows.Next() {
		r, _, err := sc.scan(rows)
		if err != nil {
			return nil, err
		}
		p := byName[name]
		if p == nil {
			continue // a person without facts' row cannot have any; read as it is
		}
		f, err := r.fact(p.Subject)
		if err != nil {
			return nil, err
		}
		p.Facts = append(p.Facts, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if rows, err = tx.Query(ctx, "SELECT name, proposal_id, digest, fact_id FROM person_proposal ORDER BY name, ord"); err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var rec people.ProposalRecord
		if err := rows.Scan(&name, &rec.ProposalID, &rec.Digest, &rec.FactID); err != nil {
			return nil, err
		}
		if p := byName[name]; p != nil {
			p.Proposals = append(p.Proposals, rec)
		}
	}
	return all, rows.Err()
}

// Refresh reads the catalog's counts (people with facts, facts), which
// Stats then returns.
func (s *People) Refresh(ctx context.Context) error {
	var st people.Stats
	err := s.db.read(ctx, "catalog", func(ctx context.Context) error {
		return s.db.pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(facts), 0) FROM person WHERE facts > 0").Scan(&st.People, &st.Facts)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.stats = st
	s.mu.Unlock()
	return nil
}

// Stats returns the counts as of the last Refresh.
func (s *People) Stats() people.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Store = api.StorePostgres
	return st
}

// Metrics returns the counts as of the last Refresh and the cache's
// counters; the file store's journal counters do not apply and stay zero.
func (s *People) Metrics() people.Metrics {
	st := s.Stats()
	m := people.Metrics{People: st.People, Facts: st.Facts}
	s.cache.metrics(&m)
	return m
}

// Ready reports whether the database answers, for /readyz.
func (s *People) Ready(ctx context.Context) error {
	if s.db.Ping(ctx) != nil {
		return fault.New(fault.Unavailable, "not_ready", "The memory database does not answer.")
	}
	return nil
}

// People is a people.Storer.
var _ people.Storer = (*People)(nil)
