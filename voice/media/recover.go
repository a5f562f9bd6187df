package media

import (
	"sync/atomic"

	"go.uber.org/zap"
)

// Components a recovered panic is counted under: the voice gateway
// websocket (JSON and binary opcodes, the DAVE handlers they reach) and
// the media path (RTP packets received, frames encrypted and sent).
const (
	ComponentGateway = "gateway"
	ComponentMedia   = "media"
)

// recoverPeer is deferred around the handling of one input a voice server
// (or a peer through it) controls: a gateway message, a datagram, a frame
// to send. A panic there drops that input, is counted in n and logged by
// component only (its value may quote the input, so it is never logged),
// and the connection lives on: no input from the network may end the
// process.
func recoverPeer(log *zap.Logger, n *atomic.Uint64, component string) {
	if r := recover(); r != nil {
		n.Add(1)
		log.Error("recovered from a panic while handling a voice server's input; the input was dropped",
			zap.String("component", component))
	}
}
