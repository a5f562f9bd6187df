package davemedia_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
)

// recorder is a media.Signal that keeps what the session sent.
type recorder struct {
	mu       sync.Mutex
	json     []media.Opcode
	data     []any // JSON opcodes' data, in order
	binary   []media.Opcode
	payloads [][]byte // binary opcodes' payloads, in order
}

func (r *recorder) SendJSON(op media.Opcode, d any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.json = append(r.json, op)
	r.data = append(r.data, d)
	return nil
}

func (r *recorder) SendBinary(op media.Opcode, payload []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.binary = append(r.binary, op)
	r.payloads = append(r.payloads, payload)
	return nil
}

// lastBinary returns the payload of the last binary op sent.
func (r *recorder) lastBinary(t *testing.T, op media.Opcode) []byte {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.binary) - 1; i >= 0; i-- {
		if r.binary[i] == op {
			return r.payloads[i]
		}
	}
	t.Fatalf("no op %d sent (sent %v)", op, r.binary)
	return nil
}

func newSession(t *testing.T, allow func(string) bool) *davemedia.Session {
	t.Helper()
	s, err := davemedia.New(davemedia.Config{UserID: "1001", ChannelID: "42", Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewRefusesWhatIsNotASnowflake(t *testing.T) {
	for _, cfg := range []davemedia.Config{
		{UserID: "bot", ChannelID: "42"},
		{UserID: "1001", ChannelID: "channel"},
		{UserID: "0", ChannelID: "42"},
	} {
		if _, err := davemedia.New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name       string
		version    int
		self       string
		err        error
		keyPackage bool
		canEncrypt bool
	}{
		{"DAVE: key package, no key to send with yet", 1, "1001", nil, true, false},
		{"protocol 0: frames pass", 0, "1001", nil, false, true},
		{"a version we do not speak", 2, "1001", media.ErrDAVEUnsupported, false, false},
		{"another user's connection", 1, "1002", davemedia.ErrWrongUser, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t, nil)
			var r recorder
			err := s.Start(tc.version, tc.self, &r)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got := len(r.binary) == 1 && r.binary[0] == media.OpDAVEMLSKeyPackage; got != tc.keyPackage {
				t.Fatalf("sent %v", r.binary)
			}
			if tc.err == nil && s.CanEncrypt() != tc.canEncrypt {
				t.Fatalf("CanEncrypt = %v", s.CanEncrypt())
			}
			if tc.version == 1 && tc.err == nil {
				if _, err := s.Encrypt(nil, []byte("opus frame")); !errors.Is(err, dave.ErrNoEncryptKey) {
					t.Fatalf("encrypt before the key: %v", err)
				}
			}
		})
	}
}

// TestDecryptSkipsTheUnconsentedUnread: the session's own consent check
// runs before any DAVE work, so a speaker whose consent went between
// media's check and DAVE's costs nothing either.
func TestDecryptSkipsTheUnconsentedUnread(t *testing.T) {
	s := newSession(t, func(u string) bool { return u == "2002" })
	var r recorder
	if err := s.Start(1, "1001", &r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decrypt(nil, "3003", []byte("frame\xfa\xfa")); !errors.Is(err, dave.ErrSkipped) {
		t.Fatalf("err = %v", err)
	}
	if st := s.DAVE().Stats(3003); st.Attempts != 0 || st.Skipped != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := s.Decrypt(nil, "not-a-user", []byte("x")); err == nil {
		t.Fatal("a non-snowflake user decrypted")
	}
}

func TestHandlersBeforeStartAndJunk(t *testing.T) {
	s := newSession(t, nil)
	// Prepare epoch 1 before Start answers with a key package, which has
	// nowhere to go: an error, not a panic.
	if err := s.HandleJSON(media.OpDAVEPrepareEpoch, json.RawMessage(`{"epoch":1,"protocol_version":1}`)); err == nil {
		t.Fatal("a reply before Start vanished silently")
	}
	var r recorder
	if err := s.Start(1, "1001", &r); err != nil {
		t.Fatal(err)
	}
	if err := s.HandleJSON(media.OpDAVEPrepareTransition, json.RawMessage(`{"transition_id":`)); err == nil {
		t.Fatal("malformed JSON accepted")
	}
	if err := s.HandleBinary(media.OpDAVEMLSAnnounceCommit, 1, []byte{0}); err == nil {
		t.Fatal("a commit without a transition id accepted")
	}
	if err := s.HandleJSON(media.OpDAVEPrepareTransition, json.RawMessage(`{"transition_id":5,"protocol_version":1}`)); err != nil {
		t.Fatal(err)
	}
	if len(r.json) != 1 || r.json[0] != media.OpDAVETransitionReady {
		t.Fatalf("sent %v, want op 23", r.json)
	}
	s.UsersConnected([]string{"2002", "junk"})
	s.UserDisconnected("junk")
	s.Close()
}
