package discordtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/discordtest"
)

// The tests in this file show the fake refusing what Discord refuses, one
// rule each, and accepting what Discord accepts. Each refusal is answered
// like Discord's (400, code 50035 Invalid Form Body, nested errors) and is
// recorded as a violation that would fail the test at cleanup; these tests
// take their violations (takeRefusals) because they send them on purpose.

// discordgoUA is what discordgo v0.29 sends; Discord requires
// "DiscordBot ($url, $versionNumber)".
const discordgoUA = "DiscordBot (https://github.com/bwmarrin/discordgo, v0.29.0)"

// rawRequest sends a hand-built request to the fake, so a test controls
// every header. headers nil means the headers a correct bot sends.
func rawRequest(t *testing.T, f *discordtest.Fake, method, path, body string, headers map[string]string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(timeout(t), method, f.APIURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if headers == nil {
		headers = map[string]string{"User-Agent": discordgoUA}
		if body != "" {
			headers["Content-Type"] = "application/json"
		}
	}
	req.Header.Set("Authorization", "Bot "+f.Token())
	req.Header["User-Agent"] = []string{""} // not Go's default
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if len(bytes.TrimSpace(b)) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
	}
	return resp.StatusCode, out
}

// wantFormError checks Discord's Invalid Form Body shape and that the
// nested errors name the field at path.
func wantFormError(t *testing.T, status int, body map[string]any, path ...string) {
	t.Helper()
	if status != http.StatusBadRequest || fmt.Sprint(body["code"]) != "50035" || body["message"] != "Invalid Form Body" {
		t.Fatalf("answered %d %v; want 400 with code 50035 Invalid Form Body", status, body)
	}
	node, _ := body["errors"].(map[string]any)
	for _, p := range path {
		next, ok := node[p].(map[string]any)
		if !ok {
			t.Fatalf("errors %v do not name %s", body["errors"], strings.Join(path, "."))
		}
		node = next
	}
	if !holdsErrors(node) {
		t.Fatalf("errors %v hold no _errors at or below %s", body["errors"], strings.Join(path, "."))
	}
}

// holdsErrors reports whether a nested errors object has an _errors list
// anywhere inside.
func holdsErrors(node map[string]any) bool {
	for k, v := range node {
		if list, ok := v.([]any); k == "_errors" && ok && len(list) > 0 {
			return true
		}
		if m, ok := v.(map[string]any); ok && holdsErrors(m) {
			return true
		}
	}
	return false
}

func guildCommandsPath(f *discordtest.Fake) string {
	return "/applications/" + f.AppID() + "/guilds/" + guildID + "/commands"
}

func TestFakeRefusesABodyWithoutJSONContentType(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	body := `[{"name":"ping","description":"Answers pong"}]`
	for _, ct := range []string{"", "text/plain"} {
		hdr := map[string]string{"User-Agent": discordgoUA}
		if ct != "" {
			hdr["Content-Type"] = ct
		}
		status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), body, hdr)
		wantFormError(t, status, ans, "headers", "Content-Type")
	}
	takeRefusals(t, f, 2)
	if status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), body, nil); status != http.StatusOK {
		t.Fatalf("with application/json: %d %v", status, ans)
	}
	if got := f.Commands(guildID); len(got) != 1 {
		t.Fatalf("registered %d commands", len(got))
	}
}

func TestFakeRefusesARequestWithoutADiscordBotUserAgent(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec))
	for _, ua := range []string{"", "Go-http-client/1.1", "DiscordBot", "DiscordBot ()", "clankie/1.0 DiscordBot (x, 1)"} {
		status, ans := rawRequest(t, f, http.MethodGet, "/users/@me", "", map[string]string{"User-Agent": ua})
		wantFormError(t, status, ans, "headers", "User-Agent")
	}
	takeRefusals(t, f, 5)
	if status, ans := rawRequest(t, f, http.MethodGet, "/users/@me", "", nil); status != http.StatusOK {
		t.Fatalf("with discordgo's User-Agent: %d %v", status, ans)
	}
}

