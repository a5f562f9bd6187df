package media_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/dave"
)

// hears has from send n frames tagged speaker and waits until to has
// received the last of them decrypted, and n-2 in all (frames tagged
// otherwise, left from earlier, are skipped): once it returns, none of
// these frames is still in flight.
func hears(ctx context.Context, t *testing.T, from, to daveClient, speaker byte, n int) {
	t.Helper()
	for i := range n {
		if err := from.Send(ctx, frame(speaker, i)); err != nil {
			t.Fatal(err)
		}
	}
	tag, last := []byte(fmt.Sprintf("opus:%c:", speaker)), frame(speaker, n-1)
	got := 0
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-to.Frames():
			if !bytes.HasPrefix(f.Opus, tag) {
				continue
			}
			got++
			if bytes.Equal(f.Opus, last) {
				if got < n-2 {
					t.Fatalf("got %d of %d frames tagged %c", got, n, speaker)
				}
				return
			}
		case <-deadline:
			t.Fatalf("got %d of %d frames tagged %c, not the last; stats %+v", got, n, speaker, to.Stats())
		}
	}
}

// TestDAVEWelcomeAfterGroupRecovers: a welcome the gateway sends to a member
// whose group exists is answered with op 31 naming its transition and a new
// key package; the gateway re-adds the member and audio is decrypted both
// ways again.
func TestDAVEWelcomeAfterGroupRecovers(t *testing.T) {
	srv, role := daveServer(t)
	a := dialDAVE(t, srv, "100", allowAll)
	b := dialDAVE(t, srv, "200", allowAll)
	users := []string{"100", "200"}
	settle(t, role, users, a, b)
	ctx := ctxT(t, 30*time.Second)
	hears(ctx, t, a, b, 'a', 10)

	kps := role.KeyPackagesFrom("200")
	tid, err := role.SendWelcomeAfterGroup("200")
	if err != nil {
		t.Fatal(err)
	}
	want := voicetest.InvalidReport{UserID: "200", TransitionID: tid}
	waitFor(t, "op 31 and a new key package", func() bool {
		return slices.Contains(role.InvalidReports(), want) && role.KeyPackagesFrom("200") > kps
	})
	if r := role.InvalidReports(); len(r) != 1 {
		t.Fatalf("op 31 reports %+v, want one", r)
	}
	if n := b.dave.DAVE().Refusals().Recoveries; n != 1 {
		t.Fatalf("B's recoveries: %d", n)
	}
	settle(t, role, users, a, b)
	hears(ctx, t, a, b, 'c', 10)
	hears(ctx, t, b, a, 'd', 10)
	if p := srv.Payloads(); p.Clear != 0 {
		t.Fatalf("relay carried clear frames: %+v", p)
	}
}

// TestDAVESustainedDecryptFailures: the relay corrupts n of A's frames on
// their way to B. At dave.DecryptFailureTolerance (36) consecutive
// failures B reports op 31 for the current transition, sends a new key
// package, and is re-added: audio flows both ways again. At 35 nothing is
// reported and A's next frames decrypt.
func TestDAVESustainedDecryptFailures(t *testing.T) {
	for _, tc := range []struct {
		n       int
		recover bool
	}{
		{dave.DecryptFailureTolerance - 1, false},
		{dave.DecryptFailureTolerance, true},
	} {
		t.Run(fmt.Sprintf("%d corrupted frames", tc.n), func(t *testing.T) {
			srv, role := daveServer(t)
			a := dialDAVE(t, srv, "100", allowAll)
			b := dialDAVE(t, srv, "200", allowAll)
			users := []string{"100", "200"}
			settle(t, role, users, a, b)
			ctx := ctxT(t, 40*time.Second)
			// B learns A's SSRC and keys with good frames first.
			hears(ctx, t, a, b, 'a', 5)
			tid, kps := role.LastTransition(), role.KeyPackagesFrom("200")
			failures := b.dave.DAVE().Stats(uid(t, "100")).Failures

			srv.CorruptDAVEFrames("100", tc.n)
			for i := range tc.n {
				if err := a.Send(ctx, frame('x', i)); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "the corrupted frames refused", func() bool {
				return b.dave.DAVE().Stats(uid(t, "100")).Failures-failures >= uint64(tc.n)
			})
			if got := srv.Corrupted(); got != uint64(tc.n) {
				t.Fatalf("relay corrupted %d frames, want %d", got, tc.n)
			}
			if !tc.recover {
				hears(ctx, t, a, b, 'c', 10)
				if r := role.InvalidReports(); len(r) != 0 || role.KeyPackagesFrom("200") != kps {
					t.Fatalf("op 31 %+v and %d new key packages after %d failures", r, role.KeyPackagesFrom("200")-kps, tc.n)
				}
				if st := b.dave.DAVE().Stats(uid(t, "100")); st.Failures-failures != uint64(tc.n) {
					t.Fatalf("B's stats for A: %+v", st)
				}
				return
			}
			want := voicetest.InvalidReport{UserID: "200", TransitionID: tid}
			waitFor(t, "op 31 and a new key package", func() bool {
				return slices.Contains(role.InvalidReports(), want) && role.KeyPackagesFrom("200") > kps
			})
			if r := role.InvalidReports(); len(r) != 1 {
				t.Fatalf("op 31 reports %+v, want one naming transition %d", r, tid)
			}
			if n := b.dave.DAVE().Refusals().Recoveries; n != 1 {
				t.Fatalf("B's recoveries: %d", n)
			}
			settle(t, role, users, a, b)
			hears(ctx, t, a, b, 'c', 10)
			hears(ctx, t, b, a, 'd', 10)
		})
	}
}
