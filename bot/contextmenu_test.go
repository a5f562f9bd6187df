package bot

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/internal/discordtest"
)

// menuServer serves the context menu tests' commands over a gateway
// session and an HTTP endpoint against one fake Discord, recording what
// each handler saw.
type menuServer struct {
	fake     *discordtest.Fake
	endpoint string

	mu   sync.Mutex
	seen []interaction.Invocation
}

func (s *menuServer) saw(inv interaction.Invocation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, inv)
}

func (s *menuServer) last() interaction.Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// form is the modal the test commands open.
func form(customID string) *interaction.Modal {
	return &interaction.Modal{CustomID: customID, Title: strings.Repeat("T", 50), Inputs: []interaction.TextInput{
		{CustomID: "fact", Label: "Fact", Style: interaction.TextParagraph, Required: true, MinLength: 1, MaxLength: 20,
			Value: "prefilled and longer than twenty"},
		{CustomID: "when", Label: strings.Repeat("L", 60), Style: interaction.TextShort, Placeholder: "7d"},
	}}
}

func startMenuServer(t *testing.T) *menuServer {
	t.Helper()
	fake := discordtest.New(t, discordtest.WithSpec(discordtest.NewSpec()), discordtest.WithGuilds(
		discordtest.Guild{ID: servedGuild, Name: "served", Channels: []discordtest.Channel{{ID: "910000000000000011", Name: "general", Type: discordgo.ChannelTypeGuildText}}}))
	s := &menuServer{fake: fake}
	slow := 600 * time.Millisecond
	remember := interaction.Command{
		Definition: &discordgo.ApplicationCommand{Name: "Remember this", Type: discordgo.MessageApplicationCommand},
		Handlers: map[string]interaction.Handler{"": func(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			s.saw(inv)
			// Slower than the deferral: a modal command is never deferred.
			time.Sleep(slow)
			return interaction.Reply{Modal: form("form:" + inv.TargetMessage.ID)}, nil
		}},
		Modals: map[string]interaction.Handler{"form": func(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			s.saw(inv)
			fact, _ := inv.Options.String("fact")
			if fact == "slow" {
				time.Sleep(slow)
			}
			return interaction.Reply{Content: "kept " + fact + " from " + inv.CustomID}, nil
		}},
		OpensModal: true,
	}
	knows := interaction.Command{
		Definition: &discordgo.ApplicationCommand{Name: "What Clankie knows", Type: discordgo.UserApplicationCommand},
		Handlers: map[string]interaction.Handler{"": func(_ context.Context, inv interaction.Invocation) (interaction.Reply, error) {
			s.saw(inv)
			if inv.TargetUser.ID == "800000000000000001" {
				time.Sleep(slow) // deferred: the file goes with the edit
			}
			return interaction.Reply{Content: "your copy", Files: []interaction.File{{Name: "copy.json", ContentType: "application/json", Data: []byte(`[1]`)}}}, nil
		}},
		// A modal cannot answer a submit.
		Modals: map[string]interaction.Handler{"late": func(context.Context, interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Modal: form("late:1")}, nil
		}},
		Components: map[string]interaction.Handler{"button": func(context.Context, interaction.Invocation) (interaction.Reply, error) {
			return interaction.Reply{Content: "clicked"}, nil
		}},
	}
	router := NewRouter(zap.NewNop(), Config{Guilds: []string{servedGuild}, DeferAfter: 200 * time.Millisecond}, remember, knows)
	s.endpoint = serveOnBoth(t, fake, router)
	return s
}

// transports deliver an interaction over the gateway or HTTP.
type transports struct {
	name     string
	interact func(context.Context, discordtest.InteractionSpec) *discordtest.Interaction
	submit   func(context.Context, discordtest.ModalSpec) *discordtest.Interaction
}

func (s *menuServer) transports() []transports {
	return []transports{
		{"gateway", s.fake.Interact, s.fake.Submit},
		{"http", func(ctx context.Context, spec discordtest.InteractionSpec) *discordtest.Interaction {
			return s.fake.InteractHTTP(ctx, s.endpoint, spec)
		}, func(ctx context.Context, spec discordtest.ModalSpec) *discordtest.Interaction {
			return s.fake.SubmitHTTP(ctx, s.endpoint, spec)
		}},
	}
}

