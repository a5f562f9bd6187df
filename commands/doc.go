// Package commands holds the slash commands, one file per command. A handler
// never talks to Discord: it gets a bot.Invocation (guild, channel, invoker,
// options, permissions) and answers a bot.Reply or an error, and it reaches
// memory only through a small interface that memoryclient satisfies, so every
// rule is tested without HTTP or a gateway.
package commands
