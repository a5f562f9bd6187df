// Package commands holds the slash commands, one file per command. A handler
// never talks to Discord and never imports the transport (package bot): it
// gets an interaction.Invocation (guild, channel, invoker, options,
// permissions) and returns an interaction.Reply or an error, routed by path
// ("person-memory/propose"). It reaches memory and voice only through small
// interfaces that memoryclient and voice satisfy, so every rule is tested
// without HTTP or a gateway.
package commands
