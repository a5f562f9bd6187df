package config

import (
	"reflect"
	"testing"

	"github.com/clankie/clankie/api"
)

// TestLaneTableMatchesConfig holds the token variables (struct tags, which
// cannot name a constant) to the lane table.
func TestLaneTableMatchesConfig(t *testing.T) {
	var vars []Var
	describe(reflect.TypeOf(Tokens{}), &vars, map[reflect.Type]bool{})
	lanes := api.Lanes()
	if len(vars) != len(lanes) {
		t.Fatalf("config.Tokens declares %d variables, the lane table has %d lanes", len(vars), len(lanes))
	}
	byLane := Tokens{
		OperatorToken:    OperatorToken{Operator: "o"},
		TextBridgeToken:  TextBridgeToken{TextBridge: "t"},
		VoiceBridgeToken: VoiceBridgeToken{VoiceBridge: "v"},
		GameplayToken:    GameplayToken{Gameplay: "g"},
	}.ByLane()
	declared := map[string]bool{}
	for _, v := range vars {
		declared[v.Name] = v.Secret
	}
	for _, l := range lanes {
		if secret, ok := declared[l.TokenVar]; !ok || !secret {
			t.Errorf("lane %s: config declares no secret %s", l.Lane, l.TokenVar)
		}
		if byLane[l.Lane] == "" {
			t.Errorf("lane %s: config.Tokens.ByLane has no token for it", l.Lane)
		}
		if !l.Lane.Valid() || l.Surface == "" || l.Credential == "" {
			t.Errorf("lane %s: incomplete row %+v", l.Lane, l)
		}
	}
}
