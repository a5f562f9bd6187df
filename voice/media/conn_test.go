package media_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
)

func TestMain(m *testing.M) {
	if os.Getenv("MEDIA_SSL_CERT_FILE_CHILD") != "" {
		os.Exit(sslCertFileChild())
	}
	goleak.VerifyTestMain(m)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func config(srv *voicetest.Server, user string, allow func(string) bool) media.Config {
	c := srv.Join(user)
	return media.Config{
		Endpoint: c.Endpoint, ServerID: c.ServerID, UserID: c.UserID, SessionID: c.SessionID, Token: c.Token,
		TLS: srv.ClientTLS(), Allow: allow,
	}
}

func dial(t *testing.T, srv *voicetest.Server, user string, allow func(string) bool) *media.Conn {
	t.Helper()
	c, err := media.Dial(ctxT(t, 10*time.Second), config(srv, user, allow))
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if !srv.Wait(ctxT(t, 5*time.Second), func() bool { return srv.Connected(user) }) {
		t.Fatalf("%s never connected", user)
	}
	return c
}

func allowAll(string) bool { return true }

// frame returns a distinct fake Opus frame: the relay and DAVE version 0
// carry bytes, so any bytes that are not the silence frame will do.
func frame(speaker byte, i int) []byte {
	return []byte(fmt.Sprintf("opus:%c:%04d:padding-to-a-realistic-size-of-a-voice-frame", speaker, i))
}

// collect reads n non-silence frames or fails after d.
func collect(t *testing.T, c *media.Conn, n int, d time.Duration) []media.Frame {
	t.Helper()
	var got []media.Frame
	deadline := time.After(d)
	for len(got) < n {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("frames closed after %d of %d", len(got), n)
			}
			if !opus.IsSilence(f.Opus) {
				got = append(got, f)
			}
		case <-deadline:
			t.Fatalf("got %d of %d frames; stats %+v", len(got), n, c.Stats())
		}
	}
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFramesCrossTheRelayInEachMode(t *testing.T) {
	for _, mode := range []media.Mode{media.ModeAES256GCM, media.ModeXChaCha} {
		t.Run(string(mode), func(t *testing.T) {
			srv := voicetest.New(t, voicetest.Options{Modes: []string{string(mode)}})
			a := dial(t, srv, "100", allowAll)
			b := dial(t, srv, "200", allowAll)
			if a.Mode() != mode || b.Mode() != mode {
				t.Fatalf("modes %s %s, want %s", a.Mode(), b.Mode(), mode)
			}
			ctx := ctxT(t, 10*time.Second)
			const n = 20
			for i := range n {
				if err := a.Send(ctx, frame('a', i)); err != nil {
					t.Fatal(err)
				}
			}
			// Packets that beat the speaking op naming their SSRC are held
			// for it: every frame is delivered, in order, byte for byte.
			got := collect(t, b, n, 5*time.Second)
			first := 0
			for i, f := range got[:n-first] {
				if f.UserID != "100" || f.SSRC != a.SSRC() || string(f.Opus) != string(frame('a', first+i)) {
					t.Fatalf("frame %d: user %q ssrc %d opus %q", i, f.UserID, f.SSRC, f.Opus)
				}
				if i > 0 && f.Sequence != got[i-1].Sequence+1 {
					t.Fatalf("sequence %d after %d", f.Sequence, got[i-1].Sequence)
				}
				if i > 0 && f.Timestamp != got[i-1].Timestamp+media.SamplesPerFrame {
					t.Fatalf("timestamp %d after %d", f.Timestamp, got[i-1].Timestamp)
				}
			}
			// Five silence frames end the utterance (more if a loaded
			// machine stalled the producer past a frame mid-way).
			waitFor(t, "the utterance to end", func() bool { return !a.Speaking() })
			if s := a.Stats().FramesSent; s < n+5 {
				t.Fatalf("sent %d packets for %d frames", s, n)
			}
			if u, ok := b.UserBySSRC(a.SSRC()); !ok || u != "100" {
				t.Fatalf("UserBySSRC = %q %v", u, ok)
			}
		})
	}
}

