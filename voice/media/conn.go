package media

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config is what a Conn needs to join a voice server: the endpoint and
// token from VOICE_SERVER_UPDATE, the session id from VOICE_STATE_UPDATE.
type Config struct {
	Endpoint  string // host[:port]; the connection dials wss:// only
	ServerID  string // guild id
	UserID    string // the bot's user id
	SessionID string
	Token     string

	// TLS configures the wss dial; nil trusts the system roots (which Go
	// reads from SSL_CERT_FILE when set). Tests inject their CA here.
	TLS *tls.Config
	// DAVE is the end-to-end encryption session; nil is Passthrough.
	DAVE DAVE
	// Allow reports whether userID has consented to be heard. It is asked
	// for every packet, before any decryption, so a change takes effect on
	// the next packet; it runs on the receive goroutine and must not block
	// (an atomic or a map under a read lock). Nil allows nobody.
	Allow func(userID string) bool
	// Log receives counts and state changes, never ids, keys or audio.
	Log *zap.Logger

	// FrameBuffer is the capacity of Frames (default 64); a frame that
	// finds it full is dropped and counted, never blocking the socket.
	FrameBuffer int
	// SendBuffer is how many frames Send queues ahead of the pacer
	// (default 10, 200 ms).
	SendBuffer int
	// HandshakeTimeout bounds each websocket handshake (default 10 s).
	HandshakeTimeout time.Duration
}

// Frame is one Opus frame received from a consented speaker.
type Frame struct {
	UserID    string
	SSRC      uint32
	Sequence  uint16
	Timestamp uint32
	Opus      []byte
	// Arrived is when its UDP packet was read.
	Arrived time.Time
}

// Stats are a connection's counters. None is per user.
type Stats struct {
	PacketsReceived   uint64 // UDP packets read after the handshake
	Malformed         uint64 // not parseable as rtpsize RTP
	NotAudio          uint64 // another payload type (e.g. RTCP)
	UnknownSSRC       uint64 // dropped: SSRC never named (or our own)
	HeldForSSRC       uint64 // held until the speaking op named their SSRC
	DroppedNoConsent  uint64 // speaker not consented: dropped undecrypted
	TransportOpens    uint64 // AEAD opens performed (the decryption count)
	TransportFailures uint64
	DAVEFailures      uint64
	FramesDelivered   uint64
	FramesOverflow    uint64 // delivered nowhere: Frames was full
	FramesSent        uint64 // UDP packets sent, silence included
	SendDroppedE2EE   uint64 // frames not sent: DAVE not ready
	GatewayMalformed  uint64
	Resumes           uint64
	// GatewayPanics and MediaPanics count inputs whose handling panicked
	// and was recovered: a gateway message, a datagram or a frame to send,
	// dropped while the connection lived on.
	GatewayPanics uint64
	MediaPanics   uint64
	// SSRCRefused counts speaking ops (5) that named a new SSRC when
	// maxSSRCs were already mapped: ignored, as a hostile server's flood.
	SSRCRefused uint64
}

type counters struct {
	received, malformed, notAudio, unknown, heldSSRC, noConsent, transportFail,
	daveFail, delivered, overflow, sent, droppedE2EE, gatewayBad, resumes,
	gatewayPanics, mediaPanics, ssrcRefused atomic.Uint64
}

// maxSSRCs bounds the SSRC→user map: a voice call has at most a few dozen
// speakers (each with an audio and perhaps a video SSRC), and a voice
// server that names more is not to be believed nor let grow our memory.
const maxSSRCs = 1024

