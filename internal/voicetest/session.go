package voicetest

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is one client websocket; closing records why the server closed it
// (a code, or -1 for a simulated network drop) so the reader knows.
type wsConn struct {
	ws      *websocket.Conn
	wmu     sync.Mutex
	closing atomic.Int32
}

func (c *wsConn) write(kind int, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.ws.WriteMessage(kind, b)
}

func (c *wsConn) closeWith(code int) {
	if !c.closing.CompareAndSwap(0, int32(code)) {
		return
	}
	c.wmu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	_ = c.ws.Close()
}

func (c *wsConn) drop() {
	c.closing.CompareAndSwap(0, -1)
	_ = c.ws.Close()
}

// session is one identified client; it outlives a dropped socket until it
// resumes or its resume window passes.
type session struct {
	srv                      *Server
	userID, sessionID, token string
	ssrc                     uint32
	maxDAVE                  int

	mu        sync.Mutex
	conn      *wsConn
	seq       uint16
	seqAck    int64
	transport *transport
	udpAddr   *net.UDPAddr
	speaking  int
	expiry    *time.Timer
}

func (ss *session) UserID() string { return ss.userID }

func (ss *session) SendJSON(op int, d any) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.conn == nil {
		return errors.New("not connected")
	}
	ss.seq++
	b, err := json.Marshal(map[string]any{"op": op, "d": d, "seq": ss.seq})
	if err != nil {
		return err
	}
	return ss.conn.write(websocket.TextMessage, b)
}

func (ss *session) SendBinary(op int, payload []byte) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.conn == nil {
		return errors.New("not connected")
	}
	ss.seq++
	b := binary.BigEndian.AppendUint16(nil, ss.seq)
	b = append(append(b, byte(op)), payload...)
	return ss.conn.write(websocket.BinaryMessage, b)
}

func (ss *session) described() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.transport != nil
}

func (ss *session) hasUDP() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.udpAddr != nil
}

func (ss *session) dropSocket() {
	ss.mu.Lock()
	c := ss.conn
	ss.mu.Unlock()
	if c != nil {
		c.drop()
	}
}

func (ss *session) closeSocket(code int) {
	ss.mu.Lock()
	c := ss.conn
	ss.mu.Unlock()
	if c != nil {
		c.closeWith(code)
	}
}

// daveErr turns a DAVE role's CloseCode into the protocolError that closes
// the socket; other errors are the role's business and close nothing.
func daveErr(err error) error {
	var c CloseCode
	if errors.As(err, &c) {
		return protocolError(c)
	}
	return nil
}

// protocolError closes the socket with a Discord close code.
type protocolError int

func (e protocolError) Error() string { return "voice gateway close " + strconv.Itoa(int(e)) }

const (
	closeUnknownOpcode    protocolError = 4001
	closeFailedDecode     protocolError = 4002
	closeNotAuthenticated protocolError = 4003
	closeAuthFailed       protocolError = 4004
	closeAlreadyAuth      protocolError = 4005
	closeSessionInvalid   protocolError = 4006
	closeSessionTimeout   protocolError = 4009
	closeServerNotFound   protocolError = 4011
	closeUnknownProtocol  protocolError = 4012
	closeUnknownMode      protocolError = 4016
	closeE2EERequired     protocolError = 4017
	closeBadRequest       protocolError = 4020
)

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("v") != "8" {
		http.Error(w, "this voice server speaks gateway v8 only", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &wsConn{ws: ws}
	hb := s.opts.HeartbeatInterval
	b, _ := json.Marshal(map[string]any{"op": 8, "d": map[string]any{"heartbeat_interval": hb.Milliseconds()}})
	s.mu.Lock()
	if s.hello != "" {
		b = []byte(`{"op":8,"d":{"heartbeat_interval":` + s.hello + `}}`)
	}
	s.mu.Unlock()
	if c.write(websocket.TextMessage, b) != nil {
		_ = ws.Close()
		return
	}
	var sess *session
	err = s.readLoop(c, &sess)
	var pe protocolError
	switch {
	case errors.As(err, &pe):
		c.closeWith(int(pe))
		if sess != nil {
			s.endSession(sess)
		}
	case c.closing.Load() != 0:
		// closed or dropped by the server on purpose: CloseWith and Drop
		// already decided the session's fate
		if c.closing.Load() == -1 && sess != nil {
			s.expireLater(sess, c)
		}
	default:
		_ = ws.Close()
		var ce *websocket.CloseError
		if sess != nil {
			if errors.As(err, &ce) && (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) {
				s.endSession(sess)
			} else {
				s.expireLater(sess, c)
			}
		}
	}
}

// expireLater ends sess after the resume window unless it resumed on
// another socket.
func (s *Server) expireLater(sess *session, c *wsConn) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	sess.mu.Lock()
	defer sess.mu.Unlock()
	if sess.conn != c || closed {
		return
	}
	sess.conn = nil
	sess.expiry = time.AfterFunc(s.opts.ResumeWindow, func() {
		sess.mu.Lock()
		resumed := sess.conn != nil
		sess.mu.Unlock()
		if !resumed {
			s.endSession(sess)
		}
	})
}

