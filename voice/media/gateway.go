package media

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.uber.org/zap"
)

// speakerMap is what the gateway tells the media half about speakers: op 5
// names the user behind an SSRC, op 13 says a user left.
type speakerMap interface {
	name(ssrc uint32, userID string)
	forget(userID string)
}

// gateway is the voice gateway session of a connection: the websocket
// (resumed when it drops), its heartbeat, the handshake up to the session
// description, the speaking op, and the routing of what the voice server
// says to the speaker map and the DAVE session. It knows nothing of UDP.
type gateway struct {
	cfg      Config
	log      *zap.Logger
	dave     DAVE
	speakers speakerMap

	ctx context.Context // the connection's life
	wg  sync.WaitGroup  // the heartbeats

	sock      atomic.Pointer[socket]
	hbStop    chan struct{} // stops the current socket's heartbeat; the handshake, then run
	seq       atomic.Int64
	unacked   atomic.Int32
	ssrc      uint32      // ours, from ready
	announced atomic.Bool // speaking op 5 sent on the current socket

	// daveEarly holds DAVE messages that arrive before the session
	// description started the DAVE session; only the handshake touches it.
	daveStarted bool
	daveEarly   []message

	malformed, resumes, panics atomic.Uint64
}

func newGateway(life context.Context, cfg Config, speakers speakerMap) *gateway {
	g := &gateway{cfg: cfg, log: cfg.Log, dave: cfg.DAVE, speakers: speakers, ctx: life}
	g.seq.Store(-1)
	return g
}

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

// open dials the websocket, starts heartbeating on hello, identifies and
// returns ready's media address, our SSRC and the mode we choose.
func (g *gateway) open(ctx context.Context) (*net.UDPAddr, Mode, error) {
	s, err := dialSocket(ctx, g.cfg.Endpoint, g.cfg.TLS, g.cfg.HandshakeTimeout)
	if err != nil {
		return nil, "", err
	}
	g.sock.Store(s)
	if g.hbStop, err = g.startHeartbeat(ctx, s); err != nil {
		return nil, "", err
	}
	err = s.writeJSON(OpIdentify, map[string]any{
		"server_id": g.cfg.ServerID, "user_id": g.cfg.UserID, "session_id": g.cfg.SessionID,
		"token": g.cfg.Token, "max_dave_protocol_version": g.dave.MaxProtocolVersion(),
	})
	if err != nil {
		return nil, "", err
	}
	m, err := g.await(ctx, s, OpReady)
	if err != nil {
		return nil, "", err
	}
	var r readyData
	if err := json.Unmarshal(m.D, &r); err != nil || r.Port <= 0 || r.Port > 65535 {
		return nil, "", errors.New("voice gateway ready lacks a usable address")
	}
	// An ip that does not parse would make DialUDP aim at this machine;
	// the voice server must name where its media goes.
	ip := net.ParseIP(r.IP)
	if ip == nil || ip.IsUnspecified() {
		return nil, "", errors.New("voice gateway ready names no usable UDP ip address")
	}
	mode, ok := ChooseMode(r.Modes)
	if !ok {
		return nil, "", errors.New("voice server offers no encryption mode we support")
	}
	g.ssrc = r.SSRC
	return &net.UDPAddr{IP: ip, Port: r.Port}, mode, nil
}

// selectProtocol tells the voice server the address IP discovery found and
// the mode, and returns the session description's transport key and DAVE
// protocol version.
func (g *gateway) selectProtocol(ctx context.Context, ip string, port int, mode Mode) (key []byte, daveVersion int, err error) {
	s := g.sock.Load()
	err = s.writeJSON(OpSelectProtocol, map[string]any{
		"protocol": "udp",
		"data":     map[string]any{"address": ip, "port": port, "mode": string(mode)},
	})
	if err != nil {
		return nil, 0, err
	}
	m, err := g.await(ctx, s, OpSessionDescription)
	if err != nil {
		return nil, 0, err
	}
	var sd sessionDescription
	if err := json.Unmarshal(m.D, &sd); err != nil || sd.Mode != string(mode) || len(sd.SecretKey) != 32 {
		return nil, 0, errors.New("voice session description is malformed")
	}
	key = make([]byte, 32)
	for i, v := range sd.SecretKey {
		if v < 0 || v > 255 {
			return nil, 0, errors.New("voice session description is malformed")
		}
		key[i] = byte(v)
	}
	return key, sd.DAVEProtocolVersion, nil
}

