package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
)

// claimSweepEvery is how often one process deletes the expired claims.
const claimSweepEvery = time.Minute

// Claims is the interaction claims in PostgreSQL, shared by every service
// process on the database.
type Claims struct {
	db *DB

	mu    sync.Mutex
	swept time.Time
}

// Claims returns the claims store.
func (db *DB) Claims() *Claims { return &Claims{db: db} }

// Claim claims id unless a row younger than api.InteractionClaimTTL (by
// the database's now()) holds it. One statement: a new id is inserted; an
// expired row is taken over by updating its time; a live row is left
// alone and no row comes back. The row lock ON CONFLICT takes makes two
// concurrent claims of one id answer true once.
func (c *Claims) Claim(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var one int
	err := c.db.pool.QueryRow(ctx, `INSERT INTO interaction_claims (interaction_id) VALUES ($1)
		ON CONFLICT (interaction_id) DO UPDATE SET claimed_at = now()
		WHERE interaction_claims.claimed_at <= now() - make_interval(secs => $2)
		RETURNING 1`, id, api.InteractionClaimTTL.Seconds()).Scan(&one)
	claimed := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, c.db.fail("claim interaction", err)
	}
	c.sweep(ctx)
	return claimed, nil
}

// sweep deletes the expired claims, at most once per claimSweepEvery in
// this process; a failure waits for the next one (the rows are only
// space: Claim never counts an expired row).
func (c *Claims) sweep(ctx context.Context) {
	c.mu.Lock()
	now := c.db.now()
	due := now.Sub(c.swept) >= claimSweepEvery || now.Before(c.swept)
	if due {
		c.swept = now
	}
	c.mu.Unlock()
	if !due {
		return
	}
	if _, err := c.db.pool.Exec(ctx, `DELETE FROM interaction_claims WHERE claimed_at <= now() - make_interval(secs => $1)`,
		api.InteractionClaimTTL.Seconds()); err != nil {
		_ = c.db.fail("sweep interaction claims", err)
	}
}
