package media_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/media"
)

// TestHostileHelloIsAFailedDial: a hello whose heartbeat interval is not a
// sane period (too small to tick, too large for a Duration, negative, not
// a number) fails the dial with an error; before, 1e-7 truncated to a zero
// ticker period and 1e300 overflowed, and time.NewTicker panicked on the
// heartbeat goroutine, taking the whole process down.
func TestHostileHelloIsAFailedDial(t *testing.T) {
	for _, raw := range []string{"1e-7", "1e300", "-1e300", "-5", "0", "999", "600001", `"13750"`, "null", "true"} {
		t.Run(raw, func(t *testing.T) {
			srv := voicetest.New(t, voicetest.Options{})
			srv.SetHelloInterval(raw)
			c, err := media.Dial(ctxT(t, 10*time.Second), config(srv, "100", allowAll))
			if err == nil {
				_ = c.Close()
				t.Fatalf("hello with heartbeat_interval %s: dial succeeded", raw)
			}
			if !strings.Contains(err.Error(), "heartbeat interval") {
				t.Fatalf("hello with heartbeat_interval %s: error %q does not name the heartbeat interval", raw, err)
			}
		})
	}
}

// TestHostileHelloOnResume: the same hello on a resume ends the connection
// with an error (a rejoin), never the process.
func TestHostileHelloOnResume(t *testing.T) {
	for _, raw := range []string{"1e-7", "1e300"} {
		t.Run(raw, func(t *testing.T) {
			srv := voicetest.New(t, voicetest.Options{})
			a := dial(t, srv, "100", allowAll)
			srv.SetHelloInterval(raw)
			srv.Drop("100")
			select {
			case <-a.Done():
			case <-time.After(15 * time.Second):
				t.Fatal("connection neither resumed nor ended")
			}
			if a.Err() == nil || !strings.Contains(a.Err().Error(), "heartbeat interval") {
				t.Fatalf("connection ended with %v, want the refused hello", a.Err())
			}
		})
	}
}

// TestReadyWithUnparsableIPIsAFailedDial: ready's ip must be an address;
// before, net.ParseIP's nil became the local address and the dial went on.
func TestReadyWithUnparsableIPIsAFailedDial(t *testing.T) {
	for _, ip := range []string{"not-an-ip", "0.0.0.0"} {
		t.Run(ip, func(t *testing.T) {
			srv := voicetest.New(t, voicetest.Options{ReadyIP: ip})
			c, err := media.Dial(ctxT(t, 10*time.Second), config(srv, "100", allowAll))
			if err == nil {
				_ = c.Close()
				t.Fatalf("ready with ip %q: dial succeeded", ip)
			}
			if !strings.Contains(err.Error(), "UDP ip address") {
				t.Fatalf("ready with ip %q: error %q", ip, err)
			}
		})
	}
}

// panicky is protocol version 0 whose DAVE handlers panic once each: what
// a parser bug on a hostile message looks like to the connection.
type panicky struct {
	media.Passthrough
	decrypts, connects atomic.Int32
}

func (p *panicky) Decrypt(dst []byte, u string, frame []byte) ([]byte, error) {
	if p.decrypts.Add(1) == 1 {
		_ = frame[len(frame)+1] // index out of range: the kind of bug a parser has
	}
	return p.Passthrough.Decrypt(dst, u, frame)
}

func (p *panicky) UsersConnected(ids []string) {
	if p.connects.Add(1) == 1 {
		_ = ids[len(ids)+1] // an index out of range
	}
}

func (p *panicky) HandleJSON(media.Opcode, json.RawMessage) error { return nil }

// TestPeerInputPanicsAreRecoveredAndCounted: a panic while handling a
// datagram or a gateway message drops that input, is counted, and the
// connection lives on and delivers what follows; before, it ended the
// process.
func TestPeerInputPanicsAreRecoveredAndCounted(t *testing.T) {
	srv := voicetest.New(t, voicetest.Options{})
	p := &panicky{}
	cfg := config(srv, "200", allowAll)
	cfg.DAVE = p
	b, err := media.Dial(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	a := dial(t, srv, "100", allowAll) // op 11 to b: UsersConnected panics
	waitFor(t, "the gateway panic to be counted", func() bool { return b.Stats().GatewayPanics == 1 })
	ctx := ctxT(t, 10*time.Second)
	for i := range 3 {
		if err := a.Send(ctx, frame('a', i)); err != nil {
			t.Fatal(err)
		}
	}
	collect(t, b, 2, 5*time.Second) // one frame's Decrypt panicked; the rest arrive
	if s := b.Stats(); s.MediaPanics != 1 || s.GatewayPanics != 1 {
		t.Fatalf("media panics %d, gateway panics %d; want 1 and 1", s.MediaPanics, s.GatewayPanics)
	}
	select {
	case <-b.Done():
		t.Fatalf("connection ended: %v", b.Err())
	default:
	}
}
