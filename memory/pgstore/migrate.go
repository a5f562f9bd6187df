package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// migrations are the schema's versions, in order. A migration is applied
// once, in the same transaction that records it; a new version is a new
// entry at the end, never an edit of an old one.
var migrations = []string{
	// 1: people and episodes.
	`CREATE TABLE people (
		-- personfiles.FileName(subject): the file store's key, so cursors and
		-- migration agree; "C" collation orders it as Go compares strings.
		name       text COLLATE "C" PRIMARY KEY,
		guild_id   text NOT NULL,
		user_id    text NOT NULL,
		facts      integer NOT NULL,
		-- people.Person's encoding: facts and idempotency records.
		state      jsonb NOT NULL,
		updated_at timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX people_with_facts ON people (name) WHERE facts > 0;
	CREATE TABLE episodes (
		episode_id   text PRIMARY KEY,
		lane         text NOT NULL,
		retained     boolean NOT NULL,
		-- what the request that created the note asked to keep (null: unknown)
		asked_retain boolean,
		record       jsonb NOT NULL
	);
	-- One row: every episode write locks it, so the ring and the retained
	-- ceiling are derived by one writer at a time across processes; its
	-- version tells a reader whether its copy is current.
	CREATE TABLE episode_clock (
		id      integer PRIMARY KEY CHECK (id = 1),
		version bigint NOT NULL
	);
	INSERT INTO episode_clock VALUES (1, 0);`,
	// 2: the claimed Discord interaction ids (HTTP interactions answered
	// once across replicas); claimed_at is the database's clock, so
	// processes with different clocks agree on when a claim expires.
	`CREATE TABLE interaction_claims (
		interaction_id text COLLATE "C" PRIMARY KEY,
		claimed_at     timestamptz NOT NULL DEFAULT now()
	);
	CREATE INDEX interaction_claims_claimed_at ON interaction_claims (claimed_at);`,
	// 3: a person becomes rows (pgstore.People): a change writes the facts
	// and records it changes, a read reads only facts, where one jsonb
	// document was decoded and rewritten whole. ord keeps people.Person's
	// order of facts and of records (eviction's ties and pruning follow
	// it); instants are text as encoding/json writes them (timestamptz
	// keeps microseconds and no offset). Every people row is converted
	// here, in its order, and the table dropped.
	`CREATE TABLE person (
		-- personfiles.FileName(subject), as in people before
		name     text COLLATE "C" PRIMARY KEY,
		guild_id text NOT NULL,
		user_id  text NOT NULL,
		facts    integer NOT NULL,
		seq      bigint NOT NULL
	);
	CREATE INDEX person_with_facts ON person (name) WHERE facts > 0;
	CREATE TABLE person_fact (
		name               text COLLATE "C" NOT NULL,
		fact_id            text COLLATE "C" NOT NULL,
		ord                bigint NOT NULL,
		kind               text NOT NULL,
		body               text NOT NULL,
		scope              text NOT NULL,
		channel_id         text NOT NULL,
		confidence         double precision NOT NULL,
		created_at         text NOT NULL,
		updated_at         text NOT NULL,
		expires_at         text,
		supersedes_fact_id text NOT NULL,
		source_surface     text NOT NULL,
		source_event_id    text NOT NULL,
		correlation_id     text NOT NULL,
		proposer_user_id   text NOT NULL,
		source_channel_id  text NOT NULL,
		source_message_id  text NOT NULL,
		PRIMARY KEY (name, fact_id)
	);
	CREATE TABLE person_proposal (
		name        text COLLATE "C" NOT NULL,
		proposal_id text COLLATE "C" NOT NULL,
		digest      text NOT NULL,
		fact_id     text NOT NULL,
		ord         bigint NOT NULL,
		PRIMARY KEY (name, proposal_id)
	);
	INSERT INTO person (name, guild_id, user_id, facts, seq)
		SELECT name, guild_id, user_id, facts, coalesce((state->>'seq')::bigint, 0) FROM people;
	INSERT INTO person_fact
		SELECT p.name, f.v->>'factId', f.ord, f.v->>'kind', f.v->>'body',
			coalesce(f.v->'visibility'->>'scope', ''), coalesce(f.v->'visibility'->>'channelId', ''),
			(f.v->>'confidence')::double precision, f.v->>'createdAt', f.v->>'updatedAt', f.v->>'expiresAt',
			coalesce(f.v->>'supersedesFactId', ''), coalesce(f.v->'provenance'->>'sourceSurface', ''),
			coalesce(f.v->'provenance'->>'sourceEventId', ''), coalesce(f.v->'provenance'->>'correlationId', ''),
			coalesce(f.v->'provenance'->>'proposerUserId', ''), coalesce(f.v->'provenance'->>'channelId', ''),
			coalesce(f.v->'provenance'->>'sourceMessageId', '')
		FROM people p CROSS JOIN LATERAL jsonb_array_elements(
			CASE WHEN jsonb_typeof(p.state->'facts') = 'array' THEN p.state->'facts' ELSE '[]' END) WITH ORDINALITY f(v, ord);
	INSERT INTO person_proposal
		SELECT p.name, r.v->>'proposalId', coalesce(r.v->>'digest', ''), r.v->>'factId', r.ord
		FROM people p CROSS JOIN LATERAL jsonb_array_elements(
			CASE WHEN jsonb_typeof(p.state->'proposals') = 'array' THEN p.state->'proposals' ELSE '[]' END) WITH ORDINALITY r(v, ord);
	DROP TABLE people;`,
	// 4: a version per person row, new at every committed change, which a
	// service's cache of people is checked against (personCache): one
	// sequence, so no two states of anyone share one, a forgotten person
	// created again included.
	`CREATE SEQUENCE person_version;
	ALTER TABLE person ADD COLUMN version bigint NOT NULL DEFAULT nextval('person_version');`,
}

