package commands

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/memoryclient"
)

func complete(t *testing.T, mem *fakeMemory, inv interaction.Invocation) ([]interaction.Choice, error) {
	t.Helper()
	suggest, ok := PersonMemory(mem, Policy{}, fixedNow, testCatalog(t)).Autocomplete[inv.Subcommand]
	if !ok {
		return nil, nil // the router gives no choices
	}
	return suggest(context.Background(), inv)
}

// manyFacts are n facts about subject, alternately proposed by the invoker
// and by someone else, with long multi-line bodies.
func manyFacts(n int, subject string) []api.Fact {
	out := make([]api.Fact, 0, n)
	for i := range n {
		proposer := testInvoker
		if i%2 == 1 {
			proposer = "someone-else"
		}
		out = append(out, fact(fmt.Sprintf("f%07d", i), subject, proposer,
			fmt.Sprintf("fact %d line one\n%s", i, strings.Repeat("é long text ", 300))))
	}
	return out
}

func TestAutocompleteSupersedes(t *testing.T) {
	tests := []struct {
		name     string
		opts     map[string]any
		facts    []api.Fact
		wantUser string
		wantIDs  []string // nil: only check bounds
		wantN    int
	}{
		{"about yourself, nothing typed", map[string]any{optSupersedes: ""}, manyFacts(40, testInvoker), testInvoker, nil, 25},
		{"id prefix", map[string]any{optSupersedes: "F000001"}, manyFacts(40, testInvoker), testInvoker, nil, 10},
		{"words, any order, any case", map[string]any{optSupersedes: "LINE 3 fact"}, manyFacts(40, testInvoker), testInvoker,
			[]string{"f0000003", "f0000013", "f0000023", "f0000030", "f0000031", "f0000032", "f0000033", "f0000034", "f0000035", "f0000036", "f0000037", "f0000038", "f0000039"}, 13},
		{"nothing matches", map[string]any{optSupersedes: "zebra"}, manyFacts(40, testInvoker), testInvoker, nil, 0},
		{"about someone else: only what you proposed", map[string]any{optSupersedes: "", optPerson: interaction.User{ID: testOther}},
			manyFacts(6, testOther), testOther, []string{"f0000000", "f0000002", "f0000004"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{recallResp: api.RecallResponse{Facts: tt.facts, Total: len(tt.facts)}}
			inv := invocation(subPropose, tt.opts)
			inv.Focused = optSupersedes
			got, err := complete(t, mem, inv)
			if err != nil {
				t.Fatal(err)
			}
			want := recallCall{testGuild, tt.wantUser, api.RecallQuery{ChannelID: testChannel, Limit: api.MaxFactsPerPerson}}
			if len(mem.recalls) != 1 || mem.recalls[0] != want {
				t.Fatalf("recall calls %+v; want %+v", mem.recalls, want)
			}
			checkChoices(t, got, tt.wantN, tt.wantIDs)
		})
	}
}

func TestAutocompleteForget(t *testing.T) {
	t.Run("yourself: every fact about you in this server", func(t *testing.T) {
		mem := &fakeMemory{mineResp: api.RecallResponse{Facts: manyFacts(30, testInvoker), Total: 30}}
		inv := invocation(subForget, map[string]any{optFact: ""})
		inv.Focused = optFact
		got, err := complete(t, mem, inv)
		if err != nil {
			t.Fatal(err)
		}
		if len(mem.mines) != 1 || mem.mines[0] != (mineCall{testGuild, testInvoker, testInvoker}) || len(mem.recalls) != 0 {
			t.Fatalf("calls: mine %+v recall %+v", mem.mines, mem.recalls)
		}
		checkChoices(t, got, 25, nil)
	})
	t.Run("someone else: what you proposed, visible here", func(t *testing.T) {
		mem := &fakeMemory{recallResp: api.RecallResponse{Facts: manyFacts(5, testOther), Total: 5}}
		inv := invocation(subForget, map[string]any{optFact: "f", optPerson: interaction.User{ID: testOther}})
		inv.Focused = optFact
		got, err := complete(t, mem, inv)
		if err != nil {
			t.Fatal(err)
		}
		if len(mem.recalls) != 1 || mem.recalls[0].UserID != testOther || mem.recalls[0].Query.ChannelID != testChannel || len(mem.mines) != 0 {
			t.Fatalf("calls: mine %+v recall %+v", mem.mines, mem.recalls)
		}
		checkChoices(t, got, 3, []string{"f0000000", "f0000002", "f0000004"})
	})
}

func TestAutocompleteAnswersNothing(t *testing.T) {
	unfocused := invocation(subPropose, map[string]any{optFact: "x"})
	unfocused.Focused = optFact
	dm := invocation(subForget, nil)
	dm.GuildID, dm.Focused = "", optFact
	failing := invocation(subForget, nil)
	failing.Focused = optFact
	tests := []struct {
		name    string
		inv     interaction.Invocation
		mem     *fakeMemory
		wantErr bool
	}{
		{"an option without suggestions", unfocused, &fakeMemory{}, false},
		{"outside a server", dm, &fakeMemory{}, false},
		{"memory out of reach", failing, &fakeMemory{mineErr: memErr(memoryclient.KindUnavailable, "x")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := complete(t, tt.mem, tt.inv)
			if len(got) != 0 || (err != nil) != tt.wantErr {
				t.Fatalf("choices %v err %v", got, err)
			}
		})
	}
}

func checkChoices(t *testing.T, got []interaction.Choice, wantN int, wantIDs []string) {
	t.Helper()
	if len(got) != wantN || len(got) > 25 {
		t.Fatalf("%d choices; want %d", len(got), wantN)
	}
	for i, c := range got {
		if n := utf8.RuneCountInString(c.Name); n > 100 {
			t.Errorf("choice name has %d characters: %q", n, c.Name)
		}
		if !strings.HasPrefix(c.Name, c.Value+" · ") || strings.Contains(c.Name, "\n") {
			t.Errorf("choice name %q does not start with its id %q on one line", c.Name, c.Value)
		}
		if wantIDs != nil && c.Value != wantIDs[i] {
			t.Errorf("choice %d is %q; want %q", i, c.Value, wantIDs[i])
		}
	}
}
