package media

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// writeTimeout bounds one websocket write so a stuck peer cannot hold the
// pacer or the gateway reader.
const writeTimeout = 5 * time.Second

// socket is one websocket to the voice gateway; writes are serialised.
type socket struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

type outbound struct {
	Op Opcode `json:"op"`
	D  any    `json:"d"`
}

// inbound is a JSON message from the voice gateway; v8 numbers them in seq.
type inbound struct {
	Op  Opcode          `json:"op"`
	D   json.RawMessage `json:"d"`
	Seq *int64          `json:"seq"`
}

// message is one gateway message: JSON, or binary (DAVE 25–30).
type message struct {
	inbound
	binary  bool
	bseq    uint16
	payload []byte
}

func (s *socket) writeJSON(op Opcode, d any) error {
	b, err := json.Marshal(outbound{Op: op, D: d})
	if err != nil {
		return fmt.Errorf("encode op %d: %w", op, err)
	}
	return s.write(websocket.TextMessage, b)
}

func (s *socket) writeBinary(op Opcode, payload []byte) error {
	b := make([]byte, 0, 1+len(payload))
	b = append(append(b, byte(op)), payload...)
	return s.write(websocket.BinaryMessage, b)
}

func (s *socket) write(kind int, b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if err := s.ws.WriteMessage(kind, b); err != nil {
		return fmt.Errorf("voice gateway write: %w", err)
	}
	return nil
}

// closeWith sends a close frame with code and closes the socket.
func (s *socket) closeWith(code int) {
	s.wmu.Lock()
	_ = s.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
	s.wmu.Unlock()
	_ = s.ws.Close()
}

// read returns the next message. A malformed frame is an error for the
// caller to skip, never a panic.
func (s *socket) read() (message, error) {
	kind, b, err := s.ws.ReadMessage()
	if err != nil {
		return message{}, err
	}
	return parseMessage(kind, b)
}

var errBadFrame = errors.New("malformed voice gateway frame")

func parseMessage(kind int, b []byte) (message, error) {
	if kind == websocket.BinaryMessage {
		if len(b) < 3 {
			return message{}, errBadFrame
		}
		m := message{binary: true, bseq: binary.BigEndian.Uint16(b), payload: b[3:]}
		m.Op = Opcode(b[2])
		return m, nil
	}
	var m message
	if err := json.Unmarshal(b, &m.inbound); err != nil {
		return message{}, errBadFrame
	}
	return m, nil
}

// gatewayURL is the wss URL for a VOICE_SERVER_UPDATE endpoint; it accepts
// the endpoint with or without a scheme and always dials wss.
func gatewayURL(endpoint string) (string, error) {
	e := strings.TrimPrefix(strings.TrimPrefix(endpoint, "wss://"), "https://")
	e = strings.TrimSuffix(e, "/")
	if e == "" || strings.ContainsAny(e, "/?#@ ") {
		return "", fmt.Errorf("voice endpoint %q is not a host[:port]", endpoint)
	}
	u := url.URL{Scheme: "wss", Host: e, Path: "/", RawQuery: "v=8"}
	return u.String(), nil
}

func (c *Conn) dialSocket(ctx context.Context) (*socket, error) {
	u, err := gatewayURL(c.cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{TLSClientConfig: c.cfg.TLS, HandshakeTimeout: c.cfg.HandshakeTimeout}
	ws, resp, err := d.DialContext(ctx, u, nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial voice gateway: %w", err)
	}
	ws.SetReadLimit(1 << 20)
	return &socket{ws: ws}, nil
}

// await reads messages, handling each, until one with op arrives, which it
// returns. ctx cancellation closes the socket to unblock the read.
func (c *Conn) await(ctx context.Context, s *socket, op Opcode) (message, error) {
	stop := context.AfterFunc(ctx, func() { _ = s.ws.Close() })
	defer stop()
	for {
		m, err := s.read()
		if errors.Is(err, errBadFrame) {
			c.stats.gatewayBad.Add(1)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return message{}, ctx.Err()
			}
			return message{}, asCloseError(err)
		}
		c.noteSeq(m)
		if !m.binary && m.Op == op {
			return m, nil
		}
		c.handleSafely(m)
	}
}

// asCloseError turns a websocket read error into a CloseError with the
// action Discord documents; a socket that dropped without a close frame
// resumes.
func asCloseError(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w", &CloseError{Code: ce.Code, Action: ActionFor(ce.Code)})
	}
	return fmt.Errorf("%w: %w", &CloseError{Code: websocket.CloseAbnormalClosure, Action: Resume}, err)
}

func (c *Conn) noteSeq(m message) {
	switch {
	case m.binary:
		c.seq.Store(int64(m.bseq))
	case m.Seq != nil:
		c.seq.Store(*m.Seq)
	}
}

type hello struct {
	HeartbeatInterval float64 `json:"heartbeat_interval"`
}

// The heartbeat intervals a hello may name; Discord sends 13.75 s. Outside
// them a hello is refused as a failed dial: a tiny value would truncate to
// a zero ticker period, a huge one overflow time.Duration, and either
// panic time.NewTicker, while a value that is merely odd would have us
// flood the gateway or never prove we are alive.
const (
	minHeartbeat = time.Second
	maxHeartbeat = 10 * time.Minute
)

// heartbeatInterval checks hello's interval, in milliseconds, against the
// bounds; NaN and infinities fail the comparison too.
func heartbeatInterval(ms float64) (time.Duration, error) {
	if !(ms >= float64(minHeartbeat/time.Millisecond) && ms <= float64(maxHeartbeat/time.Millisecond)) {
		return 0, fmt.Errorf("voice gateway hello names a heartbeat interval outside %v–%v", minHeartbeat, maxHeartbeat)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// heartbeat sends op 3 with seq_ack every interval until stop closes; when
// two heartbeats go unacknowledged it closes the socket, which resumes.
func (c *Conn) heartbeat(s *socket, interval time.Duration, stop <-chan struct{}) {
	defer c.wg.Done()
	defer c.recoverPeer(&c.stats.gatewayPanics, ComponentGateway)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-c.ctx.Done(): // the connection ended without closing stop
			return
		case <-t.C:
		}
		if c.unacked.Add(1) > 2 {
			c.log.Info("voice gateway heartbeat not acknowledged; reconnecting")
			_ = s.ws.Close()
			return
		}
		d := map[string]int64{"t": time.Now().UnixMilli(), "seq_ack": c.seq.Load()}
		if err := s.writeJSON(OpHeartbeat, d); err != nil {
			return
		}
	}
}

// startHeartbeat reads hello from s and starts heartbeating on it.
func (c *Conn) startHeartbeat(ctx context.Context, s *socket) (chan struct{}, error) {
	m, err := c.await(ctx, s, OpHello)
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
	c.unacked.Store(0)
	c.wg.Add(1)
	go c.heartbeat(s, interval, stop)
	return stop, nil
}
