package bridges

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/internal/discordtest"
)

// discordSpec is Discord's OpenAPI description, which every fake Discord in
// this package checks the bridges' requests against; loaded once.
var discordSpec = discordtest.NewSpec()

func TestTextBridgeRegistersCommandsOnce(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	// The bridge restarts within a second: no identify interval, which a
	// real restart would wait out.
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()), discordtest.WithIdentifyInterval(0))
	first := startText(t, fake, mem.url, l)
	if puts := fake.CommandPuts(guildID); len(puts) != 1 {
		t.Fatalf("first start registered %d times", len(puts))
	}
	first.stop()
	startText(t, fake, mem.url, l)
	if puts := fake.CommandPuts(guildID); len(puts) != 1 {
		t.Fatalf("a restart with unchanged definitions registered again (%d puts)", len(puts))
	}
	if global := fake.CommandPuts(discordtest.GlobalScope); len(global) != 0 {
		t.Fatalf("commands registered globally although DISCORD_GUILD_IDS is set")
	}
	cmds := fake.Commands(guildID)
	names := map[string]discordgo.ApplicationCommandType{}
	for _, c := range cmds {
		names[c.Name] = c.Type
	}
	want := map[string]discordgo.ApplicationCommandType{"person-memory": discordgo.ChatApplicationCommand,
		"Remember this": discordgo.MessageApplicationCommand, "What Clankie knows": discordgo.UserApplicationCommand,
		"Remember about them": discordgo.UserApplicationCommand}
	if len(cmds) != len(want) || !maps.Equal(names, want) {
		t.Fatalf("registered %v", names)
	}
}

func TestProposeAboutYourself(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)

	ctx := ctxFor(t, 10*time.Second)
	in := fake.Interact(ctx, pm(guildID, textA, alice, "propose", person(alice), str("fact", "I like green tea")))
	m, err := in.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	low := strings.ToLower(m.Content)
	if !strings.Contains(low, "remember") || strings.Contains(low, "review") || strings.Contains(low, "approved") {
		t.Fatalf("reply %q", m.Content)
	}
	facts := mem.export(t, alice)
	if len(facts) != 1 {
		t.Fatalf("stored %d facts", len(facts))
	}
	f := facts[0]
	if f.Body != "I like green tea" || f.Subject != (api.Subject{GuildID: guildID, UserID: alice}) ||
		f.Provenance.ChannelID != textA || f.Provenance.ProposerUserID != alice || f.Provenance.SourceEventID != in.ID ||
		f.Provenance.SourceSurface != api.SurfaceDiscordText || f.Confidence != 0.9 || f.Visibility.Scope != api.ScopeGuild {
		t.Fatalf("stored %+v", f)
	}
	if !strings.Contains(m.Content, f.FactID) {
		t.Fatalf("reply does not name the fact id: %q", m.Content)
	}
	// The same interaction delivered twice is answered once (Discord would
	// refuse a second callback with 40060) and stores one fact.
	in.Redeliver()
	waitFor(t, 5*time.Second, "the redelivery to be handled", func() bool {
		return l.obs.FilterMessage("interaction already answered").FilterField(zap.String("interactionId", in.ID)).Len() == 1
	})
	if cbs := in.Callbacks(); len(cbs) != 1 {
		t.Fatalf("a redelivered interaction was answered %d times", len(cbs))
	}
	if facts := mem.export(t, alice); len(facts) != 1 {
		t.Fatalf("a redelivered interaction stored %d facts", len(facts))
	}
}

func TestWhoMayProposeAboutOthers(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)

	for _, tc := range []struct {
		name     string
		invoker  string
		subject  string
		accepted bool
		says     string
	}{
		{"a member without the role", alice, bob, false, "only propose facts about yourself"},
		{"the memory role", mod, bob, true, "remember"},
		{"manage server", admin, bob, true, "remember"},
		{"a bot as subject", mod, helperBot, false, "bot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(mem.export(t, tc.subject))
			got := reply(t, fake, pm(guildID, textA, tc.invoker, "propose", person(tc.subject), str("fact", "plays chess "+tc.name)))
			if !strings.Contains(strings.ToLower(got), strings.ToLower(tc.says)) {
				t.Fatalf("reply %q, want it to say %q", got, tc.says)
			}
			after := len(mem.export(t, tc.subject))
			if tc.accepted != (after == before+1) || !tc.accepted && after != before {
				t.Fatalf("stored %d → %d", before, after)
			}
		})
	}
	t.Run("a reported fact defaults to medium confidence", func(t *testing.T) {
		for _, f := range mem.export(t, bob) {
			if f.Confidence != 0.6 || f.Provenance.ProposerUserID == bob {
				t.Fatalf("reported fact %+v", f)
			}
		}
	})
	t.Run("a DM is refused", func(t *testing.T) {
		ctx := ctxFor(t, 10*time.Second)
		in := fake.Interact(ctx, discordtest.InteractionSpec{UserID: alice, Command: "person-memory", Subcommand: "propose", Options: []discordtest.OptionValue{person(alice), str("fact", "x")}})
		m, err := in.WaitReply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Content, "person memory belongs to a server") {
			t.Fatalf("DM reply %q", m.Content)
		}
	})
}

