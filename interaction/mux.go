package interaction

import (
	"context"
	"fmt"
)

// Mux routes an invocation to a handler by its path ("person-memory/propose"),
// so no command switches on its own subcommand.
type Mux struct {
	routes map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{routes: map[string]Handler{}} }

// Handle routes path to h. A path routed twice or a nil handler is a
// programming error, and panics at construction as http.ServeMux does.
func (m *Mux) Handle(path string, h Handler) {
	if h == nil {
		panic(fmt.Sprintf("interaction: nil handler for %q", path))
	}
	if _, dup := m.routes[path]; dup {
		panic(fmt.Sprintf("interaction: %q routed twice", path))
	}
	m.routes[path] = h
}

// Handler returns the handler routed at path, and whether there is one.
func (m *Mux) Handler(path string) (Handler, bool) {
	h, ok := m.routes[path]
	return h, ok
}

// Serve is a Handler: it runs the handler routed at the invocation's path,
// or returns ErrStale (a sentence, never silence) when none is.
func (m *Mux) Serve(ctx context.Context, inv Invocation) (Reply, error) {
	h, ok := m.routes[inv.Path()]
	if !ok {
		return Reply{}, ErrStale
	}
	return h(ctx, inv)
}
