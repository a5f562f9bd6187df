package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func validVoice() VoiceBridge {
	return VoiceBridge{
		DiscordToken: "discord-token", ConsentPolicy: ConsentExplicit,
		RealtimeURL: "wss://api.openai.com/v1/realtime", RealtimeAPIKey: "sk-secret-key-never-echoed",
		RealtimeAuth: RealtimeAuthBearer, RealtimeModel: "gpt-realtime", RealtimeTranscribe: "gpt-4o-mini-transcribe",
		Memory:        MemoryClient{URL: "http://127.0.0.1:4310", MemoryRoot: MemoryRoot{Dir: "/tmp/clankie-memory"}},
		Discord:       Discord{APIURL: "https://discord.com/api/v10"},
		Log:           Log{Level: "info", Format: "json"},
		VoiceSessions: VoiceSessions{JoinTimeout: 10 * time.Second, IdleLeave: 2 * time.Minute, MaxSession: 2 * time.Hour},
		VoiceGroup:    VoiceGroup{Names: []string{"clankie"}, Followup: 8 * time.Second, UtteranceSilence: 600 * time.Millisecond},
	}
}

// Each voice session bound is checked at start and named; the defaults
// parse, and an empty budget is no limit.
func TestVoiceSessionBoundsAreValidatedByName(t *testing.T) {
	t.Setenv("DISCORD_VOICE_BOT_TOKEN", "discord-token")
	t.Setenv("CLANKIE_VOICE_BRIDGE_TOKEN", "voice-bridge-token-0123456789abcdef")
	v, err := parse[VoiceBridge]()
	if err != nil {
		t.Fatal(err)
	}
	if got := v.VoiceSessions; got != (VoiceSessions{JoinTimeout: 10 * time.Second, IdleLeave: 2 * time.Minute, MaxSession: 2 * time.Hour}) {
		t.Fatalf("defaults %+v", got)
	}
	t.Setenv("CLANKIE_VOICE_DAILY_BUDGET", "1h30m")
	if v, err = parse[VoiceBridge](); err != nil || v.DailyBudget != 90*time.Minute {
		t.Fatalf("budget %v %v", v.DailyBudget, err)
	}
	t.Setenv("CLANKIE_VOICE_IDLE_LEAVE", "two minutes")
	if _, err := parse[VoiceBridge](); err == nil || !strings.Contains(err.Error(), "CLANKIE_VOICE_IDLE_LEAVE") {
		t.Fatalf("an unparsable duration: %v", err)
	}
	for _, tc := range []struct {
		variable string
		edit     func(*VoiceSessions)
	}{
		{"CLANKIE_VOICE_JOIN_TIMEOUT", func(v *VoiceSessions) { v.JoinTimeout = 0 }},
		{"CLANKIE_VOICE_JOIN_TIMEOUT", func(v *VoiceSessions) { v.JoinTimeout = time.Hour }},
		{"CLANKIE_VOICE_IDLE_LEAVE", func(v *VoiceSessions) { v.IdleLeave = -time.Second }},
		{"CLANKIE_VOICE_MAX_SESSION", func(v *VoiceSessions) { v.MaxSession = 30 * time.Second }},
		{"CLANKIE_VOICE_DAILY_BUDGET", func(v *VoiceSessions) { v.DailyBudget = -time.Minute }},
		{"CLANKIE_VOICE_DAILY_BUDGET", func(v *VoiceSessions) { v.DailyBudget = 25 * time.Hour }},
	} {
		v := validVoice()
		tc.edit(&v.VoiceSessions)
		if err := v.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.variable) {
			t.Errorf("%s: %v", tc.variable, err)
		}
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
	azure.RealtimeVoice = "marin"
	if err := azure.Validate(); err != nil {
		t.Fatalf("Azure settings refused: %v", err)
	}
	for _, tc := range []struct {
		name, variable string
		edit           func(*VoiceBridge)
	}{
		{"auth", "CLANKIE_REALTIME_AUTH", func(v *VoiceBridge) { v.RealtimeAuth = "basic" }},
		{"transcription model", "CLANKIE_REALTIME_TRANSCRIBE_MODEL", func(v *VoiceBridge) { v.RealtimeTranscribe = "a model" }},
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

func TestShardSettings(t *testing.T) {
	for _, tc := range []struct {
		count, ids string
		want       ShardPlan
		variable   string // the variable the error names; "" for no error
	}{
		{"auto", "", ShardPlan{}, ""},
		{"", "", ShardPlan{}, ""},
		{"8", "", ShardPlan{Count: 8}, ""},
		{"8", "0-3", ShardPlan{Count: 8, IDs: []int{0, 1, 2, 3}}, ""},
		{"8", "4,5", ShardPlan{Count: 8, IDs: []int{4, 5}}, ""},
		{"auto", "6, 0-1", ShardPlan{IDs: []int{0, 1, 6}}, ""},
		{"0", "", ShardPlan{}, "DISCORD_SHARD_COUNT"},
		{"many", "", ShardPlan{}, "DISCORD_SHARD_COUNT"},
		{"4", "3-5", ShardPlan{}, "DISCORD_SHARD_IDS"},
		{"auto", "3-1", ShardPlan{}, "DISCORD_SHARD_IDS"},
		{"auto", "1,1", ShardPlan{}, "DISCORD_SHARD_IDS"},
		{"auto", "a", ShardPlan{}, "DISCORD_SHARD_IDS"},
		{"auto", "-1", ShardPlan{}, "DISCORD_SHARD_IDS"},
		{"auto", "0,,1", ShardPlan{}, "DISCORD_SHARD_IDS"},
	} {
		d := Discord{APIURL: "https://discord.com/api/v10", ShardCount: tc.count, ShardIDs: tc.ids}
		got, err := d.Shards()
		verr := d.Validate()
		if tc.variable == "" {
			if err != nil || verr != nil || got.Count != tc.want.Count || fmt.Sprint(got.IDs) != fmt.Sprint(tc.want.IDs) {
				t.Errorf("%q/%q: %+v, %v, %v; want %+v", tc.count, tc.ids, got, err, verr, tc.want)
			}
			continue
		}
		if err == nil || verr == nil || !strings.Contains(err.Error(), tc.variable) || !strings.Contains(verr.Error(), tc.variable) {
			t.Errorf("%q/%q: %v, want an error naming %s", tc.count, tc.ids, err, tc.variable)
		}
	}
}

func TestInteractionsSettings(t *testing.T) {
	key := strings.Repeat("ab", 32)
	base := func() TextBridge {
		return TextBridge{DiscordToken: "t", Memory: MemoryClient{URL: "http://127.0.0.1:4310", MemoryRoot: MemoryRoot{Dir: "/tmp/m"}},
			Discord: Discord{APIURL: "https://discord.com/api/v10"}, Log: Log{Level: "info", Format: "json"}}
	}
	for _, tc := range []struct {
		addr, key, variable string
	}{
		{"", "", ""},
		{":8080", key, ""},
		{"127.0.0.1:8080", strings.ToUpper(key), ""},
		{":8080", "", "DISCORD_PUBLIC_KEY"},
		{"8080", key, "DISCORD_INTERACTIONS_ADDR"},
		{":8080", key[:62], "DISCORD_PUBLIC_KEY"},
		{":8080", strings.Repeat("zz", 32), "DISCORD_PUBLIC_KEY"},
	} {
		c := base()
		c.InteractionsAddr, c.PublicKey = tc.addr, tc.key
		err := c.Validate()
		switch {
		case tc.variable == "" && err != nil:
			t.Errorf("%q/%q refused: %v", tc.addr, tc.key, err)
		case tc.variable != "" && (err == nil || !strings.Contains(err.Error(), tc.variable)):
			t.Errorf("%q/%q: %v, want an error naming %s", tc.addr, tc.key, err, tc.variable)
		case err != nil && tc.key != "" && strings.Contains(err.Error(), tc.key):
			t.Errorf("the error echoes the key")
		}
	}
}