func TestRecallMineSupersedeAndForget(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)

	reply(t, fake, pm(guildID, textA, alice, "propose", person(alice), str("fact", "only in general"), str("visibility", "channel")))
	reply(t, fake, pm(guildID, textA, alice, "propose", person(alice), str("fact", "likes green tea")))
	reply(t, fake, pm(guildID, textA, mod, "propose", person(alice), str("fact", "sings in a choir")))

	inA := reply(t, fake, pm(guildID, textA, alice, "recall"))
	if !strings.Contains(inA, "only in general") || !strings.Contains(inA, "green tea") {
		t.Fatalf("recall in the proposing channel: %q", inA)
	}
	inB := reply(t, fake, pm(guildID, textB, bob, "recall", person(alice)))
	if strings.Contains(inB, "only in general") || !strings.Contains(inB, "green tea") {
		t.Fatalf("recall in another channel: %q", inB)
	}
	narrowed := reply(t, fake, pm(guildID, textB, bob, "recall", person(alice), str("query", "TEA green")))
	if !strings.Contains(narrowed, "green tea") || strings.Contains(narrowed, "choir") {
		t.Fatalf("query did not narrow: %q", narrowed)
	}
	nothing := reply(t, fake, pm(guildID, textA, alice, "recall", person(carol)))
	if !strings.Contains(nothing, "<@"+carol+">") || strings.Contains(nothing, "tea") {
		t.Fatalf("empty recall: %q", nothing)
	}

	// An expired fact is not shown.
	soon := time.Now().Add(1500 * time.Millisecond)
	if _, err := mem.operator.Propose(context.Background(), api.ProposalRequest{SchemaVersion: 1, ProposalID: "op-expiring", Fact: api.FactInput{
		Subject: api.Subject{GuildID: guildID, UserID: alice}, Kind: api.KindPersonFact, Body: "on holiday this week",
		Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, ExpiresAt: &soon}}); err != nil {
		t.Fatal(err)
	}
	if got := reply(t, fake, pm(guildID, textA, alice, "recall")); !strings.Contains(got, "holiday") {
		t.Fatalf("fact not visible before expiry: %q", got)
	}
	time.Sleep(time.Until(soon) + 100*time.Millisecond)
	if got := reply(t, fake, pm(guildID, textA, alice, "recall")); strings.Contains(got, "holiday") {
		t.Fatalf("expired fact shown: %q", got)
	}

	// Supersede replaces.
	var teaID string
	for _, f := range mem.export(t, alice) {
		if f.Body == "likes green tea" {
			teaID = f.FactID
		}
	}
	got := reply(t, fake, pm(guildID, textA, alice, "propose", person(alice), str("fact", "likes black tea now"), str("supersedes", teaID)))
	if !strings.Contains(got, teaID) {
		t.Fatalf("supersede reply does not name the replaced id: %q", got)
	}
	after := reply(t, fake, pm(guildID, textA, alice, "recall"))
	if strings.Contains(after, "green tea") || !strings.Contains(after, "black tea") {
		t.Fatalf("supersede did not replace: %q", after)
	}

	// Mine shows everything about the invoker, wherever it is visible.
	mine := reply(t, fake, pm(guildID, textB, alice, "mine"))
	for _, want := range []string{"only in general", "black tea", "choir", "<#" + textA + ">", "<@" + mod + ">", "of 128"} {
		if !strings.Contains(mine, want) {
			t.Fatalf("mine lacks %q: %q", want, mine)
		}
	}

	// Forget: the subject, the proposer, and nobody else.
	var choirID, channelID string
	for _, f := range mem.export(t, alice) {
		switch f.Body {
		case "sings in a choir":
			choirID = f.FactID
		case "only in general":
			channelID = f.FactID
		}
	}
	refused := reply(t, fake, pm(guildID, textA, carol, "forget", person(alice), str("fact", choirID)))
	if !strings.Contains(refused, "only forget") {
		t.Fatalf("a stranger's forget: %q", refused)
	}
	reply(t, fake, pm(guildID, textA, mod, "forget", person(alice), str("fact", choirID)))
	reply(t, fake, pm(guildID, textA, alice, "forget", str("fact", channelID)))
	for _, f := range mem.export(t, alice) {
		if f.FactID == choirID || f.FactID == channelID {
			t.Fatalf("fact %s was not forgotten", f.FactID)
		}
	}
}

