package config

import (
	"fmt"
	"net"
	"strings"
)

// Metrics configures where a process serves its Prometheus metrics without
// a credential.
type Metrics struct {
	Addr string `env:"CLANKIE_METRICS_ADDR" help:"Address (host:port) on which each process serves Prometheus /metrics without a bearer; a port alone (:9310) means loopback. Empty: the memory service still serves /metrics to the operator bearer."`
}

// Validate names the variable that is wrong.
func (m Metrics) Validate() error {
	if m.Addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(m.Addr); err != nil || port == "" {
		return fmt.Errorf("CLANKIE_METRICS_ADDR must be host:port or :port, such as 127.0.0.1:9310 (got %q)", m.Addr)
	}
	return nil
}

// ListenAddr returns the address to bind: a port alone is loopback, so the
// metrics are never on every interface unless a wildcard host is written.
func (m Metrics) ListenAddr() string { return loopbackIfBare(m.Addr) }

// loopbackIfBare returns addr with a bare port (":8080") bound to
// 127.0.0.1: a listener without TLS or a credential is never on every
// interface unless a wildcard host (0.0.0.0, [::]) is written out.
func loopbackIfBare(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}
