// Package memoryclient is the HTTP client of the memory service, used by the
// Discord bridges (through the small interface package commands declares) and
// by the operator CLI.
//
// It exists so that those callers never deal with HTTP: every method takes a
// context first, speaks the wire types of package api, and fails with an
// *Error whose Kind says which sentence to show a person. Three properties are
// the reason it is its own package:
//
//   - Deadlines: Discord drops an interaction not answered within 3 s, so a
//     call, retries and backoff included, never outlives the caller's context
//     or the client's call budget (2 s by default).
//   - Safe retries: only reads, the voice briefing and Propose (idempotent
//     by proposalId) are retried, and only when the service was unreachable
//     or overloaded. Writes that could apply twice are sent once.
//   - Secrecy: the bearer is sent in the Authorization header and nowhere
//     else: not in error strings, not in logs, not in panics. Logs carry route
//     templates, never ids, queries or bodies.
package memoryclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/go-resty/resty/v2"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

// Defaults. DefaultTimeout leaves a bridge about a second of its 3 s Discord
// deadline to render and send a reply after a failed call.
const (
	DefaultTimeout = 2 * time.Second
	DefaultRetries = 2
)

const (
	// backoffBase is the first pause between attempts; each further pause is
	// three times the last (50 ms, 150 ms, 450 ms, …), capped at backoffMax
	// (newBackoff).
	backoffBase = 50 * time.Millisecond
	backoffMax  = time.Second
	// minRetryWindow is the least time that must remain before the deadline,
	// after the pause, for another attempt to be worth sending. With less, the
	// last real failure is returned rather than a certain timeout.
	minRetryWindow = 20 * time.Millisecond
	// maxResponseBytes bounds what a (broken) service can make us buffer. The
	// largest honest answer, an export of 128 facts, is well under 1 MiB.
	maxResponseBytes = 8 << 20
	userAgent        = "clankie-memoryclient/1"
)

// Client talks to one memory service with one bearer. It is safe for
// concurrent use and immutable after New.
type Client struct {
	rc             *resty.Client
	bearer         string
	timeout        time.Duration
	attemptTimeout time.Duration
	retries        int
	log            *zap.Logger
}

type options struct {
	timeout        time.Duration
	attemptTimeout time.Duration
	retries        int
	httpClient     *http.Client
	transport      http.RoundTripper
	log            *zap.Logger
}

// Option configures a Client in New.
type Option func(*options) error

// WithTimeout sets the budget of one method call, all attempts and pauses
// included (default DefaultTimeout, sized for the bridges' 3 s deadline; the
// operator CLI may want more). The caller's context deadline applies too: the
// earlier one wins. Zero means no budget of the client's own.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errors.New("memoryclient: timeout must not be negative")
		}
		o.timeout = d
		return nil
	}
}

// WithLogger sets the zap logger (default: no logging). Retries are logged at
// debug; failures that say the service is unhealthy (unavailable, timeout,
// internal, unexpected) at warn, the rest at debug. Entries hold the op, the
// method, the route template, status, kind, code, attempts and elapsed time.
func WithLogger(l *zap.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("memoryclient: logger is nil")
		}
		o.log = l
		return nil
	}
}

// New makes a Client for the service at baseURL (e.g. CLANKIE_MEMORY_URL,
// "http://127.0.0.1:4310"; a path prefix is kept) that authenticates with
// bearer. It fails on a malformed URL or an empty or unsendable bearer rather
// than at the first call; its errors never quote the URL or the bearer, since
// either may hold a secret.
func New(baseURL, bearer string, opts ...Option) (*Client, error) {
	base, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	if bearer == "" {
		return nil, errors.New("memoryclient: the bearer is empty; a memory service token is required")
	}
	for _, r := range bearer {
		if r <= ' ' || r == 0x7f || r > '~' {
			return nil, errors.New("memoryclient: the bearer holds a space, control or non-ASCII character and cannot be sent in a header")
		}
	}

	o := options{timeout: DefaultTimeout, retries: DefaultRetries, log: zap.NewNop()}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}

	var hc http.Client
	if o.httpClient != nil {
		hc = *o.httpClient // a copy: resty and we set fields on it
	}
	switch {
	case o.transport != nil:
		hc.Transport = o.transport
	case hc.Transport == nil:
		if dt, ok := http.DefaultTransport.(*http.Transport); ok {
			hc.Transport = dt.Clone()
		}
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	rc := resty.NewWithClient(&hc).
		SetBaseURL(base).
		SetAuthToken(bearer).
		SetDebug(false).
		SetDisableWarn(true).
		SetLogger(nopLogger{}).
		SetRetryCount(0).
		SetResponseBodyLimit(maxResponseBytes).
		SetHeader("Accept", "application/json").
		SetHeader("User-Agent", userAgent)

	return &Client{
		rc:             rc,
		bearer:         bearer,
		timeout:        o.timeout,
		attemptTimeout: o.attemptTimeout,
		retries:        o.retries,
		log:            o.log,
	}, nil
}

func parseBaseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", errors.New("memoryclient: the memory service URL is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", errors.New("memoryclient: the memory service URL must start with http:// or https://")
	}
	if u.Host == "" {
		return "", errors.New("memoryclient: the memory service URL has no host")
	}
	if u.User != nil {
		return "", errors.New("memoryclient: the memory service URL must not carry credentials; the bearer is passed separately")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("memoryclient: the memory service URL must not have a query or fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u.String(), nil
}

// nopLogger keeps resty silent: its error lines quote URLs (ids, search
// terms), and this package reports through *Error and zap instead.
type nopLogger struct{}

func (nopLogger) Errorf(string, ...any) {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Debugf(string, ...any) {}

// call describes one method's request.
type call struct {
	op    string    // method name for errors and logs
	route api.Route // method, path pattern (also what logs name)
	args  []string  // the pattern's path values in order, escaped by Route.Expand
	query url.Values
	body  any  // marshaled once, re-sent byte-identical on retry; nil: no body
	retry bool // safe to repeat (read, or idempotent by contract)
	// content is memory content this request carries (a fact body, a summary,
	// search terms); a service sentence that echoes it has it redacted.
	content []string
}

// do runs c within the call budget, retrying when c.retry allows, and decodes
// a 2xx JSON body into out (nil: the body is ignored). It returns the final
// status.
func (cl *Client) do(ctx context.Context, c call, out any) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	var body []byte
	if c.body != nil {
		b, err := json.Marshal(c.body)
		if err != nil {
			return 0, &Error{Op: c.op, Kind: KindInvalid, Code: "unencodable_request",
				Message: "the request could not be encoded as JSON"}
		}
		body = b
	}

	start := time.Now()
	callCtx := ctx
	if cl.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, cl.timeout)
		defer cancel()
	}

	maxAttempts := 1
	if c.retry {
		maxAttempts += cl.retries
	}
	pauses := newBackoff()
	for attempt := 1; ; attempt++ {
		status, err := cl.attempt(callCtx, c, body, out)
		if err == nil {
			// Content-free: the route template, never the path's ids.
			cl.log.Debug("memory call",
				zap.String("op", c.op), zap.String("method", c.route.Method), zap.String("route", c.route.Path),
				zap.Int("status", status), zap.Int("attempts", attempt), zap.Duration("elapsed", time.Since(start)))
			return status, nil
		}
		err.Attempts = attempt
		if attempt >= maxAttempts || !err.retryable {
			cl.logFailure(c, err, start)
			return status, err
		}
		wait := pauses.NextBackOff()
		if deadline, ok := callCtx.Deadline(); ok && time.Until(deadline) < wait+minRetryWindow {
			cl.logFailure(c, err, start)
			return status, err
		}
		cl.log.Debug("memory call retrying",
			zap.String("op", c.op), zap.String("method", c.route.Method), zap.String("route", c.route.Path),
			zap.Int("attempt", attempt), zap.Stringer("kind", err.Kind), zap.Int("status", err.Status),
			zap.Duration("backoff", wait))
		t := time.NewTimer(wait)
		select {
		case <-callCtx.Done():
			t.Stop()
			cerr := ctxError(c.op, callCtx.Err())
			cerr.Attempts = attempt
			cl.logFailure(c, cerr, start)
			return 0, cerr
		case <-t.C:
		}
	}
}

