package discordtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// TestContextMenuModalAndFilesRoundTrip: a message command arrives with
// its target and the resolved message (content included), a modal answers
// it, the submit of that modal carries the values typed in, and a reply
// with a file is taken as multipart/form-data and recorded; all through
// the real discordgo client.
func TestContextMenuModalAndFilesRoundTrip(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	seen := make(chan *discordgo.Interaction, 4)
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		seen <- ic.Interaction
		switch ic.Type {
		case discordgo.InteractionApplicationCommand:
			_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal,
				Data: &discordgo.InteractionResponseData{CustomID: "form:1", Title: "Remember this", Components: []discordgo.MessageComponent{
					discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{CustomID: "fact", Label: "Fact",
						Style: discordgo.TextInputParagraph, Value: ic.ApplicationCommandData().Resolved.Messages[ic.ApplicationCommandData().TargetID].Content,
						Required: true, MaxLength: 2048}}},
				}}})
		case discordgo.InteractionModalSubmit:
			_ = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
				Data: &discordgo.InteractionResponseData{Content: "saved", Flags: discordgo.MessageFlagsEphemeral,
					Files:       []*discordgo.File{{Name: "out.json", ContentType: "application/json", Reader: strings.NewReader(`{"ok":true}`)}},
					Attachments: &[]*discordgo.MessageAttachment{{ID: "0", Filename: "out.json"}}}})
		}
	})
	openSession(t, f, s)
	ctx := timeout(t)
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: aliceID, Command: "Remember this",
		TargetMessage: &discordtest.TargetMessage{ID: "500000000000000001", ChannelID: textID, AuthorID: bobID, Content: "I like tea"}})
	modal, err := in.WaitModal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if modal.Title != "Remember this" || modal.CustomID != "form:1" || len(modal.Inputs) != 1 || modal.Inputs[0].Value != "I like tea" ||
		modal.Inputs[0].Style != discordgo.TextInputParagraph || modal.Inputs[0].MaxLength != 2048 {
		t.Fatalf("modal %+v", modal)
	}
	got := recv(t, ctx, seen, "the message command")
	data := got.ApplicationCommandData()
	msg := data.Resolved.Messages[data.TargetID]
	if data.CommandType != discordgo.MessageApplicationCommand || data.TargetID != "500000000000000001" || msg == nil ||
		msg.Content != "I like tea" || msg.Author == nil || msg.Author.ID != bobID || msg.ChannelID != textID || got.ChannelID != textID {
		t.Fatalf("the message command arrived as %+v (message %+v)", data, msg)
	}

	spec, err := in.SubmitSpec(map[string]string{"fact": "I like green tea"})
	if err != nil {
		t.Fatal(err)
	}
	sub := f.Submit(ctx, spec)
	m, err := sub.WaitReply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Content != "saved" || len(m.Files) != 1 || m.Files[0].Name != "out.json" || string(m.Files[0].Data) != `{"ok":true}` ||
		m.Files[0].ContentType != "application/json" {
		t.Fatalf("reply %+v", m)
	}
	got = recv(t, ctx, seen, "the submit")
	md, ok := got.Data.(discordgo.ModalSubmitInteractionData)
	if got.Type != discordgo.InteractionModalSubmit || !ok || md.CustomID != "form:1" || len(md.Components) != 1 {
		t.Fatalf("the submit arrived as %+v", got.Data)
	}
	row := md.Components[0].(*discordgo.ActionsRow)
	if ti := row.Components[0].(*discordgo.TextInput); ti.CustomID != "fact" || ti.Value != "I like green tea" {
		t.Fatalf("the submitted input %+v", ti)
	}
}

// TestAUserCommandResolvesItsTarget: a user command carries target_id and
// the target in resolved.users and resolved.members.
func TestAUserCommandResolvesItsTarget(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithGuilds(testGuild()))
	in, err := f.BuildInteraction(discordtest.InteractionSpec{GuildID: guildID, UserID: aliceID, Command: "What Clankie knows", TargetUser: otherBotID})
	if err != nil {
		t.Fatal(err)
	}
	var got discordgo.Interaction
	if err := json.Unmarshal(in.Payload(), &got); err != nil {
		t.Fatal(err)
	}
	data := got.ApplicationCommandData()
	u := data.Resolved.Users[otherBotID]
	if data.CommandType != discordgo.UserApplicationCommand || data.TargetID != otherBotID || u == nil || !u.Bot ||
		data.Resolved.Members[otherBotID] == nil || len(data.Options) != 0 {
		t.Fatalf("user command data %+v", data)
	}
}

// callbackPath builds an interaction no session receives (no deadline) and
// returns its callback route.
func callbackPath(t *testing.T, f *discordtest.Fake, spec discordtest.InteractionSpec) string {
	t.Helper()
	spec.Deadline = -1
	in, err := f.BuildInteraction(spec)
	if err != nil {
		t.Fatal(err)
	}
	return "/interactions/" + in.ID + "/" + in.Token + "/callback"
}