// TestContextMenusModalsAndFiles: a message command reaches its handler
// with the resolved message and, though slower than the deferral, is
// answered with its modal (cut to Discord's limits); the modal's submit
// is routed by its prefix with the values typed in; a user command's
// reply carries its file, over the gateway and HTTP, fast or deferred; a
// submit with an undeclared prefix (or a button's) is stale; a modal
// answering a submit is the failure sentence.
func TestContextMenusModalsAndFiles(t *testing.T) {
	s := startMenuServer(t)
	const user, channel = "800000000000000009", "910000000000000011"
	for _, tr := range s.transports() {
		t.Run(tr.name+"/right-click, modal, submit", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			in := tr.interact(ctx, discordtest.InteractionSpec{GuildID: servedGuild, UserID: user, Command: "Remember this",
				TargetMessage: &discordtest.TargetMessage{ID: "500000000000000001", AuthorID: "800000000000000002", Content: "I like tea"}})
			modal, err := in.WaitModal(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if cbs := in.Callbacks(); len(cbs) != 1 {
				t.Fatalf("callbacks %+v: a modal command was deferred", cbs)
			}
			inv := s.last()
			if inv.TargetID != "500000000000000001" || inv.TargetMessage == nil || inv.TargetMessage.Content != "I like tea" ||
				inv.TargetMessage.Author.ID != "800000000000000002" || inv.TargetMessage.ChannelID != channel || inv.Command != "Remember this" {
				t.Fatalf("the handler saw %+v (message %+v)", inv, inv.TargetMessage)
			}
			if modal.CustomID != "form:500000000000000001" || modal.Title != strings.Repeat("T", 44)+"…" || len(modal.Inputs) != 2 ||
				modal.Inputs[0].Value != "prefilled and longer" || modal.Inputs[0].MaxLength != 20 || modal.Inputs[0].MinLength != 1 ||
				len([]rune(modal.Inputs[1].Label)) != 45 || modal.Inputs[1].MaxLength != 4000 || modal.Inputs[1].Required {
				t.Fatalf("modal %+v", modal)
			}
			for _, fact := range []string{"green tea", "slow"} {
				spec, err := in.SubmitSpec(map[string]string{"fact": fact})
				if err != nil {
					t.Fatal(err)
				}
				sub := tr.submit(ctx, spec)
				m, err := sub.WaitReply(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Content != "kept "+fact+" from form:500000000000000001" || !m.Ephemeral() {
					t.Fatalf("reply %+v", m)
				}
				if got := s.last(); got.CustomID != "form:500000000000000001" || got.User.ID != user || got.ChannelID != channel || got.ID != sub.ID {
					t.Fatalf("the submit handler saw %+v", got)
				}
			}
		})
		for _, target := range []string{"800000000000000003", "800000000000000001"} {
			t.Run(tr.name+"/a reply with a file/"+target, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				in := tr.interact(ctx, discordtest.InteractionSpec{GuildID: servedGuild, UserID: user, Command: "What Clankie knows", TargetUser: target})
				m, err := in.WaitReply(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if m.Content != "your copy" || !m.Ephemeral() || len(m.Files) != 1 || m.Files[0].Name != "copy.json" || string(m.Files[0].Data) != "[1]" {
					t.Fatalf("reply %+v", m)
				}
				if got := s.last(); got.TargetUser == nil || got.TargetUser.ID != target {
					t.Fatalf("the handler saw %+v", got)
				}
			})
		}
		for _, tc := range []struct{ name, customID, want string }{
			{"an undeclared prefix is stale", "nope:1", interaction.StaleSentence},
			{"a button's prefix is no modal's", "button:1", interaction.StaleSentence},
			{"a modal cannot answer a submit", "late:1", genericFailure},
		} {
			t.Run(tr.name+"/"+tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				sub := tr.submit(ctx, discordtest.ModalSpec{GuildID: servedGuild, UserID: user, CustomID: tc.customID,
					Values: []discordtest.ModalValue{{CustomID: "fact", Value: "x"}}})
				m, err := sub.WaitReply(ctx)
				if err != nil || m.Content != tc.want {
					t.Fatalf("reply %+v, %v; want %q", m, err, tc.want)
				}
			})
		}
	}
	if v := s.fake.Violations(); len(v) != 0 {
		t.Fatalf("Discord would refuse %v", v)
	}
}

