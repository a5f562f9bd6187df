package commands

import (
	"context"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/voice/voiceapi"
)

// TestEverySubcommandIsRouted: the router routes by path; a subcommand
// registered with Discord but missing from Handlers would only ever answer
// the stale sentence.
func TestEverySubcommandIsRouted(t *testing.T) {
	for _, c := range []interaction.Command{PersonMemory(&fakeMemory{}, Policy{}, fixedNow, testCatalog(t)), Voice(noVoice{}, VoicePolicy{}, testCatalog(t))} {
		var declared []string
		for _, o := range c.Definition.Options {
			if o.Type == discordgo.ApplicationCommandOptionSubCommand {
				declared = append(declared, o.Name)
			}
		}
		var routed []string
		for sub := range c.Handlers {
			routed = append(routed, sub)
		}
		slices.Sort(declared)
		slices.Sort(routed)
		if !slices.Equal(declared, routed) {
			t.Errorf("/%s declares %v and routes %v", c.Definition.Name, declared, routed)
		}
		for sub := range c.Autocomplete {
			if !slices.Contains(declared, sub) {
				t.Errorf("/%s suggests for an undeclared subcommand %q", c.Definition.Name, sub)
			}
		}
	}
}

type noVoice struct{}

func (noVoice) Join(context.Context, string, string, string, string) (string, error) {
	return "", voiceapi.ErrNotInVoice
}
func (noVoice) Leave(context.Context, string) error                                  { return voiceapi.ErrNoSession }
func (noVoice) ConsentInSession(context.Context, string, string, string, bool) error { return nil }

func (noVoice) Consent(context.Context, string, string, bool) error { return voiceapi.ErrNoSession }
func (noVoice) Status(string) (voiceapi.Status, bool)               { return voiceapi.Status{}, false }

// TestCommandsDoNotImportTheTransportOrTheClient: handlers see package
// interaction only; the discordgo transport (bot) is the router's, so a
// command is tested without it. Memory is reached through PeopleMemory and
// its errors through memoryFailure, in api terms: the client is not
// imported either.
func TestCommandsDoNotImportTheTransportOrTheClient(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/clankie/clankie/bot" || path == "github.com/clankie/clankie/memoryclient" ||
				path == "github.com/clankie/clankie/voice" {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

// TestCommandsDependOnNoVoiceMachinery: /voice reads the voice sessions
// through voice/voiceapi (its errors and status) alone, so the command
// package does not drag in the memory client, opus, DAVE, the media
// connection or the realtime client. Of ours it reaches only what it names
// (lang, the message catalog, is a leaf).
func TestCommandsDependOnNoVoiceMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/clankie/clankie/api": true, "github.com/clankie/clankie/config": true,
		"github.com/clankie/clankie/interaction": true, "github.com/clankie/clankie/voice/voiceapi": true,
		"github.com/clankie/clankie/commands": true, "github.com/clankie/clankie/lang": true,
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/clankie/clankie/") && !allowed[dep] {
			t.Errorf("commands depends on %s", dep)
		}
		for _, heavy := range []string{"tetratelabs/wazero", "mls-go", "pion/opus", "go-resty"} {
			if strings.Contains(dep, heavy) {
				t.Errorf("commands depends on %s", dep)
			}
		}
	}
}
