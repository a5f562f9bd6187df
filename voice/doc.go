// Package voice owns the voice bridge's sessions: who is in which voice
// channel (the roster, kept from gateway events), the bot's own moves, and
// one session per server holding that session's consent, its briefing loop
// and its connection to the realtime voice model.
//
// Each rule lives in one function here, with its test beside it:
//   - consent is dropped whenever a person stops being in the session's
//     channel, whatever told us (a leave or move in a VOICE_STATE_UPDATE, a
//     roster rebuilt from GUILD_CREATE after a reconnect):
//     Manager.departedLocked;
//   - consent lives in memory only, so a restart drops it, and ending a
//     session (leave, last human gone, the bot moved by someone else) drops
//     it with the session: Manager.endLocked;
//   - who counts as consented (the policy, an opt-out always wins, at most
//     25 people, never a bot): consent.permitted over roster.humans, asked
//     only through Manager.permittedLocked, which also publishes the answer
//     to Session.Consented for the audio path (a change takes effect on the
//     next 20 ms frame);
//   - a briefing reaches the model within 8000 characters: boundBriefing
//     (the memory service composes it within 25 people and 8 facts each).
//
// The audio path (media, DAVE, codec) attaches to a running Session: it
// asks Session.Consented per speaker per frame, sends consented audio with
// Session.Audio, hears the model with Session.SetOutput, and stops when
// Session.Done is closed.
//
// The package does not import the slash commands: /voice calls into a
// Manager, never the reverse.
package voice
