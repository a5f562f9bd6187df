package lang

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
	"github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

// pluralForms are the CLDR plural forms each language's plural messages
// must give ("many", which CLDR adds for fr, es and pt at a million and
// more, falls back to "other").
var pluralForms = map[string][]string{
	"en":    {"one", "other"},
	"de":    {"one", "other"},
	"fr":    {"one", "other"},
	"es-ES": {"one", "other"},
	"pt-BR": {"one", "other"},
	"ja":    {"other"},
}

// rawFiles reads every embedded message file as written: key → a string,
// or a plural message's forms.
func rawFiles(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	entries, err := fs.ReadDir(messageFiles, "messages")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(messageFiles, path.Join("messages", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[strings.TrimSuffix(e.Name(), ".json")] = m
	}
	return out
}

// forms returns a message's forms by name ("other" for a plain string).
func forms(v any) map[string]string {
	switch x := v.(type) {
	case string:
		return map[string]string{"other": x}
	case map[string]any:
		out := map[string]string{}
		for k, s := range x {
			if str, ok := s.(string); ok {
				out[k] = str
			}
		}
		return out
	}
	return nil
}

var fieldRE = regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)

// fields are the template fields a message's forms use, together.
func fields(fs map[string]string) []string {
	set := map[string]bool{}
	for _, s := range fs {
		for _, m := range fieldRE.FindAllStringSubmatch(s, -1) {
			set[m[1]] = true
		}
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

var tagRE = regexp.MustCompile(`<[@#]\{\{\s*\.\w+\s*\}\}>|<t:\{\{\s*\.\w+\s*\}\}:R>`)

// markdown is what of a sentence's formatting must survive translation:
// bold markers, code spans, mention and timestamp tags, line breaks.
func markdown(s string) string {
	tags := tagRE.FindAllString(s, -1)
	sort.Strings(tags)
	return fmt.Sprintf("** ×%d, ` ×%d, lines %d, tags %v", strings.Count(s, "**"), strings.Count(s, "`"), strings.Count(s, "\n"), tags)
}

// catalogProblems lists everything wrong with a set of message files:
// a key missing in a language (or extra), a plural form missing, a
// plural message written as a string (or the reverse), placeholders or
// markdown that differ from the English.
func catalogProblems(files map[string]map[string]any) []string {
	var out []string
	en := files["en"]
	if en == nil {
		return []string{"no en file"}
	}
	langs := make([]string, 0, len(files))
	for l := range files {
		langs = append(langs, l)
	}
	sort.Strings(langs)
	for _, l := range langs {
		if _, ok := pluralForms[l]; !ok {
			out = append(out, fmt.Sprintf("%s: a language the test has no plural forms for", l))
		}
		for key := range files[l] {
			if _, ok := en[key]; !ok {
				out = append(out, fmt.Sprintf("%s: %s is not an English message", l, key))
			}
		}
	}
	keys := make([]string, 0, len(en))
	for k := range en {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		_, plural := en[key].(map[string]any)
		want := forms(en[key])
		for _, l := range langs {
			v, ok := files[l][key]
			if !ok {
				out = append(out, fmt.Sprintf("%s: %s is missing", l, key))
				continue
			}
			if _, p := v.(map[string]any); p != plural {
				out = append(out, fmt.Sprintf("%s: %s is plural in one language and not in the other", l, key))
				continue
			}
			got := forms(v)
			if plural {
				for _, f := range pluralForms[l] {
					if got[f] == "" {
						out = append(out, fmt.Sprintf("%s: %s lacks the plural form %q", l, key, f))
					}
				}
			}
			if a, b := fields(want), fields(got); !slices.Equal(a, b) {
				out = append(out, fmt.Sprintf("%s: %s has placeholders %v, English %v", l, key, b, a))
			}
			for f, s := range got {
				if markdown(s) != markdown(want["other"]) {
					out = append(out, fmt.Sprintf("%s: %s (%s) has %s, English %s", l, key, f, markdown(s), markdown(want["other"])))
				}
			}
		}
	}
	return out
}

// Every language has every message, with the plural forms its language
// needs, the English placeholders and the English markdown.
func TestCatalogIsComplete(t *testing.T) {
	files := rawFiles(t)
	if len(files) != 1+len(Locales()) {
		t.Errorf("%d message files, want English and %d others", len(files), len(Locales()))
	}
	for _, l := range Locales() {
		if files[string(l)] == nil {
			t.Errorf("no message file for %s", l)
		}
	}
	for _, p := range catalogProblems(files) {
		t.Error(p)
	}
}

// The check above finds each kind of mistake it promises to.
func TestCatalogProblemsAreFound(t *testing.T) {
	base := func() map[string]map[string]any {
		return map[string]map[string]any{
			"en": {"A": "Hi {{.Who}}, see `/x` and <#{{.Channel}}>.", "N": map[string]any{"one": "{{.Count}} fact", "other": "{{.Count}} facts"}},
			"de": {"A": "Hallo {{.Who}}, siehe `/x` und <#{{.Channel}}>.", "N": map[string]any{"one": "{{.Count}} Fakt", "other": "{{.Count}} Fakten"}},
			"ja": {"A": "{{.Who}}さん、`/x` と<#{{.Channel}}>を見てください。", "N": map[string]any{"other": "{{.Count}}件"}},
		}
	}
	if p := catalogProblems(base()); len(p) != 0 {
		t.Fatalf("a good catalog has problems: %v", p)
	}
	cases := []struct {
		name  string
		spoil func(map[string]map[string]any)
		want  string
	}{
		{"a key lacks a locale", func(f map[string]map[string]any) { delete(f["de"], "A") }, "de: A is missing"},
		{"a key only a translation has", func(f map[string]map[string]any) { f["ja"]["B"] = "x" }, "ja: B is not an English message"},
		{"a placeholder renamed", func(f map[string]map[string]any) { f["de"]["A"] = "Hallo {{.Wer}}, siehe `/x` und <#{{.Channel}}>." }, "de: A has placeholders"},
		{"a placeholder dropped", func(f map[string]map[string]any) { f["ja"]["A"] = "`/x` と<#{{.Channel}}>を見てください。" }, "ja: A has placeholders"},
		{"a code span lost", func(f map[string]map[string]any) { f["de"]["A"] = "Hallo {{.Who}}, siehe /x und <#{{.Channel}}>." }, "de: A (other) has"},
		{"a channel tag turned into text", func(f map[string]map[string]any) { f["de"]["A"] = "Hallo {{.Who}}, siehe `/x` und #{{.Channel}}." }, "de: A (other) has"},
		{"bold added", func(f map[string]map[string]any) {
			f["de"]["A"] = "**Hallo** {{.Who}}, siehe `/x` und <#{{.Channel}}>."
		}, "de: A (other) has"},
		{"a plural form missing", func(f map[string]map[string]any) { f["de"]["N"] = map[string]any{"other": "{{.Count}} Fakten"} }, `de: N lacks the plural form "one"`},
		{"a plural written as a string", func(f map[string]map[string]any) { f["ja"]["N"] = "{{.Count}}件" }, "ja: N is plural in one language"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base()
			c.spoil(f)
			p := catalogProblems(f)
			if !slices.ContainsFunc(p, func(s string) bool { return strings.HasPrefix(s, c.want) }) {
				t.Errorf("problems %q, want one starting %q", p, c.want)
			}
		})
	}
}

// ids.go declares exactly the English sentences' keys, each constant
// spelled as its key, so a message is never used without English and
// never left unused by a renamed constant.
func TestIDsAreTheEnglishKeys(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "ids.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			lit, ok := vs.Values[i].(*ast.BasicLit)
			if !ok {
				t.Errorf("%s: not a string literal", name.Name)
				continue
			}
			v, _ := strconv.Unquote(lit.Value)
			if v != name.Name {
				t.Errorf("%s = %q: spell the key as the constant", name.Name, v)
			}
			declared[v] = true
		}
		return false
	})
	en := rawFiles(t)["en"]
	for key := range en {
		if !strings.HasPrefix(key, "cmd.") && !strings.HasPrefix(key, "menu.") && !declared[key] {
			t.Errorf("en.json has %s, which ids.go does not declare", key)
		}
	}
	for key := range declared {
		if _, ok := en[key]; !ok {
			t.Errorf("ids.go declares %s, which en.json lacks", key)
		}
	}
}