type clientMsg struct {
	Op *int            `json:"op"`
	D  json.RawMessage `json:"d"`
}

func (s *Server) readLoop(c *wsConn, sessp **session) error {
	timeout := 2 * s.opts.HeartbeatInterval
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(timeout))
		kind, b, err := c.ws.ReadMessage()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return closeSessionTimeout
			}
			return err
		}
		sess := *sessp
		if kind == websocket.BinaryMessage {
			if sess == nil {
				return closeNotAuthenticated
			}
			if len(b) < 1 || (b[0] != 26 && b[0] != 28) {
				return closeUnknownOpcode
			}
			if err := daveErr(s.opts.DAVE.Binary(sess, int(b[0]), b[1:])); err != nil {
				return err
			}
			continue
		}
		var m clientMsg
		if json.Unmarshal(b, &m) != nil || m.Op == nil {
			return closeFailedDecode
		}
		op := *m.Op
		switch {
		case op == 3:
			if err := s.heartbeat(c, sess, m.D); err != nil {
				return err
			}
		case op == 0:
			if sess != nil {
				return closeAlreadyAuth
			}
			if *sessp, err = s.identify(c, m.D); err != nil {
				return err
			}
		case op == 7:
			if sess != nil {
				return closeAlreadyAuth
			}
			if *sessp, err = s.resume(c, m.D); err != nil {
				return err
			}
		case !slices.Contains([]int{1, 5, 23, 31}, op):
			return closeUnknownOpcode
		case sess == nil:
			return closeNotAuthenticated
		case op == 1:
			if err := s.selectProtocol(sess, m.D); err != nil {
				return err
			}
		case op == 5:
			if err := s.speaking(sess, m.D); err != nil {
				return err
			}
		default:
			if err := daveErr(s.opts.DAVE.JSON(sess, op, m.D)); err != nil {
				return err
			}
		}
	}
}

func (s *Server) heartbeat(c *wsConn, sess *session, raw json.RawMessage) error {
	var d struct {
		T      *json.Number `json:"t"`
		SeqAck *int64       `json:"seq_ack"`
	}
	if json.Unmarshal(raw, &d) != nil || d.T == nil {
		return closeFailedDecode
	}
	if sess != nil && d.SeqAck != nil {
		sess.mu.Lock()
		sess.seqAck = *d.SeqAck
		sess.mu.Unlock()
	}
	if s.opts.IgnoreHeartbeats {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"op": 6, "d": map[string]any{"t": d.T}})
	return c.write(websocket.TextMessage, b)
}

