// Package voice owns the voice bridge's sessions. The Manager only routes:
// it keeps who is in which voice channel (the roster, from gateway events),
// tells the echo of the bot's own op 4 from news (echoes.go), and hands
// each server's events to that server's Session. Each Session owns its
// life (lifecycle.go: joining, live, reconnecting, ended), its consent,
// its briefing loop, its conversation with the model (speech.go) and its
// voice connection (audiolink.go).
//
// Each rule lives in one function here, with its test beside it:
//   - consent is dropped whenever a person stops being in the session's
//     channel, whatever told us (a leave or move in a VOICE_STATE_UPDATE, a
//     roster rebuilt from GUILD_CREATE after a reconnect): Session.departed;
//   - consent lives in memory only, so a restart drops it, and ending a
//     session drops it with the session: Session.end;
//   - who counts as consented (the policy, an opt-out always wins, at most
//     25 people, never a bot): consent.permitted over roster.humans, asked
//     only through Session.permittedLocked, which also publishes the answer
//     to Session.Consented for the audio path (a change takes effect on the
//     next 20 ms frame);
//   - a briefing reaches the model within 8000 characters: boundBriefing
//     (the memory service composes it within 25 people and 8 facts each);
//   - no state waits forever: Session.timeout (the join timeout, the
//     rejoins, the recheck after a "disconnected" close);
//   - when Clankie answers in a group and who may cut him off: floor;
//   - what the model's tools may reach: tools (present and consented
//     people only, in the session's channel's visibility).
//
// The audio path (voice/audio) is one per session, built before the model
// opens and handed to it as its listener: the model's audio goes straight
// to it, and each consented speaker's utterance goes from it to the model
// as a labelled turn. The voice connection under it changes with every
// reconnect. Nothing here logs a user id, a fact, a transcript or audio.
package voice