// chatName is Discord's rule for a slash command's, a subcommand's and an
// option's name in every locale (lowercase where the script has case).
var chatName = regexp.MustCompile(`^[-_'\p{L}\p{N}\p{Devanagari}\p{Thai}]{1,32}$`)

// The slash commands' keys hold what Discord accepts: names it takes as
// command and option names, descriptions and choice names of 1–100
// characters.
func TestCommandKeysFollowDiscordsRules(t *testing.T) {
	for l, msgs := range rawFiles(t) {
		for key, v := range msgs {
			s, _ := v.(string)
			switch {
			case strings.HasPrefix(key, "menu."): // a context menu's name
				if n := utf8.RuneCountInString(s); n < 1 || n > 32 {
					t.Errorf("%s: %s has %d characters; Discord takes 1–32", l, key, n)
				}
			case !strings.HasPrefix(key, "cmd."):
			case strings.HasSuffix(key, ".name"):
				if !chatName.MatchString(s) || strings.ToLower(s) != s {
					t.Errorf("%s: %s = %q is not a name Discord accepts", l, key, s)
				}
			default: // a description or a choice's name
				if n := utf8.RuneCountInString(s); n < 1 || n > 100 {
					t.Errorf("%s: %s has %d characters; Discord takes 1–100", l, key, n)
				}
			}
		}
	}
}

