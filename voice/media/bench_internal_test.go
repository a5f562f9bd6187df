package media

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// loopConn is a Conn whose UDP socket talks to a local peer socket that
// plays the voice server.
func loopConn(b *testing.B) (*Conn, *net.UDPConn) { return loopConnT(b) }

func loopConnT(b testing.TB) (*Conn, *net.UDPConn) {
	b.Helper()
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	udp, err := net.DialUDP("udp", nil, peer.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	c := newReceiver(b, ModeAES256GCM, func(u string) bool { return u == "alice" })
	c.udp.sock = udp
	b.Cleanup(func() {
		c.cancel()
		_ = udp.Close()
		_ = peer.Close()
		c.wait()
	})
	return c, peer
}

func reportPercentiles(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), name+"-p99-µs")
}

// opusLike is a typical 20 ms voice frame's size.
var opusLike = make([]byte, 120)

// BenchmarkReceiveLatency: a datagram is written on loopback, read by the
// connection's receive goroutine and delivered on Frames. "path" is from
// the read returning (Frame.Arrived) to the consumer holding the frame:
// the latency this package adds; "wire" includes the loopback send.
func BenchmarkReceiveLatency(b *testing.B) {
	c, peer := loopConn(b)
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	to := c.udp.sock.LocalAddr()
	pkts := make([][]byte, 64)
	for i := range pkts {
		pkts[i] = packet(b, sender, 11, uint16(i), opusLike)
	}
	c.udp.wg.Add(1)
	go c.udp.receive()
	path := make([]time.Duration, 0, b.N)
	wire := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := peer.WriteTo(pkts[i%len(pkts)], to); err != nil {
			b.Fatal(err)
		}
		f := <-c.udp.frames
		now := time.Now()
		path = append(path, now.Sub(f.Arrived))
		wire = append(wire, now.Sub(t0))
	}
	b.StopTimer()
	reportPercentiles(b, "path", path)
	reportPercentiles(b, "wire", wire)
}

// BenchmarkReceivePacket is the receive path's CPU per packet, for a
// consented speaker (parse, consent, AES-GCM open, DAVE passthrough,
// delivery) and an unconsented one (parse, lookup, consent, drop), against
// a bare AES-256-GCM open of the same packet as the baseline.
func BenchmarkReceivePacket(b *testing.B) {
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	pkt := packet(b, sender, 11, 1, opusLike)
	denied := packet(b, sender, 22, 1, opusLike)
	b.Run("baseline-bare-aes-gcm-open", func(b *testing.B) {
		blk, _ := aes.NewCipher(testKey)
		g, _ := cipher.NewGCM(blk)
		nonce := make([]byte, 12)
		copy(nonce, pkt[len(pkt)-4:])
		dst := make([]byte, 0, 2048)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := g.Open(dst[:0], nonce, pkt[12:len(pkt)-4], pkt[:12]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("consented", func(b *testing.B) {
		c := newReceiver(b, ModeAES256GCM, func(u string) bool { return u == "alice" })
		scratch := make([]byte, 0, 2048)
		now := time.Now()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.udp.receivePacket(pkt, scratch, now)
			<-c.udp.frames
		}
	})
	b.Run("unconsented-dropped", func(b *testing.B) {
		c := newReceiver(b, ModeAES256GCM, func(u string) bool { return u == "alice" })
		scratch := make([]byte, 0, 2048)
		now := time.Now()
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			c.udp.receivePacket(denied, scratch, now)
		}
		if c.Stats().TransportOpens != 0 {
			b.Fatal("decrypted an unconsented packet")
		}
	})
}

// BenchmarkSendLatency hands Send one frame every 20 ms, as a real-time
// producer does, stalling past a frame every 50 frames, and measures until
// its UDP packet arrives at the peer.
// Run with -benchtime=200x: each iteration is a real 20 ms frame.
func BenchmarkSendLatency(b *testing.B) {
	c, peer := loopConn(b)
	c.udp.wg.Add(1)
	go c.udp.pace()
	ctx := context.Background()
	rx, _ := NewTransport(ModeAES256GCM, testKey)
	lat := make([]time.Duration, 0, b.N)
	buf := make([]byte, 2048)
	frame := make([]byte, len(opusLike))
	tick := time.NewTicker(FrameDuration)
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		<-tick.C
		if i%50 == 49 {
			// The producer stalls past a frame: silence fills the gap
			// and speech resumes on the next tick.
			time.Sleep(FrameDuration * 3 / 2)
		}
		frame[0], frame[1] = byte(i), byte(i>>8)
		t0 := time.Now()
		if err := c.Send(ctx, frame); err != nil {
			b.Fatal(err)
		}
		for {
			n, _, err := peer.ReadFrom(buf)
			if err != nil {
				b.Fatal(err)
			}
			h, err := ParseHeader(buf[:n])
			if err != nil {
				continue // keepalive
			}
			plain, err := rx.Open(nil, h, buf[:n])
			if err != nil {
				b.Fatal(err)
			}
			if len(plain) == len(frame) && plain[0] == byte(i) && plain[1] == byte(i>>8) {
				break
			}
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	if os.Getenv("BENCH_TRACE") != "" && b.N > 100 {
		for i, d := range lat {
			fmt.Printf("%d:%v ", i, d.Round(100*time.Microsecond))
		}
		fmt.Println()
	}
	b.ReportMetric(float64(c.Stats().FramesSent-uint64(b.N)), "silence-frames")
	reportPercentiles(b, "send", lat)
}

// BenchmarkTransmit is the send path's CPU per frame: DAVE passthrough,
// RTP header, AES-GCM seal, UDP write.
func BenchmarkTransmit(b *testing.B) {
	c, _ := loopConn(b)
	s := newSender(c.udp)
	c.gw.announced.Store(true)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.transmit(opusLike)
	}
}
