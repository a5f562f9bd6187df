// Package pgstore keeps the memory service's two stores in PostgreSQL, for a
// bot owner who runs the service on more than one machine. It holds no rule
// of its own: every change loads the state it touches inside a transaction
// that locks it (a person's row, or the episode clock row), applies the very
// functions the file stores apply (memory/people, memory/episodes) and
// writes the result in the same transaction. Several service processes may
// share one database; the locks serialise them, so no update is lost.
//
// A connection string may hold a password: it never reaches an error or a
// log line. Errors name the variable (CLANKIE_MEMORY_STORE) instead.
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/personfiles"
)

// Variable is the setting that names the database, the only name errors use
// for it.
const Variable = "CLANKIE_MEMORY_STORE"

// opTimeout bounds one store operation: a database that does not answer is
// a 503 within seconds, not a hung request.
const opTimeout = 10 * time.Second

// migrateTimeout bounds bringing the schema up to date at Open, which may
// convert every row (migration 3 converted about 70,000 facts, with their
// records, a second on a small machine): a large database must not fail to
// start because its conversion outlasts one operation's bound. A
// conversion cut short is rolled back whole.
const migrateTimeout = 15 * time.Minute

// IsURL reports whether a CLANKIE_MEMORY_STORE value names PostgreSQL.
func IsURL(v string) bool {
	return strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://")
}

// DB is an open, migrated database: the pool both stores share.
type DB struct {
	pool       *pgxpool.Pool
	log        *zap.Logger
	now        func() time.Time
	cacheBytes int
}

// Options adjust Open, for tests and tools.
type Options struct {
	// Schema, when set, is created if missing and used as the search path,
	// so tests can share one server without sharing state.
	Schema string
	// MaxConns bounds the pool (default: pgxpool's, at least 4).
	MaxConns int32
	// CacheBytes bounds the people each People keeps decoded
	// (CLANKIE_MEMORY_CACHE_MB; 0 is personfiles.DefaultCacheBytes).
	CacheBytes int
	// Unchanged opens without creating or upgrading anything (no schema,
	// no table): a dry run must write nothing, and SchemaCurrent then says
	// whether the tables are there to be read.
	Unchanged bool
}

// Open connects to the database dsn names, proves it answers, and creates
// or upgrades the schema (see migrate). Its errors are sentences that name
// CLANKIE_MEMORY_STORE, never the connection string.
func Open(ctx context.Context, dsn string, log *zap.Logger, now func() time.Time, o Options) (*DB, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if now == nil {
		now = time.Now
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's parse errors may quote the string: say only which variable.
		return nil, fmt.Errorf("%s is not a PostgreSQL connection string (postgres://user:password@host:port/database?sslmode=…)", Variable)
	}
	if o.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = o.Schema
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	} else if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "clankie-memory"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot use the database %s names: %s", Variable, reason(err))
	}
	db := &DB{pool: pool, log: log, now: now, cacheBytes: cmp.Or(o.CacheBytes, personfiles.DefaultCacheBytes)}
	pctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		verb := "does not answer"
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			verb = "refused the connection" // it answered: a role, a password, a database name
		}
		return nil, fmt.Errorf("the database %s names %s: %s", Variable, verb, reason(err))
	}
	if o.Unchanged {
		return db, nil
	}
	if o.Schema != "" {
		if _, err := pool.Exec(pctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{o.Schema}.Sanitize()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("create schema in the database %s names: %s", Variable, reason(err))
		}
	}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate the database %s names: %s", Variable, reason(err))
	}
	return db, nil
}

// Close releases the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping reports whether the database answers.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return db.pool.Ping(ctx)
}

// reason is a driver error in a few words that cannot hold the connection
// string: a server's SQLSTATE and message (which never echo it), or the
// class of a network failure.
func reason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Sprintf("the server said %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "no such host"):
		return "no such host"
	case strings.Contains(err.Error(), "no such file or directory"):
		return "no server listens on that socket"
	case strings.Contains(err.Error(), "tls"):
		return "the TLS handshake failed"
	}
	return "the connection failed"
}

// errNothingSaved is the answer when the database could not be reached or
// refused the transaction: nothing of the request was saved.
func errNothingSaved() error {
	return fault.New(fault.Unavailable, "store_unavailable",
		"The memory database could not be reached, so nothing was saved; try again shortly.")
}

// errOutcomeUnknown is the answer when a commit was sent and no answer came:
// the write may or may not be saved.
func errOutcomeUnknown() error {
	return fault.New(fault.Unavailable, "outcome_unknown",
		"The memory database did not confirm this write, so it may or may not have been saved; check before repeating it (a proposal retried with the same proposalId is safe).")
}

// fail turns a driver error into the client's answer and logs it content
// free (its class and SQLSTATE only). A fault (the rules' answer) passes.
func (db *DB) fail(op string, err error) error {
	if f := db.logUnlessFault(op, err); f != nil {
		return f
	}
	return errNothingSaved()
}

// logUnlessFault returns err when it is a fault (the rules' answer), and
// otherwise logs the driver error content free (its class and SQLSTATE
// only) and returns nil, for the caller to word the answer.
func (db *DB) logUnlessFault(op string, err error) error {
	if _, ok := fault.As(err); ok {
		return err
	}
	code := ""
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		code = pe.Code
	}
	db.log.Warn("memory database operation failed", zap.String("op", op), zap.String("sqlstate", code),
		zap.String("errorType", fmt.Sprintf("%T", err)))
	return nil
}

// write runs fn in a transaction and commits it. A commit that fails
// before anything reached the server, or that the server refused, saved
// nothing; a commit that was sent and not answered has an unknown outcome,
// and says so.
//
// A caller that goes away does not cut a write short (its outcome would
// then be unknown for nothing); ctx gives the write its values only.
func (db *DB) write(ctx context.Context, op string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return db.fail(op, err)
	}
	if err := fn(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		if errors.Is(err, errNoChange) {
			return nil
		}
		return db.fail(op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) || pgconn.SafeToRetry(err) {
			return db.fail(op, err)
		}
		db.log.Warn("memory database commit unconfirmed", zap.String("op", op), zap.String("errorType", fmt.Sprintf("%T", err)))
		return errOutcomeUnknown()
	}
	return nil
}

// errNoChange ends a write transaction that has nothing to write (a
// replay, a refusal): it is rolled back and the operation succeeds.
var errNoChange = errors.New("nothing to write")

// read runs fn with ctx, bounded, on the pool.
func (db *DB) read(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		if f := db.logUnlessFault(op, err); f != nil {
			return f // the rules' own answer
		}
		// A read saves nothing by nature; saying so would puzzle.
		return fault.New(fault.Unavailable, "store_unavailable",
			"The memory database could not be reached, so nothing could be read; try again shortly.")
	}
	return nil
}
