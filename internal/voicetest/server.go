// Package voicetest is a fake Discord voice server for tests: the voice
// gateway v8 over TLS with a certificate generated in the test process, UDP
// IP discovery, and a relay that re-encrypts each RTP packet for every other
// client under that client's own transport key. It is strict like Discord:
// malformed or out-of-order messages close the socket with Discord's codes.
//
// End-to-end encryption is pluggable (DAVE); the default is protocol
// version 0, where the relay carries frames as the clients sent them.
// DAVEServer plays Discord's part in DAVE protocol version 1 (external
// sender, proposals, commits, welcomes, transitions). The relay never
// decrypts end-to-end: it only counts what it carried (Payloads), so a test
// can prove no audio crossed it in the clear.
package voicetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/clankie/clankie/voice/opus"
)

// Options configure a Server.
type Options struct {
	// HeartbeatInterval is sent in hello (default 13750 ms, as Discord).
	// A client silent for twice that is closed with 4009.
	HeartbeatInterval time.Duration
	// Modes are the transport modes offered in ready (default both rtpsize
	// AEAD modes, AES-GCM first).
	Modes []string
	// RequireDAVE closes an identify whose max_dave_protocol_version is
	// below 1 with 4017, as Discord does for non-stage channels.
	RequireDAVE bool
	// DAVE plays the voice server's DAVE role (external sender, proposals,
	// transitions); nil is protocol version 0.
	DAVE DAVE
	// IgnoreHeartbeats leaves heartbeats unacknowledged (op 6 never sent),
	// as a voice server that stopped answering would.
	IgnoreHeartbeats bool
	// ResumeWindow is how long a session whose socket dropped may resume
	// (default 5 s); after it the others get op 13.
	ResumeWindow time.Duration
	// ServerID is the guild id the server serves and identify must carry
	// (default 900000000000000001): a test whose bot joins through a fake
	// main gateway sets its guild's.
	ServerID string
	// ReadyIP is the ip ready (op 2) names for UDP (default 127.0.0.1):
	// a test of a hostile server sets one that does not parse.
	ReadyIP string
}

// Peer is one connected client as the DAVE role sees it.
type Peer interface {
	UserID() string
	SendJSON(op int, d any) error
	SendBinary(op int, payload []byte) error
}

// DAVE is the voice server's side of the DAVE protocol. Another package
// (voice/dave/davetest) provides the real external sender; NoDAVE is
// protocol version 0. Methods are called from the peer's gateway goroutine.
type DAVE interface {
	// ProtocolVersion is sent in the session description of a client that
	// identified with maxVersion as its max_dave_protocol_version.
	ProtocolVersion(maxVersion int) int
	// Joined is called after a client's session description was sent.
	Joined(p Peer, maxVersion int)
	// Left is called when a client's session ended.
	Left(userID string)
	// JSON receives opcodes 23 and 31; Binary receives 26 and 28. An error
	// that is a close code (CloseCode) closes the client's socket with it.
	JSON(p Peer, op int, d json.RawMessage) error
	Binary(p Peer, op int, payload []byte) error
}

// CloseCode is a voice gateway close code a DAVE role returns to have the
// client's socket closed with it (e.g. 4002 for an undecodable message).
type CloseCode int

func (c CloseCode) Error() string { return protocolError(c).Error() }

// NoDAVE is protocol version 0: no end-to-end encryption.
type NoDAVE struct{}

// ProtocolVersion reports 0.
func (NoDAVE) ProtocolVersion(int) int               { return 0 }
func (NoDAVE) Joined(Peer, int)                      {}
func (NoDAVE) Left(string)                           {}
func (NoDAVE) JSON(Peer, int, json.RawMessage) error { return nil }
func (NoDAVE) Binary(Peer, int, []byte) error        { return nil }

// Credentials are what Discord's main gateway would hand a client for one
// voice session (VOICE_STATE_UPDATE + VOICE_SERVER_UPDATE).
type Credentials struct {
	Endpoint  string
	ServerID  string
	UserID    string
	SessionID string
	Token     string
}