func textInput(fields string) string {
	return `{"type":1,"components":[{"type":4,"custom_id":"fact","style":2,"label":"Fact"` + fields + `}]}`
}

func modalBody(title, customID string, rows ...string) string {
	return fmt.Sprintf(`{"type":9,"data":{"custom_id":%q,"title":%q,"components":[%s]}}`, customID, title, strings.Join(rows, ","))
}

// TestFakeRefusesModalsOutsideDiscordsLimits: one rule each, a modal
// Discord refuses is refused (400, 50035, naming the field), and a modal
// within every limit is taken.
func TestFakeRefusesModalsOutsideDiscordsLimits(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	command := discordtest.InteractionSpec{GuildID: guildID, UserID: aliceID, Command: "demo"}
	ok := textInput(``)
	six := []string{ok, ok, ok, ok, ok, ok}
	for i := range six {
		six[i] = strings.Replace(ok, `"fact"`, fmt.Sprintf(`"f%d"`, i), 1)
	}
	for _, tc := range []struct {
		name string
		body string
		path []string
	}{
		{"a title over 45 characters", modalBody(strings.Repeat("t", 46), "form:1", ok), []string{"data", "title"}},
		{"an empty title", modalBody("", "form:1", ok), []string{"data", "title"}},
		{"a custom_id over 100 characters", modalBody("Form", strings.Repeat("c", 101), ok), []string{"data", "custom_id"}},
		{"no rows", modalBody("Form", "form:1"), []string{"data", "components"}},
		{"six rows", modalBody("Form", "form:1", six...), []string{"data", "components"}},
		{"two inputs in a row", modalBody("Form", "form:1",
			`{"type":1,"components":[{"type":4,"custom_id":"a","style":1,"label":"A"},{"type":4,"custom_id":"b","style":1,"label":"B"}]}`),
			[]string{"data", "components", "0", "components"}},
		{"a label over 45 characters", modalBody("Form", "form:1", strings.Replace(ok, `"Fact"`, `"`+strings.Repeat("l", 46)+`"`, 1)),
			[]string{"data", "components", "0", "components", "0", "label"}},
		{"no label", modalBody("Form", "form:1", `{"type":1,"components":[{"type":4,"custom_id":"fact","style":2}]}`),
			[]string{"data", "components", "0", "components", "0", "label"}},
		{"a value over 4000 characters", modalBody("Form", "form:1", textInput(`,"value":"`+strings.Repeat("v", 4001)+`"`)),
			[]string{"data", "components", "0", "components", "0", "value"}},
		{"a value over its max_length", modalBody("Form", "form:1", textInput(`,"value":"abcdef","max_length":5`)),
			[]string{"data", "components", "0", "components", "0", "value"}},
		{"a max_length over 4000", modalBody("Form", "form:1", textInput(`,"max_length":4001`)),
			[]string{"data", "components", "0", "components", "0", "max_length"}},
		{"min_length over max_length", modalBody("Form", "form:1", textInput(`,"min_length":10,"max_length":5`)),
			[]string{"data", "components", "0", "components", "0", "min_length"}},
		{"an unknown style", modalBody("Form", "form:1", strings.Replace(ok, `"style":2`, `"style":3`, 1)),
			[]string{"data", "components", "0", "components", "0", "style"}},
		{"a custom_id twice", modalBody("Form", "form:1", ok, ok), []string{"data", "components", "1", "components", "0", "custom_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer := rawRequest(t, f, http.MethodPost, callbackPath(t, f, command), tc.body, nil)
			wantFormError(t, status, answer, tc.path...)
			takeRefusals(t, f, 1)
		})
	}
	t.Run("a modal answering a modal submit", func(t *testing.T) {
		sub, err := f.BuildSubmit(discordtest.ModalSpec{GuildID: guildID, UserID: aliceID, CustomID: "form:1", Deadline: -1})
		if err != nil {
			t.Fatal(err)
		}
		status, answer := rawRequest(t, f, http.MethodPost, "/interactions/"+sub.ID+"/"+sub.Token+"/callback", modalBody("Form", "form:2", ok), nil)
		wantFormError(t, status, answer, "type")
		takeRefusals(t, f, 1)
	})
	t.Run("a modal within every limit", func(t *testing.T) {
		body := modalBody(strings.Repeat("t", 45), strings.Repeat("c", 100), textInput(`,"value":"`+strings.Repeat("v", 4000)+`","min_length":0,"max_length":4000,"placeholder":"`+strings.Repeat("p", 100)+`"`))
		if status, answer := rawRequest(t, f, http.MethodPost, callbackPath(t, f, command), body, nil); status != http.StatusNoContent {
			t.Fatalf("answered %d %v", status, answer)
		}
	})
}