// Conn is a voice connection. Its methods are safe for concurrent use.
type Conn struct {
	cfg  Config
	log  *zap.Logger
	dave DAVE

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}

	sock    atomic.Pointer[socket]
	seq     atomic.Int64
	unacked atomic.Int32

	udp       *net.UDPConn
	ssrc      uint32
	mode      Mode
	transport *Transport

	mu     sync.RWMutex
	bySSRC map[uint32]string

	frames    chan Frame
	sendQ     chan []byte
	announced atomic.Bool  // speaking op 5 sent on the current socket
	pending   atomic.Int64 // frames handed to Send and not yet transmitted
	talking   atomic.Bool  // the pacer is inside an utterance

	stats counters

	// daveEarly holds DAVE messages that arrive before the session
	// description started the DAVE session; only the handshake touches it.
	daveStarted bool
	daveEarly   []message

	// held are packets waiting for their SSRC to be named; only the
	// receive goroutine touches it.
	held []heldPacket

	errOnce sync.Once
	err     error
}

// ErrClosed reports a connection closed by its owner.
var ErrClosed = errors.New("voice connection closed")

// errPeerPanic ends a connection whose resume handshake panicked on the
// voice server's input; like a failed resume, it calls for a rejoin.
var errPeerPanic = fmt.Errorf("%w: the voice server's input could not be handled", &CloseError{Code: 1006, Action: Rejoin})

type readyData struct {
	SSRC  uint32   `json:"ssrc"`
	IP    string   `json:"ip"`
	Port  int      `json:"port"`
	Modes []string `json:"modes"`
}

type sessionDescription struct {
	Mode                string `json:"mode"`
	SecretKey           []int  `json:"secret_key"`
	DAVEProtocolVersion int    `json:"dave_protocol_version"`
}

// Dial joins the voice server: websocket, identify, UDP IP discovery, select
// protocol, session description. ctx bounds the handshake only; the
// connection then lives until Close or a close the gateway will not resume.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Endpoint == "" || cfg.ServerID == "" || cfg.UserID == "" || cfg.SessionID == "" || cfg.Token == "" {
		return nil, errors.New("voice connection needs endpoint, server id, user id, session id and token")
	}
	if cfg.DAVE == nil {
		cfg.DAVE = Passthrough{}
	}
	if cfg.Allow == nil {
		cfg.Allow = func(string) bool { return false }
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.FrameBuffer <= 0 {
		cfg.FrameBuffer = 64
	}
	if cfg.SendBuffer <= 0 {
		cfg.SendBuffer = 10
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	life, cancel := context.WithCancel(context.Background())
	c := &Conn{
		cfg: cfg, log: cfg.Log, dave: cfg.DAVE,
		ctx: life, cancel: cancel, done: make(chan struct{}),
		bySSRC: map[uint32]string{},
		frames: make(chan Frame, cfg.FrameBuffer),
		sendQ:  make(chan []byte, cfg.SendBuffer),
	}
	c.seq.Store(-1)
	if err := c.handshake(ctx); err != nil {
		c.shutdown(err)
		c.wg.Wait()
		return nil, err
	}
	return c, nil
}

func (c *Conn) handshake(ctx context.Context) error {
	s, err := c.dialSocket(ctx)
	if err != nil {
		return err
	}
	c.sock.Store(s)
	stopHB, err := c.startHeartbeat(ctx, s)
	if err != nil {
		return err
	}
	fail := func(err error) error { close(stopHB); return err }
	err = s.writeJSON(OpIdentify, map[string]any{
		"server_id": c.cfg.ServerID, "user_id": c.cfg.UserID, "session_id": c.cfg.SessionID,
		"token": c.cfg.Token, "max_dave_protocol_version": c.dave.MaxProtocolVersion(),
	})
	if err != nil {
		return fail(err)
	}
	m, err := c.await(ctx, s, OpReady)
	if err != nil {
		return fail(err)
	}
	var r readyData
	if err := json.Unmarshal(m.D, &r); err != nil || r.Port <= 0 || r.Port > 65535 {
		return fail(errors.New("voice gateway ready lacks a usable address"))
	}
	// An ip that does not parse would make DialUDP aim at this machine;
	// the voice server must name where its media goes.
	udpIP := net.ParseIP(r.IP)
	if udpIP == nil || udpIP.IsUnspecified() {
		return fail(errors.New("voice gateway ready names no usable UDP ip address"))
	}
	mode, ok := ChooseMode(r.Modes)
	if !ok {
		return fail(errors.New("voice server offers no encryption mode we support"))
	}
	c.ssrc, c.mode = r.SSRC, mode
	udp, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: udpIP, Port: r.Port})
	if err != nil {
		return fail(fmt.Errorf("voice UDP: %w", err))
	}
	c.udp = udp
	ip, port, err := discoverIP(ctx, udp, r.SSRC)
	if err != nil {
		return fail(err)
	}
	err = s.writeJSON(OpSelectProtocol, map[string]any{
		"protocol": "udp",
		"data":     map[string]any{"address": ip, "port": port, "mode": string(mode)},
	})
	if err != nil {
		return fail(err)
	}
	m, err = c.await(ctx, s, OpSessionDescription)
	if err != nil {
		return fail(err)
	}
	var sd sessionDescription
	if err := json.Unmarshal(m.D, &sd); err != nil || sd.Mode != string(mode) || len(sd.SecretKey) != 32 {
		return fail(errors.New("voice session description is malformed"))
	}
	key := make([]byte, 32)
	for i, v := range sd.SecretKey {
		if v < 0 || v > 255 {
			return fail(errors.New("voice session description is malformed"))
		}
		key[i] = byte(v)
	}
	if c.transport, err = NewTransport(mode, key); err != nil {
		return fail(err)
	}
	if err := c.dave.Start(sd.DAVEProtocolVersion, c.cfg.UserID, signal{c}); err != nil {
		return fail(fmt.Errorf("DAVE protocol version %d: %w", sd.DAVEProtocolVersion, err))
	}
	c.daveStarted = true
	for _, m := range c.daveEarly {
		c.handleSafely(m)
	}
	c.daveEarly = nil
	c.wg.Add(3)
	go c.run(s, stopHB)
	go c.receive()
	go c.pace()
	go func() { c.wg.Wait(); close(c.done) }()
	c.log.Info("voice connected", zap.String("mode", string(mode)), zap.Int("dave_protocol_version", sd.DAVEProtocolVersion))
	return nil
}

