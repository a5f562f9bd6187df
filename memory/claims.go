package memory

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/fault"
)

// ClaimStore remembers which Discord interactions a bridge replica has
// taken on, for api.InteractionClaimTTL: the files (fileClaims) or
// PostgreSQL (pgstore.Claims). Claim reports true the first time id is
// claimed within the TTL and false after; true is returned only once the
// claim is durable, so a replica restarted (or another one) still sees it.
type ClaimStore interface {
	Claim(ctx context.Context, id string) (bool, error)
}

// claimInteraction is POST /v1/memory/interactions/{interactionId}/claim.
// Its receipt holds the id (a Discord snowflake, no content) and whether it
// was claimed.
func (s *Service) claimInteraction(r *request) (reply, error) {
	id := r.PathValue("interactionId")
	if !api.ValidSnowflake(id) {
		return reply{}, fault.New(fault.Invalid, "invalid_request",
			"interactionId must be a Discord snowflake: 1 to %d digits.", api.MaxSnowflakeLength)
	}
	claimed, err := s.claims.Claim(r.Context(), id)
	rec := []zap.Field{zap.String("interactionId", id), zap.Bool("claimed", claimed)}
	if err != nil {
		return reply{receipt: rec}, err
	}
	if !claimed {
		return reply{receipt: rec}, fault.New(fault.Conflict, "already_claimed",
			"This interaction was already claimed in the last %d minutes; do not answer it again.", int(api.InteractionClaimTTL/time.Minute))
	}
	return reply{receipt: rec}, nil
}

// claimsFile is the file store's claims, in the memory root: one line per
// claim, "<unix nanoseconds> <interaction id>\n", appended and
// fdatasync'ed before the claim is acknowledged.
const claimsFile = "interaction-claims"

// compactClaimsAt is how many lines the claims file may hold before a claim
// that finds most of them expired rewrites it with the live ones.
const compactClaimsAt = 4096

// fileClaims is the file store's ClaimStore: an append-only file that
// survives kill -9 (every acknowledged claim was fdatasync'ed), rewritten
// without expired lines on open and whenever most of it has expired.
type fileClaims struct {
	root  *os.Root
	now   func() time.Time
	files durable.Disk

	// compactAt is compactClaimsAt (smaller in tests).
	compactAt int

	mu sync.Mutex
	// f is the file open for appending; nil after a failed write, so the
	// next claim rewrites the file from live (dropping a torn line).
	f     *os.File
	live  map[string]time.Time
	order []claimAt // live claims, oldest first (may hold superseded ones)
	lines int       // lines in the file
}

type claimAt struct {
	id string
	at time.Time
}

// openFileClaims loads the claims file from root (a missing file is none),
// keeps the claims younger than api.InteractionClaimTTL and rewrites the
// file with only those, which also drops a line torn by a crash.
func openFileClaims(root *os.Root, now func() time.Time, files durable.Disk) (*fileClaims, error) {
	if now == nil {
		now = time.Now
	}
	c := &fileClaims{root: root, now: now, files: files, compactAt: compactClaimsAt, live: map[string]time.Time{}}
	data, err := root.ReadFile(claimsFile)
	if err != nil && !durable.IsNotExist(err) {
		return nil, fmt.Errorf("read %s: %w", claimsFile, err)
	}
	t := now()
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !complete {
			break // torn by a crash before its sync: never acknowledged
		}
		ts, id, ok := bytes.Cut(line, []byte{' '})
		n, err := strconv.ParseInt(string(ts), 10, 64)
		if !ok || err != nil || !api.ValidSnowflake(string(id)) {
			continue
		}
		at := time.Unix(0, n)
		if t.Sub(at) >= api.InteractionClaimTTL {
			continue
		}
		if _, seen := c.live[string(id)]; !seen {
			c.order = append(c.order, claimAt{string(id), at})
		}
		c.live[string(id)] = at
	}
	if err := c.rewriteLocked(); err != nil {
		return nil, err
	}
	return c, nil
}

// Claim claims id unless it was claimed within the TTL; a true answer is on
// disk.
func (c *fileClaims) Claim(_ context.Context, id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.expireLocked(now)
	if at, seen := c.live[id]; seen && now.Sub(at) < api.InteractionClaimTTL {
		return false, nil
	}
	if c.f == nil || c.lines >= c.compactAt && c.lines > 2*len(c.live) {
		if err := c.rewriteLocked(); err != nil {
			return false, err
		}
	}
	line := strconv.AppendInt(nil, now.UnixNano(), 10)
	line = append(append(append(line, ' '), id...), '\n')
	if _, err := c.f.Write(line); err != nil {
		return false, c.brokenLocked("write", err)
	}
	if err := c.files.Datasync(c.f); err != nil {
		return false, c.brokenLocked("fdatasync", err)
	}
	c.lines++
	// An expired claim of the same id may still be in order (a clock that
	// went back); rewriteLocked and expireLocked skip it as superseded.
	c.order = append(c.order, claimAt{id, now})
	c.live[id] = now
	return true, nil
}

// brokenLocked closes the file after a failed write or sync, so the next
// claim starts from a rewritten file, and returns the request's answer: no
// claim was made.
func (c *fileClaims) brokenLocked(op string, err error) error {
	_ = c.f.Close()
	c.f = nil
	return fmt.Errorf("%s %s: %w", op, claimsFile, err)
}

// expireLocked forgets the claims older than the TTL.
func (c *fileClaims) expireLocked(now time.Time) {
	for len(c.order) > 0 && now.Sub(c.order[0].at) >= api.InteractionClaimTTL {
		if c.live[c.order[0].id].Equal(c.order[0].at) {
			delete(c.live, c.order[0].id)
		}
		c.order[0] = claimAt{}
		c.order = c.order[1:]
	}
	if cap(c.order) > 2*compactClaimsAt && len(c.order) < cap(c.order)/4 {
		c.order = append([]claimAt(nil), c.order...) // let the dropped head go
	}
}

// rewriteLocked replaces the file with the live claims (temp file, fsync,
// rename, directory fsync) and reopens it for appending.
func (c *fileClaims) rewriteLocked() error {
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
	var buf []byte
	n := 0
	for _, e := range c.order {
		if !c.live[e.id].Equal(e.at) {
			continue // superseded by a later claim of the same id
		}
		buf = strconv.AppendInt(buf, e.at.UnixNano(), 10)
		buf = append(append(append(buf, ' '), e.id...), '\n')
		n++
	}
	if err := c.files.WriteFile(c.root, claimsFile, buf); err != nil {
		return fmt.Errorf("rewrite %s: %w", claimsFile, err)
	}
	f, err := c.root.OpenFile(claimsFile, os.O_WRONLY|os.O_APPEND, durable.FileMode)
	if err != nil {
		return fmt.Errorf("open %s: %w", claimsFile, err)
	}
	c.f, c.lines = f, n
	return nil
}

// Close closes the file; every acknowledged claim is already on disk.
func (c *fileClaims) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}