// startDAVE starts the DAVE session at the version the session description
// named and hands it the DAVE messages that came before.
func (g *gateway) startDAVE(version int) error {
	if err := g.dave.Start(version, g.cfg.UserID, signal{g}); err != nil {
		return fmt.Errorf("DAVE protocol version %d: %w", version, err)
	}
	g.daveStarted = true
	for _, m := range g.daveEarly {
		g.handleSafely(m)
	}
	g.daveEarly = nil
	return nil
}

// signal sends DAVE messages on whatever socket is current.
type signal struct{ g *gateway }

var errNoSocket = errors.New("voice gateway not connected")

func (s signal) SendJSON(op Opcode, d any) error {
	if k := s.g.sock.Load(); k != nil {
		return k.writeJSON(op, d)
	}
	return errNoSocket
}

func (s signal) SendBinary(op Opcode, payload []byte) error {
	if k := s.g.sock.Load(); k != nil {
		return k.writeBinary(op, payload)
	}
	return errNoSocket
}

// speaking sends op 5 with the microphone flag on or off. The sender asks
// for on before every packet, so it is sent once per socket: a resumed
// socket is told again.
func (g *gateway) speaking(on bool) {
	if on && g.announced.Load() {
		return
	}
	flag := 0
	if on {
		flag = 1
	}
	g.announced.Store(on)
	if s := g.sock.Load(); s != nil {
		if err := s.writeJSON(OpSpeaking, map[string]any{"speaking": flag, "delay": 0, "ssrc": g.ssrc}); err != nil {
			g.log.Debug("speaking flag not sent", zap.Error(err))
		}
	}
}

// handleSafely is handle behind recover: a message whose handling panics
// is dropped and counted, and the connection carries on.
func (g *gateway) handleSafely(m message) {
	defer recoverPeer(g.log, &g.panics, ComponentGateway)
	g.handle(m)
}

// handle acts on one gateway message other than the one a handshake awaits.
func (g *gateway) handle(m message) {
	if !g.daveStarted && m.Op.IsDAVE() {
		if len(g.daveEarly) < 64 {
			g.daveEarly = append(g.daveEarly, m)
		}
		return
	}
	if m.binary {
		if m.Op.IsBinary() {
			if err := g.dave.HandleBinary(m.Op, m.bseq, m.payload); err != nil {
				g.log.Warn("DAVE binary message refused", zap.Int("op", int(m.Op)), zap.Error(err))
			}
		}
		return
	}
	switch m.Op {
	case OpHeartbeatAck:
		g.unacked.Store(0)
	case OpSpeaking:
		var d struct {
			UserID string `json:"user_id"`
			SSRC   uint32 `json:"ssrc"`
		}
		if json.Unmarshal(m.D, &d) == nil {
			g.speakers.name(d.SSRC, d.UserID)
		}
	case OpClientsConnect:
		var d struct {
			UserIDs []string `json:"user_ids"`
		}
		if json.Unmarshal(m.D, &d) == nil {
			g.dave.UsersConnected(d.UserIDs)
		}
	case OpClientDisconnect:
		var d struct {
			UserID string `json:"user_id"`
		}
		if json.Unmarshal(m.D, &d) == nil && d.UserID != "" {
			g.speakers.forget(d.UserID)
			g.dave.UserDisconnected(d.UserID)
		}
	case OpDAVEPrepareTransition, OpDAVEExecuteTransition, OpDAVEPrepareEpoch, OpDAVEMLSInvalidCommitWelcome:
		if err := g.dave.HandleJSON(m.Op, m.D); err != nil {
			g.log.Warn("DAVE message refused", zap.Int("op", int(m.Op)), zap.Error(err))
		}
	}
}

// run reads the gateway until it fails, resuming while the close code
// says so. It returns nil once the connection's life has ended, else why
// the connection must end.
func (g *gateway) run() (err error) {
	defer func() {
		// Each message is handled behind its own recover; this one covers
		// the resume handshake, and ends the connection rather than the
		// process.
		if r := recover(); r != nil {
			g.panics.Add(1)
			g.log.Error("recovered from a panic on the voice gateway; the connection ends", zap.String("component", ComponentGateway))
			err = errPeerPanic
		}
	}()
	s, stop := g.sock.Load(), g.hbStop
	for {
		err := g.readLoop(s)
		close(stop)
		if g.ctx.Err() != nil {
			return nil
		}
		var ce *CloseError
		if !errors.As(err, &ce) || ce.Action != Resume {
			g.log.Info("voice gateway closed", zap.Error(err))
			return err
		}
		s, stop, err = g.resume()
		if err != nil {
			g.log.Info("voice gateway resume failed", zap.Error(err))
			return err
		}
	}
}