// multipartBody builds a multipart/form-data body: payload_json, then each
// file as files[n] (name "" leaves the filename out).
func multipartBody(t *testing.T, payload string, files ...[2]string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	p, _ := w.CreatePart(h)
	_, _ = p.Write([]byte(payload))
	for i, f := range files {
		h := textproto.MIMEHeader{}
		if f[0] == "" {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"`, i))
		} else {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"; filename=%q`, i, f[0]))
		}
		h.Set("Content-Type", "application/json")
		p, _ := w.CreatePart(h)
		_, _ = p.Write([]byte(f[1]))
	}
	_ = w.Close()
	return b.String(), w.FormDataContentType()
}

// TestFakeChecksMultipartUploads: a callback with files is taken as
// multipart/form-data with payload_json and files[n]; attachment ids must
// be strings naming an uploaded part, every part needs a filename, and a
// route that takes no files refuses a multipart body.
func TestFakeChecksMultipartUploads(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	command := discordtest.InteractionSpec{GuildID: guildID, UserID: aliceID, Command: "demo"}
	send := func(path, method, payload string, files ...[2]string) (int, map[string]any) {
		body, ct := multipartBody(t, payload, files...)
		return rawRequest(t, f, method, path, body, map[string]string{"User-Agent": discordgoUA, "Content-Type": ct})
	}
	reply := func(attachments string) string {
		return `{"type":4,"data":{"content":"here","flags":64,"attachments":` + attachments + `}}`
	}
	file := [2]string{"a.json", `{"a":1}`}
	for _, tc := range []struct {
		name        string
		attachments string
		files       [][2]string
		path        []string
	}{
		{"a number as attachment id", `[{"id":0,"filename":"a.json"}]`, [][2]string{file}, []string{"data", "attachments", "0", "id"}},
		{"an attachment id naming no part", `[{"id":"1","filename":"a.json"}]`, [][2]string{file}, []string{"data", "attachments", "0", "id"}},
		{"a file part without a filename", `[{"id":"0"}]`, [][2]string{{"", `{}`}}, []string{"files[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer := send(callbackPath(t, f, command), http.MethodPost, reply(tc.attachments), tc.files...)
			wantFormError(t, status, answer, tc.path...)
			takeRefusals(t, f, 1)
		})
	}
	t.Run("no payload_json", func(t *testing.T) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		fw, _ := w.CreateFormFile("files[0]", "a.json")
		_, _ = fw.Write([]byte(`{}`))
		_ = w.Close()
		status, answer := rawRequest(t, f, http.MethodPost, callbackPath(t, f, command), b.String(),
			map[string]string{"User-Agent": discordgoUA, "Content-Type": w.FormDataContentType()})
		wantFormError(t, status, answer, "payload_json")
		takeRefusals(t, f, 1)
	})
	t.Run("a route that takes no files", func(t *testing.T) {
		status, answer := send(guildCommandsPath(f), http.MethodPut, `[]`, file)
		wantFormError(t, status, answer, "headers", "Content-Type")
		takeRefusals(t, f, 1)
	})
	t.Run("an upload Discord takes", func(t *testing.T) {
		spec := command
		spec.Deadline = -1
		in, err := f.BuildInteraction(spec)
		if err != nil {
			t.Fatal(err)
		}
		status, answer := send("/interactions/"+in.ID+"/"+in.Token+"/callback", http.MethodPost, reply(`[{"id":"0","filename":"a.json"}]`), file)
		if status != http.StatusNoContent {
			t.Fatalf("answered %d %v", status, answer)
		}
		m, ok := in.Original()
		cbs := in.Callbacks()
		if !ok || m.Content != "here" || len(m.Files) != 1 || m.Files[0].Name != "a.json" || string(m.Files[0].Data) != `{"a":1}` ||
			len(cbs) != 1 || len(cbs[0].Files) != 1 || !strings.Contains(string(cbs[0].Raw), `"attachments"`) {
			t.Fatalf("recorded %+v, callbacks %+v", m, cbs)
		}
	})
}

// TestFakeRefusesContextMenusDiscordRefuses: a context menu's name is 1–32
// characters, and it has no description and no options.
func TestFakeRefusesContextMenusDiscordRefuses(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	for _, tc := range []struct {
		name string
		body string
		path []string
	}{
		{"a name over 32 characters", `[{"type":3,"name":"` + strings.Repeat("n", 33) + `"}]`, []string{"0", "name"}},
		{"a description", `[{"type":2,"name":"What Clankie knows","description":"about someone"}]`, []string{"0", "description"}},
		{"options", `[{"type":3,"name":"Remember this","options":[{"type":3,"name":"fact","description":"the fact"}]}]`, []string{"0", "options"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, answer := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), tc.body, nil)
			wantFormError(t, status, answer, tc.path...)
			takeRefusals(t, f, 1)
		})
	}
	if status, answer := rawRequest(t, f, http.MethodPut, guildCommandsPath(f),
		`[{"type":3,"name":"Remember this"},{"type":2,"name":"What Clankie knows"}]`, nil); status != http.StatusOK {
		t.Fatalf("context menus answered %d %v", status, answer)
	}
}
