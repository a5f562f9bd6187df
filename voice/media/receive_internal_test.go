package media

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var testKey = bytes.Repeat([]byte{7}, 32)

// newReceiver is a Conn with no sockets and just what the receive path
// needs.
func newReceiver(tb testing.TB, mode Mode, allow func(string) bool) *Conn {
	tb.Helper()
	tr, err := NewTransport(mode, testKey)
	if err != nil {
		tb.Fatal(err)
	}
	c := newConn(Config{Allow: allow, FrameBuffer: 1024})
	tb.Cleanup(c.cancel)
	c.udp.transport, c.udp.ssrc = tr, 99
	c.udp.bySSRC[11], c.udp.bySSRC[22] = "alice", "bob"
	c.gw.daveStarted = true
	return c
}

// packet seals payload as ssrc's packet number seq, under the test key.
func packet(tb testing.TB, tr *Transport, ssrc uint32, seq uint16, payload []byte) []byte {
	tb.Helper()
	return tr.Seal(nil, appendHeader(nil, seq, uint32(seq)*SamplesPerFrame, ssrc), payload)
}

func TestConsentChangeTakesEffectOnNextPacket(t *testing.T) {
	var allowed atomic.Bool
	c := newReceiver(t, ModeAES256GCM, func(u string) bool { return u == "alice" && allowed.Load() })
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	scratch := make([]byte, 0, 2048)
	var want []string
	for i := range 15 {
		// allowed for packets 0–4, withdrawn for 5–9, given again for 10–14
		allowed.Store(i < 5 || i >= 10)
		p := fmt.Sprintf("frame-%02d", i)
		c.udp.receivePacket(packet(t, sender, 11, uint16(i), []byte(p)), scratch, time.Now())
		if allowed.Load() {
			want = append(want, p)
		}
	}
	var got []string
	for len(c.udp.frames) > 0 {
		got = append(got, string((<-c.udp.frames).Opus))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	if s := c.Stats(); s.TransportOpens != 10 || s.DroppedNoConsent != 5 {
		t.Fatalf("opens %d dropped %d, want 10 and 5", s.TransportOpens, s.DroppedNoConsent)
	}
}

func TestReceivePathDropsBeforeDecrypting(t *testing.T) {
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	good := packet(t, sender, 11, 1, []byte("opus"))
	cases := []struct {
		name   string
		pkt    []byte
		opens  uint64
		expect func(Stats) uint64
	}{
		{"unconsented", packet(t, sender, 22, 1, []byte("opus")), 0, func(s Stats) uint64 { return s.DroppedNoConsent }},
		{"unknown ssrc (held)", packet(t, sender, 33, 1, []byte("opus")), 0, func(s Stats) uint64 { return s.HeldForSSRC }},
		{"own ssrc", packet(t, sender, 99, 1, []byte("opus")), 0, func(s Stats) uint64 { return s.UnknownSSRC }},
		{"short", good[:20], 0, func(s Stats) uint64 { return s.Malformed }},
		{"rtp version 1", append([]byte{0x40}, good[1:]...), 0, func(s Stats) uint64 { return s.Malformed }},
		{"rtcp", append([]byte{0x80, 0xc8}, good[2:]...), 0, func(s Stats) uint64 { return s.NotAudio }},
		{"tampered", append(append([]byte(nil), good[:len(good)-6]...), 0, 0, 0, 0, 0, 0), 1, func(s Stats) uint64 { return s.TransportFailures }},
		{"consented", good, 1, func(s Stats) uint64 { return s.FramesDelivered }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newReceiver(t, ModeAES256GCM, func(u string) bool { return u == "alice" })
			c.udp.receivePacket(tc.pkt, nil, time.Now())
			s := c.Stats()
			if s.TransportOpens != tc.opens || tc.expect(s) != 1 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// TestPacketsBeforeTheSpeakingOpAreHeldThenJudged: a speaker's first
// packets can beat the op 5 that names its SSRC. They are held encrypted,
// then judged in order once it is named: delivered if consented, dropped
// undecrypted if not, and dropped when never named.
func TestPacketsBeforeTheSpeakingOpAreHeldThenJudged(t *testing.T) {
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	c := newReceiver(t, ModeAES256GCM, func(u string) bool { return u == "carol" })
	now := time.Now()
	for i := range 3 {
		c.udp.receivePacket(packet(t, sender, 44, uint16(i), []byte(fmt.Sprint("carol-", i))), nil, now)
		c.udp.receivePacket(packet(t, sender, 55, uint16(i), []byte("dave")), nil, now)
	}
	c.udp.receivePacket(packet(t, sender, 66, 0, []byte("never named")), nil, now)
	if s := c.Stats(); s.HeldForSSRC != 7 || s.TransportOpens != 0 || len(c.udp.frames) != 0 {
		t.Fatalf("before naming: %+v", s)
	}
	// op 5 names both; carol consented, dave not
	c.udp.mu.Lock()
	c.udp.bySSRC[44], c.udp.bySSRC[55] = "carol", "dave"
	c.udp.mu.Unlock()
	c.udp.receivePacket(packet(t, sender, 44, 3, []byte("carol-3")), nil, now.Add(10*time.Millisecond))
	c.udp.receivePacket(packet(t, sender, 55, 3, []byte("dave")), nil, now.Add(10*time.Millisecond))
	var got []string
	for len(c.udp.frames) > 0 {
		got = append(got, string((<-c.udp.frames).Opus))
	}
	if fmt.Sprint(got) != "[carol-0 carol-1 carol-2 carol-3]" {
		t.Fatalf("delivered %v", got)
	}
	s := c.Stats()
	if s.TransportOpens != 4 || s.DroppedNoConsent != 4 || s.UnknownSSRC != 0 {
		t.Fatalf("after naming: %+v", s)
	}
	// the never-named packet expires
	c.udp.receivePacket(packet(t, sender, 44, 4, []byte("carol-4")), nil, now.Add(time.Second))
	if s := c.Stats(); s.UnknownSSRC != 1 || len(c.udp.held) != 0 {
		t.Fatalf("after expiry: %+v, %d held", s, len(c.udp.held))
	}
}

// TestHeaderExtensionIsAADAndBodyIsEncrypted builds an rtpsize packet with a
// header extension the way Discord clients send them: the 4-byte extension
// header in clear (part of the AAD), its body encrypted with the payload.
func TestHeaderExtensionIsAADAndBodyIsEncrypted(t *testing.T) {
	for _, mode := range []Mode{ModeAES256GCM, ModeXChaCha} {
		t.Run(string(mode), func(t *testing.T) {
			c := newReceiver(t, mode, func(string) bool { return true })
			sender, _ := NewTransport(mode, testKey)
			hdr := appendHeader(nil, 5, 4800, 11)
			hdr[0] |= 0x10
			hdr = append(hdr, 0xBE, 0xDE, 0x00, 0x02) // two words of extension body
			body := []byte{0x10, 0xAA, 0, 0, 0x21, 0xBB, 0xCC, 0}
			pkt := sender.Seal(nil, hdr, append(body, []byte("the-opus")...))
			if bytes.Contains(pkt, body[:2]) && bytes.Index(pkt, body[:2]) < 16 {
				t.Fatal("extension body travelled in clear")
			}
			c.udp.receivePacket(pkt, nil, time.Now())
			f := <-c.udp.frames
			if string(f.Opus) != "the-opus" || f.Sequence != 5 || f.Timestamp != 4800 {
				t.Fatalf("frame %+v", f)
			}
		})
	}
}

func TestActionFor(t *testing.T) {
	cases := map[int]CloseAction{
		1000: Resume, 1006: Resume, 4015: Resume,
		4006: Rejoin, 4009: Rejoin, 4011: Rejoin, 4017: Rejoin,
		4001: Stop, 4004: Stop, 4014: Stop, 4016: Stop, 4020: Stop, 4021: Stop, 4022: Stop,
	}
	for code, want := range cases {
		if got := ActionFor(code); got != want {
			t.Errorf("ActionFor(%d) = %s, want %s", code, got, want)
		}
	}
}

func TestGatewayURLAcceptsEndpointsAndRefusesOthers(t *testing.T) {
	for in, want := range map[string]string{
		"c-ams01.discord.media:443": "wss://c-ams01.discord.media:443/?v=8",
		"wss://127.0.0.1:9999":      "wss://127.0.0.1:9999/?v=8",
		"host":                      "wss://host/?v=8",
	} {
		if got, err := gatewayURL(in); err != nil || got != want {
			t.Errorf("gatewayURL(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host/path", "user@host", "h?x=1"} {
		if _, err := gatewayURL(bad); err == nil {
			t.Errorf("gatewayURL(%q) accepted", bad)
		}
	}
}

// FuzzReceivePacket feeds arbitrary datagrams to the receive path, with the
// SSRC they name mapped to a consented speaker so that the decryption and
// extension/padding stripping are reached: never a panic, never a frame
// from a packet that does not authenticate.
func FuzzReceivePacket(f *testing.F) {
	sender, _ := NewTransport(ModeAES256GCM, testKey)
	f.Add(packet(f, sender, 11, 1, []byte("opus")))
	hdr := appendHeader(nil, 5, 4800, 11)
	hdr[0] |= 0x30
	hdr = append(hdr, 0xBE, 0xDE, 0xFF, 0xFF)
	f.Add(sender.Seal(nil, hdr, []byte{1, 2, 3, 200}))
	f.Add([]byte{0x80, 120, 0, 1, 0, 0, 0, 0, 0, 0, 0, 11})
	f.Add([]byte{0x9f, 120, 0, 1, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		c := newReceiver(t, ModeAES256GCM, func(string) bool { return true })
		if len(pkt) >= 12 {
			c.udp.bySSRC[binary.BigEndian.Uint32(pkt[8:])] = "alice"
		}
		c.udp.receivePacket(pkt, make([]byte, 0, 64), time.Now())
		if _, err := ParseHeader(pkt); err != nil && c.Stats().TransportOpens != 0 {
			t.Fatal("decrypted a packet whose header does not parse")
		}
		if c.Stats().FramesDelivered > c.Stats().TransportOpens-c.Stats().TransportFailures {
			t.Fatal("delivered a frame that did not authenticate")
		}
	})
}

// FuzzGatewayMessage feeds arbitrary websocket frames to the gateway
// message parser and handler.
func FuzzGatewayMessage(f *testing.F) {
	f.Add(true, []byte(`{"op":5,"d":{"user_id":"1","ssrc":5,"speaking":1},"seq":3}`))
	f.Add(true, []byte(`{"op":13,"d":{"user_id":"1"}}`))
	f.Add(true, []byte(`{"op":11,"d":{"user_ids":["1","2"]}}`))
	f.Add(true, []byte(`{"op":21,"d":null}`))
	f.Add(false, []byte{0, 7, 25, 1, 2, 3})
	f.Add(false, []byte{0})
	f.Fuzz(func(t *testing.T, text bool, b []byte) {
		c := newReceiver(t, ModeAES256GCM, func(string) bool { return true })
		kind := websocket.BinaryMessage
		if text {
			kind = websocket.TextMessage
		}
		m, err := parseMessage(kind, b)
		if err != nil {
			return
		}
		c.gw.noteSeq(m)
		c.gw.handle(m)
	})
}

// TestSSRCMapIsCapped: a voice server naming ever more SSRCs grows the map
// to maxSSRCs and no further; the rest are refused and counted, while a
// known SSRC may still be renamed.
func TestSSRCMapIsCapped(t *testing.T) {
	c := newReceiver(t, ModeAES256GCM, func(string) bool { return true })
	clear(c.udp.bySSRC)
	speaking := func(ssrc uint32, user string) message {
		d, _ := json.Marshal(map[string]any{"user_id": user, "ssrc": ssrc, "speaking": 1})
		return message{inbound: inbound{Op: OpSpeaking, D: d}}
	}
	for i := range maxSSRCs + 1 {
		c.gw.handle(speaking(uint32(1000+i), "u"))
	}
	c.gw.handle(speaking(1000, "renamed"))
	if n := len(c.udp.bySSRC); n != maxSSRCs {
		t.Fatalf("SSRC map holds %d entries, want %d", n, maxSSRCs)
	}
	if got := c.Stats().SSRCRefused; got != 1 {
		t.Fatalf("SSRCRefused = %d, want 1", got)
	}
	if u, _ := c.UserBySSRC(1000); u != "renamed" {
		t.Fatalf("known SSRC not renamed: %q", u)
	}
}

// FuzzHelloInterval feeds arbitrary hello data to the heartbeat interval
// check: whatever it accepts is within the bounds and a ticker can run
// on it, so no hello can panic the heartbeat goroutine.
func FuzzHelloInterval(f *testing.F) {
	for _, s := range []string{`{"heartbeat_interval":13750}`, `{"heartbeat_interval":1e-7}`, `{"heartbeat_interval":1e300}`,
		`{"heartbeat_interval":-5}`, `{"heartbeat_interval":1000}`, `{"heartbeat_interval":600000}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		var h hello
		if json.Unmarshal(d, &h) != nil {
			return
		}
		iv, err := heartbeatInterval(h.HeartbeatInterval)
		if err != nil {
			return
		}
		if iv < minHeartbeat || iv > maxHeartbeat {
			t.Fatalf("accepted %v from %q", iv, d)
		}
		time.NewTicker(iv).Stop()
	})
}
