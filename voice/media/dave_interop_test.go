package media_test

import (
	"context"
	"encoding/base64"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
)

func b64(frames [][]byte) []string {
	out := make([]string, len(frames))
	for i, f := range frames {
		out[i] = base64.StdEncoding.EncodeToString(f)
	}
	return out
}

// toneOf decodes Opus frames with our pure-Go decoder and returns the
// dominant frequency of the mono mix of the last second of them: what a
// listener would hear. (Every frame is decoded; the scan is bounded to a
// second because its cost grows with the square of the length.)
func toneOf(t *testing.T, frames [][]byte) float64 {
	t.Helper()
	dec, err := opus.NewGoDecoder(2)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]int16, opus.FrameSamples*2*6)
	var mono []int16
	for _, f := range frames {
		n, err := dec.Decode(context.Background(), f, buf)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		mono = pcm.AppendMono(mono, buf[:2*n])
	}
	if len(mono) > opus.SampleRate {
		mono = mono[len(mono)-opus.SampleRate:]
	}
	return pcmtest.DominantFrequency(mono, opus.SampleRate, 100, 2000)
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// sendAll queues frames on c in the background, after one silence frame
// that makes the speaking op (5) go out first: discord.js drops packets
// that beat it. The returned channel reports the first error (nil when all
// were queued).
func sendAll(ctx context.Context, c *media.Conn, frames [][]byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		for _, f := range append([][]byte{[]byte(opus.SilenceFrame)}, frames...) {
			if err := c.Send(ctx, f); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done
}

// dialPlain dials a DAVE client without a testing.T, for a goroutine; the
// caller closes it.
func dialPlain(ctx context.Context, srv *voicetest.Server, user string) (*media.Conn, error) {
	d, err := davemedia.New(davemedia.Config{UserID: user, ChannelID: testChannel, Allow: allowAll})
	if err != nil {
		return nil, err
	}
	cfg := config(srv, user, allowAll)
	cfg.DAVE = d
	return media.Dial(ctx, cfg)
}

// heardFrames reads the frames list of a node "heard" event.
func heardFrames(t *testing.T, m map[string]any) [][]byte {
	t.Helper()
	var got []string
	for _, s := range m["frames"].([]any) {
		got = append(got, s.(string))
	}
	return decodeAll(t, got)
}

// collectFrom gathers userID's non-silence frames from c until the node
// peer reports "played" (plus a drain), failing after d.
func collectFrom(t *testing.T, c *media.Conn, p *nodePeer, userID string, d time.Duration, during func()) [][]byte {
	t.Helper()
	var got [][]byte
	var drain <-chan time.Time
	deadline := time.After(d)
	lines := p.lines
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatal("frames closed")
			}
			if f.UserID != userID || opus.IsSilence(f.Opus) {
				continue
			}
			got = append(got, f.Opus)
			if during != nil && len(got) == 25 {
				go during()
			}
		case m, ok := <-lines:
			if !ok {
				if drain == nil {
					t.Fatalf("node exited before it played; stderr:\n%s", tail(p.stderr.String(), 4000))
				}
				lines = nil // it played and left: drain what is in flight
				continue
			}
			switch m["event"] {
			case "played":
				drain = time.After(300 * time.Millisecond)
			case "heard":
				p.early = append(p.early, m)
			}
		case <-drain:
			return got
		case <-deadline:
			t.Fatalf("got %d frames from %s; stats %+v", len(got), userID, c.Stats())
		}
	}
}

// awaitHeard returns the node peer's "heard" event, whether it came during
// collectFrom or comes now.
func (p *nodePeer) awaitHeard(t *testing.T) map[string]any {
	t.Helper()
	if len(p.early) > 0 {
		return p.early[0]
	}
	return p.await(t, "heard", 30*time.Second)
}

