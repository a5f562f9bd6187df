package memoryclient

import (
	"errors"
	"net/http"
	"time"
)

// Options only the tests set; production callers (the bridges, the CLI) use
// WithTimeout and WithLogger. Kept here so they are not dead code in the
// binary.

// WithAttemptTimeout bounds each single request inside a call, so a hung
// attempt of a retry-safe call can be abandoned and retried while the call's
// budget still has room. Zero (the default) lets an attempt use the whole
// remaining budget.
func WithAttemptTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return errors.New("memoryclient: attempt timeout must not be negative")
		}
		o.attemptTimeout = d
		return nil
	}
}

// WithRetries sets how many extra attempts a retry-safe call may make after
// the first (default DefaultRetries). Zero disables retries.
func WithRetries(n int) Option {
	return func(o *options) error {
		if n < 0 {
			return errors.New("memoryclient: retries must not be negative")
		}
		o.retries = n
		return nil
	}
}

// WithHTTPClient uses hc's transport, jar and timeout. The Client works on a
// copy, so hc is not modified; redirects are never followed, whatever
// hc.CheckRedirect says, so the bearer cannot be carried to another address.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) error {
		if hc == nil {
			return errors.New("memoryclient: http client is nil")
		}
		o.httpClient = hc
		return nil
	}
}

// WithTransport sets the round tripper (tests, a unix socket dialer, TLS
// settings). It takes precedence over the transport of WithHTTPClient.
func WithTransport(rt http.RoundTripper) Option {
	return func(o *options) error {
		if rt == nil {
			return errors.New("memoryclient: transport is nil")
		}
		o.transport = rt
		return nil
	}
}
