package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
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
	eachPerson  func(context.Context, func(*people.Person) error) error
	putPerson   func(context.Context, *people.Person, bool) (bool, error)
	allEpisodes func(context.Context) ([]api.Episode, error)
	merge       func(context.Context, []api.Episode, bool) (int, error)
	close       func() error
}

// ErrMigrateUsage marks a migration refused for its arguments (a missing
// flag, the same store twice, a source that does not exist): the CLI
// exits 2 for it, as for any usage mistake.
var ErrMigrateUsage = errors.New("migrate usage")

// migrateUsageError is a sentence about the arguments; it is
// ErrMigrateUsage to errors.Is.
type migrateUsageError string

func (e migrateUsageError) Error() string      { return string(e) }
func (migrateUsageError) Is(target error) bool { return target == ErrMigrateUsage }

// usage is a sentence about the arguments, marked ErrMigrateUsage.
func usage(format string, args ...any) error {
	return migrateUsageError(fmt.Sprintf(format, args...))
}

// emptyTarget is the target of a dry run that does not exist yet (a
// directory not created, a database without the schema): everything would
// be written, and nothing is, not even the target itself.
func emptyTarget() *migrationStore {
	return &migrationStore{
		eachPerson:  func(context.Context, func(*people.Person) error) error { return nil },
		putPerson:   func(context.Context, *people.Person, bool) (bool, error) { return true, nil },
		allEpisodes: func(context.Context) ([]api.Episode, error) { return nil, nil },
		merge:       func(_ context.Context, eps []api.Episode, _ bool) (int, error) { return len(eps), nil },
		close:       func() error { return nil },
	}
}

// namedBy rewords a store's sentence, which names CLANKIE_MEMORY_STORE,
// to name the flag that gave the connection string instead.
func namedBy(flag string, err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), pgstore.Variable, flag))
}

// openMigrationStore opens one side. source: it must exist (a typo must not
// become a new, empty memory root). dryRun: nothing may be created or
// changed, so a target that does not exist yet reads as empty.
func openMigrationStore(ctx context.Context, where, flag string, source, dryRun bool, log *zap.Logger) (*migrationStore, error) {
	if pgstore.IsURL(where) {
		db, err := pgstore.Open(ctx, where, log, nil, pgstore.Options{MaxConns: 2, Unchanged: dryRun})
		if err != nil {
			return nil, namedBy(flag, err)
		}
		if dryRun {
			current, err := db.SchemaCurrent(ctx)
			if err != nil {
				db.Close()
				return nil, namedBy(flag, err)
			}
			switch {
			case !current && source:
				db.Close()
				return nil, usage("%s names a database without clankie's current schema; a dry run changes nothing, so run the migration without --dry-run, or start a service on it once, to create or upgrade it", flag)
			case !current:
				db.Close()
				return emptyTarget(), nil
			}
		}
		ps, es := db.People(), db.Episodes()
		return &migrationStore{eachPerson: ps.Each, putPerson: people.New(ps).Put, allEpisodes: es.All, merge: es.Merge,
			close: func() error { db.Close(); return nil }}, nil
	}
	if strings.Contains(where, "://") {
		return nil, usage("%s must be a data directory or a postgres:// (postgresql://) connection string", flag)
	}
	if st, err := os.Stat(where); err != nil || !st.IsDir() {
		switch {
		case source:
			return nil, usage("%s %s is not a data directory (nothing is there to copy)", flag, where)
		case err == nil:
			return nil, usage("%s %s is a file, not a data directory", flag, where)
		case dryRun:
			return emptyTarget(), nil
		}
	}
	if source && !holdsMemory(where) {
		return nil, usage("%s %s holds no clankie memory (no %s or %s folder)", flag, where, personfiles.Dir, episodes.Dir)
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
	ps, err := personfiles.Open(root, log, time.Now, durable.Disk{}, personfiles.Options{})
	if err != nil {
		return fail(fmt.Errorf("load person facts from %s: %w", flag, err))
	}
	es, err := episodes.Open(root, log, time.Now, durable.Disk{})
	if err != nil {
		ps.Close()
		return fail(fmt.Errorf("load episodes from %s: %w", flag, err))
	}
	return &migrationStore{
		eachPerson:  ps.Each,
		putPerson:   people.New(ps).Put,
		allEpisodes: func(context.Context) ([]api.Episode, error) { eps, _ := es.All(); return eps, nil },
		merge:       func(_ context.Context, eps []api.Episode, dryRun bool) (int, error) { return es.Merge(eps, dryRun) },
		close: func() error {
			err := ps.Close()
			_ = lock.Release()
			root.Close()
			return err
		},
	}, nil
}

// holdsMemory reports whether dir has a memory root's folders, so a
// migration never reads (and so initialises) a directory that is not one.
func holdsMemory(dir string) bool {
	for _, sub := range []string{personfiles.Dir, episodes.Dir} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
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
		return c, usage("both --from and --to are required: a data directory and a postgres:// URL, either way round")
	}
	if from == to {
		return c, usage("--from and --to name the same store")
	}
	src, err := openMigrationStore(ctx, from, "--from", true, dryRun, log)
	if err != nil {
		return c, err
	}
	defer src.close()
	dst, err := openMigrationStore(ctx, to, "--to", false, dryRun, log)
	if err != nil {
		return c, err
	}
	err = src.eachPerson(ctx, func(p *people.Person) error {
		c.People++
		c.Facts += len(p.Facts)
		changed, err := dst.putPerson(ctx, p, dryRun)
		if changed {
			c.PeopleWritten++
		}
		return err
	})
	if err != nil {
		dst.close()
		return c, fmt.Errorf("copy people: %w", err)
	}
	eps, err := src.allEpisodes(ctx)
	if err != nil {
		dst.close()
		return c, fmt.Errorf("read episodes: %w", err)
	}
	c.Episodes = len(eps)
	if c.EpisodesWritten, err = dst.merge(ctx, eps, dryRun); err != nil {
		dst.close()
		return c, fmt.Errorf("copy episodes: %w", err)
	}
	return c, dst.close()
}