// discoverIP performs UDP IP discovery: a 74-byte request naming our SSRC,
// answered with the address and port the server sees.
func discoverIP(ctx context.Context, udp *net.UDPConn, ssrc uint32) (string, int, error) {
	req := make([]byte, 74)
	binary.BigEndian.PutUint16(req[0:], 1)
	binary.BigEndian.PutUint16(req[2:], 70)
	binary.BigEndian.PutUint32(req[4:], ssrc)
	buf := make([]byte, 1500)
	defer func() { _ = udp.SetReadDeadline(time.Time{}) }()
	for attempt := 0; attempt < 5; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", 0, err
		}
		if _, err := udp.Write(req); err != nil {
			return "", 0, fmt.Errorf("voice IP discovery: %w", err)
		}
		_ = udp.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := udp.Read(buf)
			if err != nil {
				break
			}
			if ip, port, ok := parseDiscovery(buf[:n], ssrc); ok {
				return ip, port, nil
			}
		}
	}
	return "", 0, errors.New("voice IP discovery got no answer")
}

func parseDiscovery(b []byte, ssrc uint32) (string, int, bool) {
	if len(b) != 74 || binary.BigEndian.Uint16(b) != 2 || binary.BigEndian.Uint16(b[2:]) != 70 || binary.BigEndian.Uint32(b[4:]) != ssrc {
		return "", 0, false
	}
	addr := b[8:72]
	n := 0
	for n < len(addr) && addr[n] != 0 {
		n++
	}
	ip := net.ParseIP(string(addr[:n]))
	if ip == nil {
		return "", 0, false
	}
	return ip.String(), int(binary.BigEndian.Uint16(b[72:])), true
}

// signal sends DAVE messages on whatever socket is current.
type signal struct{ c *Conn }

var errNoSocket = errors.New("voice gateway not connected")

func (s signal) SendJSON(op Opcode, d any) error {
	if k := s.c.sock.Load(); k != nil {
		return k.writeJSON(op, d)
	}
	return errNoSocket
}

