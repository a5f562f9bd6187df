package api_test

import (
	"testing"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
)

// TestLaneTableMatchesConfig holds config's token variables (struct tags,
// which cannot name a constant) to the lane table.
func TestLaneTableMatchesConfig(t *testing.T) {
	vars := config.Describe(config.Tokens{})
	lanes := api.Lanes()
	if len(vars) != len(lanes) {
		t.Fatalf("config.Tokens declares %d variables, the lane table has %d lanes", len(vars), len(lanes))
	}
	byLane := config.Tokens{Operator: "o", TextBridge: "t", VoiceBridge: "v", Gameplay: "g"}.ByLane()
	declared := map[string]bool{}
	for _, v := range vars {
		declared[v.Name] = true
	}
	for _, l := range lanes {
		if !declared[l.TokenVar] {
			t.Errorf("lane %s: config declares no %s", l.Lane, l.TokenVar)
		}
		if byLane[l.Lane] == "" {
			t.Errorf("lane %s: config.Tokens.ByLane has no token for it", l.Lane)
		}
		if !l.Lane.Valid() || l.Surface == "" || l.Credential == "" {
			t.Errorf("lane %s: incomplete row %+v", l.Lane, l)
		}
	}
}

func TestValidKind(t *testing.T) {
	for _, k := range api.Kinds() {
		if !api.ValidKind(k) {
			t.Errorf("ValidKind(%q) = false", k)
		}
	}
	for _, k := range []string{"", "fact", "Person-Fact"} {
		if api.ValidKind(k) {
			t.Errorf("ValidKind(%q) = true", k)
		}
	}
}