func TestHostileFactIsShownSafely(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)
	body := "@everyone **bold** __under__ `code` <@" + bob + "> " + strings.Repeat("x", 2048)
	body = body[:2048]
	reply(t, fake, pm(guildID, textA, alice, "propose", person(alice), str("fact", body)))
	got := reply(t, fake, pm(guildID, textA, alice, "recall"))
	if strings.Contains(got, "@everyone") || strings.Contains(got, "**bold**") || strings.Contains(got, "<@"+bob+">") {
		t.Fatalf("unsafe recall: %q", got[:200])
	}
	if n := len([]rune(got)); n > 2000 {
		t.Fatalf("recall is %d characters", n)
	}
	mine := reply(t, fake, pm(guildID, textA, alice, "mine"))
	if strings.Contains(mine, "@everyone") {
		t.Fatal("unsafe mine")
	}
}

func TestMemoryDownOrSlow(t *testing.T) {
	l := newLogs()
	// One bridge after another against one fake, within seconds: no
	// identify interval, which real restarts would wait out.
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()), discordtest.WithIdentifyInterval(0))
	t.Run("down", func(t *testing.T) {
		r := startText(t, fake, deadURL(t), l)
		defer r.stop()
		ctx := ctxFor(t, 10*time.Second)
		in := fake.Interact(ctx, pm(guildID, textA, alice, "propose", person(alice), str("fact", "x")))
		m, err := in.WaitReply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cb := in.Callbacks()[0]
		if !strings.Contains(m.Content, "memory is unavailable right now; nothing was saved") || cb.After > 3*time.Second {
			t.Fatalf("reply %q after %v", m.Content, cb.After)
		}
	})
	t.Run("slow", func(t *testing.T) {
		mem := startMemory(t, l.log)
		r := startText(t, fake, slowProxy(t, mem.url, 2500*time.Millisecond), l)
		defer r.stop()
		ctx := ctxFor(t, 15*time.Second)
		in := fake.Interact(ctx, pm(guildID, textA, alice, "propose", person(alice), str("fact", "slow but saved")))
		m, err := in.WaitReply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first := in.Callbacks()[0]
		if first.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || !first.Ephemeral() || first.After > 3*time.Second {
			t.Fatalf("first callback %+v", first)
		}
		if m.Via != discordtest.ViaEdit || !strings.Contains(strings.ToLower(m.Content), "remember") {
			t.Fatalf("final reply %q via %s", m.Content, m.Via)
		}
		if len(mem.export(t, alice)) != 1 {
			t.Fatal("the slow proposal was not stored")
		}
	})
}

// TestTextBridgeLogsHoldNoContent runs the user-visible flows and reads every
// log line of the service and the bridge: no fact body and no token.
func TestTextBridgeLogsHoldNoContent(t *testing.T) {
	l := newLogs()
	mem := startMemory(t, l.log)
	fake := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	startText(t, fake, mem.url, l)
	secret := "pomegranate-harmonica-4412"
	reply(t, fake, pm(guildID, textA, alice, "propose", person(alice), str("fact", "my "+secret)))
	reply(t, fake, pm(guildID, textA, alice, "propose", person(bob), str("fact", "bob "+secret)))
	reply(t, fake, pm(guildID, textA, alice, "recall", str("query", secret)))
	reply(t, fake, pm(guildID, textA, alice, "mine"))
	ctx := ctxFor(t, 10*time.Second)
	in := fake.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, ChannelID: textA, UserID: alice, Command: "person-memory", Subcommand: "forget", Autocomplete: true,
		Options: []discordtest.OptionValue{str("fact", secret[:4]).Focus()}})
	if _, err := in.WaitCallback(ctx); err != nil {
		t.Fatal(err)
	}
	l.assertClean(t, secret, tokens.Operator, tokens.TextBridge, tokens.VoiceBridge, tokens.Gameplay, fake.Token())
}