// TestUnconsentedSpeakerIsNeverDecrypted: two people speak; the listener has
// consent from one. The other's packets are dropped by SSRC and the
// transport decryption count equals exactly the consented packets.
func TestUnconsentedSpeakerIsNeverDecrypted(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	listener := dial(t, srv, "300", func(u string) bool { return u == "100" })
	yes := dial(t, srv, "100", allowAll)
	no := dial(t, srv, "200", allowAll)
	ctx := ctxT(t, 20*time.Second)

	// Warm up until the listener knows both SSRCs, so that every counted
	// packet below reaches the consent check.
	_ = yes.Send(ctx, frame('y', 999))
	_ = no.Send(ctx, frame('n', 999))
	waitFor(t, "both SSRCs mapped", func() bool {
		_, a := listener.UserBySSRC(yes.SSRC())
		_, b := listener.UserBySSRC(no.SSRC())
		return a && b
	})
	waitFor(t, "warm-up utterances to end", func() bool { return !yes.Speaking() && !no.Speaking() })
	warm := yes.Stats().FramesSent + no.Stats().FramesSent
	waitFor(t, "warm-up packets in", func() bool { return listener.Stats().PacketsReceived == warm })
	before := listener.Stats()

	const n = 25
	for i := range n {
		if err := yes.Send(ctx, frame('y', i)); err != nil {
			t.Fatal(err)
		}
		if err := no.Send(ctx, frame('n', i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "utterances to end", func() bool { return !yes.Speaking() && !no.Speaking() })
	// frames plus trailing silence, as each speaker counted its packets
	yesPer := yes.Stats().FramesSent - warm/2
	noPer := no.Stats().FramesSent - warm/2
	if yesPer < n+5 || noPer < n+5 {
		t.Fatalf("speakers sent %d and %d packets", yesPer, noPer)
	}
	waitFor(t, "all packets in", func() bool {
		return listener.Stats().PacketsReceived-before.PacketsReceived == yesPer+noPer
	})
	after := listener.Stats()
	if d := after.DroppedNoConsent - before.DroppedNoConsent; d != noPer {
		t.Errorf("dropped for lack of consent: %d, want %d", d, noPer)
	}
	if d := after.TransportOpens - before.TransportOpens; d != yesPer {
		t.Errorf("transport decryptions: %d, want exactly the consented speaker's %d", d, yesPer)
	}
	if d := after.FramesDelivered - before.FramesDelivered; d != yesPer {
		t.Errorf("delivered %d, want %d", d, yesPer)
	}
	for range len(listener.Frames()) {
		f := <-listener.Frames()
		if f.UserID != "100" {
			t.Fatalf("delivered a frame of user %q", f.UserID)
		}
	}
}

// TestResumeAfterDroppedSocket: the gateway socket drops without a close
// frame; the connection resumes (op 7 → op 9) and audio flows again.
func TestResumeAfterDroppedSocket(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	a := dial(t, srv, "100", allowAll)
	b := dial(t, srv, "200", allowAll)
	if !srv.Drop("100") {
		t.Fatal("no session to drop")
	}
	waitFor(t, "resume", func() bool { return a.Stats().Resumes == 1 })
	select {
	case <-a.Done():
		t.Fatalf("connection ended: %v", a.Err())
	default:
	}
	ctx := ctxT(t, 10*time.Second)
	for i := range 10 {
		_ = a.Send(ctx, frame('a', i))
	}
	got := collect(t, b, 8, 5*time.Second)
	if got[len(got)-1].UserID != "100" {
		t.Fatalf("user %q", got[len(got)-1].UserID)
	}
}

func TestCloseCodes(t *testing.T) {
	cases := []struct {
		code   int
		action media.CloseAction
	}{
		{4006, media.Rejoin},
		{4009, media.Rejoin},
		{4014, media.Stop},
		{4017, media.Rejoin},
		{4021, media.Stop},
		{4022, media.Stop},
		{4015, media.Resume},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			srv := voicetest.New(t, voicetest.Options{})
			a := dial(t, srv, "100", allowAll)
			srv.CloseWith("100", tc.code)
			if tc.action == media.Resume {
				waitFor(t, "resume", func() bool { return a.Stats().Resumes == 1 })
				return
			}
			select {
			case <-a.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("connection did not end")
			}
			var ce *media.CloseError
			if !errors.As(a.Err(), &ce) || ce.Code != tc.code || ce.Action != tc.action {
				t.Fatalf("Err() = %v, want code %d action %s", a.Err(), tc.code, tc.action)
			}
			if _, ok := <-a.Frames(); ok {
				t.Fatal("Frames still open after the end")
			}
		})
	}
}

