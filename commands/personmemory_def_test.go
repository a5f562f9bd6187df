package commands

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"
)

func TestPersonMemoryDefinitionIsDeterministic(t *testing.T) {
	a, err := json.Marshal(PersonMemory(&fakeMemory{}, Policy{}, nil, testCatalog(t)).Definition)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(PersonMemory(&fakeMemory{}, Policy{MemoryRoleIDs: []string{"1"}}, fixedNow, testCatalog(t)).Definition)
	if !bytes.Equal(a, b) {
		t.Fatalf("two builds differ:\n%s\n%s", a, b)
	}
}

func TestPersonMemoryDefinitionFitsDiscord(t *testing.T) {
	def := personMemoryDefinition(testCatalog(t))
	name := regexp.MustCompile(`^[a-z0-9_-]{1,32}$`)
	checkText := func(what, n, desc string) {
		t.Helper()
		if !name.MatchString(n) {
			t.Errorf("%s name %q is not a valid command name", what, n)
		}
		if l := utf8.RuneCountInString(desc); l < 1 || l > 100 {
			t.Errorf("%s %q description has %d characters", what, n, l)
		}
	}
	checkText("command", def.Name, def.Description)
	if def.Name != "person-memory" {
		t.Fatalf("name %q", def.Name)
	}
	if def.Contexts == nil || len(*def.Contexts) != 1 || (*def.Contexts)[0] != discordgo.InteractionContextGuild {
		t.Fatalf("contexts %v; want guild only", def.Contexts)
	}
	subs := map[string]*discordgo.ApplicationCommandOption{}
	for _, sub := range def.Options {
		checkText("subcommand", sub.Name, sub.Description)
		if sub.Type != discordgo.ApplicationCommandOptionSubCommand {
			t.Errorf("%s is not a subcommand", sub.Name)
		}
		subs[sub.Name] = sub
		optional := false
		for _, o := range sub.Options {
			checkText(sub.Name+" option", o.Name, o.Description)
			for _, c := range o.Choices {
				if l := utf8.RuneCountInString(c.Name); l < 1 || l > 100 {
					t.Errorf("choice %q", c.Name)
				}
			}
			if o.Required && optional {
				t.Errorf("%s: required option %s follows an optional one", sub.Name, o.Name)
			}
			optional = optional || !o.Required
			if o.Autocomplete && len(o.Choices) > 0 {
				t.Errorf("%s %s has both choices and autocomplete", sub.Name, o.Name)
			}
		}
	}
	for _, want := range []string{subPropose, subRecall, subMine, subForget} {
		if subs[want] == nil {
			t.Fatalf("no subcommand %s", want)
		}
	}
	opt := func(sub, name string) *discordgo.ApplicationCommandOption {
		for _, o := range subs[sub].Options {
			if o.Name == name {
				return o
			}
		}
		t.Fatalf("%s has no option %s", sub, name)
		return nil
	}
	if o := opt(subPropose, optPerson); o.Type != discordgo.ApplicationCommandOptionUser || !o.Required {
		t.Error("propose person must be a required user")
	}
	if o := opt(subPropose, optFact); !o.Required || o.MinLength == nil || *o.MinLength != 1 || o.MaxLength != 2048 {
		t.Error("propose fact must be required, 1–2048 characters")
	}
	for name, n := range map[string]int{optKind: 3, optVisibility: 2, optConfidence: 3} {
		if o := opt(subPropose, name); len(o.Choices) != n || o.Required {
			t.Errorf("propose %s: %d choices", name, len(o.Choices))
		}
	}
	if o := opt(subPropose, optExpires); o.Required || o.MaxLength != maxExpiresText {
		t.Error("propose expires must be an optional short string")
	}
	if o := opt(subPropose, optSupersedes); !o.Autocomplete || o.Required {
		t.Error("propose supersedes must be an optional autocomplete")
	}
	if o := opt(subRecall, optPerson); o.Required || o.Type != discordgo.ApplicationCommandOptionUser {
		t.Error("recall person must be an optional user")
	}
	if o := opt(subRecall, optQuery); o.Required || o.MaxLength != 200 {
		t.Error("recall query must be optional, at most 200 characters")
	}
	if len(subs[subMine].Options) != 0 {
		t.Error("mine takes no options")
	}
	if o := opt(subForget, optFact); !o.Required || !o.Autocomplete {
		t.Error("forget fact must be a required autocomplete")
	}
	if o := opt(subForget, optPerson); o.Required {
		t.Error("forget person must be optional")
	}
}