// migrateLock is the advisory lock key that serialises schema changes of
// processes starting at once ("clankie" in ASCII).
const migrateLock = 0x636c616e6b6965

// migrate brings the schema to the newest version in one transaction:
// idempotent (a current schema is left alone), and serialised against
// other processes starting at the same time.
func (db *DB) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS clankie_schema (
		version    integer PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	var have int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM clankie_schema").Scan(&have); err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("the schema is version %d, newer than this clankie knows (%d); upgrade clankie", have, len(migrations))
	}
	for v := have + 1; v <= len(migrations); v++ {
		db.log.Info("memory database migrating", zap.Int("version", v))
		if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO clankie_schema (version) VALUES ($1)", v); err != nil {
			return err
		}
		db.log.Info("memory database migrated", zap.Int("version", v))
	}
	return tx.Commit(ctx)
}

// SchemaCurrent reports whether the database holds this clankie's whole
// schema (for a database opened Unchanged: a dry run reads a database
// without one as empty).
func (db *DB) SchemaCurrent(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var exists bool
	err := db.pool.QueryRow(ctx, "SELECT to_regclass('clankie_schema') IS NOT NULL").Scan(&exists)
	var have int
	if err == nil && exists {
		err = db.pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM clankie_schema").Scan(&have)
	}
	if err != nil {
		return false, fmt.Errorf("read the schema version in the database %s names: %s", Variable, reason(err))
	}
	return have == len(migrations), nil
}

// DropSchema removes a schema and everything in it (tests' throwaway
// schemas).
func (db *DB) DropSchema(ctx context.Context, schema string) error {
	_, err := db.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// Dump returns every stored row as text keyed by table and key, so a test
// can prove a refused request changed nothing, byte for byte.
func (db *DB) Dump(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, q := range []string{
		"SELECT 'person/' || name, t::text FROM person t",
		"SELECT 'person_fact/' || name || '/' || fact_id, t::text FROM person_fact t",
		"SELECT 'person_proposal/' || name || '/' || proposal_id, t::text FROM person_proposal t",
		"SELECT 'episodes/' || episode_id, coalesce(asked_retain::text, '-') || ' ' || record::text FROM episodes",
		"SELECT 'episode_clock', version::text FROM episode_clock",
	} {
		rows, err := db.pool.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k, v string
			if err := rows.Scan(&k, &v); err != nil {
				rows.Close()
				return nil, err
			}
			out[k] = v
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
