package dave_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// corrupted returns from's next frame with a ciphertext byte flipped: what
// arrives when a sender's keys and ours disagree.
func corrupted(t *testing.T, from peer) []byte {
	t.Helper()
	enc := from.Encrypt(t, opusFrame(t, 80))
	bad := bytes.Clone(enc)
	bad[0] ^= 0xFF
	return bad
}

// recovery asserts out is op 31 for transition tid followed by a new key
// package, and returns the key package.
func recovery(t *testing.T, out []dave.Message, tid uint16) []byte {
	t.Helper()
	if len(out) != 2 || out[0].Op != dave.OpMLSInvalidCommitWelcome || out[1].Op != dave.OpMLSKeyPackage {
		t.Fatalf("answered %v, want op 31 then op 26", ops(out))
	}
	if out[0].TransitionID != tid {
		t.Fatalf("op 31 names transition %d, want %d", out[0].TransitionID, tid)
	}
	if len(out[1].Payload) == 0 {
		t.Fatal("empty key package")
	}
	return out[1].Payload
}

// TestWelcomeAfterGroupIsAnsweredWithRecovery: a welcome reaching a member
// whose group is established is not ignored: like libdave (which refuses
// it) and discord.js (which then re-initialises), the member answers op 31
// for the welcome's transition and a fresh key package, resets, and is back
// in the group after the gateway removes and re-adds it.
func TestWelcomeAfterGroupIsAnsweredWithRecovery(t *testing.T) {
	g := newGateway(t, channel)
	a, d := newGoPeer(t, 9501, channel), newDaveyPeer(t, 9502, channel)
	g.found(t, a, a, d)
	c := newGoPeer(t, 9503, channel)
	// c joins with a's commit; keep the welcome that brought it in.
	kp := c.Join(t, g.es.Package(), g.ids())
	add, _, err := g.es.ProposeAdd(g.groupID, g.epoch, kp)
	if err != nil {
		t.Fatal(err)
	}
	users := g.ids(c)
	out := a.Proposals(t, davetest.ProposalsAppend(add), users)
	if d.Proposals(t, davetest.ProposalsAppend(add), users) == nil || out == nil {
		t.Fatal("no commit for the add")
	}
	commit, welcome, err := dave.SplitCommitWelcome(out)
	if err != nil {
		t.Fatal(err)
	}
	g.tid++
	for _, m := range []peer{a, d} {
		if err := m.Commit(t, g.tid, commit); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Welcome(t, g.tid, welcome); err != nil {
		t.Fatal(err)
	}
	g.roster.Add(c.ID())
	g.members = append(g.members, c)
	g.epoch++
	for _, m := range g.members {
		m.Execute(t, g.tid)
	}
	sameGroup(t, 2, a, d, c)

	// The same welcome again, under a later transition: refused loudly.
	replies, err := c.binary(30, 77, welcome)
	if !errors.Is(err, dave.ErrWelcomeAfterGroup) {
		t.Fatalf("err = %v, want ErrWelcomeAfterGroup", err)
	}
	recovery(t, replies, 77)
	if c.Epoch(t) != 0 || c.s.Refusals().Recoveries != 1 {
		t.Fatalf("after the refusal: epoch %d, refusals %+v; want a reset and one recovery", c.Epoch(t), c.s.Refusals())
	}
	// The gateway removes the stale leaf and re-adds c: frames flow again.
	g.remove(t, a, c)
	g.add(t, d, c)
	sameGroup(t, 4, a, d, c)
	exchange(t, a, d, c)
}

// TestSustainedDecryptFailuresRecover: DecryptFailureTolerance (36, as
// discord.js) consecutive failures from one sender, in an established group
// with no transition pending, make Decrypt report ErrRecoveryDue exactly
// once; RecoverDecryption answers op 31 for the last executed transition
// and a fresh key package. Fewer, or failures broken by a success, or
// spread over senders, or from an unconsented sender, or during a
// transition, do not.
func TestSustainedDecryptFailuresRecover(t *testing.T) {
	const n = dave.DecryptFailureTolerance
	if n != 36 {
		t.Fatalf("DecryptFailureTolerance = %d, discord.js uses 36", n)
	}
	for _, tc := range []struct {
		name string
		// drive sends frames to b from a (and c) and returns the
		// transition op 31 must name, or -1 if no recovery is due.
		drive func(t *testing.T, g *gateway, a, b, c *goPeer) int
	}{
		{"35 failures: no recovery", func(t *testing.T, g *gateway, a, b, _ *goPeer) int {
			mustFail(t, b, a, n-1)
			return -1
		}},
		{"36 failures: recovery", func(t *testing.T, g *gateway, a, b, _ *goPeer) int {
			mustFail(t, b, a, n-1)
			failLast(t, b, a)
			return int(g.tid)
		}},
		{"a success ends the run", func(t *testing.T, g *gateway, a, b, _ *goPeer) int {
			mustFail(t, b, a, n-1)
			if _, err := b.Decrypt(t, a.ID(), a.Encrypt(t, opusFrame(t, 80))); err != nil {
				t.Fatalf("a good frame: %v", err)
			}
			mustFail(t, b, a, n-1)
			failLast(t, b, a)
			return int(g.tid)
		}},
		{"the silence frame does not end the run", func(t *testing.T, g *gateway, a, b, _ *goPeer) int {
			mustFail(t, b, a, n-2)
			if _, err := b.Decrypt(t, a.ID(), []byte{0xF8, 0xFF, 0xFE}); err != nil {
				t.Fatalf("silence: %v", err)
			}
			mustFail(t, b, a, 1)
			failLast(t, b, a)
			return int(g.tid)
		}},
		{"senders are counted apart", func(t *testing.T, g *gateway, a, b, c *goPeer) int {
			for range n - 1 {
				mustFail(t, b, a, 1)
				mustFail(t, b, c, 1)
			}
			failLast(t, b, c)
			return int(g.tid)
		}},
		{"failures during a transition do not count", func(t *testing.T, g *gateway, a, b, _ *goPeer) int {
			if out := b.json(t, dave.OpPrepareTransition, `{"transition_id":50,"protocol_version":1}`); !hasOp(out, dave.OpReadyForTransition) {
				t.Fatalf("prepare transition answered %v", ops(out))
			}
			mustFail(t, b, a, 2*n)
			b.Execute(t, 50)
			mustFail(t, b, a, n-1)
			failLast(t, b, a)
			return 50
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGateway(t, channel)
			a, b, c := newGoPeer(t, 9601, channel), newGoPeer(t, 9602, channel), newGoPeer(t, 9603, channel)
			g.found(t, a, a, b, c)
			exchange(t, a, b, c)
			tid := tc.drive(t, g, a, b, c)
			out, err := b.s.RecoverDecryption()
			if err != nil {
				t.Fatal(err)
			}
			if tid < 0 {
				if len(out) != 0 || b.s.Refusals().Recoveries != 0 {
					t.Fatalf("recovered (%v) without cause", ops(out))
				}
				exchange(t, a, b, c)
				return
			}
			recovery(t, out, uint16(tid))
			if b.Epoch(t) != 0 || b.s.Refusals().Recoveries != 1 {
				t.Fatalf("after recovery: epoch %d, refusals %+v", b.Epoch(t), b.s.Refusals())
			}
			// A second sender's failures find the recovery under way.
			if again, err := b.s.RecoverDecryption(); err != nil || len(again) != 0 {
				t.Fatalf("a second recovery: %v %v", ops(again), err)
			}
			if _, err := b.Decrypt(t, c.ID(), corrupted(t, c)); errors.Is(err, dave.ErrRecoveryDue) {
				t.Fatal("failures counted while recovering")
			}
			// The gateway removes the stale leaf and re-adds b.
			g.remove(t, a, b)
			g.add(t, c, b)
			exchange(t, a, b, c)
		})
	}
}

// mustFail feeds b k corrupted frames from sender, none of which may call
// for a recovery.
func mustFail(t *testing.T, b *goPeer, from peer, k int) {
	t.Helper()
	for i := range k {
		_, err := b.Decrypt(t, from.ID(), corrupted(t, from))
		if !errors.Is(err, dave.ErrAuthentication) {
			t.Fatalf("corrupted frame %d: %v, want ErrAuthentication", i, err)
		}
		if errors.Is(err, dave.ErrRecoveryDue) {
			t.Fatalf("recovery due after %d failures", i+1)
		}
	}
}

// failLast feeds the failure that must complete the run: it, and only
// it, calls for a recovery.
func failLast(t *testing.T, b *goPeer, from peer) {
	t.Helper()
	_, err := b.Decrypt(t, from.ID(), corrupted(t, from))
	if !errors.Is(err, dave.ErrRecoveryDue) || !errors.Is(err, dave.ErrAuthentication) {
		t.Fatalf("failure %d: %v, want ErrRecoveryDue wrapping ErrAuthentication", dave.DecryptFailureTolerance, err)
	}
	if _, err := b.Decrypt(t, from.ID(), corrupted(t, from)); errors.Is(err, dave.ErrRecoveryDue) {
		t.Fatal("ErrRecoveryDue reported twice for one run")
	}
}

// TestUnconsentedSenderNeverCountsAsFailure: frames from a sender Allow
// refuses are dropped unread (ErrSkipped) and never count towards a
// recovery, however many arrive and whatever they hold; a consented
// sender's failures in the same session still do.
func TestUnconsentedSenderNeverCountsAsFailure(t *testing.T) {
	g := newGateway(t, channel)
	a, c := newGoPeer(t, 9801, channel), newGoPeer(t, 9803, channel)
	b := newGoPeerAllowing(t, 9802, channel, func(u dave.UserID) bool { return u != dave.UserID(a.ID()) })
	g.found(t, a, a, b, c)
	for i := range 3 * dave.DecryptFailureTolerance {
		f := a.Encrypt(t, opusFrame(t, 80))
		if i%2 == 0 {
			f = corrupted(t, a)
		}
		if _, err := b.Decrypt(t, a.ID(), f); !errors.Is(err, dave.ErrSkipped) {
			t.Fatalf("unconsented frame %d: %v, want ErrSkipped", i, err)
		}
	}
	if st := b.s.Stats(dave.UserID(a.ID())); st.Attempts != 0 || st.Failures != 0 || st.Skipped != 3*dave.DecryptFailureTolerance {
		t.Fatalf("stats for the unconsented sender: %+v", st)
	}
	if out, err := b.s.RecoverDecryption(); err != nil || len(out) != 0 {
		t.Fatalf("recovery for an unconsented sender: %v %v", ops(out), err)
	}
	mustFail(t, b, c, dave.DecryptFailureTolerance-1)
	failLast(t, b, c)
}