func (g *gateway) readLoop(s *socket) error {
	for {
		m, err := s.read()
		if errors.Is(err, errBadFrame) {
			g.malformed.Add(1)
			continue
		}
		if err != nil {
			return asCloseError(err)
		}
		g.noteSeq(m)
		g.handleSafely(m)
	}
}

// resume reconnects and sends op 7, retrying while the failure itself says
// resume: five attempts, each after a pause of resumeBackoff's.
func (g *gateway) resume() (*socket, chan struct{}, error) {
	pauses := resumeBackoff()
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		t := time.NewTimer(pauses.NextBackOff())
		select {
		case <-g.ctx.Done():
			t.Stop()
			return nil, nil, ErrClosed
		case <-t.C:
		}
		s, stop, err := g.resumeOnce()
		if err == nil {
			g.resumes.Add(1)
			g.log.Info("voice gateway resumed")
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

// resumeBackoff is the pauses before resume's attempts: 100 ms, doubled
// every time up to 5 s. It is cenkalti/backoff's policy, the one the
// realtime client and the memory client use; without jitter, for it paces
// one bot's connection, not a herd.
func resumeBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{InitialInterval: 100 * time.Millisecond, Multiplier: 2, MaxInterval: 5 * time.Second}
}

func (g *gateway) resumeOnce() (*socket, chan struct{}, error) {
	ctx, cancel := context.WithTimeout(g.ctx, g.cfg.HandshakeTimeout)
	defer cancel()
	s, err := dialSocket(ctx, g.cfg.Endpoint, g.cfg.TLS, g.cfg.HandshakeTimeout)
	if err != nil {
		return nil, nil, err
	}
	g.sock.Store(s)
	g.announced.Store(false)
	stop, err := g.startHeartbeat(ctx, s)
	if err != nil {
		_ = s.ws.Close()
		return nil, nil, err
	}
	err = s.writeJSON(OpResume, map[string]any{
		"server_id": g.cfg.ServerID, "session_id": g.cfg.SessionID, "token": g.cfg.Token, "seq_ack": g.seq.Load(),
	})
	if err == nil {
		_, err = g.await(ctx, s, OpResumed)
	}
	if err != nil {
		close(stop)
		_ = s.ws.Close()
		return nil, nil, err
	}
	return s, stop, nil
}

// close sends the current socket a normal close; run then ends.
func (g *gateway) close() {
	if s := g.sock.Load(); s != nil {
		s.closeWith(1000)
	}
}

// await reads messages, handling each, until one with op arrives, which it
// returns. ctx cancellation closes the socket to unblock the read.
func (g *gateway) await(ctx context.Context, s *socket, op Opcode) (message, error) {
	stop := context.AfterFunc(ctx, func() { _ = s.ws.Close() })
	defer stop()
	for {
		m, err := s.read()
		if errors.Is(err, errBadFrame) {
			g.malformed.Add(1)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return message{}, ctx.Err()
			}
			return message{}, asCloseError(err)
		}
		g.noteSeq(m)
		if !m.binary && m.Op == op {
			return m, nil
		}
		g.handleSafely(m)
	}
}

func (g *gateway) noteSeq(m message) {
	switch {
	case m.binary:
		g.seq.Store(int64(m.bseq))
	case m.Seq != nil:
		g.seq.Store(*m.Seq)
	}
}

// heartbeat sends op 3 with seq_ack every interval until stop closes; when
// two heartbeats go unacknowledged it closes the socket, which resumes.
func (g *gateway) heartbeat(s *socket, interval time.Duration, stop <-chan struct{}) {
	defer g.wg.Done()
	defer recoverPeer(g.log, &g.panics, ComponentGateway)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-g.ctx.Done(): // the connection ended without closing stop
			return
		case <-t.C:
		}
		if g.unacked.Add(1) > 2 {
			g.log.Info("voice gateway heartbeat not acknowledged; reconnecting")
			_ = s.ws.Close()
			return
		}
		d := map[string]int64{"t": time.Now().UnixMilli(), "seq_ack": g.seq.Load()}
		if err := s.writeJSON(OpHeartbeat, d); err != nil {
			return
		}
	}
}

// startHeartbeat reads hello from s and starts heartbeating on it.
func (g *gateway) startHeartbeat(ctx context.Context, s *socket) (chan struct{}, error) {
	m, err := g.await(ctx, s, OpHello)
	if err != nil {
		return nil, err
	}
	var h hello
	if err := json.Unmarshal(m.D, &h); err != nil {
		return nil, fmt.Errorf("voice gateway hello has no heartbeat interval")
	}
	interval, err := heartbeatInterval(h.HeartbeatInterval)
	if err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	g.unacked.Store(0)
	g.wg.Add(1)
	go g.heartbeat(s, interval, stop)
	return stop, nil
}