// TestContextMenuTargetsAreChecked: a context menu is parsed against its
// definition's type, and its target must be in the resolved data.
func TestContextMenuTargetsAreChecked(t *testing.T) {
	def := &discordgo.ApplicationCommand{Name: "Remember this", Type: discordgo.MessageApplicationCommand}
	user := &discordgo.Member{User: &discordgo.User{ID: "u"}}
	msg := &discordgo.Message{ID: "m", ChannelID: "c", Content: "hi", Author: &discordgo.User{ID: "a", Bot: true}, WebhookID: "w"}
	for _, tc := range []struct {
		name  string
		data  discordgo.ApplicationCommandInteractionData
		stale bool
	}{
		{"a message command", discordgo.ApplicationCommandInteractionData{Name: def.Name, CommandType: discordgo.MessageApplicationCommand, TargetID: "m",
			Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Messages: map[string]*discordgo.Message{"m": msg}}}, false},
		{"a user command under its name", discordgo.ApplicationCommandInteractionData{Name: def.Name, CommandType: discordgo.UserApplicationCommand, TargetID: "u",
			Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Users: map[string]*discordgo.User{"u": {ID: "u"}}}}, true},
		{"no resolved message", discordgo.ApplicationCommandInteractionData{Name: def.Name, CommandType: discordgo.MessageApplicationCommand, TargetID: "m"}, true},
		{"another message resolved", discordgo.ApplicationCommandInteractionData{Name: def.Name, CommandType: discordgo.MessageApplicationCommand, TargetID: "x",
			Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Messages: map[string]*discordgo.Message{"m": msg}}}, true},
		{"options", discordgo.ApplicationCommandInteractionData{Name: def.Name, CommandType: discordgo.MessageApplicationCommand, TargetID: "m",
			Options:  []*discordgo.ApplicationCommandInteractionDataOption{{Name: "x", Type: discordgo.ApplicationCommandOptionString, Value: "y"}},
			Resolved: &discordgo.ApplicationCommandInteractionDataResolved{Messages: map[string]*discordgo.Message{"m": msg}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := parseInvocation(&discordgo.Interaction{ID: "1", Type: discordgo.InteractionApplicationCommand, GuildID: "g", ChannelID: "c",
				Member: user, Data: tc.data}, def)
			if tc.stale {
				if err != interaction.ErrStale {
					t.Fatalf("parsed %+v, %v; want stale", inv, err)
				}
				return
			}
			want := interaction.Message{ID: "m", ChannelID: "c", Author: interaction.User{ID: "a", Bot: true}, Webhook: true, Content: "hi"}
			if err != nil || inv.TargetID != "m" || inv.TargetMessage == nil || *inv.TargetMessage != want || inv.Path() != def.Name {
				t.Fatalf("parsed %+v (%+v), %v", inv, inv.TargetMessage, err)
			}
		})
	}
}

// TestAModalAfterADeferralIsTheFailureSentence: a command that did not
// declare OpensModal may be deferred, and Discord takes no modal after a
// deferral: the person reads the failure sentence, not silence.
func TestAModalAfterADeferralIsTheFailureSentence(t *testing.T) {
	r := NewRouter(zap.NewNop(), Config{DeferAfter: 20 * time.Millisecond}, echo(func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		time.Sleep(100 * time.Millisecond)
		return interaction.Reply{Modal: form("form:1")}, nil
	}, nil))
	rec := &recorder{start: time.Now()}
	r.Serve(context.Background(), rec, echoIn())
	if len(rec.responses) != 1 || rec.responses[0].Type != discordgo.InteractionResponseDeferredChannelMessageWithSource ||
		len(rec.edits) != 1 || rec.edits[0] != genericFailure {
		t.Fatalf("responses %+v, edits %q", rec.responses, rec.edits)
	}
}

