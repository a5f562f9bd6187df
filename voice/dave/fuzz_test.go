package dave

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/dave/davetest"
	"github.com/clankie/clankie/voice/opus"
)

// FuzzParseFrame: any bytes either fail the protocol frame check with an
// error or parse into ranges that lie inside the media part in order; a
// decryptor holding a key never panics on them and never accepts a frame it
// did not get from the matching encryptor.
func FuzzParseFrame(f *testing.F) {
	base := bytes.Repeat([]byte{3}, 16)
	enc := &encryptor{}
	enc.setRatchet(newKeyRatchet(base))
	good, _ := enc.encrypt(nil, bytes.Repeat([]byte{0x78}, 40))
	f.Add(good)
	f.Add([]byte{0xF8, 0xFF, 0xFE})
	f.Add(frameWith([]byte("headerbody"), 1<<24+1, []Range{{0, 2}, {5, 1}}, nil))
	f.Add(append(bytes.Repeat([]byte{0xFF}, 30), 0x20, 0xFA, 0xFA))
	f.Add([]byte{0xFA, 0xFA})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err == nil {
			var end uint64
			for _, r := range fr.Ranges {
				if r.Offset < end || r.Offset+r.Size > uint64(len(fr.Media)) || r.Offset+r.Size < r.Offset {
					t.Fatalf("range %+v escapes media of %d bytes", r, len(fr.Media))
				}
				end = r.Offset + r.Size
			}
			if len(fr.Tag) != tagSize {
				t.Fatalf("tag of %d bytes", len(fr.Tag))
			}
		}
		now := time.Unix(0, 0)
		d := &decryptor{}
		d.addRatchet(newKeyRatchet(base), now)
		out, err := d.decrypt(nil, b, now)
		if err == nil && !bytes.Equal(b, good) && !opus.IsSilence(b) {
			t.Fatalf("accepted a frame no encryptor produced: %x -> %x", b, out)
		}
	})
}

// FuzzBinaryOpcodes feeds a session (DAVE on, external sender known,
// local group founded) one server binary message: it must answer with an
// error or messages, never panic, and a bad commit or welcome must come with
// op 31.
func FuzzBinaryOpcodes(f *testing.F) {
	es, err := davetest.NewExternalSender()
	if err != nil {
		f.Fatal(err)
	}
	pkg := es.Package()
	peer, _ := New(Options{UserID: 77, ChannelID: 5})
	peerOut, _ := peer.OnSelectProtocolAck(1)
	kp := peerOut[0].Payload
	add, ref, _ := es.ProposeAdd(groupID(5), 0, kp)
	rm, _, _ := es.ProposeRemove(groupID(5), 0, 1)
	f.Add(davetest.Binary(1, 25, 0, pkg))
	f.Add(davetest.Binary(2, 27, 0, davetest.ProposalsAppend(add)))
	f.Add(davetest.Binary(2, 27, 0, davetest.ProposalsAppend(add, rm)))
	f.Add(davetest.Binary(3, 27, 0, davetest.ProposalsRevoke(ref)))
	// A commit and welcome as another session produces them.
	other, _ := New(Options{UserID: 78, ChannelID: 5})
	other.AddUser(76)
	_, _ = other.OnSelectProtocolAck(1)
	_, _ = other.OnExternalSender(pkg)
	self, _ := New(Options{UserID: 76, ChannelID: 5})
	selfOut, _ := self.OnSelectProtocolAck(1)
	add76, _, _ := es.ProposeAdd(groupID(5), 0, selfOut[0].Payload)
	cw, _ := other.OnProposals(davetest.ProposalsAppend(add76))
	if len(cw) == 1 {
		commit, welcome, err := SplitCommitWelcome(cw[0].Payload)
		if err == nil {
			f.Add(davetest.Binary(4, 29, 1, commit))
			f.Add(davetest.Binary(5, 30, 1, welcome))
		}
	}
	f.Add([]byte{0, 1, 29, 0, 1, 0, 1, 0, 1, 0xBF})
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, err := New(Options{UserID: 76, ChannelID: 5})
		if err != nil {
			t.Fatal(err)
		}
		s.AddUser(77)
		if _, err := s.OnSelectProtocolAck(1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OnExternalSender(pkg); err != nil {
			t.Fatal(err)
		}
		b, out, err := s.HandleBinary(msg)
		if err != nil && (b.Op == OpMLSAnnounceCommit || b.Op == OpMLSWelcome) && len(out) > 0 {
			if out[0].Op != OpMLSInvalidCommitWelcome || out[0].TransitionID != b.TransitionID {
				t.Fatalf("bad op %d answered with %+v", b.Op, out[0])
			}
		}
		// A panic inside mls-go is recovered, counted once, and leaves a
		// session that still takes the next message.
		if errors.Is(err, ErrPeerPanic) != (s.Refusals().Panics == 1) {
			t.Fatalf("err %v with %d panics counted", err, s.Refusals().Panics)
		}
		if _, err := s.OnExternalSender(pkg); errors.Is(err, ErrPeerPanic) {
			t.Fatalf("after op %d the session panics on the external sender", b.Op)
		}
		_, _, _ = parseProposals(msg)
		_, _, _ = SplitCommitWelcome(msg)
	})
}