// TestDiscordJSDAVEInterop puts our client (media.Conn + voice/dave through
// davemedia) and the real @discordjs/voice 0.19 client (with davey) in one
// end-to-end encrypted call through the fake voice server's DAVE role, and
// checks what each hears, what each decrypted, and what the relay carried.
func TestDiscordJSDAVEInterop(t *testing.T) {
	srv, role := daveServer(t)
	const frames = 50
	nodeTone := encodeTone(t, 440, frames)
	ourTone := encodeTone(t, 660, frames)
	who := newConsent("111", "555")
	ctx := ctxT(t, 90*time.Second)
	var us daveClient
	parent := t

	t.Run("nothing leaves before DAVE is ready; each hears the other's tone", func(t *testing.T) {
		p := startNode(t, srv, "dave", map[string]any{
			"creds": srv.Join("111"), "channel": testChannel, "with": []string{"222"},
			// discord.js drops the packets that beat the speaking op
			"hear": "222", "hearFrames": frames - 3, "frames": b64(nodeTone), "timeoutMs": 20000,
		})
		waitFor(t, "discord.js connected", func() bool { return srv.Connected("111") })
		us = dialDAVEFor(t, parent, srv, "222", who.allow)
		// Straight after the session description our sender key cannot
		// exist yet (discord.js is in the call, so we are not alone): the
		// frame is counted and dropped, never sent in the clear.
		if us.dave.CanEncrypt() {
			t.Fatal("DAVE reports ready before any MLS message")
		}
		if err := us.Send(ctx, ourTone[0]); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the early frame dropped", func() bool { return us.Stats().SendDroppedE2EE >= 1 })
		if st := us.Stats(); st.FramesSent != 0 {
			t.Fatalf("sent %d frames before DAVE was ready", st.FramesSent)
		}

		settle(t, role, []string{"111", "222"}, us)
		p.await(t, "ready", 20*time.Second)
		sent := sendAll(ctx, us.Conn, ourTone)
		got := collectFrom(t, us.Conn, p, "111", 30*time.Second, nil)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		heard := p.awaitHeard(t)
		t.Logf("we got %d frames from discord.js (DAVE %+v); discord.js heard %d, undecrypted %v, davey stats %v; our stats %+v",
			len(got), us.dave.DAVE().Stats(uid(t, "111")), len(heard["frames"].([]any)), heard["undecrypted"], heard["stats"], us.Stats())

		// We decrypted discord.js's frames and hear its 440 Hz tone.
		if len(got) < frames-2 {
			t.Fatalf("we got %d of %d frames", len(got), frames)
		}
		assertSameFrames(t, got, nodeTone, 2)
		ourHz, theirHz := toneOf(t, got), toneOf(t, heardFrames(t, heard))
		t.Logf("we hear %.1f Hz; discord.js's own decoder hears %v Hz, ours decodes its frames to %.1f Hz", ourHz, heard["freq"], theirHz)
		if !near(ourHz, 440, 5) {
			t.Fatalf("we hear %.1f Hz, discord.js played 440 Hz", ourHz)
		}
		st := us.dave.DAVE().Stats(uid(t, "111"))
		if st.Successes < uint64(len(got)) || st.Failures != 0 {
			t.Fatalf("our DAVE stats for discord.js: %+v", st)
		}
		// discord.js (davey) decrypted ours and hears 660 Hz.
		hf := heardFrames(t, heard)
		if len(hf) < frames-3 || heard["undecrypted"].(float64) != 0 {
			t.Fatalf("discord.js heard %d frames, %v undecrypted; stats %v", len(hf), heard["undecrypted"], heard["stats"])
		}
		if f := heard["freq"].(float64); !near(f, 660, 10) {
			t.Fatalf("discord.js hears %v Hz, we sent 660 Hz", f)
		}
		if f := toneOf(t, hf); !near(f, 660, 5) {
			t.Fatalf("frames discord.js decrypted decode to %.1f Hz", f)
		}
	})

	if t.Failed() {
		return
	}
	// discord.js left after the first subtest: we are the sole member.
	waitFor(t, "discord.js gone", func() bool { return !srv.Connected("111") })

	t.Run("an unconsented speaker costs no decryption at all", func(t *testing.T) {
		mute := dialDAVEFor(t, parent, srv, "444", allowAll) // stays for the next subtest
		settle(t, role, []string{"222", "444"}, us, mute)
		before, payloads := us.Stats(), srv.Payloads()
		for i := range frames {
			if err := mute.Send(ctx, ourTone[i]); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "444's frames dropped", func() bool { return us.Stats().DroppedNoConsent-before.DroppedNoConsent >= frames })
		after := us.Stats()
		if after.TransportOpens != before.TransportOpens || after.FramesDelivered != before.FramesDelivered {
			t.Fatalf("transport opens %d→%d, delivered %d→%d for an unconsented speaker",
				before.TransportOpens, after.TransportOpens, before.FramesDelivered, after.FramesDelivered)
		}
		if st := us.dave.DAVE().Stats(uid(t, "444")); st.Attempts != 0 || st.Successes != 0 {
			t.Fatalf("our DAVE worked on an unconsented speaker: %+v", st)
		}
		// What was dropped was end-to-end encrypted: the relay saw DAVE frames.
		if p := srv.Payloads(); p.DAVE-payloads.DAVE < frames || p.Clear != 0 {
			t.Fatalf("relay carried %+v (before %+v)", p, payloads)
		}
		t.Logf("unconsented: %d dropped, transport opens unchanged at %d, DAVE %+v",
			after.DroppedNoConsent-before.DroppedNoConsent, after.TransportOpens, us.dave.DAVE().Stats(uid(t, "444")))
	})
	if t.Failed() {
		return
	}

	t.Run("frames keep flowing while a member joins and another leaves", func(t *testing.T) {
		const long = 250 // 5 s each way
		nodeLong := encodeTone(t, 440, long)
		ourLong := encodeTone(t, 660, long)
		p := startNode(t, srv, "dave", map[string]any{
			"creds": srv.Join("555"), "channel": testChannel, "with": []string{"222", "444"},
			"hear": "222", "hearFrames": long - 3, "frames": b64(nodeLong), "timeoutMs": 30000,
		})
		start := time.Now()
		settle(t, role, []string{"222", "444", "555"}, us)
		p.await(t, "ready", 20*time.Second)
		t.Logf("%v: discord.js ready", time.Since(start))
		epoch := role.Epoch()
		sent := sendAll(ctx, us.Conn, ourLong)
		churned := make(chan error, 1)
		// Once frames flow (half a second in): 333 joins, then 444 leaves.
		during := func() {
			third, err := dialPlain(ctx, srv, "333")
			if err != nil {
				churned <- err
				return
			}
			if !srv.Wait(ctx, func() bool { return role.Settled("222", "333", "444", "555") }) {
				churned <- context.DeadlineExceeded
				return
			}
			_ = third.Close()
			if !srv.Wait(ctx, func() bool { return role.Settled("222", "444", "555") }) {
				churned <- context.DeadlineExceeded
				return
			}
			churned <- nil
		}
		got := collectFrom(t, us.Conn, p, "555", 40*time.Second, during)
		t.Logf("%v: collected", time.Since(start))
		if err := <-churned; err != nil {
			t.Fatalf("membership change: %v", err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		heard := p.awaitHeard(t)
		t.Logf("%v: heard", time.Since(start))
		hf := heardFrames(t, heard)
		st := us.dave.DAVE().Stats(uid(t, "555"))
		t.Logf("epochs %d→%d; we got %d of %d (DAVE %+v); discord.js heard %d of %d, undecrypted %v, davey stats %v; relay %+v; role %+v",
			epoch, role.Epoch(), len(got), long, st, len(hf), long, heard["undecrypted"], heard["stats"], srv.Payloads(), role.Stats())
		if role.Epoch() < epoch+2 {
			t.Fatalf("epoch %d→%d: no join and leave happened mid-call", epoch, role.Epoch())
		}
		if len(got) < long-5 || st.Failures > 3 {
			t.Fatalf("we got %d of %d frames across the epoch changes; DAVE %+v", len(got), long, st)
		}
		if f := toneOf(t, got); !near(f, 440, 5) {
			t.Fatalf("we hear %.1f Hz, discord.js played 440 Hz", f)
		}
		if len(hf) < long-8 {
			t.Fatalf("discord.js heard %d of %d frames across the epoch changes", len(hf), long)
		}
		if f := toneOf(t, hf); !near(f, 660, 5) {
			t.Fatalf("discord.js decrypted frames that decode to %.1f Hz", f)
		}
	})

	// Whatever happened, no audio crossed the relay in the clear.
	if p := srv.Payloads(); p.Clear != 0 {
		t.Fatalf("relay carried %d clear frames into an end-to-end encrypted call (%+v)", p.Clear, p)
	}
}

// TestDiscordJSDAVERecovery corrupts the first commit or welcome the fake
// server sends discord.js: davey refuses it, discord.js reports op 31 and
// sends a new key package, the server re-adds it, and the call carries
// audio both ways again.
func TestDiscordJSDAVERecovery(t *testing.T) {
	var corrupted atomic.Bool
	role, err := voicetest.NewDAVEServer(voicetest.DAVEServerOptions{
		ChannelID: 700000000000000001, Logf: t.Logf,
		Tamper: func(op int, user string, body []byte) []byte {
			if user == "111" && corrupted.CompareAndSwap(false, true) {
				body[len(body)/2] ^= 0xFF
			}
			return body
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := voicetest.New(t, voicetest.Options{DAVE: role, RequireDAVE: true})
	const frames = 50
	nodeTone := encodeTone(t, 440, frames)
	ourTone := encodeTone(t, 660, frames)
	ctx := ctxT(t, 60*time.Second)
	us := dialDAVE(t, srv, "222", allowAll)
	p := startNode(t, srv, "dave", map[string]any{
		"creds": srv.Join("111"), "channel": testChannel, "with": []string{"222"},
		"hear": "222", "hearFrames": frames - 3, "frames": b64(nodeTone), "timeoutMs": 20000,
	})
	waitFor(t, "op 31 from discord.js", func() bool { return role.Stats().InvalidReports >= 1 })
	settle(t, role, []string{"111", "222"}, us)
	p.await(t, "ready", 20*time.Second)
	sent := sendAll(ctx, us.Conn, ourTone)
	got := collectFrom(t, us.Conn, p, "111", 30*time.Second, nil)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	heard := p.awaitHeard(t)
	hf := heardFrames(t, heard)
	t.Logf("after recovery: we got %d (DAVE %+v), discord.js heard %d; role %+v", len(got), us.dave.DAVE().Stats(uid(t, "111")), len(hf), role.Stats())
	if !corrupted.Load() {
		t.Fatal("nothing was corrupted")
	}
	if len(got) < frames-2 || !near(toneOf(t, got), 440, 5) {
		t.Fatalf("after recovery we got %d frames", len(got))
	}
	if len(hf) < frames-3 || !near(toneOf(t, hf), 660, 5) {
		t.Fatalf("after recovery discord.js heard %d frames", len(hf))
	}
	if p := srv.Payloads(); p.Clear != 0 {
		t.Fatalf("relay carried clear frames: %+v", p)
	}
}
