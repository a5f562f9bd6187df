package media

import (
	"context"
	"crypto/tls"
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

// dialSocket opens a websocket to the voice gateway at endpoint.
func dialSocket(ctx context.Context, endpoint string, tlsConf *tls.Config, timeout time.Duration) (*socket, error) {
	u, err := gatewayURL(endpoint)
	if err != nil {
		return nil, err
	}
	d := websocket.Dialer{TLSClientConfig: tlsConf, HandshakeTimeout: timeout}
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
