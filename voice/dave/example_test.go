package dave_test

import (
	"encoding/json"
	"errors"

	"github.com/clankie/clankie/voice/dave"
)

// Example shows how a voice connection drives a Session: gateway messages
// in, replies out, our Opus frames encrypted, others' frames decrypted only
// for consented speakers.
func Example() {
	consented := map[dave.UserID]bool{} // kept current by the consent code
	s, err := dave.New(dave.Options{
		UserID:    1234,
		ChannelID: 5678,
		// Frames of anyone not consented are dropped before any decryption;
		// s.Stats(user).Skipped counts them, .Attempts stays 0.
		Allow: func(u dave.UserID) bool { return consented[u] },
	})
	if err != nil {
		return
	}
	send := func(m dave.Message) { _ = m.Encode() } // to the voice websocket (binary if m.Binary())

	// A JSON gateway message (op 4, 11, 13, 21, 22, 24): pass its "d".
	out, _ := s.HandleJSON(dave.OpSelectProtocolAck, json.RawMessage(`{"dave_protocol_version":1}`))
	for _, m := range out {
		send(m)
	}
	// A binary gateway message (ops 25, 27, 29, 30): pass it whole. On a
	// bad commit or welcome out holds op 31 and a new key package.
	var wsBinary []byte
	hdr, out, _ := s.HandleBinary(wsBinary)
	_ = hdr.Seq // for the heartbeat's seq_ack
	for _, m := range out {
		send(m)
	}

	// Sending: hold frames until Ready; never send them in the clear.
	if s.Ready() {
		pkt, err := s.Encrypt(nil, []byte{0xF8, 0xFF, 0xFE})
		_, _ = pkt, err
	}
	// Receiving: the SSRC → user map comes from op 5 / op 11.
	var speaker dave.UserID = 42
	var frame []byte
	opus, err := s.Decrypt(speaker, nil, frame)
	if errors.Is(err, dave.ErrSkipped) {
		return // not consented: nothing was decrypted
	}
	_ = opus
	// Output:
}
