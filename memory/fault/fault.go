// Package fault is the one error type the stores return for outcomes a client
// caused. The HTTP layer maps Kind to a status and shows Message as the
// sentence; anything that is not a *Error is the service's own failure.
//
// A Message is shown to people and logged: it must never hold memory content
// (fact bodies, summaries) or a token.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies a client-caused outcome.
type Kind int

// The kinds, each one HTTP status.
const (
	Invalid   Kind = iota + 1 // 400
	Forbidden                 // 403
	NotFound                  // 404
	Conflict                  // 409
	// Unprocessable is a valid request the state refuses (422), such as a
	// Discord proposal for a person whose memory only an operator can make
	// room in. Clients show its sentence.
	Unprocessable // 422
	// Unavailable is the store's database out of reach (503): the request
	// was fine and nothing was saved, or, when its sentence says so, the
	// outcome of a commit is unknown. Clients show its sentence.
	Unavailable // 503
)

// Error is a client-caused outcome with a machine code and a sentence.
type Error struct {
	Kind    Kind
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// New builds an Error with a formatted sentence.
func New(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error inside err, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