// newBackoff is one call's pauses between attempts: backoffBase, then three
// times the last, capped at backoffMax, without jitter (a call retries at
// most a few times within its budget). It is cenkalti/backoff's policy, the
// one the realtime client and the voice reconnects use too; the loop in do
// stays ours, for backoff.Retry measures its deadline from its own start,
// answers an expired context with the context's error where do returns the
// last real failure, and cannot give each attempt its own timeout.
func newBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: backoffBase, Multiplier: 3, MaxInterval: backoffMax}
}

// attempt sends one request. The returned *Error is nil on a 2xx.
func (cl *Client) attempt(callCtx context.Context, c call, body []byte, out any) (int, *Error) {
	actx := callCtx
	if cl.attemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(callCtx, cl.attemptTimeout)
		defer cancel()
	}
	req := cl.rc.R().SetContext(actx)
	if len(c.query) > 0 {
		req.SetQueryParamsFromValues(c.query)
	}
	if body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(body)
	}
	resp, err := req.Execute(c.route.Method, c.route.Expand(c.args...))
	if err != nil {
		return 0, cl.transportError(c.op, callCtx, actx, err)
	}
	status := resp.StatusCode()
	if status < 200 || status > 299 {
		return status, cl.statusError(c, status, resp.Body())
	}
	if out != nil {
		if err := json.Unmarshal(resp.Body(), out); err != nil {
			return status, &Error{Op: c.op, Kind: KindUnexpected, Status: status,
				Message: "the memory service answered with a body this client cannot read"}
		}
	}
	return status, nil
}

// transportError classifies a failure with no HTTP answer. The call context
// decides first: if it is done, the caller's deadline, the call budget or a
// cancellation ended the call, and nothing is retried. Otherwise the attempt
// alone failed, and a retry-safe call may try again.
func (cl *Client) transportError(op string, callCtx, actx context.Context, err error) *Error {
	if cerr := callCtx.Err(); cerr != nil {
		return ctxError(op, cerr)
	}
	cause := err
	var uerr *url.Error
	if errors.As(err, &uerr) {
		cause = uerr.Err
	}
	if errors.Is(err, resty.ErrResponseBodyTooLarge) {
		return &Error{Op: op, Kind: KindUnexpected, Message: "the memory service answered with a body larger than this client accepts", cause: cause}
	}
	var nerr interface{ Timeout() bool }
	if actx.Err() != nil || (errors.As(err, &nerr) && nerr.Timeout()) {
		return &Error{Op: op, Kind: KindTimeout, Message: genericMessage(KindTimeout), cause: cause, retryable: true}
	}
	return &Error{Op: op, Kind: KindUnavailable, Message: genericMessage(KindUnavailable),
		detail: transportDetail(err), cause: cause, retryable: true}
}

func ctxError(op string, cerr error) *Error {
	k := KindTimeout
	if errors.Is(cerr, context.Canceled) {
		k = KindCanceled
	}
	return &Error{Op: op, Kind: k, Message: genericMessage(k), cause: cerr}
}

// statusError turns a non-2xx answer into an *Error, taking the service's
// code and sentence from its JSON body when there is one.
func (cl *Client) statusError(c call, status int, body []byte) *Error {
	k := kindForStatus(status)
	e := &Error{Op: c.op, Kind: k, Status: status, retryable: k == KindUnavailable}
	var ae api.Error
	if len(bytes.TrimSpace(body)) > 0 && json.Unmarshal(body, &ae) == nil {
		e.Code = cleanCode(ae.Code)
		e.Message = cleanMessage(ae.Message, cl.bearer, c.content)
	}
	if e.Message == "" {
		e.Message = genericMessage(k)
	}
	return e
}

func (cl *Client) logFailure(c call, e *Error, start time.Time) {
	lvl := zap.DebugLevel
	switch e.Kind {
	case KindUnavailable, KindTimeout, KindInternal, KindUnexpected:
		lvl = zap.WarnLevel
	}
	if ce := cl.log.Check(lvl, "memory call failed"); ce != nil {
		ce.Write(zap.String("op", c.op), zap.String("method", c.route.Method), zap.String("route", c.route.Path),
			zap.Stringer("kind", e.Kind), zap.Int("status", e.Status), zap.String("code", e.Code),
			zap.Int("attempts", e.Attempts), zap.Duration("elapsed", time.Since(start)))
	}
}
