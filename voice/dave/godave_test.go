package dave_test

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/disgoorg/godave"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

type recorder struct {
	keyPackages, commits [][]byte
	ready, invalid       []uint16
}

func (r *recorder) SendMLSKeyPackage(b []byte) error {
	r.keyPackages = append(r.keyPackages, b)
	return nil
}
func (r *recorder) SendMLSCommitWelcome(b []byte) error { r.commits = append(r.commits, b); return nil }
func (r *recorder) SendReadyForTransition(id uint16) error {
	r.ready = append(r.ready, id)
	return nil
}
func (r *recorder) SendInvalidCommitWelcome(id uint16) error {
	r.invalid = append(r.invalid, id)
	return nil
}

// godaveInGroup founds a group of the godave.Session adapter (what disgo's
// voice package calls, as user 9601, committing) and davey (9602) under
// transition 3, and returns the adapter, what it sent, and davey.
func godaveInGroup(t *testing.T) (godave.Session, *recorder, *daveyPeer) {
	t.Helper()
	rec := &recorder{}
	var gs godave.Session = dave.NewGodave(nil)(slog.New(slog.DiscardHandler), "9601", rec)
	gs.SetChannelID(channel)
	if gs.MaxSupportedProtocolVersion() != 1 {
		t.Fatal("max protocol version")
	}
	g := newGateway(t, channel)
	d1 := newDaveyPeer(t, 9602, channel)
	gs.AddUser("9602")
	gs.OnSelectProtocolAck(1)
	gs.OnDaveMLSExternalSenderPackage(g.es.Package())
	if len(rec.keyPackages) != 1 {
		t.Fatalf("%d key packages sent", len(rec.keyPackages))
	}
	d1.Join(t, g.es.Package(), nil)
	msg, _, err := g.es.ProposeAdd(g.groupID, 0, d1.call(t, map[string]any{"cmd": "keyPackage"}).bytes(t))
	if err != nil {
		t.Fatal(err)
	}
	gs.OnDaveMLSProposals(davetest.ProposalsAppend(msg))
	if len(rec.commits) != 1 {
		t.Fatal("no commit sent")
	}
	commit, welcome, err := dave.SplitCommitWelcome(rec.commits[0])
	if err != nil {
		t.Fatal(err)
	}
	gs.OnDaveMLSPrepareCommitTransition(3, commit)
	if err := d1.Welcome(t, 3, welcome); err != nil {
		t.Fatal(err)
	}
	if len(rec.ready) != 1 || rec.ready[0] != 3 {
		t.Fatalf("ready for transitions %v", rec.ready)
	}
	gs.OnDaveExecuteTransition(3)
	if !gs.Ready() {
		t.Fatal("not ready after the transition")
	}
	return gs, rec, d1
}

// TestGodaveAdapter runs the godave.Session adapter through a group
// founded with davey.
func TestGodaveAdapter(t *testing.T) {
	gs, rec, d1 := godaveInGroup(t)
	frame := opusFrame(t, 120)
	buf := make([]byte, gs.MaxEncryptedFrameSize(len(frame)))
	n, err := gs.Encrypt(1, frame, buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d1.Decrypt(t, 9601, buf[:n])
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("davey decrypting the adapter's frame: %v", err)
	}
	enc := d1.Encrypt(t, frame)
	out := make([]byte, gs.MaxDecryptedFrameSize("9602", len(enc)))
	n, err = gs.Decrypt("9602", enc, out)
	if err != nil || !bytes.Equal(out[:n], frame) {
		t.Fatalf("adapter decrypting davey's frame: %v", err)
	}
	gs.OnDaveMLSPrepareCommitTransition(4, []byte{0, 1, 0, 1, 0xBF})
	if len(rec.invalid) != 1 || rec.invalid[0] != 4 || len(rec.keyPackages) != 2 {
		t.Fatalf("bad commit: invalid %v, %d key packages", rec.invalid, len(rec.keyPackages))
	}
	if err := gs.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestGodaveRecoversFromDecryptFailures: through the adapter too, the
// DecryptFailureTolerance-th frame in a row from one sender that fails to
// decrypt sends op 31 for the current transition and a new key package.
func TestGodaveRecoversFromDecryptFailures(t *testing.T) {
	gs, rec, d1 := godaveInGroup(t)
	frame := opusFrame(t, 120)
	for i := range dave.DecryptFailureTolerance {
		if len(rec.invalid) != 0 {
			t.Fatalf("op 31 after %d failures", i)
		}
		bad := d1.Encrypt(t, frame)
		bad[0] ^= 0xFF
		out := make([]byte, gs.MaxDecryptedFrameSize("9602", len(bad)))
		if _, err := gs.Decrypt("9602", bad, out); err == nil {
			t.Fatal("a corrupted frame decrypted")
		}
	}
	if len(rec.invalid) != 1 || rec.invalid[0] != 3 || len(rec.keyPackages) != 2 {
		t.Fatalf("after %d failures: op 31 for %v, %d key packages; want transition 3 and a second key package",
			dave.DecryptFailureTolerance, rec.invalid, len(rec.keyPackages))
	}
}
