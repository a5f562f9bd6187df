// Package discordtest is a fake Discord for tests: a REST API and a gateway
// served over loopback that the real discordgo client (v0.29, API v9 on the
// wire) connects to unchanged.
//
// The bridges are tested against it rather than against mocks of discordgo so
// that the code under test exercises the same client, the same JSON shapes
// and the same protocol steps (HELLO, IDENTIFY, READY, heartbeats, interaction
// callbacks, webhook edits) as it would against discord.com. Where Discord
// enforces a rule that a bot can get wrong (the 3 second interaction deadline,
// "already acknowledged", 2000 character content, command name rules,
// privileged intents), the fake enforces it too and answers with Discord's
// error codes, so a test fails the way production would.
//
// Every REST request is also checked the way Discord checks it: a
// "DiscordBot (url, version)" User-Agent, a JSON Content-Type on a body, the
// body against the request schema of Discord's own OpenAPI description
// (../shared/discord-api-spec/openapi.json beside the module, or
// /work/shared/…; a string is taken for an integer field when it parses as
// one, as Discord does) and the documented limits the description does not
// hold (a deferral sets no flag but EPHEMERAL, a command's text is at most
// 8000 characters, …). A refused request is answered 400 with code 50035 and
// Discord's nested errors, and it fails the test at cleanup unless the test
// took it with TakeViolations: a change that sends what Discord refuses
// cannot pass. The description is loaded once per Spec; a test package keeps
// one (var discordSpec = discordtest.NewSpec()) and passes WithSpec.
//
// Sharding is Discord's: GET /gateway/bot recommends one shard per 1000
// guilds and reports session_start_limit (WithSessionStartLimit); an
// IDENTIFY with [id, count] gets only the guilds (guild_id >> 22) % count ==
// id, as do those guilds' events and interactions; a shard that would carry
// more than 2500 guilds is closed with 4011; each IDENTIFY spends one start,
// and two in one max_concurrency bucket within the identify interval (5 s,
// or WithIdentifyInterval) are refused with 4008 and fail the test, as is an
// op 4 sent on a shard that does not own its guild.
//
// HTTP interactions: the fake holds the application's Ed25519 key
// (PublicKey, for DISCORD_PUBLIC_KEY) and POSTs signed interactions to an
// endpoint (InteractHTTP); the response is checked and recorded as the
// callback, so WaitReply works as for the gateway. It sends a badly signed
// copy first on the first request to an endpoint and every tenth and fails
// the test unless that is answered 401; PingHTTP does the portal's check;
// PostSigned sends hand-shaped requests (stale timestamps, big bodies).
//
// Buttons: a message the bot posts may carry action rows of buttons
// (checked against Discord's limits, kept in ChannelMessage.Components);
// Click and ClickHTTP send a click on one (type 3, its custom_id and
// message), answered and awaited as a command is.
//
// Context menus and modals: InteractionSpec.TargetUser or TargetMessage
// makes a user or message command (target_id and resolved data, a
// message's content included). A modal callback (type 9) is checked
// against Discord's limits (title 1–45, custom_ids ≤ 100 and unique, 1–5
// action rows of one text input each, labels 1–45, values ≤ 4000 and within
// max_length, min ≤ max; never in answer to a submit) and kept
// (Callback.Modal, WaitModal); Submit and SubmitHTTP send a modal submit
// (type 5), Interaction.SubmitSpec the submit of the modal the bot opened.
//
// Uploads: the callback and the webhook message routes take
// multipart/form-data as Discord does: payload_json (checked as a JSON
// body) and files[n] parts, each with a filename; every attachments entry
// must have a string id naming an uploaded part. The files are kept
// (Callback.Files, Message.Files).
//
// Wiring a session to a fake:
//
//	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(g))
//	rt, _ := bot.NewRESTTransport(fake.APIURL(), nil)
//	s, _ := discordgo.New("Bot " + fake.Token())
//	s.Client = &http.Client{Transport: rt}
//	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildVoiceStates
//	err := s.Open() // GET /gateway, then the websocket
//	...
//	in := fake.Interact(ctx, discordtest.InteractionSpec{GuildID: g.ID, UserID: "…", Command: "voice", Subcommand: "status"})
//	reply, err := in.WaitReply(ctx)
//	...
//	fake.WaitHeartbeat(ctx) // see its doc: dodges a discordgo Close race
//	s.Close()
//
// Close the discordgo session before the fake: discordgo reconnects forever
// when its gateway goes away, which would leak its goroutines. New registers
// the fake's Close with t.Cleanup, so a session closed in the test body or in
// a later-registered cleanup is closed first.
//
// discordgo behaviour the fake works with (v0.29):
//   - Open does GET <api>/gateway, appends "/" and "?v=9&encoding=json", and
//     identifies with the token including its "Bot " prefix and
//     compress=true (the fake then zlib-compresses READY and GUILD_CREATE, as
//     Discord does for large payloads).
//   - Handlers run on their own goroutines while discordgo's State keeps the
//     same event structs and overwrites them in place on later events
//     (READY's guild stubs when GUILD_CREATE arrives), so even copying them
//     in a handler races under -race. Set Session.StateEnabled = false, or
//     SyncEvents = true and copy in the handler.
//   - Session.Close sleeps one second, and the heartbeat goroutine can
//     reconnect after Close if it had not sent its first heartbeat yet (see
//     WaitHeartbeat).
//   - discordgo never reads close codes: after any drop it reconnects and
//     resumes; a failed resume (op 9) makes it identify again.
package discordtest
