package dave_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

func TestInteropBadFramesRefused(t *testing.T) {
	g := newGateway(t, channel)
	ours, d1 := newGoPeer(t, 9001, channel), newDaveyPeer(t, 9002, channel)
	g.found(t, ours, ours, d1)

	// A separate call: same user ids, its own group and keys.
	g2 := newGateway(t, channel+1)
	other, d1b := newGoPeer(t, 9001, channel+1), newDaveyPeer(t, 9002, channel+1)
	g2.found(t, d1b, other, d1b)

	frame := opusFrame(t, 120)
	good := d1.Encrypt(t, frame)
	corrupted := bytes.Clone(good)
	corrupted[10] ^= 0x01
	wrongKey := d1b.Encrypt(t, frame)
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"corrupted frame", corrupted, dave.ErrAuthentication},
		{"frame under a wrong key", wrongKey, dave.ErrAuthentication},
		{"truncated frame", good[:len(good)-5], dave.ErrNotEncrypted},
		{"plain opus in an encrypted call", frame, dave.ErrNotEncrypted},
	}
	ours.advance(20e9) // past the upgrade's passthrough window
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ours.Decrypt(t, d1.ID(), tt.frame)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), "0x") {
				t.Fatalf("error %q looks like it carries bytes", err)
			}
		})
	}
	if got, err := ours.Decrypt(t, d1.ID(), good); err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("the good frame after the bad ones: %v", err)
	}
	if _, err := ours.Decrypt(t, d1.ID(), good); !errors.Is(err, dave.ErrReplayedNonce) {
		t.Fatalf("replayed nonce: %v", err)
	}
	// And davey refuses ours' corrupted and replayed frames.
	enc := ours.Encrypt(t, frame)
	bad := bytes.Clone(enc)
	bad[5] ^= 0x80
	if _, err := d1.Decrypt(t, ours.ID(), bad); err == nil {
		t.Fatal("davey accepted a corrupted frame of ours")
	}
	if _, err := d1.Decrypt(t, ours.ID(), enc); err != nil {
		t.Fatalf("davey refused the good frame: %v", err)
	}
	if _, err := d1.Decrypt(t, ours.ID(), enc); err == nil {
		t.Fatal("davey accepted a replay of ours' frame")
	}
}

