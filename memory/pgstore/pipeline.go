package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// pipeTx is a transaction whose BEGIN rides in its first batch and whose
// COMMIT rides in its last, so a read-decide-write transaction costs two
// round trips, not four (pgx's Begin and Commit are each one of their
// own). On a socket to a database on the same machine a round trip costs
// about as much as the statements of a proposal together; halving them is
// most of what a proposal costs here beyond the commit's fsync.
type pipeTx struct {
	conn  *pgx.Conn
	begun bool
}

// batch returns a batch to queue the transaction's next statements in;
// the first begins the transaction (pgx's Batch.BeginTx).
func (t *pipeTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		b.BeginTx(pgx.TxOptions{})
	}
	return b
}

// send sends b, which batch made, and reads the result of its BEGIN if
// it has one. The caller reads the rest and closes them.
func (t *pipeTx) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	br := t.conn.SendBatch(ctx, b)
	if t.begun {
		return br, nil
	}
	t.begun = true
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// writePiped runs fn in a pipeTx and commits the batch it returns with
// the COMMIT queued after it: the writes and their commit are one round
// trip. fn returning errNoChange (nothing to write) or an error rolls the
// transaction back.
//
// The outcome is told as write tells it: a statement of the last batch
// that the server refused (its error is the server's) stopped the server
// from running the rest, COMMIT included, so nothing was saved; a batch
// that pgx knows it never sent saved nothing; a batch sent and not
// answered may have been committed or not, and the answer says so.
//
// A caller that goes away does not cut a write short; ctx gives the
// write its values only.
func (db *DB) writePiped(ctx context.Context, op string, fn func(ctx context.Context, tx *pipeTx) (*pgx.Batch, error)) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.fail(op, err)
	}
	// A connection released inside a transaction (one this could not roll
	// back) is closed by the pool, never reused.
	defer conn.Release()
	tx := &pipeTx{conn: conn.Conn()}
	last, err := fn(ctx, tx)
	if err != nil {
		if tx.begun {
			_, _ = tx.conn.Exec(ctx, "ROLLBACK")
		}
		if errors.Is(err, errNoChange) {
			return nil
		}
		return db.fail(op, err)
	}
	n := last.Len()
	b := tx.batch() // a transaction that read nothing begins here
	b.QueuedQueries = append(b.QueuedQueries, last.QueuedQueries...)
	b.Queue("commit")
	br, err := tx.send(ctx, b)
	if err != nil {
		return db.fail(op, err) // BEGIN was refused: nothing ran
	}
	for i := 0; i <= n; i++ {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	_ = br.Close()
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) || pgconn.SafeToRetry(err) {
		if tx.conn.PgConn().TxStatus() != 'I' {
			_, _ = tx.conn.Exec(ctx, "ROLLBACK")
		}
		return db.fail(op, err)
	}
	db.log.Warn("memory database commit unconfirmed", zap.String("op", op), zap.String("errorType", fmt.Sprintf("%T", err)))
	return errOutcomeUnknown()
}
