package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/discordtest"
	"github.com/clankie/clankie/memoryclient"
)

// TestUpRunsTheTextBridgeWithItsOwnBearer runs `clankie up` in-process with
// a text bot token pointed at the fake Discord: the bridge registers its
// command, and a proposal lands in the service under the text bridge's lane,
// so it used its own minted bearer over loopback.
func TestUpRunsTheTextBridgeWithItsOwnBearer(t *testing.T) {
	const guild, channel, user = "100000000000000001", "100000000000000011", "200000000000000001"
	fake := discordtest.New(t, discordtest.WithGuilds(discordtest.Guild{ID: guild,
		Members:  []discordtest.Member{{UserID: user}},
		Channels: []discordtest.Channel{{ID: channel, Name: "general", Type: discordgo.ChannelTypeGuildText}}}))
	dir := filepath.Join(t.TempDir(), "memory")
	addr := freeAddr(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLANKIE_MEMORY_DIR", dir)
	t.Setenv("CLANKIE_MEMORY_ADDR", addr)
	t.Setenv("DISCORD_TEXT_BOT_TOKEN", fake.Token())
	t.Setenv("DISCORD_API_URL", fake.APIURL())
	t.Setenv("DISCORD_GUILD_IDS", guild)
	t.Setenv("CLANKIE_LOG_LEVEL", "error")

	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- runUp(ctx, &out) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("clankie up stopped with %v", err)
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer wcancel()
	if _, err := fake.WaitCommandPuts(wctx, guild, 1); err != nil {
		t.Fatalf("the text bridge never registered its command: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "text bridge: starting") || !strings.Contains(out.String(), "voice bridge: skipped; set DISCORD_VOICE_BOT_TOKEN") {
		t.Fatalf("clankie up said:\n%s", out.String())
	}
	in := fake.Interact(wctx, discordtest.InteractionSpec{GuildID: guild, ChannelID: channel, UserID: user, Command: "person-memory", Subcommand: "propose",
		Options: []discordtest.OptionValue{discordtest.UserOption("person", user), discordtest.StringOption("fact", "likes tea")}})
	if m, err := in.WaitReply(wctx); err != nil || !strings.Contains(strings.ToLower(m.Content), "remember") {
		t.Fatalf("reply %q %v", m.Content, err)
	}
	opTok, err := config.ResolveBearer("", dir, api.LaneOperator)
	if err != nil {
		t.Fatal(err)
	}
	op, _ := memoryclient.New("http://"+addr, opTok)
	exp, err := op.Export(wctx, guild, user)
	if err != nil || len(exp.Facts) != 1 || exp.Facts[0].Provenance.SourceSurface != api.SurfaceDiscordText {
		t.Fatalf("stored %+v %v", exp.Facts, err)
	}
}
