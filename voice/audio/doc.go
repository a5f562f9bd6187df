// Package audio is the voice bridge's media-independent audio pipeline,
// between a Discord voice connection (Opus frames, already past the
// connection's consent check and DAVE) and the realtime model (PCM16 LE
// mono at 24 kHz):
//
//   - Inbound hears consented speakers: one Opus decoder per speaker,
//     created when they first speak and dropped when they stop being
//     consented or go quiet, their frames mixed to mono, resampled to
//     24 kHz and handed to a sink (the model's input_audio_buffer.append).
//     Consent is asked again for every speaker at every mix step and every
//     20 ms tick, so an opt-out, a leave or a move takes effect within one
//     frame, mid-utterance included: their buffered frames are dropped
//     undecoded. The bot's own user id is never accepted.
//   - In the utterance mode (group calls, where the model must know who
//     spoke), Inbound mixes nothing: each consented speaker's audio is
//     buffered on its own and handed over as an Utterance once they have
//     been silent for a while (no frames, or frames under a voice floor),
//     in the order the utterances started, within bounds on an
//     utterance's length and on the audio waiting. Losing consent drops
//     what they were saying, unsent. A per-speaker Speaking cue, in
//     either mode, tells the session someone has been talking long enough
//     to barge in.
//   - Outbound speaks: the model's PCM16 24 kHz deltas, of any size, are
//     upsampled to 48 kHz stereo and encoded to 20 ms Opus frames, queued,
//     and handed in order to the media connection, whose pacer is the one
//     20 ms clock of the outgoing audio (it also raises the speaking flag
//     and ends each utterance with the Opus silence frames): each hand-over
//     waits for the frame's slot, so the Outbound keeps no clock and stays
//     one frame ahead of the wire. It counts what was handed over per
//     assistant item, so BargeIn can drop everything queued at once and
//     report where to truncate the item.
//
// Neither logs anything. Their Stats hold counts and durations only: no
// user id, no audio, no transcript.
//
// The package depends on voice/opus and voice/pcm only; the media
// connection, DAVE and the model client meet it through the function
// values and small interfaces in the configs, so it builds and tests alone.
package audio
