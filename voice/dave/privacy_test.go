package dave

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/clankie/clankie/voice/dave/davetest"
)

// TestErrorsCarryNoSecrets drives two sessions into a group, provokes the
// errors a peer or a hostile gateway can cause, and checks none of them
// carries a key or secret of the session, raw or in hex.
func TestErrorsCarryNoSecrets(t *testing.T) {
	es, err := davetest.NewExternalSender()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := New(Options{UserID: 11, ChannelID: 3})
	b, _ := New(Options{UserID: 12, ChannelID: 3})
	a.AddUser(12)
	_, _ = a.OnSelectProtocolAck(1)
	_, _ = a.OnExternalSender(es.Package())
	out, _ := b.OnSelectProtocolAck(1)
	_, _ = b.OnExternalSender(es.Package())
	add, _, _ := es.ProposeAdd(groupID(3), 0, out[0].Payload)
	cw, err := a.OnProposals(davetest.ProposalsAppend(add))
	if err != nil || len(cw) != 1 {
		t.Fatalf("commit: %v", err)
	}
	commit, welcome, _ := SplitCommitWelcome(cw[0].Payload)
	if _, err := a.OnAnnounceCommit(1, commit); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OnWelcome(1, welcome); err != nil {
		t.Fatal(err)
	}
	a.OnExecuteTransition(1)
	b.OnExecuteTransition(1)

	var secrets [][]byte
	for _, s := range []*Session{a, b} {
		g := s.m.established
		secrets = append(secrets, g.EpochSecrets().ExporterSecret.AsSlice(), g.EpochSecrets().InitSecret.AsSlice())
		for _, u := range []uint64{11, 12} {
			base, _ := senderSecret(g, u)
			secrets = append(secrets, base)
			k, _ := newKeyRatchet(base).key(0)
			secrets = append(secrets, k)
		}
		secrets = append(secrets, s.m.kpPriv.InitKey.Bytes())
	}

	var errs []error
	frame, _ := a.Encrypt(nil, bytes.Repeat([]byte{1}, 50))
	bad := bytes.Clone(frame)
	bad[3] ^= 1
	_, e := b.Decrypt(11, nil, bad)
	errs = append(errs, e)
	_, e = b.Decrypt(11, nil, frame)
	errs = append(errs, e)
	_, e = b.Decrypt(11, nil, frame)
	errs = append(errs, e)
	_, e = b.Decrypt(11, nil, frame[:len(frame)-4])
	errs = append(errs, e)
	_, e = a.OnProposals([]byte{0, 5, 1, 2, 3, 4, 5})
	errs = append(errs, e)
	_, e = a.OnProposals(davetest.ProposalsAppend(add)) // stale epoch
	errs = append(errs, e)
	_, e = a.OnAnnounceCommit(2, append(bytes.Clone(commit), 1))
	errs = append(errs, e)
	_, e = b.OnAnnounceCommit(3, []byte{0, 1, 0, 1, 9, 9, 9})
	errs = append(errs, e)
	_, e = a.OnWelcome(4, welcome)
	errs = append(errs, e)
	for _, e := range errs {
		if e == nil {
			continue
		}
		msg := e.Error()
		for _, s := range secrets {
			if len(s) < 8 {
				continue
			}
			if strings.Contains(msg, string(s)) || strings.Contains(strings.ToLower(msg), hex.EncodeToString(s)) || strings.Contains(msg, hex.EncodeToString(s[:8])) {
				t.Fatalf("error %q carries a secret", msg)
			}
		}
	}
	if len(errs) == 0 {
		t.Fatal("no errors provoked")
	}
}