func TestFakeRefusesADeferralWithFlagsOtherThanEphemeral(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	s.SyncEvents = true
	errs := make(chan error, 4)
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		for _, flags := range []discordgo.MessageFlags{discordgo.MessageFlagsSuppressEmbeds, discordgo.MessageFlagsEphemeral | discordgo.MessageFlagsSuppressNotifications,
			discordgo.MessageFlagsEphemeral} {
			errs <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
				Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
				Data: &discordgo.InteractionResponseData{Flags: flags},
			})
		}
	})
	openSession(t, f, s)
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "slow"})
	for _, what := range []string{"SUPPRESS_EMBEDS", "EPHEMERAL|SUPPRESS_NOTIFICATIONS"} {
		err := recv(t, ctx, errs, what)
		if status, code := restCode(err); status != http.StatusBadRequest || code != discordtest.CodeInvalidFormBody {
			t.Fatalf("deferral with %s = %v; want 400/50035", what, err)
		}
	}
	if err := recv(t, ctx, errs, "EPHEMERAL"); err != nil {
		t.Fatalf("deferral with EPHEMERAL: %v", err)
	}
	if cb, err := in.WaitCallback(ctx); err != nil || !cb.Ephemeral() {
		t.Fatalf("accepted deferral %+v, %v", cb, err)
	}
	takeRefusals(t, f, 2)
}

func TestFakeRefusesDefaultMemberPermissionsThatIsNotANumber(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	put := func(perms string) (int, map[string]any) {
		return rawRequest(t, f, http.MethodPut, guildCommandsPath(f),
			`[{"name":"ping","description":"Answers pong","default_member_permissions":`+perms+`}]`, nil)
	}
	for _, bad := range []string{`"manage_guild"`, `"0x20"`, `"-1"`, `true`} {
		status, ans := put(bad)
		wantFormError(t, status, ans, "0", "default_member_permissions")
	}
	takeRefusals(t, f, 4)
	// Discord takes the bitset as a string (what discordgo sends), as a
	// number, or null.
	for _, good := range []string{`"32"`, `32`, `"0"`, `null`} {
		if status, ans := put(good); status != http.StatusOK {
			t.Fatalf("default_member_permissions %s: %d %v", good, status, ans)
		}
	}
}

func TestFakeRefusesUnknownIntegrationTypesAndContexts(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	for _, tc := range []struct{ field, value string }{
		{"integration_types", "[2]"},
		{"integration_types", "[0, 5]"},
		{"integration_types", "[]"},
		{"contexts", "[3]"},
		{"contexts", "[0, 0]"},
		{"contexts", `["guild"]`},
	} {
		status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f),
			`[{"name":"ping","description":"Answers pong","`+tc.field+`":`+tc.value+`}]`, nil)
		wantFormError(t, status, ans, "0", tc.field)
	}
	takeRefusals(t, f, 6)
	status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f),
		`[{"name":"ping","description":"Answers pong","integration_types":[0,1],"contexts":[0,1,2]}]`, nil)
	if status != http.StatusOK {
		t.Fatalf("known integration types and contexts: %d %v", status, ans)
	}
}

// bigCommand has 25 subcommands of one string option each; every
// description is 100 characters.
func bigCommand(optionsPerSub int) *discordgo.ApplicationCommand {
	desc := strings.Repeat("d", 100)
	cmd := &discordgo.ApplicationCommand{Name: "big", Description: "A command with long descriptions"}
	for i := range 25 {
		sub := &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionSubCommand, Name: fmt.Sprintf("sub%02d", i), Description: desc}
		for j := range optionsPerSub {
			sub.Options = append(sub.Options, &discordgo.ApplicationCommandOption{Type: discordgo.ApplicationCommandOptionString, Name: fmt.Sprintf("opt%d", j), Description: desc})
		}
		cmd.Options = append(cmd.Options, sub)
	}
	return cmd
}

// TestFakeAcceptsACommandWith5000CharactersOfDescriptions: Discord counts
// names, descriptions and choice values of a command together against 8000
// characters. The fake used to refuse above 4000.
func TestFakeAcceptsACommandWith5000CharactersOfDescriptions(t *testing.T) {
	t.Parallel()
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	s := newSession(t, f)
	if _, err := s.ApplicationCommandBulkOverwrite(f.AppID(), guildID, []*discordgo.ApplicationCommand{bigCommand(1)}); err != nil {
		t.Fatalf("25×(100+100) characters of descriptions: %v", err)
	}
	if got := f.Commands(guildID); len(got) != 1 || len(got[0].Options) != 25 {
		t.Fatalf("registered %+v", got)
	}
	// 25×(100+3×100) = 10,000 is over the limit.
	_, err := s.ApplicationCommandBulkOverwrite(f.AppID(), guildID, []*discordgo.ApplicationCommand{bigCommand(3)})
	if status, code := restCode(err); status != 400 || code != discordtest.CodeInvalidFormBody {
		t.Fatalf("10,000 characters = %v", err)
	}
	var re *discordgo.RESTError
	if !errors.As(err, &re) || !strings.Contains(string(re.ResponseBody), "APPLICATION_COMMAND_TOO_LARGE") {
		t.Fatalf("10,000 characters refused for another reason: %v", err)
	}
	takeRefusals(t, f, 1)
}

