package memory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
	"github.com/clankie/clankie/memory/personfiles"
	"github.com/clankie/clankie/memory/pgstore"
)

// Server is a running memory service: the root locked, the stores loaded,
// the listener open.
type Server struct {
	Addr   string // the address actually listened on
	Minted []string
	// MetricsAddr is where /metrics is served without a bearer
	// (CLANKIE_METRICS_ADDR), empty when it is not set.
	MetricsAddr string
	// Registry holds the service's metrics; the bridges of the same
	// process register theirs here, so one scrape shows the process.
	Registry  *prometheus.Registry
	metrics   *http.Server
	metricsLn net.Listener
	http      *http.Server
	ln        net.Listener
	closeFn   func() error
	log       *zap.Logger
}

// Start opens the root (creating it 0700, tightening it), takes the
// one-writer lock, loads both stores and listens. With CLANKIE_MEMORY_STORE
// naming PostgreSQL it connects and migrates instead, and takes no lock:
// several processes may share the database. It does not serve until
// Serve is called, so a caller can print the address first.
func Start(cfg config.Memory, log *zap.Logger) (*Server, error) {
	// Bind first: a port in use must fail before anything touches the
	// disk (no root created, no token minted, no LOCK left behind).
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, listenError("CLANKIE_MEMORY_ADDR", cfg.Addr, err)
	}
	var mln net.Listener
	if cfg.Metrics.Addr != "" {
		if mln, err = net.Listen("tcp", cfg.Metrics.ListenAddr()); err != nil {
			ln.Close()
			return nil, listenError("CLANKIE_METRICS_ADDR", cfg.Metrics.ListenAddr(), err)
		}
	}
	closeListeners := func() {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
	}
	var (
		lock     *durable.Lock
		ps       people.Storer
		es       EpisodeStore
		cs       ClaimStore
		closeDB  func() error
		released = func() {}
	)
	if cfg.Postgres() {
		// Several processes share the database: no lock file, and every
		// process is given the same bearers (config refuses to mint them).
		// The database comes first, so one that is unreachable or refuses
		// leaves no memory directory behind.
		db, err := pgstore.Open(context.Background(), cfg.Store, log, time.Now, pgstore.Options{CacheBytes: cfg.CacheBytes()})
		if err != nil {
			closeListeners()
			return nil, err
		}
		ps, es, cs = db.People(), db.Episodes(), db.Claims()
		closeDB = func() error { db.Close(); return nil }
	}
	root, err := durable.OpenRoot(cfg.Dir)
	if err != nil {
		closeListeners()
		if closeDB != nil {
			closeDB()
		}
		return nil, err
	}
	if !cfg.Postgres() {
		if lock, err = durable.AcquireLock(root, cfg.Dir); err != nil {
			closeListeners()
			root.Close()
			return nil, err
		}
		released = func() { _ = lock.Release() }
	}
	fail := func(err error) (*Server, error) {
		closeListeners()
		if closeDB != nil {
			closeDB()
		}
		released()
		root.Close()
		return nil, err
	}
	if _, err := durable.SweepTemp(root, "."); err != nil {
		return fail(fmt.Errorf("sweep temp files in the memory root: %w", err))
	}
	bearers, minted, err := LoadBearers(root, cfg.Tokens)
	if err != nil {
		return fail(err)
	}
	fsync := newFsyncMetric()
	if !cfg.Postgres() {
		files := fsyncDisk(fsync)
		fps, err := personfiles.Open(root, log, time.Now, files, personfiles.Options{CacheBytes: cfg.CacheBytes()})
		if err != nil {
			return fail(fmt.Errorf("load person facts: %w", err))
		}
		fes, err := episodes.Open(root, log, time.Now, files)
		if err != nil {
			fps.Close()
			return fail(fmt.Errorf("load episodes: %w", err))
		}
		fcs, err := openFileClaims(root, time.Now, files)
		if err != nil {
			fps.Close()
			return fail(fmt.Errorf("load interaction claims: %w", err))
		}
		ps, es, cs = fps, FileEpisodes{fes}, fcs
		closeDB = func() error { return errors.Join(fps.Close(), fcs.Close()) }
	}
	svc := NewService(root, cfg.Dir, bearers, ps, es, cs, log, time.Now, fsync)
	srv := &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	out := &Server{
		Addr: ln.Addr().String(), Minted: minted, http: srv, ln: ln, log: log,
		Registry: svc.Registry(),
		closeFn: func() error {
			// The file people store checkpoints on close, so the next
			// start reads its catalog and no journal.
			err := closeDB()
			released()
			if cerr := root.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}
	if mln != nil {
		out.MetricsAddr, out.metricsLn = mln.Addr().String(), mln
		out.metrics = MetricsServer(svc.MetricsHandler(), log)
	}
	return out, nil
}

// MetricsServer serves h at /metrics (and nothing else) with the same
// timeouts as the service, for a CLANKIE_METRICS_ADDR listener.
func MetricsServer(h http.Handler, log *zap.Logger) *http.Server {
	only := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusNotFound, "not_found", "This listener serves only GET /metrics.")
			return
		}
		h.ServeHTTP(w, r)
	})
	return &http.Server{Handler: only, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: zap.NewStdLog(log.Named("metrics"))}
}

// Serve serves requests until ctx is done, then stops accepting, lets
// in-flight requests (and their durable writes) finish, and releases the root.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(s.ln) }()
	if s.metrics != nil {
		go func() { _ = s.metrics.Serve(s.metricsLn) }()
		defer s.metrics.Close()
	}
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		serveErr = s.http.Shutdown(shutdownCtx)
		cancel()
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && serveErr == nil {
			serveErr = err
		}
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	if err := s.closeFn(); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

// Close releases a server that was started but never served: it closes the
// listeners and the stores and releases the root. A server that is serving
// is stopped by cancelling Serve's context instead.
func (s *Server) Close() error {
	s.ln.Close()
	if s.metricsLn != nil {
		s.metricsLn.Close()
	}
	return s.closeFn()
}

// listenError says why an address could not be bound, in words.
func listenError(variable, addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s %s is already in use by another process; stop it or choose another port", variable, addr)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s %s may not be bound by this user (ports below 1024 need privileges)", variable, addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%s %s names an address this host does not have", variable, addr)
	}
	return fmt.Errorf("cannot listen on %s %s: %w", variable, addr, err)
}
