package voicetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// daveJoin identifies userID with DAVE on a raw websocket and reads up to
// the external sender package (op 25).
func daveJoin(t *testing.T, s *Server, userID string) *websocket.Conn {
	t.Helper()
	ws := rawDial(t, s, "v=8")
	c := s.Join(userID)
	send(t, ws, map[string]any{"op": 0, "d": map[string]any{
		"server_id": c.ServerID, "user_id": c.UserID, "session_id": c.SessionID, "token": c.Token,
		"max_dave_protocol_version": 1,
	}})
	readOp(t, ws, 2)
	send(t, ws, map[string]any{"op": 1, "d": map[string]any{"protocol": "udp", "data": map[string]any{
		"address": "127.0.0.1", "port": 9, "mode": "aead_aes256_gcm_rtpsize",
	}}})
	var sd struct {
		Version int `json:"dave_protocol_version"`
	}
	if err := json.Unmarshal(readOp(t, ws, 4), &sd); err != nil || sd.Version != 1 {
		t.Fatalf("session description: version %d, %v", sd.Version, err)
	}
	readBinary(t, ws, 25)
	return ws
}

// readBinary skips JSON messages (a lone client gets op 24 first) and
// returns the body of the next binary message, which must be op.
func readBinary(t *testing.T, ws *websocket.Conn, op byte) []byte {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		kind, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("waiting for op %d: %v", op, err)
		}
		if kind != websocket.BinaryMessage {
			continue
		}
		if len(b) < 3 || b[2] != op {
			t.Fatalf("expected op %d, got %x", op, b)
		}
		return b[3:]
	}
}

func daveRole(t *testing.T) (*Server, *DAVEServer) {
	t.Helper()
	role, err := NewDAVEServer(DAVEServerOptions{ChannelID: 42})
	if err != nil {
		t.Fatal(err)
	}
	return New(t, Options{DAVE: role, RequireDAVE: true}), role
}

// TestDAVERoleIsStrict: what cannot be decoded closes the socket with
// 4002; what is merely out of order or not the sender's is ignored and the
// session carries on.
func TestDAVERoleIsStrict(t *testing.T) {
	bin := func(b ...byte) func(*testing.T, *websocket.Conn) {
		return func(t *testing.T, ws *websocket.Conn) {
			if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	js := func(v string) func(*testing.T, *websocket.Conn) {
		return func(t *testing.T, ws *websocket.Conn) { send(t, ws, v) }
	}
	for _, tc := range []struct {
		name string
		do   func(*testing.T, *websocket.Conn)
		code int // 0: ignored, the session stays
	}{
		{"garbage key package", bin(26, 0xde, 0xad, 0xbe, 0xef), 4002},
		{"empty key package", bin(26), 4002},
		{"garbage commit", bin(28, 0, 1, 0, 1, 0xff), 4002},
		{"binary opcode a client never sends", bin(27, 0), 4001},
		{"ready without a transition id", js(`{"op":23,"d":{}}`), 4002},
		{"invalid commit report without a transition id", js(`{"op":31,"d":{"transition_id":"x"}}`), 4002},
		{"ready for a transition never announced", js(`{"op":23,"d":{"transition_id":999}}`), 0},
		{"invalid commit report out of the blue", js(`{"op":31,"d":{"transition_id":7}}`), 0},
		{"key package naming someone else", func(t *testing.T, ws *websocket.Conn) {
			s, err := dave.New(dave.Options{UserID: 31337, ChannelID: 42})
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.OnSelectProtocolAck(1)
			if err != nil || len(out) != 1 {
				t.Fatal(out, err)
			}
			bin(append([]byte{26}, out[0].Payload...)...)(t, ws)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, role := daveRole(t)
			ws := daveJoin(t, srv, "1001")
			tc.do(t, ws)
			if tc.code != 0 {
				if got := closeCode(t, ws); got != tc.code {
					t.Fatalf("closed with %d, want %d", got, tc.code)
				}
				return
			}
			send(t, ws, map[string]any{"op": 3, "d": map[string]any{"t": 1, "seq_ack": 0}})
			readOp(t, ws, 6)
			if st := role.Stats(); st.Proposals != 0 || st.CommitsAccepted != 0 {
				t.Fatalf("role acted on it: %+v", st)
			}
		})
	}
}

// FuzzDAVEParsers: the role's readers of member messages never panic and
// never read past their input.
func FuzzDAVEParsers(f *testing.F) {
	s, err := dave.New(dave.Options{UserID: 5, ChannelID: 42})
	if err != nil {
		f.Fatal(err)
	}
	out, err := s.OnSelectProtocolAck(1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(out[0].Payload)
	es, err := davetest.NewExternalSender()
	if err != nil {
		f.Fatal(err)
	}
	msg, _, err := es.ProposeAdd([]byte{0, 0, 0, 0, 0, 0, 0, 42}, 0, out[0].Payload)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add([]byte{0, 1, 0, 1, 8, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 3, 0x40, 0x22, 2, 0x20})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = keyPackageUser(b)
		_, _ = parseCommit(b)
	})
}

// TestKeyPackageUserReadsTheCredential checks the gateway's reading of a
// real key package against the user it was made for.
func TestKeyPackageUserReadsTheCredential(t *testing.T) {
	s, err := dave.New(dave.Options{UserID: 1234567890123, ChannelID: 42})
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.OnSelectProtocolAck(1)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := keyPackageUser(out[0].Payload); err != nil || u != 1234567890123 {
		t.Fatalf("user %d, %v", u, err)
	}
}

// TestLoneJoinerBecomesSoleMember: the first DAVE client gets op 24 epoch
// 1, the external sender and op 21 transition 0, as Discord makes a lone
// member found its own group; the key package it sent before op 24 is not
// proposed to anyone.
func TestLoneJoinerBecomesSoleMember(t *testing.T) {
	srv, role := daveRole(t)
	ws := rawDial(t, srv, "v=8")
	c := srv.Join("1001")
	send(t, ws, map[string]any{"op": 0, "d": map[string]any{
		"server_id": c.ServerID, "user_id": c.UserID, "session_id": c.SessionID, "token": c.Token,
		"max_dave_protocol_version": 1,
	}})
	readOp(t, ws, 2)
	send(t, ws, map[string]any{"op": 1, "d": map[string]any{"protocol": "udp", "data": map[string]any{
		"address": "127.0.0.1", "port": 9, "mode": "aead_aes256_gcm_rtpsize",
	}}})
	readOp(t, ws, 4)
	var epoch struct {
		Epoch   int `json:"epoch"`
		Version int `json:"protocol_version"`
	}
	if err := json.Unmarshal(readOp(t, ws, 24), &epoch); err != nil || epoch.Epoch != 1 || epoch.Version != 1 {
		t.Fatalf("op 24 %+v: %v", epoch, err)
	}
	readBinary(t, ws, 25)
	var tr struct {
		TransitionID *int `json:"transition_id"`
	}
	if err := json.Unmarshal(readOp(t, ws, 21), &tr); err != nil || tr.TransitionID == nil || *tr.TransitionID != 0 {
		t.Fatalf("op 21: %v", err)
	}
	if st := role.Stats(); st.Proposals != 0 {
		t.Fatalf("role proposed %d", st.Proposals)
	}
}