// TestFakeChecksBodiesAgainstDiscordsSpec: fields the fake's own rules never
// looked at are checked by Discord's OpenAPI description: a wrong type, an
// unknown enum value, a length only the spec states.
func TestFakeChecksBodiesAgainstDiscordsSpec(t *testing.T) {
	t.Parallel()
	ctx := timeout(t)
	f := discordtest.New(t, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	for _, tc := range []struct {
		name string
		body string
		path []string
	}{
		{"dm_permission is a boolean", `[{"name":"ping","description":"d","dm_permission":"yes"}]`, []string{"0", "dm_permission"}},
		{"localized names are at most 32", `[{"name":"ping","description":"d","name_localizations":{"fr":"` + strings.Repeat("p", 33) + `"}}]`, []string{"0", "name_localizations", "fr"}},
		{"an option type exists", `[{"name":"ping","description":"d","options":[{"type":12,"name":"x","description":"d"}]}]`, []string{"0", "options", "0"}},
		{"min_length is at most 6000", `[{"name":"ping","description":"d","options":[{"type":3,"name":"x","description":"d","min_length":6001}]}]`, []string{"0", "options", "0", "min_length"}},
	} {
		status, ans := rawRequest(t, f, http.MethodPut, guildCommandsPath(f), tc.body, nil)
		if status != http.StatusBadRequest {
			t.Fatalf("%s: answered %d %v", tc.name, status, ans)
		}
		wantFormError(t, status, ans, tc.path...)
	}
	takeRefusals(t, f, 4)

	// An interaction callback: tts is a boolean in Discord's description.
	s := newSession(t, f)
	s.SyncEvents = true
	errs := make(chan error, 1)
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		errs <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "hi", Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: &discordgo.MessageAllowedMentions{Parse: []discordgo.AllowedMentionType{"nobody"}}}})
	})
	openSession(t, f, s)
	in := f.Interact(ctx, discordtest.InteractionSpec{GuildID: guildID, UserID: bobID, Command: "hi"})
	if status, code := restCode(recv(t, ctx, errs, "callback")); status != 400 || code != discordtest.CodeInvalidFormBody {
		t.Fatalf("allowed_mentions.parse [nobody] = %d/%d", status, code)
	}
	if cbs := in.Callbacks(); len(cbs) != 1 || cbs[0].Accepted() {
		t.Fatalf("callbacks %+v", cbs)
	}
	takeRefusals(t, f, 1)
}

// cleanupTB stands in for a test: it keeps the cleanups the fake registers, to run them when the test chooses, and what the fake reports.
type cleanupTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *cleanupTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *cleanupTB) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *cleanupTB) runCleanups() []string {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}

// TestARefusedRequestFailsTheTest: a bot change that sends what Discord
// refuses must fail its test even when the test never looks at the answer.
func TestARefusedRequestFailsTheTest(t *testing.T) {
	t.Parallel()
	rec := &cleanupTB{TB: t}
	f := discordtest.New(rec, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	rawRequest(t, f, http.MethodPut, guildCommandsPath(f), `[{"name":"ping","description":"d","contexts":[9]}]`, nil)
	errs := rec.runCleanups()
	if len(errs) != 1 || !strings.Contains(errs[0], "Discord would refuse") || !strings.Contains(errs[0], "contexts") {
		t.Fatalf("the fake reported %q", errs)
	}

	clean := &cleanupTB{TB: t}
	f = discordtest.New(clean, discordtest.WithSpec(discordSpec), discordtest.WithGuilds(testGuild()))
	rawRequest(t, f, http.MethodPut, guildCommandsPath(f), `[{"name":"ping","description":"d","contexts":[0]}]`, nil)
	if errs := clean.runCleanups(); len(errs) != 0 {
		t.Fatalf("a valid request was reported: %q", errs)
	}
}

// TestMissingSpecFailsOnCI: on CI shared/ is always cloned beside the
// repository, so a missing description is a broken checkout, not a reason to
// check less.
func TestMissingSpecFailsOnCI(t *testing.T) {
	t.Setenv("CI", "true")
	rec := &cleanupTB{TB: t}
	discordtest.New(rec, discordtest.WithSpec(discordtest.NewSpecAt(t.TempDir()+"/openapi.json")))
	if errs := rec.runCleanups(); len(errs) != 1 || !strings.Contains(errs[0], "OpenAPI description is missing") {
		t.Fatalf("the fake reported %q", errs)
	}
	if !discordSpec.Available() {
		t.Fatalf("Discord's OpenAPI description is not at %s", discordSpec.Path())
	}
}
