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
//     25 people, never a bot): consent.permitted and roster.humans.
//
// The package does not import the slash commands: /voice calls into a
// Manager, never the reverse.
package voice
