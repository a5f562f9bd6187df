package media_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/nodetest"
	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/opus"
)

// nodePeer runs internal/nodetest/voice_peer.js: the real @discordjs/voice
// 0.19 client, trusting the fake's certificate through NODE_EXTRA_CA_CERTS.
type nodePeer struct {
	cmd    *exec.Cmd
	lines  chan map[string]any
	stderr bytes.Buffer
	early  []map[string]any // events read while waiting for another
}

func startNode(t *testing.T, srv *voicetest.Server, mode string, cfg any) *nodePeer {
	t.Helper()
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &nodePeer{lines: make(chan map[string]any, 16)}
	p.cmd = nodetest.Command(t, "voice_peer.js", mode, string(arg))
	p.cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+srv.CAFile())
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
	}()
	go func() { _ = p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("node stderr (tail):\n%s", tail(p.stderr.String(), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// await returns the next stdout object whose event is ev.
func (p *nodePeer) await(t *testing.T, ev string, d time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				t.Fatalf("node exited before %q; stderr:\n%s", ev, tail(p.stderr.String(), 4000))
			}
			if m["event"] == ev {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q from node; stderr:\n%s", ev, tail(p.stderr.String(), 4000))
		}
	}
}

// encodeTone has opusscript (libopus) encode a sine tone into 20 ms frames.
func encodeTone(t *testing.T, freq, frames int) [][]byte {
	t.Helper()
	cfg, _ := json.Marshal(map[string]int{"freq": freq, "frames": frames})
	out, err := nodetest.Command(t, "voice_peer.js", "encode", string(cfg)).Output()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	var r struct{ Frames []string }
	if err := json.Unmarshal(out, &r); err != nil || len(r.Frames) != frames {
		t.Fatalf("encode output: %v (%d frames)", err, len(r.Frames))
	}
	return decodeAll(t, r.Frames)
}

func decodeAll(t *testing.T, b64 []string) [][]byte {
	t.Helper()
	var fs [][]byte
	for _, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, b)
	}
	return fs
}

// assertSameFrames checks that got is want from some frame on, byte for
// byte and in order, with at most maxSkip leading frames missing.
func assertSameFrames(t *testing.T, got, want [][]byte, maxSkip int) {
	t.Helper()
	if len(got) == 0 {
		t.Fatal("no frames")
	}
	skip := len(want) - len(got)
	if skip < 0 || skip > maxSkip {
		t.Fatalf("got %d frames of %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[skip+i]) {
			t.Fatalf("frame %d differs from sent frame %d", i, skip+i)
		}
	}
}

func TestDiscordJSVoiceInterop(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	const frames = 50
	nodeTone := encodeTone(t, 440, frames)
	ourTone := encodeTone(t, 660, frames)
	us := dial(t, srv, "222", allowAll)
	// A second listener whom nobody consented to be heard by.
	deaf := dial(t, srv, "444", func(string) bool { return false })

	t.Run("discord.js speaks, we hear", func(t *testing.T) {
		creds := srv.Join("111")
		b64 := make([]string, len(nodeTone))
		for i, f := range nodeTone {
			b64[i] = base64.StdEncoding.EncodeToString(f)
		}
		p := startNode(t, srv, "play", map[string]any{"creds": creds, "frames": b64})
		p.await(t, "ready", 20*time.Second)
		var got [][]byte
		silence := 0
		var drain <-chan time.Time // set once discord.js reports it played everything
		deadline := time.After(20 * time.Second)
	collect:
		for {
			select {
			case f := <-us.Frames():
				if f.UserID != "111" {
					t.Fatalf("frame from %q", f.UserID)
				}
				if ssrc, _ := srv.SSRC("111"); f.SSRC != ssrc {
					t.Fatalf("ssrc %d, server assigned %d", f.SSRC, ssrc)
				}
				if opus.IsSilence(f.Opus) {
					silence++
					continue
				}
				got = append(got, f.Opus)
			case m, ok := <-p.lines:
				if ok && m["event"] == "played" {
					drain = time.After(300 * time.Millisecond)
				}
			case <-drain:
				break collect
			case <-deadline:
				t.Fatalf("got %d frames, %d silence; stats %+v", len(got), silence, us.Stats())
			}
		}
		if silence == 0 {
			t.Error("discord.js ended its utterance without silence frames")
		}
		// We hold packets that beat the speaking op naming their SSRC:
		// not one frame is lost.
		assertSameFrames(t, got, nodeTone, 0)
		// discord.js left: op 13 removes its SSRC from our map.
		ssrc, _ := srv.SSRC("111")
		waitFor(t, "op 13 to unmap discord.js", func() bool { _, ok := us.UserBySSRC(ssrc); return !ok })
		// The listener without consent dropped every packet undecrypted.
		if s := deaf.Stats(); s.TransportOpens != 0 || s.FramesDelivered != 0 || s.DroppedNoConsent < frames-2 {
			t.Fatalf("unconsented listener: %+v", s)
		}
	})

	t.Run("we speak, discord.js hears", func(t *testing.T) {
		creds := srv.Join("333")
		p := startNode(t, srv, "listen", map[string]any{"creds": creds, "hear": "222", "frames": frames, "timeoutMs": 15000})
		p.await(t, "ready", 20*time.Second)
		waitFor(t, "discord.js connected", func() bool { return srv.Connected("333") })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, f := range ourTone {
			if err := us.Send(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		heard := p.await(t, "heard", 30*time.Second)
		var got []string
		for _, s := range heard["frames"].([]any) {
			got = append(got, s.(string))
		}
		// discord.js drops packets that beat the speaking op (it does not
		// hold them); our pacer may send up to three back to back.
		assertSameFrames(t, decodeAll(t, got), ourTone, 3)
		if f := heard["freq"].(float64); f < 650 || f > 670 {
			t.Fatalf("discord.js hears %v Hz, we sent 660 Hz", f)
		}
	})

	t.Run("discord.js resumes after its socket drops, and still hears us", func(t *testing.T) {
		creds := srv.Join("555")
		p := startNode(t, srv, "listen", map[string]any{"creds": creds, "hear": "222", "frames": frames, "timeoutMs": 20000})
		p.await(t, "ready", 20*time.Second)
		waitFor(t, "discord.js connected", func() bool { return srv.Connected("555") })
		before := srv.Resumes()
		if !srv.Drop("555") {
			t.Fatal("no session to drop")
		}
		waitFor(t, "discord.js to resume", func() bool { return srv.Resumes() == before+1 })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, f := range ourTone {
			if err := us.Send(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		heard := p.await(t, "heard", 30*time.Second)
		if n := len(heard["frames"].([]any)); n < frames-3 {
			t.Fatalf("discord.js heard %d frames after resuming", n)
		}
	})
}
