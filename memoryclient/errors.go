package memoryclient

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
)

// Kind classifies a failed call so a caller can pick the sentence a person
// sees ("memory is unavailable right now; nothing was saved", "you can only
// forget facts about yourself", …) without parsing strings or statuses.
type Kind int

// The kinds. The zero value is never returned by this package; it is what
// KindOf returns for an error that did not come from a Client.
const (
	KindUnknown Kind = iota
	// KindUnavailable: the service could not be reached (connection refused or
	// reset, DNS failure, a connection closed before an answer) or answered
	// 502, 503, 504 or 429. The bridges show "memory is unavailable".
	KindUnavailable
	// KindTimeout: the caller's context deadline, the client's call budget or
	// an attempt's timeout ran out before an answer arrived.
	KindTimeout
	// KindCanceled: the caller canceled the context. Kept apart from Timeout
	// because nobody is waiting for a sentence any more.
	KindCanceled
	// KindUnauthorized: 401, the bearer is missing or unknown. The service's
	// Message says which credential is needed and where it comes from.
	KindUnauthorized
	// KindForbidden: 403, a known bearer on a route or lane it may not use, or
	// a requester who is neither the subject nor the proposer.
	KindForbidden
	// KindNotFound: 404, the fact, person or episode is absent.
	KindNotFound
	// KindConflict: 409, a proposalId or episodeId reused with a different
	// body, or a retain at capacity.
	KindConflict
	// KindInvalid: 400, 413 or 422 from the service, or an argument this
	// client refuses before sending (Status 0), such as an empty id.
	KindInvalid
	// KindInternal: any other 5xx: the service failed on its own.
	KindInternal
	// KindUnexpected: an answer outside the contract (a 3xx, an unlisted 4xx,
	// a 2xx body that is not the documented JSON, an oversized body).
	KindUnexpected
)

var kindNames = [...]string{
	KindUnknown:      "unknown",
	KindUnavailable:  "unavailable",
	KindTimeout:      "timeout",
	KindCanceled:     "canceled",
	KindUnauthorized: "unauthorized",
	KindForbidden:    "forbidden",
	KindNotFound:     "not_found",
	KindConflict:     "conflict",
	KindInvalid:      "invalid",
	KindInternal:     "internal",
	KindUnexpected:   "unexpected",
}

// String names the kind in snake_case, the form used in logs.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// genericMessage is the sentence used when the service gave none (transport
// failures, non-JSON error bodies) so that Message is never empty.
func genericMessage(k Kind) string {
	switch k {
	case KindUnavailable:
		return "the memory service could not be reached"
	case KindTimeout:
		return "the memory service did not answer in time"
	case KindCanceled:
		return "the request to the memory service was canceled"
	case KindUnauthorized:
		return "the memory service did not accept the credential"
	case KindForbidden:
		return "the memory service refused this request for this credential"
	case KindNotFound:
		return "the memory service has no such record"
	case KindConflict:
		return "the request conflicts with what the memory service already holds"
	case KindInvalid:
		return "the memory service rejected the request as invalid"
	case KindInternal:
		return "the memory service failed while handling the request"
	default:
		return "the memory service gave an answer this client does not understand"
	}
}

// Error is every failure a Client method returns. It carries what a caller
// needs to choose a sentence and nothing it must not show: never the bearer,
// never a request body, never a path or query (ids and search terms stay out).
type Error struct {
	// Op is the client method that failed ("propose", "recall", …).
	Op string
	// Kind classifies the failure; see the Kind constants.
	Kind Kind
	// Status is the HTTP status, or 0 when no answer arrived or the client
	// refused the call before sending.
	Status int
	// Code is the service's snake_case error code, empty when it gave none.
	Code string
	// Message is the service's sentence for a person (content-free by the
	// service's contract), or a generic sentence of this package.
	Message string
	// Attempts is how many requests were sent (0 when refused before sending).
	Attempts int

	detail    string // transport-level hint (e.g. "dial: connect: connection refused"); no URL
	cause     error  // sanitized: never a *url.Error (it would carry the URL)
	retryable bool   // an attempt-level failure that a retry-safe call may repeat
}

