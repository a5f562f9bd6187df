package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/pgstore"
)

// MigrateCounts is what a migration read and wrote.
type MigrateCounts struct {
	People, PeopleWritten, Facts int
	Episodes, EpisodesWritten    int
	DryRun                       bool
}

// String is the line `clankie memory migrate` prints.
func (c MigrateCounts) String() string {
	verb := "written"
	if c.DryRun {
		verb = "would be written (dry run: nothing was written)"
	}
	return fmt.Sprintf("people: %d read (%d facts), %d %s; episodes: %d read, %d %s",
		c.People, c.Facts, c.PeopleWritten, verb, c.Episodes, c.EpisodesWritten, verb)
}

// migrationStore is one side of a migration: a data root's files (locked,
// so no service runs on it meanwhile) or a PostgreSQL database (which
// running services may share: its row and clock locks serialise them).
type migrationStore struct {
	eachPerson  func(func(*people.Person) error) error
	putPerson   func(*people.Person, bool) (bool, error)
	allEpisodes func() ([]api.Episode, error)
	merge       func([]api.Episode, bool) (int, error)
	close       func() error
}

func openMigrationStore(ctx context.Context, where, flag string, log *zap.Logger) (*migrationStore, error) {
	if pgstore.IsURL(where) {
		db, err := pgstore.Open(ctx, where, log, nil, pgstore.Options{MaxConns: 2})
		if err != nil {
			return nil, fmt.Errorf("%s", strings.ReplaceAll(err.Error(), pgstore.Variable, flag))
		}
		ps, es := db.People(), db.Episodes()
		return &migrationStore{eachPerson: ps.Each, putPerson: ps.Put, allEpisodes: es.All, merge: es.Merge,
			close: func() error { db.Close(); return nil }}, nil
	}
	if strings.Contains(where, "://") {
		return nil, fmt.Errorf("%s must be a data directory or a postgres:// (postgresql://) connection string", flag)
	}
	root, err := durable.OpenRoot(where)
	if err != nil {
		return nil, err
	}
	lock, err := durable.AcquireLock(root, where)
	if err != nil {
		root.Close()
		return nil, err
	}
	fail := func(err error) (*migrationStore, error) {
		_ = lock.Release()
		root.Close()
		return nil, err
	}
	ps, err := people.Open(root, log, time.Now)
	if err != nil {
		return fail(fmt.Errorf("load person facts from %s: %w", flag, err))
	}
	es, err := episodes.Open(root, log, time.Now)
	if err != nil {
		ps.Close()
		return fail(fmt.Errorf("load episodes from %s: %w", flag, err))
	}
	return &migrationStore{
		eachPerson:  ps.Each,
		putPerson:   ps.Put,
		allEpisodes: func() ([]api.Episode, error) { eps, _ := es.All(); return eps, nil },
		merge:       es.Merge,
		close: func() error {
			err := ps.Close()
			_ = lock.Release()
			root.Close()
			return err
		},
	}, nil
}

// Migrate copies every person (their whole state: facts and idempotency
// records) and every episode from one store to another: a data directory
// or a postgres:// URL on either side. It is idempotent: a person whose
// state the target already holds, and an episode it holds unchanged, are
// not written again, so a second run writes nothing. dryRun reads both and
// writes nothing. Errors never hold a connection string.
func Migrate(ctx context.Context, from, to string, dryRun bool, log *zap.Logger) (MigrateCounts, error) {
	c := MigrateCounts{DryRun: dryRun}
	if from == "" || to == "" {
		return c, fmt.Errorf("both --from and --to are required: a data directory and a postgres:// URL, either way round")
	}
	if from == to {
		return c, fmt.Errorf("--from and --to name the same store")
	}
	src, err := openMigrationStore(ctx, from, "--from", log)
	if err != nil {
		return c, err
	}
	defer src.close()
	dst, err := openMigrationStore(ctx, to, "--to", log)
	if err != nil {
		return c, err
	}
	err = src.eachPerson(func(p *people.Person) error {
		c.People++
		c.Facts += p.Len()
		changed, err := dst.putPerson(p, dryRun)
		if changed {
			c.PeopleWritten++
		}
		return err
	})
	if err != nil {
		dst.close()
		return c, fmt.Errorf("copy people: %w", err)
	}
	eps, err := src.allEpisodes()
	if err != nil {
		dst.close()
		return c, fmt.Errorf("read episodes: %w", err)
	}
	c.Episodes = len(eps)
	if c.EpisodesWritten, err = dst.merge(eps, dryRun); err != nil {
		dst.close()
		return c, fmt.Errorf("copy episodes: %w", err)
	}
	return c, dst.close()
}
