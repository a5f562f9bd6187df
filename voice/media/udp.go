package media

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// maxSSRCs bounds the SSRC→user map: a voice call has at most a few dozen
// speakers (each with an audio and perhaps a video SSRC), and a voice
// server that names more is not to be believed nor let grow our memory.
const maxSSRCs = 1024

// udpConn is the media half of a connection: the UDP socket IP discovery
// found, RTP with rtpsize transport encryption, the pacer that sends our
// frames (send.go), the receive path that delivers consented speakers'
// (receive.go), and the SSRC→user map the gateway fills. It speaks to the
// gateway only through speaking, the op 5 flag.
type udpConn struct {
	allow func(userID string) bool
	log   *zap.Logger
	dave  DAVE

	ctx context.Context // the connection's life
	wg  sync.WaitGroup  // receive and pace

	sock      *net.UDPConn
	ssrc      uint32
	mode      Mode
	transport *Transport

	mu     sync.RWMutex
	bySSRC map[uint32]string

	frames chan Frame
	// sendQ holds what Send and TrySend queue ahead of the pacer; handQ is
	// Play's hand-over, unbuffered, so a frame moves only when the pacer
	// takes it for its slot.
	sendQ, handQ chan []byte
	pending      atomic.Int64 // frames handed over and not yet transmitted
	talking      atomic.Bool  // the pacer is inside an utterance
	speaking     func(on bool)

	// held are packets waiting for their SSRC to be named; only the
	// receive goroutine touches it.
	held []heldPacket

	stats udpCounters
}

type udpCounters struct {
	received, malformed, notAudio, unknown, heldSSRC, noConsent, transportFail,
	daveFail, delivered, overflow, sent, droppedE2EE, panics, ssrcRefused atomic.Uint64
}

func newUDPConn(life context.Context, cfg Config) *udpConn {
	return &udpConn{
		allow: cfg.Allow, log: cfg.Log, dave: cfg.DAVE, ctx: life,
		bySSRC: map[uint32]string{},
		frames: make(chan Frame, cfg.FrameBuffer),
		sendQ:  make(chan []byte, cfg.SendBuffer),
		handQ:  make(chan []byte),
	}
}

// connect opens the socket to the voice server's media address and
// returns the address and port it sees us at (IP discovery).
func (u *udpConn) connect(ctx context.Context, addr *net.UDPAddr, ssrc uint32) (string, int, error) {
	sock, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return "", 0, fmt.Errorf("voice UDP: %w", err)
	}
	u.sock, u.ssrc = sock, ssrc
	return discoverIP(ctx, sock, ssrc)
}

// start takes the session description's transport and starts the receive
// path and the pacer.
func (u *udpConn) start(mode Mode, key []byte) error {
	t, err := NewTransport(mode, key)
	if err != nil {
		return err
	}
	u.mode, u.transport = mode, t
	u.wg.Add(2)
	go u.receive()
	go u.pace()
	return nil
}

// close closes the socket, which ends the receive path; the pacer ends
// with the connection's life.
func (u *udpConn) close() {
	if u.sock != nil {
		_ = u.sock.Close()
	}
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

// name records the user the gateway announced for ssrc (op 5). Our own
// SSRC is never mapped, and a new SSRC past maxSSRCs is refused.
func (u *udpConn) name(ssrc uint32, userID string) {
	if userID == "" || ssrc == 0 || ssrc == u.ssrc {
		return
	}
	u.mu.Lock()
	if _, known := u.bySSRC[ssrc]; known || len(u.bySSRC) < maxSSRCs {
		u.bySSRC[ssrc] = userID
	} else {
		u.stats.ssrcRefused.Add(1)
	}
	u.mu.Unlock()
}

// forget drops every SSRC of a user who left (op 13).
func (u *udpConn) forget(userID string) {
	u.mu.Lock()
	for ssrc, v := range u.bySSRC {
		if v == userID {
			delete(u.bySSRC, ssrc)
		}
	}
	u.mu.Unlock()
}

func (u *udpConn) userBySSRC(ssrc uint32) (string, bool) {
	u.mu.RLock()
	v, ok := u.bySSRC[ssrc]
	u.mu.RUnlock()
	return v, ok
}
