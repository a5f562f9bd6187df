package dave_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/clankie/clankie/voice/dave"
)

// TestUndocumentedDowngradeRefused: once a call is end-to-end encrypted,
// protocol.md's only way to protocol version 0 is op 21 with a transition
// id, then op 22. Any other way (op 24 epoch 1 naming version 0, op 21 with
// id 0, which executes at once, a second select protocol ack) is refused:
// our frames stay encrypted, and each refusal is counted. Before, each of
// them put our frames in the clear.
func TestUndocumentedDowngradeRefused(t *testing.T) {
	plain := []byte{0x78, 0x01, 0x02}
	cases := []struct {
		name string
		do   func(s *dave.Session) error
	}{
		{"prepare epoch 1 at version 0", func(s *dave.Session) error {
			_, err := s.HandleJSON(dave.OpPrepareEpoch, json.RawMessage(`{"epoch":1,"protocol_version":0}`))
			return err
		}},
		{"prepare transition id 0 at version 0", func(s *dave.Session) error {
			out, err := s.HandleJSON(dave.OpPrepareTransition, json.RawMessage(`{"transition_id":0,"protocol_version":0}`))
			if len(out) > 0 {
				return errors.New("answered")
			}
			return err
		}},
		{"select protocol ack at version 0", func(s *dave.Session) error {
			_, err := s.OnSelectProtocolAck(0)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ours, d1 := newStarted(t, 9600)
			err := tc.do(ours.s)
			if err != nil && !errors.Is(err, dave.ErrDowngradeRefused) {
				t.Fatalf("downgrade answered %v", err)
			}
			if got := ours.Encrypt(t, plain); bytes.Equal(got, plain) {
				t.Fatal("after an undocumented downgrade our frame went out in the clear")
			}
			if ours.s.ProtocolVersion() != 1 || ours.s.Downgraded() {
				t.Fatalf("protocol %d, downgraded %v: want 1, false", ours.s.ProtocolVersion(), ours.s.Downgraded())
			}
			if n := ours.s.Refusals().Downgrades; n != 1 {
				t.Fatalf("Refusals().Downgrades = %d, want 1", n)
			}
			exchange(t, ours, d1) // the call carries on encrypted
		})
	}
}

// TestDocumentedDowngradeIsReported: the documented downgrade (op 21 with
// a transition id and version 0, then op 22) is followed, and from its
// execution Downgraded reports that our frames go out in the clear, until
// an upgrade's transition executes.
func TestDocumentedDowngradeIsReported(t *testing.T) {
	_, ours, _ := newStarted(t, 9700)
	if ours.s.Downgraded() {
		t.Fatal("an encrypted call reported as downgraded")
	}
	ours.json(t, dave.OpPrepareTransition, `{"transition_id":20,"protocol_version":0}`)
	if ours.s.Downgraded() {
		t.Fatal("downgraded before the transition executed")
	}
	ours.Execute(t, 20)
	if !ours.s.Downgraded() {
		t.Fatal("after the documented downgrade, Downgraded is false")
	}
	if n := ours.s.Refusals().Downgrades; n != 0 {
		t.Fatalf("the documented downgrade was counted as refused (%d)", n)
	}
}
