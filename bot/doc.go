// Package bot is the Discord transport and nothing of memory. It builds the
// discordgo session, syncs slash commands, and routes every interaction
// through one entry point: it parses Discord's interaction into an
// interaction.Invocation (checking option types against the definition),
// runs it through the middleware (recovery, the guild allow-list, deferral,
// timeouts) and the mux, and turns the reply or error into Discord's
// response. Command handlers live in package commands and never call
// Discord themselves.
package bot