// Server is a running fake voice server.
type Server struct {
	opts     Options
	serverID string
	tlsCfg   *tls.Config
	roots    *x509.CertPool
	caFile   string
	ln       net.Listener
	http     *http.Server
	udp      *net.UDPConn
	wg       sync.WaitGroup
	upgrader websocket.Upgrader

	mu       sync.Mutex
	closed   bool
	creds    map[string]Credentials // by session id
	sessions map[string]*session    // by session id, once identified
	byAddr   map[string]*session
	nextSSRC uint32
	// hello, when set, is sent verbatim as hello's heartbeat_interval
	// (SetHelloInterval): a hostile server's value.
	hello string
	// corrupt is how many more DAVE frames from each user the relay
	// corrupts (CorruptDAVEFrames).
	corrupt map[string]int

	relayed  atomic.Uint64
	rejected atomic.Uint64
	// authFailures counts identifies refused with 4004: an unknown session
	// id, or a token that is not the latest one issued for it.
	authFailures atomic.Uint64
	payloads     [3]atomic.Uint64 // DAVE frames, silence frames, other (clear) frames
	resumes      atomic.Uint64
	corrupted    atomic.Uint64
}

// New starts a fake voice server on loopback and stops it when tb ends.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(opts, tb.TempDir())
	if err != nil {
		tb.Fatalf("fake voice server: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Start starts a fake voice server, writing its CA certificate into dir.
func Start(opts Options, dir string) (*Server, error) {
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 13750 * time.Millisecond
	}
	if opts.ReadyIP == "" {
		opts.ReadyIP = "127.0.0.1"
	}
	if len(opts.Modes) == 0 {
		opts.Modes = []string{"aead_aes256_gcm_rtpsize", "aead_xchacha20_poly1305_rtpsize"}
	}
	if opts.DAVE == nil {
		opts.DAVE = NoDAVE{}
	}
	if opts.ResumeWindow <= 0 {
		opts.ResumeWindow = 5 * time.Second
	}
	if opts.ServerID == "" {
		opts.ServerID = "900000000000000001"
	}
	cert, certPEM, err := testCert()
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "voicetest-ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	s := &Server{
		opts: opts, serverID: opts.ServerID, roots: roots, caFile: caFile,
		tlsCfg:   &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		creds:    map[string]Credentials{},
		sessions: map[string]*session{},
		byAddr:   map[string]*session{},
		corrupt:  map[string]int{},
		nextSSRC: 1000,
	}
	s.ln, err = tls.Listen("tcp", "127.0.0.1:0", s.tlsCfg)
	if err != nil {
		return nil, err
	}
	s.udp, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		_ = s.ln.Close()
		return nil, err
	}
	s.http = &http.Server{
		Handler: http.HandlerFunc(s.serveWS), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0), // refused handshakes are what some tests do
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = s.http.Serve(s.ln) }()
	go s.serveUDP()
	return s, nil
}

// Close stops the server and every connection, and waits for its goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	var socks []*session
	for _, ss := range s.sessions {
		socks = append(socks, ss)
	}
	s.mu.Unlock()
	_ = s.http.Close()
	_ = s.udp.Close()
	if c, ok := s.opts.DAVE.(interface{ Close() }); ok {
		c.Close()
	}
	for _, ss := range socks {
		ss.mu.Lock()
		if ss.expiry != nil {
			ss.expiry.Stop()
		}
		ss.mu.Unlock()
		ss.dropSocket()
	}
	s.wg.Wait()
}

// SetHelloInterval makes the hello (op 8) of every websocket opened from
// now on carry raw, verbatim, as its heartbeat_interval: a hostile or
// broken voice server's value (e.g. "1e-7", "1e300", "-5"). "" restores
// Options.HeartbeatInterval.
func (s *Server) SetHelloInterval(raw string) {
	s.mu.Lock()
	s.hello = raw
	s.mu.Unlock()
}

// Endpoint is the host:port a VOICE_SERVER_UPDATE would carry.
func (s *Server) Endpoint() string { return s.ln.Addr().String() }

// ServerID is the guild id this voice server serves.
func (s *Server) ServerID() string { return s.serverID }

