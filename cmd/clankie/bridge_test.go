package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
)

var discordSpec = discordtest.NewSpec()

const syncGuild = "100000000000000001"

// textEnv sets what `clankie bridge text` reads, with every other clankie
// and Discord variable unset, and returns the bearer (a secret).
func textEnv(t *testing.T, fake *discordtest.Fake, extra map[string]string) string {
	t.Helper()
	for _, v := range config.All() {
		t.Setenv(v.Name, "")
	}
	bearer := "text-cli-secret-token-0000001"
	for k, v := range map[string]string{
		"DISCORD_TEXT_BOT_TOKEN": fake.Token(), "DISCORD_API_URL": fake.APIURL(), "DISCORD_GUILD_IDS": syncGuild,
		"CLANKIE_TEXT_BRIDGE_TOKEN": bearer, "CLANKIE_MEMORY_DIR": t.TempDir(), "CLANKIE_MEMORY_URL": "http://127.0.0.1:9",
		"CLANKIE_LOG_LEVEL": "info", "CLANKIE_LOG_FORMAT": "json", "DISCORD_SHARD_COUNT": "auto",
		"CLANKIE_REALTIME_AUTH": "bearer", "CLANKIE_REALTIME_MODEL": "gpt-realtime", "CLANKIE_REALTIME_TRANSCRIBE_MODEL": "gpt-4o-mini-transcribe",
	} {
		t.Setenv(k, v)
	}
	for k, v := range extra {
		t.Setenv(k, v)
	}
	return bearer
}

func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String() + errb.String()
}

// `clankie bridge text sync` registers the commands and exits; a second run
// writes nothing. It opens no gateway.
func TestBridgeTextSync(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(discordtest.Guild{ID: syncGuild}))
	bearer := textEnv(t, fake, nil)
	for range 2 {
		if code, out := runCLI(t, "bridge", "text", "sync"); code != 0 {
			t.Fatalf("exit %d: %s", code, out)
		} else if strings.Contains(out, fake.Token()) || strings.Contains(out, bearer) {
			t.Fatal("the output holds a secret")
		}
	}
	if puts := fake.CommandPuts(syncGuild); len(puts) != 1 {
		t.Fatalf("%d registrations", len(puts))
	}
	if len(fake.Identifies()) != 0 {
		t.Fatal("sync opened a gateway")
	}
}

// TestBridgeSyncRemovesCommandsFromScopesNoLongerServed: moving between
// DISCORD_GUILD_IDS and global commands used to leave the old copies, so a
// server listed every command twice. `clankie bridge text sync` and
// `clankie bridge voice sync` leave each bridge's commands only where the
// settings put them.
func TestBridgeSyncRemovesCommandsFromScopesNoLongerServed(t *testing.T) {
	const other = "100000000000000002"
	for _, bridge := range []struct {
		name     string
		commands int // /person-memory, the text bridge's three context menus, /voice for the voice bridge
		env      map[string]string
	}{
		{"text", 4, nil},
		{"voice", 2, map[string]string{"DISCORD_TEXT_BOT_TOKEN": "", "CLANKIE_TEXT_BRIDGE_TOKEN": ""}},
	} {
		t.Run(bridge.name, func(t *testing.T) {
			fake := discordtest.New(t, discordtest.WithSpec(discordSpec),
				discordtest.WithGuilds(discordtest.Guild{ID: syncGuild}, discordtest.Guild{ID: other}))
			scopes := func() []int {
				return []int{len(fake.Commands("")), len(fake.Commands(syncGuild)), len(fake.Commands(other))}
			}
			n := bridge.commands
			for _, step := range []struct {
				guilds string
				want   []int // commands: global, syncGuild, other
			}{
				{other + "," + syncGuild, []int{0, n, n}},
				{syncGuild, []int{0, n, 0}}, // other was dropped from the list
				{"", []int{n, 0, 0}},        // to global: no server keeps a copy
				{other, []int{0, 0, n}},     // and back: the global copy goes
			} {
				env := map[string]string{"DISCORD_GUILD_IDS": step.guilds}
				textEnv(t, fake, env)
				if bridge.name == "voice" {
					env["DISCORD_VOICE_BOT_TOKEN"] = fake.Token()
					env["CLANKIE_VOICE_BRIDGE_TOKEN"] = "voice-cli-secret-token-000001"
					for k, v := range bridge.env {
						env[k] = v
					}
					for k, v := range env {
						t.Setenv(k, v)
					}
				}
				if code, out := runCLI(t, "bridge", bridge.name, "sync"); code != 0 {
					t.Fatalf("DISCORD_GUILD_IDS=%q: exit %d: %s", step.guilds, code, out)
				}
				if got := scopes(); !slices.Equal(got, step.want) {
					t.Fatalf("after a sync with DISCORD_GUILD_IDS=%q, commands per scope (global, %s, %s) = %v, want %v",
						step.guilds, syncGuild, other, got, step.want)
				}
			}
			if v := fake.Violations(); len(v) != 0 {
				t.Fatalf("requests Discord would refuse: %v", v)
			}
			if len(fake.Identifies()) != 0 {
				t.Fatal("sync opened a gateway")
			}
		})
	}
}

// Wrong sharding and interactions settings stop the bridge at start with
// exit code 2 and a line naming the variable, never its value.
func TestBridgeTextRefusesBadShardAndInteractionSettings(t *testing.T) {
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec))
	for _, tc := range []struct {
		env      map[string]string
		variable string
		value    string
	}{
		{map[string]string{"DISCORD_SHARD_COUNT": "eight-ish"}, "DISCORD_SHARD_COUNT", "eight-ish"},
		{map[string]string{"DISCORD_SHARD_IDS": "0-3,x9q"}, "DISCORD_SHARD_IDS", "x9q"},
		{map[string]string{"DISCORD_SHARD_COUNT": "4", "DISCORD_SHARD_IDS": "2-7"}, "DISCORD_SHARD_IDS", "2-7"},
		{map[string]string{"DISCORD_INTERACTIONS_ADDR": "127.0.0.1:0"}, "DISCORD_PUBLIC_KEY", ""},
		{map[string]string{"DISCORD_INTERACTIONS_ADDR": "127.0.0.1:0", "DISCORD_PUBLIC_KEY": "not-hex-q7"}, "DISCORD_PUBLIC_KEY", "not-hex-q7"},
	} {
		textEnv(t, fake, tc.env)
		code, out := runCLI(t, "bridge", "text")
		if code != 2 || !strings.Contains(out, tc.variable) || tc.value != "" && strings.Contains(out, tc.value) {
			t.Errorf("%v: exit %d, %q", tc.env, code, out)
		}
	}
	if len(fake.Requests()) != 0 {
		t.Fatal("a refused setting still reached Discord")
	}
}
