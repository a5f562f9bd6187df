package media

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
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
	// SendBuffer is how many frames Send and TrySend queue ahead of the
	// pacer (default 10, 200 ms); Play queues none.
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

// Conn is a voice connection: a voice gateway session (gateway.go) and the
// UDP media connection it negotiates (udp.go), dialled, run and ended
// together. Its methods are safe for concurrent use.
type Conn struct {
	gw  *gateway
	udp *udpConn

	ctx    context.Context // the connection's life
	cancel context.CancelFunc
	done   chan struct{}

	errOnce sync.Once
	err     error
}

// ErrClosed reports a connection closed by its owner.
var ErrClosed = errors.New("voice connection closed")

// errPeerPanic ends a connection whose resume handshake panicked on the
// voice server's input; like a failed resume, it calls for a rejoin.
var errPeerPanic = fmt.Errorf("%w: the voice server's input could not be handled", &CloseError{Code: 1006, Action: Rejoin})

// Dial joins the voice server: websocket, identify, UDP IP discovery, select
// protocol, session description. ctx bounds the handshake only; the
// connection then lives until Close or a close the gateway will not resume.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Endpoint == "" || cfg.ServerID == "" || cfg.UserID == "" || cfg.SessionID == "" || cfg.Token == "" {
		return nil, errors.New("voice connection needs endpoint, server id, user id, session id and token")
	}
	c := newConn(cfg)
	if err := c.handshake(ctx); err != nil {
		c.shutdown(err)
		c.wait()
		return nil, err
	}
	return c, nil
}

// newConn composes the two halves, with cfg's defaults filled in: the
// gateway names speakers to the media half, which asks the gateway for the
// speaking flag.
func newConn(cfg Config) *Conn {
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
	c := &Conn{ctx: life, cancel: cancel, done: make(chan struct{})}
	c.udp = newUDPConn(life, cfg)
	c.gw = newGateway(life, cfg, c.udp)
	c.udp.speaking = c.gw.speaking
	return c
}

// handshake takes the two halves through the join in Discord's order, then
// starts them.
func (c *Conn) handshake(ctx context.Context) error {
	addr, mode, err := c.gw.open(ctx)
	if err != nil {
		return err
	}
	ip, port, err := c.udp.connect(ctx, addr, c.gw.ssrc)
	if err != nil {
		return err
	}
	key, daveVersion, err := c.gw.selectProtocol(ctx, ip, port, mode)
	if err != nil {
		return err
	}
	if err := c.udp.start(mode, key); err != nil {
		return err
	}
	if err := c.gw.startDAVE(daveVersion); err != nil {
		return err
	}
	c.gw.wg.Add(1)
	go func() {
		defer c.gw.wg.Done()
		if err := c.gw.run(); err != nil {
			c.shutdown(err)
		}
	}()
	go func() { c.wait(); close(c.done) }()
	c.gw.log.Info("voice connected", zap.String("mode", string(mode)), zap.Int("dave_protocol_version", daveVersion))
	return nil
}

// wait returns once both halves' goroutines have exited.
func (c *Conn) wait() {
	c.gw.wg.Wait()
	c.udp.wg.Wait()
}

// shutdown ends the connection once, recording why.
func (c *Conn) shutdown(err error) {
	c.errOnce.Do(func() {
		c.err = err
		c.cancel()
		c.gw.close()
		c.udp.close()
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
func (c *Conn) Frames() <-chan Frame { return c.udp.frames }

// SSRC is our own synchronisation source.
func (c *Conn) SSRC() uint32 { return c.udp.ssrc }

// Mode is the negotiated transport encryption mode.
func (c *Conn) Mode() Mode { return c.udp.mode }

// UserBySSRC returns the user the gateway announced for ssrc.
func (c *Conn) UserBySSRC(ssrc uint32) (string, bool) { return c.udp.userBySSRC(ssrc) }

// Send queues one 20 ms Opus frame for the pacer, up to SendBuffer ahead
// of it. It blocks only while the queue is full (the producer is ahead of
// real time) and returns when ctx ends or the connection closes.
func (c *Conn) Send(ctx context.Context, opus []byte) error {
	return c.udp.send(ctx, c.udp.sendQ, opus)
}

// Play hands one 20 ms Opus frame to the pacer and returns once the pacer
// has taken it for its slot (or ctx ends, or the connection closes). A
// producer with a queue of its own, such as the audio path, so stays one
// frame ahead of the wire without a clock of its own, and what it drops
// from its queue (a barge-in) is never sent. Play and Send are not meant
// to be mixed.
func (c *Conn) Play(ctx context.Context, opus []byte) error {
	return c.udp.send(ctx, c.udp.handQ, opus)
}

// TrySend queues one frame without blocking and reports whether it was
// queued: false when the queue is full or the connection closed.
func (c *Conn) TrySend(opus []byte) bool { return c.udp.trySend(opus) }

// Flush drops every frame Send or TrySend queued and returns how many:
// barge-in stops our audio at once. The utterance then ends with its
// silence frames.
func (c *Conn) Flush() int { return c.udp.flush() }

// Speaking reports whether an utterance is in progress: frames queued, or
// sent and not yet ended by the trailing silence.
func (c *Conn) Speaking() bool { return c.udp.pending.Load() > 0 || c.udp.talking.Load() }

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats {
	g, u := c.gw, &c.udp.stats
	st := Stats{
		PacketsReceived: u.received.Load(), Malformed: u.malformed.Load(), NotAudio: u.notAudio.Load(),
		UnknownSSRC: u.unknown.Load(), HeldForSSRC: u.heldSSRC.Load(), DroppedNoConsent: u.noConsent.Load(),
		TransportFailures: u.transportFail.Load(), DAVEFailures: u.daveFail.Load(),
		FramesDelivered: u.delivered.Load(), FramesOverflow: u.overflow.Load(), FramesSent: u.sent.Load(),
		SendDroppedE2EE: u.droppedE2EE.Load(), GatewayMalformed: g.malformed.Load(), Resumes: g.resumes.Load(),
		GatewayPanics: g.panics.Load(), MediaPanics: u.panics.Load(), SSRCRefused: u.ssrcRefused.Load(),
	}
	if c.udp.transport != nil {
		st.TransportOpens = c.udp.transport.Opens()
	}
	return st
}
