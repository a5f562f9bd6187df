package media_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/media"
)

// fakeDAVE stands in for voice/dave to prove the plumbing: it answers the
// external sender with a key package, a prepare transition with transition
// ready, and "encrypts" by XOR once the transition executed.
type fakeDAVE struct {
	mu        sync.Mutex
	sig       media.Signal
	version   int
	binary    []string // "op/seq/payload"
	users     []string
	ready     atomic.Bool
	decrypted atomic.Int64
}

func (d *fakeDAVE) MaxProtocolVersion() int { return 1 }

func (d *fakeDAVE) Start(version int, self string, sig media.Signal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.version, d.sig = version, sig
	return nil
}

func (d *fakeDAVE) HandleJSON(op media.Opcode, data json.RawMessage) error {
	var t struct {
		TransitionID int `json:"transition_id"`
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return err
	}
	switch op {
	case media.OpDAVEPrepareTransition:
		return d.sig.SendJSON(media.OpDAVETransitionReady, map[string]int{"transition_id": t.TransitionID})
	case media.OpDAVEExecuteTransition:
		d.ready.Store(true)
	}
	return nil
}

func (d *fakeDAVE) HandleBinary(op media.Opcode, seq uint16, payload []byte) error {
	d.mu.Lock()
	d.binary = append(d.binary, string(rune('0'+op/10))+string(rune('0'+op%10))+"/"+string(payload))
	d.mu.Unlock()
	if op == media.OpDAVEMLSExternalSender {
		return d.sig.SendBinary(media.OpDAVEMLSKeyPackage, []byte("key-package"))
	}
	return nil
}

func (d *fakeDAVE) UsersConnected(ids []string) {
	d.mu.Lock()
	d.users = append(d.users, ids...)
	d.mu.Unlock()
}

func (d *fakeDAVE) UserDisconnected(id string) {
	d.mu.Lock()
	d.users = slices.DeleteFunc(d.users, func(u string) bool { return u == id })
	d.mu.Unlock()
}

func (d *fakeDAVE) CanEncrypt() bool { return d.ready.Load() }

func xor(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, c^0x5a)
	}
	return dst
}

func (d *fakeDAVE) Encrypt(dst, frame []byte) ([]byte, error) { return xor(dst, frame), nil }

func (d *fakeDAVE) Decrypt(dst []byte, _ string, frame []byte) ([]byte, error) {
	d.decrypted.Add(1)
	return xor(dst, frame), nil
}

func (d *fakeDAVE) snapshot() ([]string, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.binary), slices.Clone(d.users)
}

// externalSender is the server's side: it sends the external sender
// package on join, and on a key package a prepare transition; on
// transition ready it executes it.
type externalSender struct {
	mu    sync.Mutex
	got   []string
	peers map[string]voicetest.Peer
}

func (e *externalSender) ProtocolVersion(int) int { return 1 }

func (e *externalSender) Joined(p voicetest.Peer, max int) {
	e.mu.Lock()
	e.peers[p.UserID()] = p
	e.mu.Unlock()
	_ = p.SendBinary(25, []byte("external-sender"))
}

func (e *externalSender) Left(string) {}

func (e *externalSender) JSON(p voicetest.Peer, op int, d json.RawMessage) error {
	e.mu.Lock()
	e.got = append(e.got, p.UserID()+":json:"+string(rune('0'+op/10))+string(rune('0'+op%10)))
	e.mu.Unlock()
	if op == 23 {
		_ = p.SendJSON(22, map[string]int{"transition_id": 7})
	}
	return nil
}

func (e *externalSender) Binary(p voicetest.Peer, op int, payload []byte) error {
	e.mu.Lock()
	e.got = append(e.got, p.UserID()+":bin:"+string(rune('0'+op/10))+string(rune('0'+op%10))+":"+string(payload))
	e.mu.Unlock()
	if op == 26 {
		_ = p.SendJSON(21, map[string]int{"transition_id": 7, "protocol_version": 1})
	}
	return nil
}

func TestDAVEOpcodesReachTheSessionAndBack(t *testing.T) {
	es := &externalSender{peers: map[string]voicetest.Peer{}}
	srv := voicetest.New(t, voicetest.Options{DAVE: es, RequireDAVE: true})
	da, db := &fakeDAVE{}, &fakeDAVE{}
	dialDAVE := func(user string, d *fakeDAVE) *media.Conn {
		cfg := config(srv, user, allowAll)
		cfg.DAVE = d
		c, err := media.Dial(ctxT(t, 10*time.Second), cfg)
		if err != nil {
			t.Fatalf("dial %s: %v", user, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a := dialDAVE("100", da)
	b := dialDAVE("200", db)
	waitFor(t, "both transitions executed", func() bool { return da.ready.Load() && db.ready.Load() })
	binA, usersA := da.snapshot()
	if len(binA) != 1 || binA[0] != "25/external-sender" || da.version != 1 {
		t.Fatalf("A's DAVE got %q at version %d", binA, da.version)
	}
	waitFor(t, "op 11 for B at A", func() bool { _, u := da.snapshot(); return slices.Contains(u, "200") })
	_ = usersA
	es.mu.Lock()
	got := slices.Clone(es.got)
	es.mu.Unlock()
	for _, want := range []string{"100:bin:26:key-package", "100:json:23", "200:bin:26:key-package", "200:json:23"} {
		if !slices.Contains(got, want) {
			t.Fatalf("external sender got %q, missing %q", got, want)
		}
	}

	ctx := ctxT(t, 10*time.Second)
	for i := range 10 {
		_ = a.Send(ctx, frame('a', i))
	}
	frames := collect(t, b, 8, 5*time.Second)
	first := frames[0].Opus[7] - '0' // frame('a', i) spells i at bytes 4–7
	for i, f := range frames {
		if !bytes.Equal(f.Opus, frame('a', int(first)+i)) {
			t.Fatalf("B got %q", f.Opus)
		}
	}
	if db.decrypted.Load() == 0 {
		t.Fatal("B's DAVE decrypted nothing")
	}

	// B leaves: A's DAVE hears op 13.
	_ = b.Close()
	waitFor(t, "op 13 at A", func() bool { _, u := da.snapshot(); return !slices.Contains(u, "200") })
}

func TestPassthroughRefusesAnE2EECall(t *testing.T) {
	es := &externalSender{peers: map[string]voicetest.Peer{}}
	srv := voicetest.New(t, voicetest.Options{DAVE: es})
	_, err := media.Dial(ctxT(t, 5*time.Second), config(srv, "100", allowAll))
	if !errors.Is(err, media.ErrDAVEUnsupported) {
		t.Fatalf("err = %v", err)
	}
}
