package dave

import (
	"errors"
	"testing"

	"github.com/clankie/clankie/voice/dave/davetest"
)

// TestMLSPanicIsRecoveredAndCounted: a commit whose handling panics inside
// mls-go (here: our recorded commit with its group gone, so mls-go walks
// a nil group) is answered as an unusable commit (op 31 and a fresh key
// package), counted, and the session lives on. Before, the panic crossed
// HandleBinary and ended the process.
func TestMLSPanicIsRecoveredAndCounted(t *testing.T) {
	s, err := New(Options{UserID: 76, ChannelID: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.OnSelectProtocolAck(1); err != nil {
		t.Fatal(err)
	}
	s.m.ownCommit, s.m.outbound = []byte("commit"), nil
	_, out, err := s.HandleBinary(davetest.Binary(1, 29, 7, []byte("commit")))
	if !errors.Is(err, ErrPeerPanic) {
		t.Fatalf("err = %v, want ErrPeerPanic", err)
	}
	if len(out) != 2 || out[0].Op != OpMLSInvalidCommitWelcome || out[0].TransitionID != 7 || out[1].Op != OpMLSKeyPackage {
		t.Fatalf("answered %+v, want op 31 for transition 7 and a key package", out)
	}
	if n := s.Refusals().Panics; n != 1 {
		t.Fatalf("Refusals().Panics = %d, want 1", n)
	}
	// The session still works: it takes the external sender and founds
	// its local group with the fresh key package.
	es, err := davetest.NewExternalSender()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.HandleBinary(davetest.Binary(2, 25, 0, es.Package())); err != nil {
		t.Fatalf("after recovery, the external sender: %v", err)
	}
	if s.m.pending == nil {
		t.Fatal("after recovery, no local group was founded")
	}
}

// TestRecognizedUsersAreCapped: op 11 naming ever more users grows the
// recognized set to maxRecognized and no further; the rest are counted.
func TestRecognizedUsersAreCapped(t *testing.T) {
	s, err := New(Options{UserID: 76, ChannelID: 5})
	if err != nil {
		t.Fatal(err)
	}
	for u := range UserID(maxRecognized + 1) {
		s.AddUser(u + 1000)
	}
	s.AddUser(1000) // already known: no refusal
	if n := len(s.recognized); n != maxRecognized {
		t.Fatalf("recognized holds %d users, want %d", n, maxRecognized)
	}
	if n := s.Refusals().UsersOverCap; n != 1 {
		t.Fatalf("Refusals().UsersOverCap = %d, want 1", n)
	}
}
