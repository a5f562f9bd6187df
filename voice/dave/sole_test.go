package dave_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// TestSoleMemberOnlyAsTheProtocolSays: a client encrypts under its own
// local group (the sole member state) only once a transition executes it:
// op 21 with transition id 0, after op 24 epoch 1 resets it (protocol.md,
// "Sole member reset"), or straight after the external sender. Being the
// only user op 11 named is no such sign (it once was, here), and neither is
// a non-zero transition's execute, nor op 24 alone.
func TestSoleMemberOnlyAsTheProtocolSays(t *testing.T) {
	type step struct {
		op dave.Opcode
		d  string // JSON, or "" for the external sender (op 25)
	}
	var (
		es      = step{op: dave.OpMLSExternalSender}
		epoch1  = step{dave.OpPrepareEpoch, `{"epoch":1,"protocol_version":1}`}
		trans0  = step{dave.OpPrepareTransition, `{"transition_id":0,"protocol_version":1}`}
		trans5  = step{dave.OpPrepareTransition, `{"transition_id":5,"protocol_version":1}`}
		exec5   = step{dave.OpExecuteTransition, `{"transition_id":5}`}
		nobody  = step{dave.OpClientsConnect, `{"user_ids":[]}`}
		someone = step{dave.OpClientsConnect, `{"user_ids":["9902"]}`}
	)
	for _, tc := range []struct {
		name  string
		steps []step
		ready bool
	}{
		{"session description and external sender", []step{es}, false},
		{"alone by op 11", []step{nobody, es}, false},
		{"op 24 epoch 1 alone", []step{es, epoch1}, false},
		{"a non-zero transition executed", []step{es, trans5, exec5}, false},
		{"op 24 epoch 1 then op 21 transition 0", []step{es, epoch1, trans0}, true},
		{"op 24 epoch 1, external sender, op 21 transition 0", []step{epoch1, es, trans0}, true},
		{"op 21 transition 0 after the external sender", []step{es, trans0}, true},
		{"others connected, then the sole member reset", []step{someone, es, epoch1, trans0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ext, err := davetest.NewExternalSender()
			if err != nil {
				t.Fatal(err)
			}
			s, err := dave.New(dave.Options{UserID: 9901, ChannelID: channel})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.OnSelectProtocolAck(1); err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				if st.d == "" {
					_, _, err = s.HandleBinary(davetest.Binary(uint16(i+1), uint8(dave.OpMLSExternalSender), 0, ext.Package()))
				} else {
					_, err = s.HandleJSON(st.op, json.RawMessage(st.d))
				}
				if err != nil {
					t.Fatalf("step %d (op %d): %v", i, st.op, err)
				}
			}
			if s.Ready() != tc.ready {
				t.Fatalf("Ready() = %v, want %v", s.Ready(), tc.ready)
			}
			frame := bytes.Repeat([]byte{0x78, 1, 2, 3}, 20)
			out, err := s.Encrypt(nil, frame)
			switch {
			case !tc.ready && !errors.Is(err, dave.ErrNoEncryptKey):
				t.Fatalf("encrypt before the sole member state: %v, want ErrNoEncryptKey", err)
			case tc.ready && (err != nil || bytes.Contains(out, frame[:16])):
				t.Fatalf("the sole member's frame: %v (in the clear: %v)", err, bytes.Contains(out, frame[:16]))
			}
		})
	}
}