func (s signal) SendBinary(op Opcode, payload []byte) error {
	if k := s.c.sock.Load(); k != nil {
		return k.writeBinary(op, payload)
	}
	return errNoSocket
}

// handleSafely is handle behind recover: a message whose handling panics
// is dropped and counted, and the connection carries on.
func (c *Conn) handleSafely(m message) {
	defer c.recoverPeer(&c.stats.gatewayPanics, ComponentGateway)
	c.handle(m)
}

// handle acts on one gateway message other than the one a handshake awaits.
func (c *Conn) handle(m message) {
	if !c.daveStarted && m.Op.IsDAVE() {
		if len(c.daveEarly) < 64 {
			c.daveEarly = append(c.daveEarly, m)
		}
		return
	}
	if m.binary {
		if m.Op.IsBinary() {
			if err := c.dave.HandleBinary(m.Op, m.bseq, m.payload); err != nil {
				c.log.Warn("DAVE binary message refused", zap.Int("op", int(m.Op)), zap.Error(err))
			}
		}
		return
	}
	switch m.Op {
	case OpHeartbeatAck:
		c.unacked.Store(0)
	case OpSpeaking:
		var d struct {
			UserID string `json:"user_id"`
			SSRC   uint32 `json:"ssrc"`
		}
		if json.Unmarshal(m.D, &d) == nil && d.UserID != "" && d.SSRC != 0 && d.SSRC != c.ssrc {
			c.mu.Lock()
			if _, known := c.bySSRC[d.SSRC]; known || len(c.bySSRC) < maxSSRCs {
				c.bySSRC[d.SSRC] = d.UserID
			} else {
				c.stats.ssrcRefused.Add(1)
			}
			c.mu.Unlock()
		}
	case OpClientsConnect:
		var d struct {
			UserIDs []string `json:"user_ids"`
		}
		if json.Unmarshal(m.D, &d) == nil {
			c.dave.UsersConnected(d.UserIDs)
		}
	case OpClientDisconnect:
		var d struct {
			UserID string `json:"user_id"`
		}
		if json.Unmarshal(m.D, &d) == nil && d.UserID != "" {
			c.mu.Lock()
			for ssrc, u := range c.bySSRC {
				if u == d.UserID {
					delete(c.bySSRC, ssrc)
				}
			}
			c.mu.Unlock()
			c.dave.UserDisconnected(d.UserID)
		}
	case OpDAVEPrepareTransition, OpDAVEExecuteTransition, OpDAVEPrepareEpoch, OpDAVEMLSInvalidCommitWelcome:
		if err := c.dave.HandleJSON(m.Op, m.D); err != nil {
			c.log.Warn("DAVE message refused", zap.Int("op", int(m.Op)), zap.Error(err))
		}
	}
}

// run reads the gateway until it fails, then resumes or ends the connection
// as the close code says.
func (c *Conn) run(s *socket, stopHB chan struct{}) {
	defer c.wg.Done()
	defer func() {
		// Each message is handled behind its own recover; this one covers
		// the resume handshake, and ends the connection rather than the
		// process.
		if r := recover(); r != nil {
			c.stats.gatewayPanics.Add(1)
			c.log.Error("recovered from a panic on the voice gateway; the connection ends", zap.String("component", ComponentGateway))
			c.shutdown(errPeerPanic)
		}
	}()
	for {
		err := c.readLoop(s)
		close(stopHB)
		if c.ctx.Err() != nil {
			return
		}
		var ce *CloseError
		if !errors.As(err, &ce) || ce.Action != Resume {
			c.log.Info("voice gateway closed", zap.Error(err))
			c.shutdown(err)
			return
		}
		s, stopHB, err = c.resume()
		if err != nil {
			c.log.Info("voice gateway resume failed", zap.Error(err))
			c.shutdown(err)
			return
		}
	}
}