// ClientTLS returns a client TLS configuration that trusts the test CA.
func (s *Server) ClientTLS() *tls.Config {
	return &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}
}

// CAFile is the PEM file of the test CA, for SSL_CERT_FILE or
// NODE_EXTRA_CA_CERTS.
func (s *Server) CAFile() string { return s.caFile }

// Relayed reports how many RTP packets the relay delivered (one per receiver).
func (s *Server) Relayed() uint64 { return s.relayed.Load() }

// Resumes reports how many sessions resumed (op 7 answered with op 9).
func (s *Server) Resumes() uint64 { return s.resumes.Load() }

// AuthFailures reports how many identifies were refused with 4004 (a
// token replaced by a later Admit, as Discord refuses a stale one).
func (s *Server) AuthFailures() uint64 { return s.authFailures.Load() }

// Rejected reports how many UDP packets the relay refused.
func (s *Server) Rejected() uint64 { return s.rejected.Load() }

// Join issues voice credentials for userID, as the main gateway would when
// the user joins the channel.
func (s *Server) Join(userID string) Credentials { return s.Admit(userID, randHex(16)) }

// Admit issues voice credentials for userID's voice session sessionID (the
// session id of their main gateway connection, which Discord's
// VOICE_STATE_UPDATE carries) with a fresh token, as Discord does on every
// VOICE_SERVER_UPDATE. Admitting a session id again replaces its token.
func (s *Server) Admit(userID, sessionID string) Credentials {
	c := Credentials{
		Endpoint: s.Endpoint(), ServerID: s.serverID, UserID: userID,
		SessionID: sessionID, Token: randHex(16),
	}
	s.mu.Lock()
	s.creds[c.SessionID] = c
	s.mu.Unlock()
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Drop cuts userID's websocket without a close frame, as a network fault
// would; the client may resume.
func (s *Server) Drop(userID string) bool {
	ss := s.byUser(userID)
	if ss == nil {
		return false
	}
	ss.dropSocket()
	return true
}

// CloseWith closes userID's websocket with code. Codes Discord resumes from
// (4015) leave the session resumable; any other ends it.
func (s *Server) CloseWith(userID string, code int) bool {
	ss := s.byUser(userID)
	if ss == nil {
		return false
	}
	ss.closeSocket(code)
	if code != 4015 {
		s.endSession(ss)
	}
	return true
}

// SSRC returns the SSRC the server assigned to userID.
func (s *Server) SSRC(userID string) (uint32, bool) {
	ss := s.byUser(userID)
	if ss == nil {
		return 0, false
	}
	return ss.ssrc, true
}

func (s *Server) byUser(userID string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		if ss.userID == userID {
			return ss
		}
	}
	return nil
}

func (s *Server) others(self *session) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*session
	for _, ss := range s.sessions {
		if ss != self && ss.described() {
			out = append(out, ss)
		}
	}
	return out
}

// endSession forgets a session and tells the others (op 13).
func (s *Server) endSession(ss *session) {
	s.mu.Lock()
	if s.sessions[ss.sessionID] != ss {
		s.mu.Unlock()
		return
	}
	delete(s.sessions, ss.sessionID)
	delete(s.creds, ss.sessionID)
	for a, x := range s.byAddr {
		if x == ss {
			delete(s.byAddr, a)
		}
	}
	s.mu.Unlock()
	s.opts.DAVE.Left(ss.userID)
	for _, o := range s.others(ss) {
		_ = o.SendJSON(13, map[string]any{"user_id": ss.userID})
	}
}

// serveUDP answers IP discovery and relays RTP.
func (s *Server) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, addr, err := s.udp.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p := buf[:n]
		switch {
		case n == 74 && binary.BigEndian.Uint16(p) == 1:
			s.discover(p, addr)
		case n == 8:
			// keepalive
		default:
			s.relay(p, addr)
		}
	}
}

