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
// End-to-end encryption (DAVE) plugs in through the DAVE interface; Passthrough
// is protocol version 0.
package media