func (c *Conn) readLoop(s *socket) error {
	for {
		m, err := s.read()
		if errors.Is(err, errBadFrame) {
			c.stats.gatewayBad.Add(1)
			continue
		}
		if err != nil {
			return asCloseError(err)
		}
		c.noteSeq(m)
		c.handleSafely(m)
	}
}

// resume reconnects and sends op 7, retrying with backoff while the failure
// itself says resume.
func (c *Conn) resume() (*socket, chan struct{}, error) {
	backoff := 100 * time.Millisecond
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		select {
		case <-c.ctx.Done():
			return nil, nil, ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
		s, stop, err := c.resumeOnce()
		if err == nil {
			c.stats.resumes.Add(1)
			c.log.Info("voice gateway resumed")
			return s, stop, nil
		}
		last = err
		var ce *CloseError
		if errors.As(err, &ce) && ce.Action != Resume {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("%w: %w", &CloseError{Code: 1006, Action: Rejoin}, last)
}

func (c *Conn) resumeOnce() (*socket, chan struct{}, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.HandshakeTimeout)
	defer cancel()
	s, err := c.dialSocket(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.sock.Store(s)
	c.announced.Store(false)
	stop, err := c.startHeartbeat(ctx, s)
	if err != nil {
		_ = s.ws.Close()
		return nil, nil, err
	}
	err = s.writeJSON(OpResume, map[string]any{
		"server_id": c.cfg.ServerID, "session_id": c.cfg.SessionID, "token": c.cfg.Token, "seq_ack": c.seq.Load(),
	})
	if err == nil {
		_, err = c.await(ctx, s, OpResumed)
	}
	if err != nil {
		close(stop)
		_ = s.ws.Close()
		return nil, nil, err
	}
	return s, stop, nil
}

// shutdown ends the connection once, recording why.
func (c *Conn) shutdown(err error) {
	c.errOnce.Do(func() {
		c.err = err
		c.cancel()
		if s := c.sock.Load(); s != nil {
			s.closeWith(1000)
		}
		if c.udp != nil {
			_ = c.udp.Close()
		}
	})
}

// Close leaves the voice server and waits for the connection's goroutines.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	<-c.done
	return nil
}

// Done is closed when the connection has ended and its goroutines exited.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended: ErrClosed after Close, or an error
// wrapping a *CloseError whose Action tells the caller to rejoin or stop.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Frames delivers consented speakers' Opus frames; it is closed when the
// connection ends.
func (c *Conn) Frames() <-chan Frame { return c.frames }

// SSRC is our own synchronisation source.
func (c *Conn) SSRC() uint32 { return c.ssrc }

// Mode is the negotiated transport encryption mode.
func (c *Conn) Mode() Mode { return c.mode }

// UserBySSRC returns the user the gateway announced for ssrc.
func (c *Conn) UserBySSRC(ssrc uint32) (string, bool) {
	c.mu.RLock()
	u, ok := c.bySSRC[ssrc]
	c.mu.RUnlock()
	return u, ok
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	s := &c.stats
	st := Stats{
		PacketsReceived: s.received.Load(), Malformed: s.malformed.Load(), NotAudio: s.notAudio.Load(),
		UnknownSSRC: s.unknown.Load(), HeldForSSRC: s.heldSSRC.Load(), DroppedNoConsent: s.noConsent.Load(),
		TransportFailures: s.transportFail.Load(), DAVEFailures: s.daveFail.Load(),
		FramesDelivered: s.delivered.Load(), FramesOverflow: s.overflow.Load(), FramesSent: s.sent.Load(),
		SendDroppedE2EE: s.droppedE2EE.Load(), GatewayMalformed: s.gatewayBad.Load(), Resumes: s.resumes.Load(),
		GatewayPanics: s.gatewayPanics.Load(), MediaPanics: s.mediaPanics.Load(), SSRCRefused: s.ssrcRefused.Load(),
	}
	if c.transport != nil {
		st.TransportOpens = c.transport.Opens()
	}
	return st
}

// randomStart returns a random RTP sequence and timestamp origin.
func randomStart() (uint16, uint32) {
	return uint16(rand.Uint32()), rand.Uint32()
}