// A Discord locale picks its language; one the catalog does not translate
// (English variants, Chinese, Korean, none, nonsense) is English.
func TestPrinterFallsBackToEnglish(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for locale, want := range map[string]string{
		"de": "Erledigt.", "fr": "C’est fait.", "es-ES": "Hecho.", "pt-BR": "Pronto.", "ja": "完了しました。",
		"es-419": "Hecho.", "en-US": "Done.", "en-GB": "Done.", "zh-CN": "Done.", "ko": "Done.", "": "Done.", "no such locale!": "Done.",
	} {
		if got := c.Printer(locale).Say(Done, nil); got != want {
			t.Errorf("%q: %q, want %q", locale, got, want)
		}
	}
	if got := c.Printer("de").Count(VoiceStatusConsented, 2, nil); got != "2 Sprecher haben eingewilligt." {
		t.Errorf("German plural: %q", got)
	}
	if got := c.Printer("ja").Render(Msg{ID: VoiceJoinFailed, Args: Args{"Channel": "42", "Why": Msg{ID: EndedEmpty}}}); got != "<#42>に参加できませんでした：チャンネルに誰もいなくなりました。" {
		t.Errorf("nested message: %q", got)
	}
}

// Command fills every description and localization from the catalog, in
// the five locales.
func TestCommandLocalizesEveryLevel(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	def := c.Command(&discordgo.ApplicationCommand{Name: "voice", Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "consent", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "action", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "x", Value: "opt-in"}}},
		}},
	}})
	if def.Description != "Clankie in a voice channel: join, leave, consent and status" || (*def.NameLocalizations)[discordgo.German] != "sprachkanal" {
		t.Errorf("command: %q %v", def.Description, *def.NameLocalizations)
	}
	action := def.Options[0].Options[0]
	if action.Description != "opt-in or opt-out" || action.NameLocalizations[discordgo.Japanese] != "操作" || len(action.DescriptionLocalizations) != 5 {
		t.Errorf("option: %q %v %v", action.Description, action.NameLocalizations, action.DescriptionLocalizations)
	}
	if ch := action.Choices[0]; ch.Name != "opt-in" || ch.NameLocalizations[discordgo.PortugueseBR] != "aceitar" {
		t.Errorf("choice: %q %v", ch.Name, ch.NameLocalizations)
	}
}

// A context-menu command gets its name's localizations only (Discord
// refuses a description on one), and a command without keys gets no
// description and no localizations rather than its keys as words.
func TestCommandOfAContextMenuAndWithoutKeys(t *testing.T) {
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	menu := c.Command(&discordgo.ApplicationCommand{Name: "Keep this", Type: discordgo.MessageApplicationCommand})
	if menu.Description != "" || menu.DescriptionLocalizations != nil || menu.NameLocalizations != nil {
		t.Fatalf("context menu without keys: %q %v %v", menu.Description, menu.DescriptionLocalizations, menu.NameLocalizations)
	}
	if err := c.bundle.AddMessages(language.German, &i18n.Message{ID: "menu.Keep this", Other: "Das behalten"}); err != nil {
		t.Fatal(err)
	}
	menu = c.Command(&discordgo.ApplicationCommand{Name: "Keep this", Type: discordgo.MessageApplicationCommand})
	if menu.Description != "" || menu.NameLocalizations == nil || (*menu.NameLocalizations)[discordgo.German] != "Das behalten" {
		t.Fatalf("context menu: %q %v", menu.Description, menu.NameLocalizations)
	}
	none := c.Command(&discordgo.ApplicationCommand{Name: "no-such-command", Options: []*discordgo.ApplicationCommandOption{
		{Type: discordgo.ApplicationCommandOptionString, Name: "x", Choices: []*discordgo.ApplicationCommandOptionChoice{{Name: "y", Value: "y"}}}}})
	o := none.Options[0]
	if none.Description != "" || none.NameLocalizations != nil || o.Description != "" || o.NameLocalizations != nil || o.Choices[0].Name != "y" || o.Choices[0].NameLocalizations != nil {
		t.Fatalf("no keys: %+v %+v", none, o)
	}
}