func TestDialRefusals(t *testing.T) {
	t.Run("DAVE required", func(t *testing.T) {
		srv := voicetest.New(t, voicetest.Options{RequireDAVE: true})
		_, err := media.Dial(ctxT(t, 5*time.Second), config(srv, "100", allowAll))
		var ce *media.CloseError
		if !errors.As(err, &ce) || ce.Code != media.CloseE2EERequired || ce.Action != media.Rejoin {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		srv := voicetest.New(t, voicetest.Options{})
		cfg := config(srv, "100", allowAll)
		cfg.Token = "not-the-token"
		_, err := media.Dial(ctxT(t, 5*time.Second), cfg)
		var ce *media.CloseError
		if !errors.As(err, &ce) || ce.Code != media.CloseAuthenticationFailed || ce.Action != media.Stop {
			t.Fatalf("err = %v", err)
		}
		if errors.Is(err, nil) || containsToken(err.Error(), cfg.Token) {
			t.Fatalf("error carries the token: %v", err)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		srv := voicetest.New(t, voicetest.Options{})
		cfg := config(srv, "100", allowAll)
		cfg.TLS = nil // system roots: the test CA is not among them
		if _, err := media.Dial(ctxT(t, 5*time.Second), cfg); err == nil {
			t.Fatal("dialled a server with an untrusted certificate")
		}
	})
}

func containsToken(s, tok string) bool {
	return len(tok) > 0 && len(s) >= len(tok) && indexOf(s, tok) >= 0
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestSSLCertFileIsHonoured runs a child process whose only trust in the
// test CA comes from SSL_CERT_FILE (Go reads system roots once per process).
func TestSSLCertFileIsHonoured(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	c := srv.Join("100")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MEDIA_SSL_CERT_FILE_CHILD=1", "SSL_CERT_FILE="+srv.CAFile(),
		"CHILD_ENDPOINT="+c.Endpoint, "CHILD_SERVER="+c.ServerID, "CHILD_USER="+c.UserID,
		"CHILD_SESSION="+c.SessionID, "CHILD_TOKEN="+c.Token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func sslCertFileChild() int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := media.Dial(ctx, media.Config{
		Endpoint: os.Getenv("CHILD_ENDPOINT"), ServerID: os.Getenv("CHILD_SERVER"), UserID: os.Getenv("CHILD_USER"),
		SessionID: os.Getenv("CHILD_SESSION"), Token: os.Getenv("CHILD_TOKEN"),
	})
	if err != nil {
		fmt.Println("dial with SSL_CERT_FILE:", err)
		return 1
	}
	_ = c.Close()
	return 0
}

// notReady is a DAVE session whose sender key is not established yet.
type notReady struct{ media.Passthrough }

func (notReady) CanEncrypt() bool { return false }

func TestNothingSentWhileDAVENotReady(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	cfg := config(srv, "100", allowAll)
	cfg.DAVE = notReady{}
	a, err := media.Dial(ctxT(t, 5*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dial(t, srv, "200", allowAll)
	ctx := ctxT(t, 5*time.Second)
	for i := range 5 {
		_ = a.Send(ctx, frame('a', i))
	}
	waitFor(t, "the utterance to end", func() bool { return !a.Speaking() })
	if d := a.Stats().SendDroppedE2EE; d < 10 { // 5 frames + 5 silence
		t.Fatalf("dropped %d", d)
	}
	if s := a.Stats(); s.FramesSent != 0 {
		t.Fatalf("sent %d packets into a call whose DAVE was not ready", s.FramesSent)
	}
	if srv.Relayed() != 0 {
		t.Fatalf("relay carried %d packets", srv.Relayed())
	}
}

func TestCloseEndsEverything(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	a := dial(t, srv, "100", allowAll)
	var closed atomic.Bool
	go func() { <-a.Done(); closed.Store(true) }()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(a.Err(), media.ErrClosed) {
		t.Fatalf("Err() = %v", a.Err())
	}
	if err := a.Send(context.Background(), []byte{1}); !errors.Is(err, media.ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
	if err := a.Play(context.Background(), []byte{1}); !errors.Is(err, media.ErrClosed) {
		t.Fatalf("Play after Close = %v", err)
	}
	waitFor(t, "Done", closed.Load)
}

// TestFlushStopsQueuedAudio: barge-in drops what is queued; the listener
// hears only what left before, then the utterance's silence.
func TestFlushStopsQueuedAudio(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	a := dial(t, srv, "100", allowAll)
	b := dial(t, srv, "200", allowAll)
	for i := range 10 {
		if !a.TrySend(frame('a', i)) {
			t.Fatalf("frame %d not queued", i)
		}
	}
	// The queue holds 10; the pacer may have taken up to three since.
	queued, full := 10, false
	for i := 10; i < 20 && !full; i++ {
		if full = !a.TrySend(frame('a', i)); !full {
			queued++
		}
	}
	if !full {
		t.Fatal("TrySend never reported a full queue")
	}
	dropped := a.Flush()
	if dropped < 5 {
		t.Fatalf("flushed %d frames", dropped)
	}
	waitFor(t, "the utterance to end", func() bool { return !a.Speaking() })
	sent := a.Stats().FramesSent
	if sent > uint64(queued-dropped+5) {
		t.Fatalf("sent %d packets after flushing %d", sent, dropped)
	}
	waitFor(t, "silence at the listener", func() bool {
		for len(b.Frames()) > 0 {
			if opus.IsSilence((<-b.Frames()).Opus) {
				return true
			}
		}
		return false
	})
}

// TestPacerHoldsABurstToRealTime: a producer far ahead of real time (a
// model's audio arrives in bursts) is paced to one packet per 20 ms; only
// a lower bound is asserted, which a loaded machine cannot break.
func TestPacerHoldsABurstToRealTime(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	a := dial(t, srv, "100", allowAll)
	ctx := ctxT(t, 10*time.Second)
	start := time.Now()
	const n = 30
	for i := range n {
		if err := a.Send(ctx, frame('a', i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the utterance to end", func() bool { return !a.Speaking() })
	// n frames and 5 silence frames, at most three back to back: the last
	// leaves no sooner than (n+5-3) frames after the first.
	if d, min := time.Since(start), time.Duration(n+5-3)*media.FrameDuration; d < min {
		t.Fatalf("%d frames and their silence left in %v, faster than real time (%v)", n, d, min)
	}
}

// TestPlayHandsOverAtTheSlot: Play returns only as the pacer takes the
// frame, after it sent the one before, so a producer that plays as fast as
// it can is held to real time by Play alone and is never more than one
// frame ahead of the wire. Only lower bounds on time are asserted.
func TestPlayHandsOverAtTheSlot(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	a := dial(t, srv, "100", allowAll)
	ctx := ctxT(t, 10*time.Second)
	start := time.Now()
	const n = 30
	for i := range n {
		if err := a.Play(ctx, frame('a', i)); err != nil {
			t.Fatal(err)
		}
		if sent := a.Stats().FramesSent; sent < uint64(i) {
			t.Fatalf("Play of frame %d returned with %d sent: more than one frame ahead of the wire", i, sent)
		}
	}
	// At most three back to back: the last was taken no sooner than
	// n-3 frames after the first.
	if d, min := time.Since(start), time.Duration(n-3)*media.FrameDuration; d < min {
		t.Fatalf("%d frames played in %v, faster than real time (%v)", n, d, min)
	}
	waitFor(t, "the utterance to end", func() bool { return !a.Speaking() })
	if s := a.Stats(); s.FramesSent != n+5 {
		t.Fatalf("sent %d packets, want %d frames and 5 silence", s.FramesSent, n)
	}
}

// TestUnacknowledgedHeartbeatsReconnect: a gateway that stops answering
// heartbeats is closed by the client after two misses and resumed.
func TestUnacknowledgedHeartbeatsReconnect(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{HeartbeatInterval: time.Second, IgnoreHeartbeats: true})
	a := dial(t, srv, "100", allowAll)
	waitFor(t, "a resume", func() bool { return a.Stats().Resumes >= 1 && srv.Resumes() >= 1 })
	select {
	case <-a.Done():
		t.Fatalf("connection ended: %v", a.Err())
	default:
	}
}