// Error renders op, kind, status, code and message. It is built only from
// those fields, so it holds no bearer, body, path or query.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("memoryclient: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.String())
	if e.Status != 0 {
		b.WriteString(" ")
		b.WriteString(strconv.Itoa(e.Status))
	}
	if e.Code != "" {
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.detail != "" {
		b.WriteString(" (")
		b.WriteString(e.detail)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap exposes the underlying cause, stripped of any *url.Error wrapper, so
// errors.Is(err, context.DeadlineExceeded) works without leaking the URL.
func (e *Error) Unwrap() error { return e.cause }

// AsError returns the *Error inside err, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// KindOf returns the Kind of err, KindUnknown when err is nil or did not come
// from a Client.
func KindOf(err error) Kind {
	if e, ok := AsError(err); ok {
		return e.Kind
	}
	return KindUnknown
}

// kindForStatus maps a non-2xx status to its Kind.
func kindForStatus(status int) Kind {
	switch {
	case status == 400 || status == 413 || status == 422:
		return KindInvalid
	case status == 401:
		return KindUnauthorized
	case status == 403:
		return KindForbidden
	case status == 404:
		return KindNotFound
	case status == 409:
		return KindConflict
	case status == 429 || status == 502 || status == 503 || status == 504:
		return KindUnavailable
	case status >= 500 && status <= 599:
		return KindInternal
	default:
		return KindUnexpected
	}
}

const maxMessageBytes = 512

// minRedactLen is the shortest content string redacted from a sentence;
// shorter ones would garble ordinary words and reveal next to nothing.
const minRedactLen = 4

// cleanMessage keeps a service sentence fit to show: no bearer and none of
// the request's content (the contract makes sentences content-free, but a
// broken or hostile service could echo the Authorization header or the body),
// no control characters, bounded length.
func cleanMessage(s, bearer string, content []string) string {
	if bearer != "" {
		s = strings.ReplaceAll(s, bearer, "[redacted]")
	}
	for _, c := range content {
		if c = strings.TrimSpace(c); len(c) >= minRedactLen {
			s = strings.ReplaceAll(s, c, "[redacted]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(s) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// cleanCode keeps a code only when it has the contract's snake_case shape, so
// nothing else can ride in through it.
func cleanCode(s string) string {
	if s == "" || len(s) > 64 {
		return ""
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return ""
		}
	}
	return s
}

// transportDetail names what went wrong on the wire without a URL: the
// network operation and the system error ("dial: connect: connection
// refused"), or a closed connection.
func transportDetail(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "lookup: " + dnsErr.Err
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Err != nil {
		return opErr.Op + ": " + opErr.Err.Error()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed before an answer"
	}
	return ""
}

// invalidArg is a call this client refuses before sending.
func invalidArg(op, code, format string, args ...any) *Error {
	return &Error{Op: op, Kind: KindInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unreachable reports whether the service gave no usable answer in time: it
// was down or overloaded (429, 502, 503, 504), the call ran out of time, or
// the caller canceled it. Callers tell a person "memory is unavailable"
// without naming Kind.
func (e *Error) Unreachable() bool {
	return e.Kind == KindUnavailable || e.Kind == KindTimeout || e.Kind == KindCanceled
}

// Answer returns the failure in the api's terms: the HTTP status the service
// answered (400 for an argument this client refused before sending, as the
// service would have; 0 when nothing answered) and its error body.
func (e *Error) Answer() (status int, body api.Error) {
	status = e.Status
	if status == 0 && e.Kind == KindInvalid {
		status = http.StatusBadRequest
	}
	return status, api.Error{Code: e.Code, Message: e.Message}
}
