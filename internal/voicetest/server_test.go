package voicetest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rawDial(t *testing.T, s *Server, query string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{TLSClientConfig: s.ClientTLS()}
	ws, resp, err := d.Dial("wss://"+s.Endpoint()+"/?"+query, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func send(t *testing.T, ws *websocket.Conn, v any) {
	t.Helper()
	var err error
	if s, ok := v.(string); ok {
		err = ws.WriteMessage(websocket.TextMessage, []byte(s))
	} else {
		err = ws.WriteJSON(v)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// closeCode reads until the server closes and returns its close code.
func closeCode(t *testing.T, ws *websocket.Conn) int {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		t.Fatalf("read: %v (no close frame)", err)
	}
}

func identify(c Credentials) map[string]any {
	return map[string]any{"op": 0, "d": map[string]any{
		"server_id": c.ServerID, "user_id": c.UserID, "session_id": c.SessionID, "token": c.Token,
		"max_dave_protocol_version": 0,
	}}
}

func readOp(t *testing.T, ws *websocket.Conn, op int) json.RawMessage {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		var m struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&m); err != nil {
			t.Fatalf("waiting for op %d: %v", op, err)
		}
		if m.Op == op {
			return m.D
		}
	}
}

func TestRefusesLikeDiscord(t *testing.T) {
	type step func(t *testing.T, s *Server, ws *websocket.Conn, c Credentials)
	withIdentify := func(mut func(d map[string]any)) step {
		return func(t *testing.T, s *Server, ws *websocket.Conn, c Credentials) {
			m := identify(c)
			mut(m["d"].(map[string]any))
			send(t, ws, m)
		}
	}
	identified := func(next map[string]any) step {
		return func(t *testing.T, s *Server, ws *websocket.Conn, c Credentials) {
			send(t, ws, identify(c))
			readOp(t, ws, 2)
			send(t, ws, next)
		}
	}
	cases := []struct {
		name string
		opts Options
		do   step
		code int
	}{
		{"not JSON", Options{}, func(t *testing.T, _ *Server, ws *websocket.Conn, _ Credentials) { send(t, ws, "{op:0") }, 4002},
		{"speaking before identify", Options{}, func(t *testing.T, _ *Server, ws *websocket.Conn, _ Credentials) {
			send(t, ws, map[string]any{"op": 5, "d": map[string]any{"speaking": 1, "ssrc": 1}})
		}, 4003},
		{"binary before identify", Options{}, func(t *testing.T, _ *Server, ws *websocket.Conn, _ Credentials) {
			_ = ws.WriteMessage(websocket.BinaryMessage, []byte{26, 1})
		}, 4003},
		{"unknown opcode", Options{}, func(t *testing.T, _ *Server, ws *websocket.Conn, _ Credentials) {
			send(t, ws, map[string]any{"op": 42, "d": nil})
		}, 4001},
		{"identify without token", Options{}, withIdentify(func(d map[string]any) { delete(d, "token") }), 4002},
		{"identify with a number for user id", Options{}, withIdentify(func(d map[string]any) { d["user_id"] = 5 }), 4002},
		{"identify with the wrong token", Options{}, withIdentify(func(d map[string]any) { d["token"] = "nope" }), 4004},
		{"identify for another user", Options{}, withIdentify(func(d map[string]any) { d["user_id"] = "666" }), 4004},
		{"identify for another server", Options{}, withIdentify(func(d map[string]any) { d["server_id"] = "1" }), 4011},
		{"identify without DAVE where required", Options{RequireDAVE: true}, withIdentify(func(map[string]any) {}), 4017},
		{"identify twice", Options{}, identified(map[string]any{"op": 0, "d": map[string]any{}}), 4005},
		{"select protocol webrtc", Options{}, identified(map[string]any{"op": 1, "d": map[string]any{
			"protocol": "webrtc", "data": map[string]any{"address": "127.0.0.1", "port": 5, "mode": "aead_aes256_gcm_rtpsize"}}}), 4012},
		{"select protocol xsalsa20", Options{}, identified(map[string]any{"op": 1, "d": map[string]any{
			"protocol": "udp", "data": map[string]any{"address": "127.0.0.1", "port": 5, "mode": "xsalsa20_poly1305"}}}), 4016},
		{"select protocol without address", Options{}, identified(map[string]any{"op": 1, "d": map[string]any{
			"protocol": "udp", "data": map[string]any{"mode": "aead_aes256_gcm_rtpsize"}}}), 4020},
		{"speaking for another ssrc", Options{}, identified(map[string]any{"op": 5, "d": map[string]any{"speaking": 1, "ssrc": 1}}), 4020},
		{"heartbeat without t", Options{}, identified(map[string]any{"op": 3, "d": map[string]any{"seq_ack": 1}}), 4002},
		{"resume of an unknown session", Options{}, func(t *testing.T, s *Server, ws *websocket.Conn, c Credentials) {
			send(t, ws, map[string]any{"op": 7, "d": map[string]any{"server_id": c.ServerID, "session_id": "x", "token": c.Token, "seq_ack": 1}})
		}, 4006},
		{"silence past the heartbeat", Options{HeartbeatInterval: 50 * time.Millisecond}, func(*testing.T, *Server, *websocket.Conn, Credentials) {}, 4009},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t, tc.opts)
			ws := rawDial(t, s, "v=8")
			readOp(t, ws, 8)
			tc.do(t, s, ws, s.Join("100"))
			if got := closeCode(t, ws); got != tc.code {
				t.Fatalf("close code %d, want %d", got, tc.code)
			}
		})
	}
}

func TestRefusesOtherGatewayVersions(t *testing.T) {
	s := New(t, Options{})
	d := websocket.Dialer{TLSClientConfig: s.ClientTLS()}
	for _, q := range []string{"", "v=4", "v=7"} {
		ws, resp, err := d.Dial("wss://"+s.Endpoint()+"/?"+q, nil)
		if err == nil {
			ws.Close()
			t.Fatalf("%q: upgraded", q)
		}
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%q: %v", q, err)
		}
		resp.Body.Close()
	}
}

func TestReadyOffersRtpsizeModesAndHelloHasInterval(t *testing.T) {
	s := New(t, Options{})
	ws := rawDial(t, s, "v=8")
	var hello struct {
		HeartbeatInterval float64 `json:"heartbeat_interval"`
	}
	_ = json.Unmarshal(readOp(t, ws, 8), &hello)
	if hello.HeartbeatInterval != 13750 {
		t.Fatalf("heartbeat interval %v", hello.HeartbeatInterval)
	}
	send(t, ws, identify(s.Join("100")))
	var ready struct {
		SSRC  uint32   `json:"ssrc"`
		Modes []string `json:"modes"`
	}
	_ = json.Unmarshal(readOp(t, ws, 2), &ready)
	if ready.SSRC == 0 || strings.Join(ready.Modes, ",") != "aead_aes256_gcm_rtpsize,aead_xchacha20_poly1305_rtpsize" {
		t.Fatalf("ready %+v", ready)
	}
}
