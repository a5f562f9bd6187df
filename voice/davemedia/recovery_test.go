package davemedia_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
)

// member is one davemedia session in a two-member call the test plays the
// gateway for.
type member struct {
	s   *davemedia.Session
	rec *recorder
	seq uint16
}

func (m *member) binary(t *testing.T, op media.Opcode, tid uint16, body []byte) {
	t.Helper()
	m.seq++
	payload := body
	if op == media.OpDAVEMLSAnnounceCommit || op == media.OpDAVEMLSWelcome {
		payload = binary.BigEndian.AppendUint16(nil, tid)
		payload = append(payload, body...)
	}
	if err := m.s.HandleBinary(op, m.seq, payload); err != nil {
		t.Fatalf("op %d: %v", op, err)
	}
}

// twoMembers founds a group of 1001 (committing) and 2002 under
// transition 1 and returns them, 1001 logging to log.
func twoMembers(t *testing.T, log *zap.Logger) (a, b *member) {
	t.Helper()
	es, err := davetest.NewExternalSender()
	if err != nil {
		t.Fatal(err)
	}
	mk := func(self, other string, log *zap.Logger) *member {
		s, err := davemedia.New(davemedia.Config{UserID: self, ChannelID: "42", Allow: func(string) bool { return true }, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		m := &member{s: s, rec: &recorder{}}
		if err := s.Start(1, self, m.rec); err != nil {
			t.Fatal(err)
		}
		s.UsersConnected([]string{other})
		m.binary(t, media.OpDAVEMLSExternalSender, 0, es.Package())
		return m
	}
	a, b = mk("1001", "2002", log), mk("2002", "1001", nil)
	add, _, err := es.ProposeAdd([]byte{0, 0, 0, 0, 0, 0, 0, 42}, 0, b.rec.lastBinary(t, media.OpDAVEMLSKeyPackage))
	if err != nil {
		t.Fatal(err)
	}
	a.binary(t, media.OpDAVEMLSProposals, 0, davetest.ProposalsAppend(add))
	commit, welcome, err := dave.SplitCommitWelcome(a.rec.lastBinary(t, media.OpDAVEMLSCommitWelcome))
	if err != nil {
		t.Fatal(err)
	}
	a.binary(t, media.OpDAVEMLSAnnounceCommit, 1, commit)
	b.binary(t, media.OpDAVEMLSWelcome, 1, welcome)
	for _, m := range []*member{a, b} {
		if err := m.s.HandleJSON(media.OpDAVEExecuteTransition, json.RawMessage(`{"transition_id":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// TestDecryptFailuresSendRecovery: the 36th consecutive frame from one
// sender that fails to decrypt makes the session send op 31 for the
// current transition and a fresh key package through its Signal, and log
// one line with counts and the sender's id only; 35 send nothing.
func TestDecryptFailuresSendRecovery(t *testing.T) {
	for _, tc := range []struct {
		failures int
		recover  bool
	}{
		{dave.DecryptFailureTolerance - 1, false},
		{dave.DecryptFailureTolerance, true},
	} {
		t.Run(fmt.Sprintf("%d failures", tc.failures), func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			a, b := twoMembers(t, zap.New(core))
			frame := bytes.Repeat([]byte{0x78, 9, 8, 7}, 20)
			good, err := b.s.Encrypt(nil, frame)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := a.s.Decrypt(nil, "2002", good); err != nil || !bytes.Equal(got, frame) {
				t.Fatalf("a good frame: %v", err)
			}
			kps := len(a.rec.payloads)
			for i := range tc.failures {
				bad, err := b.s.Encrypt(nil, frame)
				if err != nil {
					t.Fatal(err)
				}
				bad[0] ^= 0xFF
				_, err = a.s.Decrypt(nil, "2002", bad)
				if !errors.Is(err, dave.ErrAuthentication) {
					t.Fatalf("frame %d: %v", i, err)
				}
			}
			a.rec.mu.Lock()
			sentJSON, data, binaries := a.rec.json, a.rec.data, a.rec.binary[kps:]
			a.rec.mu.Unlock()
			var invalid []any
			for i, op := range sentJSON {
				if op == media.OpDAVEMLSInvalidCommitWelcome {
					invalid = append(invalid, data[i])
				}
			}
			if !tc.recover {
				if len(invalid) != 0 || len(binaries) != 0 || logs.Len() != 0 {
					t.Fatalf("sent op 31 %v and binary %v, logged %d lines", invalid, binaries, logs.Len())
				}
				return
			}
			if len(invalid) != 1 || fmt.Sprint(invalid[0]) != "map[transition_id:1]" {
				t.Fatalf("op 31 sent %v, want once for transition 1", invalid)
			}
			if len(binaries) != 1 || binaries[0] != media.OpDAVEMLSKeyPackage {
				t.Fatalf("binary ops after the failures: %v, want one key package", binaries)
			}
			if r := a.s.DAVE().Refusals(); r.Recoveries != 1 {
				t.Fatalf("refusals %+v, want one recovery", r)
			}
			entries := logs.All()
			if len(entries) != 1 {
				t.Fatalf("logged %d lines, want 1", len(entries))
			}
			fields := entries[0].ContextMap()
			// No user id: voice logs say what happened, never who.
			if fields["consecutive_failures"] != int64(dave.DecryptFailureTolerance) || fields["transition_id"] == nil || len(fields) != 2 {
				t.Fatalf("log fields %v: want the count and the transition only", fields)
			}
		})
	}
}