func (s *Server) discover(p []byte, addr *net.UDPAddr) {
	if binary.BigEndian.Uint16(p[2:]) != 70 {
		s.rejected.Add(1)
		return
	}
	ssrc := binary.BigEndian.Uint32(p[4:])
	s.mu.Lock()
	var found *session
	for _, ss := range s.sessions {
		if ss.ssrc == ssrc {
			found = ss
		}
	}
	if found != nil {
		s.byAddr[addr.String()] = found
		found.mu.Lock()
		found.udpAddr = addr
		found.mu.Unlock()
	}
	s.mu.Unlock()
	if found == nil {
		s.rejected.Add(1)
		return
	}
	resp := make([]byte, 74)
	binary.BigEndian.PutUint16(resp, 2)
	binary.BigEndian.PutUint16(resp[2:], 70)
	binary.BigEndian.PutUint32(resp[4:], ssrc)
	copy(resp[8:72], addr.IP.String())
	binary.BigEndian.PutUint16(resp[72:], uint16(addr.Port))
	_, _ = s.udp.WriteToUDP(resp, addr)
}

// relay decrypts a client's packet with its key and re-encrypts it for each
// other client with theirs. A packet whose SSRC is not its sender's, or
// that does not authenticate, is refused.
func (s *Server) relay(p []byte, addr *net.UDPAddr) {
	s.mu.Lock()
	from := s.byAddr[addr.String()]
	s.mu.Unlock()
	if from == nil || len(p) < 12 || binary.BigEndian.Uint32(p[8:]) != from.ssrc {
		s.rejected.Add(1)
		return
	}
	from.mu.Lock()
	tr := from.transport
	var hdr, plain []byte
	var err error = errors.New("no key")
	if tr != nil {
		hdr, plain, err = tr.open(p)
	}
	from.mu.Unlock()
	if err != nil {
		s.rejected.Add(1)
		return
	}
	kind := classify(hdr, plain)
	s.payloads[kind].Add(1)
	if kind == 0 {
		s.maybeCorrupt(from.userID, hdr, plain)
	}
	for _, o := range s.others(from) {
		o.mu.Lock()
		to, dst := o.transport, o.udpAddr
		var out []byte
		if to != nil && dst != nil {
			out = to.seal(hdr, plain)
		}
		o.mu.Unlock()
		if out != nil {
			if _, err := s.udp.WriteToUDP(out, dst); err == nil {
				s.relayed.Add(1)
			}
		}
	}
}

// Payloads counts the audio frames clients sent through the relay by what
// the relay saw once transport encryption was off: DAVE frames (ending in
// the 0xFAFA magic marker), the Opus silence frame (which DAVE never
// encrypts), and anything else, which in an end-to-end encrypted call is
// audio sent in the clear.
type Payloads struct {
	DAVE, Silence, Clear uint64
}

// Payloads reports what the relay carried.
func (s *Server) Payloads() Payloads {
	return Payloads{DAVE: s.payloads[0].Load(), Silence: s.payloads[1].Load(), Clear: s.payloads[2].Load()}
}

// classify reads a relayed packet's payload: 0 a DAVE frame, 1 the silence
// frame, 2 anything else. The extension body (rtpsize encrypts it with the
// payload) is skipped first.
func classify(hdr, plain []byte) int {
	plain, ok := payloadOf(hdr, plain)
	if !ok {
		return 2
	}
	switch {
	case opus.IsSilence(plain):
		return 1
	case len(plain) > 2 && plain[len(plain)-2] == 0xFA && plain[len(plain)-1] == 0xFA:
		return 0
	}
	return 2
}

// payloadOf returns the frame in a relayed packet's decrypted body: what
// follows the extension body, which rtpsize encrypts with the payload.
func payloadOf(hdr, plain []byte) ([]byte, bool) {
	if hdr[0]&0x10 != 0 && len(hdr) >= 16 {
		n := 4 * int(binary.BigEndian.Uint16(hdr[len(hdr)-2:]))
		if n > len(plain) {
			return nil, false
		}
		plain = plain[n:]
	}
	return plain, true
}

// Wait blocks until cond holds or ctx ends, polling: a helper for tests
// that wait on the server's view (e.g. a user's session described).
func (s *Server) Wait(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

// Connected reports whether userID's session is described (ready for RTP).
func (s *Server) Connected(userID string) bool {
	ss := s.byUser(userID)
	return ss != nil && ss.described() && ss.hasUDP()
}
