// Package media is clankie's Discord voice connection: the voice gateway v8
// over wss, UDP IP discovery, rtpsize transport encryption and RTP, with a
// receive path that enforces per-speaker consent at the packet.
//
// We write our own connection rather than use disgo's voice package because
// an unconsented speaker's packets must be dropped by SSRC from the clear RTP
// header before transport decryption, before DAVE and before decoding, and
// the hook and its counters have to live in our own receive path. The main
// gateway stays discordgo; a caller feeds this package the session id, token
// and endpoint from discordgo's VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE.
//
// A Conn composes two halves that share only its life: the voice gateway
// session (gateway.go over socket.go: identify, resume, heartbeat, the
// session description, the speaking op, the client connect and disconnect
// ops and the DAVE ops' routing, close codes) and the UDP media connection
// (udp.go: IP discovery and the SSRC→user map; send.go: the pacer, the one
// 20 ms clock of our outgoing audio; receive.go; rtp.go and crypt.go). The
// gateway tells the media half who speaks on which SSRC; the media half
// asks the gateway to raise and lower the speaking flag.
//
// End-to-end encryption (DAVE) plugs in through the DAVE interface; Passthrough
// is protocol version 0.
package media