// TestEndpointNeverDefersAModalCommand: a command that opens a modal
// cannot be deferred, so a claim slower than the deferral gets the
// unreachable sentence (nothing ran) instead of a deferral no modal could
// follow; a modal submit, which can be deferred, is deferred as a command.
func TestEndpointNeverDefersAModalCommand(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Unix(1_800_000_000, 0)
	c := newClaims()
	c.delay = claimDeferAfter + 200*time.Millisecond
	var runs atomic.Int32
	opens := func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		runs.Add(1)
		return interaction.Reply{Modal: form("form:1")}, nil
	}
	cmd := echo(opens, nil)
	cmd.OpensModal = true
	cmd.Modals = map[string]interaction.Handler{"form": func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		runs.Add(1)
		return interaction.Reply{Content: "kept"}, nil
	}}
	router := NewRouter(zap.NewNop(), Config{}, cmd)
	t.Cleanup(router.Wait)
	rest := &recorder{start: time.Now()}
	e := &Endpoint{Router: router, REST: rest, Key: pub, Claims: c, Log: zap.NewNop(), Now: func() time.Time { return now }}

	w := httptest.NewRecorder()
	e.ServeHTTP(w, signed(t, priv, commandBody("4001", "x", false), now, false))
	router.Wait()
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"type":4`) || !strings.Contains(w.Body.String(), memoryUnreachable) || runs.Load() != 0 {
		t.Fatalf("a modal command with a slow claim answered %d %s (ran %d)", w.Code, w.Body.String(), runs.Load())
	}

	submit := &discordgo.Interaction{ID: "4002", Token: "tok4002", AppID: "app", Type: discordgo.InteractionModalSubmit, GuildID: "g", ChannelID: "c",
		Member: &discordgo.Member{User: &discordgo.User{ID: "u"}}, Data: discordgo.ModalSubmitInteractionData{CustomID: "form:1"}}
	body, _ := json.Marshal(submit)
	w = httptest.NewRecorder()
	e.ServeHTTP(w, signed(t, priv, string(body), now, false))
	router.Wait()
	rest.mu.Lock()
	defer rest.mu.Unlock()
	if !strings.Contains(w.Body.String(), `"type":5`) || len(rest.edits) != 1 || rest.edits[0] != "kept" || runs.Load() != 1 {
		t.Fatalf("a slow-claimed submit answered %s, edits %q (ran %d)", w.Body.String(), rest.edits, runs.Load())
	}
}

// TestModalSubmitsAreCounted: a submit is counted under kind "modal",
// labelled by its declared prefix, or "modal:unknown" for any other (a
// custom_id is not a closed set).
func TestModalSubmitsAreCounted(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), "text")
	cmd := echo(nil, nil)
	cmd.Modals = map[string]interaction.Handler{"form": func(context.Context, interaction.Invocation) (interaction.Reply, error) {
		return interaction.Reply{Content: "kept"}, nil
	}}
	r := NewRouter(zap.NewNop(), Config{Metrics: m}, cmd)
	for i, customID := range []string{"form:1", "forged:1"} {
		r.Serve(context.Background(), &recorder{start: time.Now()}, &discordgo.Interaction{ID: strconv.Itoa(i), Type: discordgo.InteractionModalSubmit,
			GuildID: "g", ChannelID: "c", Member: &discordgo.Member{User: &discordgo.User{ID: "u"}},
			Data: discordgo.ModalSubmitInteractionData{CustomID: customID}})
	}
	for _, want := range []struct {
		label   string
		outcome Outcome
	}{{"modal:form", OutcomeOK}, {"modal:unknown", OutcomeStale}} {
		var got dto.Metric
		if err := m.interactions.WithLabelValues(want.label, "modal", string(want.outcome)).Write(&got); err != nil || got.GetCounter().GetValue() != 1 {
			t.Fatalf("interactions{command=%q,kind=modal,outcome=%q} = %v, %v", want.label, want.outcome, got.GetCounter().GetValue(), err)
		}
	}
}
