package memory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/people"
)

// Server is a running memory service: the root locked, the stores loaded,
// the listener open.
type Server struct {
	Addr    string // the address actually listened on
	Minted  []string
	http    *http.Server
	ln      net.Listener
	lock    *durable.Lock
	closeFn func() error
	log     *zap.Logger
}

// Start opens the root (creating it 0700, tightening it), takes the
// one-writer lock, loads both stores and listens. It does not serve until
// Serve is called, so a caller can print the address first.
func Start(cfg config.Memory, log *zap.Logger) (*Server, error) {
	root, err := durable.OpenRoot(cfg.Dir)
	if err != nil {
		return nil, err
	}
	lock, err := durable.AcquireLock(root, cfg.Dir)
	if err != nil {
		root.Close()
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		lock.Release()
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
	ps, err := people.Open(root, log, time.Now)
	if err != nil {
		return fail(fmt.Errorf("load person facts: %w", err))
	}
	es, err := episodes.Open(root, log, time.Now)
	if err != nil {
		ps.Close()
		return fail(fmt.Errorf("load episodes: %w", err))
	}
	svc := NewService(root, cfg.Dir, bearers, ps, es, log, time.Now)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		ps.Close()
		return fail(fmt.Errorf("listen on CLANKIE_MEMORY_ADDR %s: %w", cfg.Addr, err))
	}
	srv := &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	return &Server{
		Addr: ln.Addr().String(), Minted: minted, http: srv, ln: ln, lock: lock, log: log,
		closeFn: func() error {
			// The people store checkpoints on close, so the next start
			// reads its catalog and no journal.
			err := ps.Close()
			lock.Release()
			if cerr := root.Close(); err == nil {
				err = cerr
			}
			return err
		},
	}, nil
}

// Serve answers requests until ctx is done, then stops accepting, lets
// in-flight requests (and their durable writes) finish, and releases the root.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(s.ln) }()
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
