package bot

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
)

// NetReason says in words why a call to a server failed: DNS, refused,
// reset, timeout or TLS. It never returns a Go type name and never the
// request's URL or body (a URL can carry ids); a DNS failure names the host
// that could not be found, which is configuration, not content.
func NetReason(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	var alertErr tls.AlertError
	switch {
	case err == nil:
		return "no error"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "DNS: the host " + dnsErr.Name + " was not found"
		}
		if dnsErr.IsTimeout {
			return "DNS: looking up " + dnsErr.Name + " timed out"
		}
		return "DNS: looking up " + dnsErr.Name + " failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the connection was refused (nothing is listening there)"
	case errors.Is(err, syscall.ECONNRESET):
		return "the connection was reset"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "the network or host is unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &certErr), errors.As(err, &unknownAuth), errors.As(err, &hostErr):
		return "TLS: the server's certificate was not accepted"
	case errors.As(err, &recordErr):
		return "TLS: the server did not speak TLS (is the URL http rather than https?)"
	case errors.As(err, &alertErr):
		return "TLS: the handshake failed"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http's own wording for a TLS record header that is HTTP.
		return "TLS: the server did not speak TLS (is the URL http rather than https?)"
	case errors.Is(err, ErrTokenRejected):
		return "the bot token was rejected"
	}
	return "the connection failed"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// reasonError prints as its reason and unwraps to the cause, so a caller
// can still test errors.Is while a person reads words.
type reasonError struct {
	prefix string
	err    error
}

func (e *reasonError) Error() string { return e.prefix + ": " + NetReason(e.err) }
func (e *reasonError) Unwrap() error { return e.err }
