package config

import (
	"strings"
	"testing"
)

func validVoice() VoiceBridge {
	return VoiceBridge{
		DiscordToken: "discord-token", ConsentPolicy: ConsentExplicit,
		RealtimeURL: "wss://api.openai.com/v1/realtime", RealtimeAPIKey: "sk-secret-key-never-echoed",
		RealtimeAuth: RealtimeAuthBearer, RealtimeModel: "gpt-realtime", RealtimeTurns: RealtimeServerVAD,
		Memory:  MemoryClient{URL: "http://127.0.0.1:4310", Dir: "/tmp/clankie-memory"},
		Discord: Discord{APIURL: "https://discord.com/api/v10"},
		Log:     Log{Level: "info", Format: "json"},
	}
}

// Each realtime setting is checked at start, and a wrong one is named
// without echoing the key.
func TestRealtimeSettingsAreValidatedByName(t *testing.T) {
	if err := validVoice().Validate(); err != nil {
		t.Fatalf("valid settings refused: %v", err)
	}
	azure := validVoice()
	azure.RealtimeURL, azure.RealtimeAuth, azure.RealtimeModel = "wss://res.openai.azure.com/openai/v1/realtime", RealtimeAuthAPIKey, "my-deployment_1"
	azure.RealtimeTurns, azure.RealtimeVoice = RealtimeSemVAD, "marin"
	if err := azure.Validate(); err != nil {
		t.Fatalf("Azure settings refused: %v", err)
	}
	for _, tc := range []struct {
		name, variable string
		edit           func(*VoiceBridge)
	}{
		{"auth", "CLANKIE_REALTIME_AUTH", func(v *VoiceBridge) { v.RealtimeAuth = "basic" }},
		{"turn detection", "CLANKIE_REALTIME_TURN_DETECTION", func(v *VoiceBridge) { v.RealtimeTurns = "push" }},
		{"model", "CLANKIE_REALTIME_MODEL", func(v *VoiceBridge) { v.RealtimeModel = "gpt realtime?x=1" }},
		{"empty model", "CLANKIE_REALTIME_MODEL", func(v *VoiceBridge) { v.RealtimeModel = "" }},
		{"voice", "CLANKIE_REALTIME_VOICE", func(v *VoiceBridge) { v.RealtimeVoice = "a voice" }},
	} {
		v := validVoice()
		tc.edit(&v)
		err := v.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.variable) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.variable)
		} else if strings.Contains(err.Error(), v.RealtimeAPIKey) {
			t.Errorf("%s: the error echoes the key", tc.name)
		}
	}
}