func (s *Server) identify(c *wsConn, raw json.RawMessage) (*session, error) {
	var d struct {
		ServerID  *string `json:"server_id"`
		UserID    *string `json:"user_id"`
		SessionID *string `json:"session_id"`
		Token     *string `json:"token"`
		MaxDAVE   *int    `json:"max_dave_protocol_version"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ServerID == nil || d.UserID == nil || d.SessionID == nil || d.Token == nil ||
		*d.UserID == "" || *d.SessionID == "" || *d.Token == "" {
		return nil, closeFailedDecode
	}
	if *d.ServerID != s.serverID {
		return nil, closeServerNotFound
	}
	maxDAVE := 0
	if d.MaxDAVE != nil {
		maxDAVE = *d.MaxDAVE
	}
	s.mu.Lock()
	cred, ok := s.creds[*d.SessionID]
	if !ok || cred.UserID != *d.UserID || cred.Token != *d.Token {
		s.mu.Unlock()
		s.authFailures.Add(1)
		return nil, closeAuthFailed
	}
	if s.opts.RequireDAVE && maxDAVE < 1 {
		s.mu.Unlock()
		return nil, closeE2EERequired
	}
	if old := s.sessions[cred.SessionID]; old != nil {
		s.mu.Unlock()
		old.closeSocket(4006)
		s.endSession(old)
		s.mu.Lock()
		s.creds[cred.SessionID] = cred
	}
	s.nextSSRC++
	sess := &session{srv: s, userID: cred.UserID, sessionID: cred.SessionID, token: cred.Token, ssrc: s.nextSSRC, maxDAVE: maxDAVE, conn: c}
	s.sessions[sess.sessionID] = sess
	s.mu.Unlock()
	port := s.udp.LocalAddr().(*net.UDPAddr).Port
	err := sess.SendJSON(2, map[string]any{
		"ssrc": sess.ssrc, "ip": s.opts.ReadyIP, "port": port, "modes": s.opts.Modes, "heartbeat_interval": 1,
	})
	return sess, err
}

func (s *Server) resume(c *wsConn, raw json.RawMessage) (*session, error) {
	var d struct {
		ServerID  *string `json:"server_id"`
		SessionID *string `json:"session_id"`
		Token     *string `json:"token"`
		SeqAck    *int64  `json:"seq_ack"`
	}
	if json.Unmarshal(raw, &d) != nil || d.ServerID == nil || d.SessionID == nil || d.Token == nil {
		return nil, closeFailedDecode
	}
	if *d.ServerID != s.serverID {
		return nil, closeServerNotFound
	}
	s.mu.Lock()
	sess := s.sessions[*d.SessionID]
	s.mu.Unlock()
	if sess == nil || sess.token != *d.Token {
		return nil, closeSessionInvalid
	}
	sess.mu.Lock()
	old := sess.conn
	sess.conn = c
	if sess.expiry != nil {
		sess.expiry.Stop()
		sess.expiry = nil
	}
	if d.SeqAck != nil {
		sess.seqAck = *d.SeqAck
	}
	sess.mu.Unlock()
	if old != nil && old != c {
		old.drop()
	}
	s.resumes.Add(1)
	return sess, sess.SendJSON(9, nil)
}

func (s *Server) selectProtocol(sess *session, raw json.RawMessage) error {
	var d struct {
		Protocol string `json:"protocol"`
		Data     *struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
			Mode    string `json:"mode"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &d) != nil || d.Data == nil {
		return closeFailedDecode
	}
	if d.Protocol != "udp" {
		return closeUnknownProtocol
	}
	if !slices.Contains(s.opts.Modes, d.Data.Mode) {
		return closeUnknownMode
	}
	ip := net.ParseIP(d.Data.Address)
	if ip == nil || d.Data.Port <= 0 || d.Data.Port > 65535 {
		return closeBadRequest
	}
	if sess.described() {
		return closeAlreadyAuth
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	tr, err := newTransport(d.Data.Mode, key)
	if err != nil {
		return closeUnknownMode
	}
	addr := &net.UDPAddr{IP: ip, Port: d.Data.Port}
	s.mu.Lock()
	s.byAddr[addr.String()] = sess
	s.mu.Unlock()
	sess.mu.Lock()
	sess.udpAddr = addr
	sess.mu.Unlock()
	ints := make([]int, len(key))
	for i, b := range key {
		ints[i] = int(b)
	}
	others := s.others(sess)
	if err := sess.SendJSON(4, map[string]any{
		"mode": d.Data.Mode, "secret_key": ints, "audio_codec": "opus",
		"dave_protocol_version": s.opts.DAVE.ProtocolVersion(sess.maxDAVE), "media_session_id": randHex(8),
	}); err != nil {
		return err
	}
	sess.mu.Lock()
	sess.transport = tr
	sess.mu.Unlock()
	if len(others) > 0 {
		ids := make([]string, 0, len(others))
		for _, o := range others {
			ids = append(ids, o.userID)
		}
		_ = sess.SendJSON(11, map[string]any{"user_ids": ids})
		for _, o := range others {
			o.mu.Lock()
			sp := o.speaking
			o.mu.Unlock()
			_ = sess.SendJSON(5, map[string]any{"user_id": o.userID, "ssrc": o.ssrc, "speaking": sp})
		}
	}
	for _, o := range others {
		_ = o.SendJSON(11, map[string]any{"user_ids": []string{sess.userID}})
	}
	s.opts.DAVE.Joined(sess, sess.maxDAVE)
	return nil
}

func (s *Server) speaking(sess *session, raw json.RawMessage) error {
	var d struct {
		Speaking *int    `json:"speaking"`
		SSRC     *uint32 `json:"ssrc"`
	}
	if json.Unmarshal(raw, &d) != nil || d.Speaking == nil || d.SSRC == nil {
		return closeFailedDecode
	}
	if *d.SSRC != sess.ssrc {
		return closeBadRequest
	}
	sess.mu.Lock()
	sess.speaking = *d.Speaking
	sess.mu.Unlock()
	for _, o := range s.others(sess) {
		_ = o.SendJSON(5, map[string]any{"user_id": sess.userID, "ssrc": sess.ssrc, "speaking": *d.Speaking})
	}
	return nil
}