// TestSkipDoesNoDecryptionWork: a sender the caller does not allow is
// dropped before any decryption, and the counters show it.
func TestSkipDoesNoDecryptionWork(t *testing.T) {
	var allowed atomic.Bool
	allowed.Store(true)
	g := newGateway(t, channel)
	d1 := newDaveyPeer(t, 9102, channel)
	ours := newGoPeer(t, 9101, channel)
	s, err := dave.New(dave.Options{UserID: 9101, ChannelID: channel, Now: ours.clock,
		Allow: func(u dave.UserID) bool { return u != dave.UserID(d1.ID()) || allowed.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	ours.s = s
	g.found(t, d1, ours, d1)
	if _, err := ours.Decrypt(t, d1.ID(), d1.Encrypt(t, []byte("consented"))); err != nil {
		t.Fatal(err)
	}
	allowed.Store(false)
	for i := 0; i < 50; i++ {
		if _, err := ours.Decrypt(t, d1.ID(), d1.Encrypt(t, []byte("not consented"))); !errors.Is(err, dave.ErrSkipped) {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	st := s.Stats(dave.UserID(d1.ID()))
	if st.Attempts != 1 || st.Successes != 1 || st.Skipped != 50 {
		t.Fatalf("stats %+v: want 1 attempt, 1 success, 50 skipped", st)
	}
	// A caller that filters itself counts with Skip.
	s.Skip(dave.UserID(d1.ID()))
	if got := s.Stats(dave.UserID(d1.ID())); got.Skipped != 51 || got.Attempts != 1 {
		t.Fatalf("after Skip: %+v", got)
	}
}

// newStarted returns a Go session that founded a group with davey.
func newStarted(t *testing.T, id uint64) (*gateway, *goPeer, *daveyPeer) {
	t.Helper()
	g := newGateway(t, channel)
	ours, d1 := newGoPeer(t, id, channel), newDaveyPeer(t, id+1, channel)
	g.found(t, ours, ours, d1)
	return g, ours, d1
}

func ops(out []dave.Message) []dave.Opcode {
	var o []dave.Opcode
	for _, m := range out {
		o = append(o, m.Op)
	}
	return o
}

// TestBadMLSInputRecovers: malformed or misaddressed commits and welcomes
// get op 31 and a fresh key package; malformed proposals an error; never a
// panic.
func TestBadMLSInputRecovers(t *testing.T) {
	g, ours, d1 := newStarted(t, 9200)
	d2 := newDaveyPeer(t, 9202, channel)
	kp := d2.Join(t, g.es.Package(), g.ids())
	msg, _, _ := g.es.ProposeAdd(g.groupID, g.epoch, kp)
	if ours.Proposals(t, davetest.ProposalsAppend(msg), g.ids(d2)) == nil {
		t.Fatal("no commit from ours")
	}
	theirs := d1.Proposals(t, davetest.ProposalsAppend(msg), g.ids(d2))
	theirCommit, welcome, err := dave.SplitCommitWelcome(theirs)
	if err != nil {
		t.Fatal(err)
	}
	// davey's commit wins over ours.
	if err := ours.Commit(t, 5, theirCommit); err != nil {
		t.Fatalf("davey's commit: %v", err)
	}
	// Replaying an old-epoch commit is ignored, not fatal.
	if out, err := ours.binary(29, 6, theirCommit); err != nil || len(out) != 0 {
		t.Fatalf("old commit: %v %v", ops(out), err)
	}
	// A commit claiming a future epoch: op 31 for its transition, a reset
	// and a new key package.
	future := bytes.Clone(theirCommit)
	future[4+1+8+7] = 9 // the epoch follows version, wire format and the 8-byte group id
	out, err := ours.binary(29, 7, future)
	if err == nil || !hasOp(out, dave.OpMLSInvalidCommitWelcome) || !hasOp(out, dave.OpMLSKeyPackage) {
		t.Fatalf("commit for a future epoch: %v %v", ops(out), err)
	}
	if out[0].TransitionID != 7 {
		t.Fatalf("op 31 for transition %d, want 7", out[0].TransitionID)
	}
	// A welcome that does not name us: op 31 too.
	out, err = ours.binary(30, 8, welcome)
	if err == nil || !hasOp(out, dave.OpMLSInvalidCommitWelcome) || !hasOp(out, dave.OpMLSKeyPackage) {
		t.Fatalf("welcome not for us: %v %v", ops(out), err)
	}
	// Garbage in every binary opcode: errors or ignored, never a panic.
	garbage := [][]byte{nil, {0}, {0, 1}, {0, 1, 0, 1}, bytes.Repeat([]byte{0xFF}, 64), {0, 1, 0, 1, 0xBF, 0xFF, 0xFF, 0xFF}, {1, 0x80, 0, 0, 0}}
	for _, b := range garbage {
		for _, op := range []uint8{25, 27, 29, 30} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("op %d %x: panic %v", op, b, r)
					}
				}()
				_, _ = ours.binary(op, 9, b)
			}()
		}
	}
	// The session recovers: a fresh group with another davey works.
	g2 := newGateway(t, channel)
	fresh := newDaveyPeer(t, 9299, channel)
	ours.s.RemoveUser(dave.UserID(d1.ID()))
	g2.found(t, ours, ours, fresh)
	exchange(t, ours, fresh)
}

func TestGarbageCommitOnEstablishedGroup(t *testing.T) {
	_, ours, _ := newStarted(t, 9250)
	out, err := ours.binary(29, 4, []byte{0, 1, 0, 1, 0xBF})
	if err == nil || !hasOp(out, dave.OpMLSInvalidCommitWelcome) || !hasOp(out, dave.OpMLSKeyPackage) {
		t.Fatalf("garbage commit: %v %v", ops(out), err)
	}
}

func TestProposalsRefused(t *testing.T) {
	g, ours, _ := newStarted(t, 9300)
	stranger := newDaveyPeer(t, 9399, channel)
	kp := stranger.Join(t, g.es.Package(), nil)
	msg, ref, _ := g.es.ProposeAdd(g.groupID, g.epoch, kp)
	// Not in the call (no op 11 for them): refused.
	if _, err := ours.s.OnProposals(davetest.ProposalsAppend(msg)); !errors.Is(err, dave.ErrBadProposal) {
		t.Fatalf("add for a user not in the call: %v", err)
	}
	// From another external sender: refused.
	impostor, _ := davetest.NewExternalSender()
	forged, _, _ := impostor.ProposeAdd(g.groupID, g.epoch, kp)
	ours.s.AddUser(dave.UserID(stranger.ID()))
	if _, err := ours.s.OnProposals(davetest.ProposalsAppend(forged)); !errors.Is(err, dave.ErrBadProposal) {
		t.Fatalf("proposal from another external sender: %v", err)
	}
	// For the wrong epoch: refused.
	stale, _, _ := g.es.ProposeAdd(g.groupID, g.epoch+3, kp)
	if _, err := ours.s.OnProposals(davetest.ProposalsAppend(stale)); !errors.Is(err, dave.ErrBadProposal) {
		t.Fatalf("proposal for the wrong epoch: %v", err)
	}
	// Append then revoke: the second answer carries no commit.
	out, err := ours.s.OnProposals(davetest.ProposalsAppend(msg))
	if err != nil || !hasOp(out, dave.OpMLSCommitWelcome) {
		t.Fatalf("valid add: %v %v", ops(out), err)
	}
	out, err = ours.s.OnProposals(davetest.ProposalsRevoke(ref))
	if err != nil || len(out) != 0 {
		t.Fatalf("revoke: %v %v", ops(out), err)
	}
	if _, err := ours.s.OnProposals(davetest.ProposalsRevoke(ref)); err == nil {
		t.Fatal("revoking an unknown proposal was accepted")
	}
}

// TestDowngradeAndUpgrade: a transition to protocol 0 passes frames
// through; prepare epoch 1 brings DAVE back with a new group.
func TestDowngradeAndUpgrade(t *testing.T) {
	g, ours, d1 := newStarted(t, 9400)
	out := ours.json(t, dave.OpPrepareTransition, `{"transition_id":20,"protocol_version":0}`)
	if !hasOp(out, dave.OpReadyForTransition) {
		t.Fatalf("prepare downgrade: %v", ops(out))
	}
	plain := []byte{0x78, 0x01, 0x02}
	// Receivers accept plain frames from the prepare on.
	if got, err := ours.Decrypt(t, d1.ID(), plain); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("plain frame during the downgrade: %v", err)
	}
	ours.Execute(t, 20)
	if ours.s.ProtocolVersion() != 0 {
		t.Fatal("still on protocol 1 after the downgrade")
	}
	if got := ours.Encrypt(t, plain); !bytes.Equal(got, plain) {
		t.Fatal("protocol 0 frame was transformed")
	}
	// Upgrade: op 24 epoch 1 → new key package; a new group with davey.
	out = ours.json(t, dave.OpPrepareEpoch, `{"epoch":1,"protocol_version":1}`)
	if !hasOp(out, dave.OpMLSKeyPackage) {
		t.Fatalf("prepare epoch 1: %v", ops(out))
	}
	g2 := newGateway(t, channel)
	d2 := newDaveyPeer(t, 9402, channel)
	_ = g
	g2.found(t, d2, ours, d2)
	g2.tid = 30
	ours.json(t, dave.OpPrepareTransition, `{"transition_id":31,"protocol_version":1}`)
	ours.Execute(t, 31)
	if ours.s.ProtocolVersion() != 1 {
		t.Fatal("not back on protocol 1")
	}
	exchange(t, ours, d2)
}

func TestMessagesEncode(t *testing.T) {
	m := dave.Message{Op: dave.OpReadyForTransition, TransitionID: 12}
	var v struct {
		Op int `json:"op"`
		D  struct {
			TransitionID int `json:"transition_id"`
		} `json:"d"`
	}
	if err := json.Unmarshal(m.Encode(), &v); err != nil || v.Op != 23 || v.D.TransitionID != 12 {
		t.Fatalf("op 23 encodes to %s", m.Encode())
	}
	kp := dave.Message{Op: dave.OpMLSKeyPackage, Payload: []byte{1, 2}}
	if !kp.Binary() || !bytes.Equal(kp.Encode(), []byte{26, 1, 2}) {
		t.Fatalf("op 26 encodes to %x", kp.Encode())
	}
}
