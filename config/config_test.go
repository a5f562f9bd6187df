package config

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

// secret is planted in every bad value below; no error may repeat it.
const secret = "s3cr3t-Do-Not-Echo"

// cleanEnv unsets every variable config reads, so the host's environment
// cannot decide a case, and points the memory root at a temp dir.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, v := range All() {
		if old, ok := os.LookupEnv(v.Name); ok {
			t.Setenv(v.Name, old) // restored after the test
			os.Unsetenv(v.Name)
		}
	}
	t.Setenv("CLANKIE_MEMORY_DIR", t.TempDir())
}

func loadAll() map[string]func() error {
	return map[string]func() error{
		"memory":   func() error { _, err := LoadMemory(); return err },
		"text":     func() error { _, err := LoadTextBridge(); return err },
		"voice":    func() error { _, err := LoadVoiceBridge(); return err },
		"operator": func() error { _, err := LoadOperator(); return err },
	}
}

// TestConfigErrorsNameTheVariableNeverTheValue walks every validation that
// can refuse a setting, each with a value carrying a secret (an api-key
// query, URL userinfo, or just a mistyped value that might be one), and
// checks the error names the variable and the problem and never the value.
func TestConfigErrorsNameTheVariableNeverTheValue(t *testing.T) {
	tests := []struct {
		name   string
		load   string
		env    map[string]string
		reason string // a word of the explanation
	}{
		{"realtime URL with an api-key query and the wrong scheme", "voice",
			map[string]string{"CLANKIE_REALTIME_URL": "https://realtime.example/v1/realtime?api-key=" + secret}, "wss"},
		{"realtime URL with an api-key query and no scheme", "voice",
			map[string]string{"CLANKIE_REALTIME_URL": "realtime.example/v1/realtime?api-key=" + secret}, "absolute"},
		{"realtime URL that does not parse", "voice",
			map[string]string{"CLANKIE_REALTIME_URL": "wss://[::1%zz]/?api-key=" + secret}, "absolute"},
		{"realtime URL with userinfo", "voice",
			map[string]string{"CLANKIE_REALTIME_URL": "wss://user:" + secret + "@realtime.example/v1"}, "credentials"},
		{"memory URL with userinfo", "text",
			map[string]string{"CLANKIE_MEMORY_URL": "http://clankie:" + secret + "@127.0.0.1:4310"}, "credentials"},
		{"memory URL with userinfo for the operator", "operator",
			map[string]string{"CLANKIE_MEMORY_URL": "http://clankie:" + secret + "@127.0.0.1:4310"}, "credentials"},
		{"memory URL with a query", "voice",
			map[string]string{"CLANKIE_MEMORY_URL": "http://127.0.0.1:4310/?token=" + secret}, "query"},
		{"memory URL without a scheme", "text",
			map[string]string{"CLANKIE_MEMORY_URL": "clankie:" + secret + "@127.0.0.1:4310"}, "absolute"},
		{"memory URL with the wrong scheme", "text",
			map[string]string{"CLANKIE_MEMORY_URL": "ftp" + secret + "://127.0.0.1:4310"}, "http"},
		{"discord API URL with userinfo", "text",
			map[string]string{"DISCORD_API_URL": "https://bot:" + secret + "@proxy.example/api/v10"}, "credentials"},
		{"discord API URL without a host", "text",
			map[string]string{"DISCORD_API_URL": "/api/v10?key=" + secret}, "absolute"},
		{"memory address", "memory", map[string]string{"CLANKIE_MEMORY_ADDR": secret}, "host:port"},
		{"log level", "memory", map[string]string{"CLANKIE_LOG_LEVEL": secret}, "debug"},
		{"log format", "operator", map[string]string{"CLANKIE_LOG_FORMAT": secret}, "json"},
		{"guild ids", "text", map[string]string{"DISCORD_GUILD_IDS": "123456789012345678," + secret}, "numeric"},
		{"memory role ids", "voice", map[string]string{"DISCORD_MEMORY_ROLE_IDS": secret}, "numeric"},
		{"memory user ids", "text", map[string]string{"DISCORD_MEMORY_USER_IDS": secret}, "numeric"},
		{"voice role ids", "voice", map[string]string{"DISCORD_VOICE_ROLE_IDS": secret}, "numeric"},
		{"voice user ids", "voice", map[string]string{"DISCORD_VOICE_USER_IDS": secret}, "numeric"},
		{"consent policy", "voice", map[string]string{"DISCORD_VOICE_CONSENT_POLICY": secret}, "explicit"},
		{"short operator token", "operator", map[string]string{"CLANKIE_OPERATOR_TOKEN": secret[:10]}, "16"},
		{"token with whitespace", "memory", map[string]string{"CLANKIE_GAMEPLAY_TOKEN": secret + " " + secret}, "whitespace"},
		{"memory port out of range", "memory", map[string]string{"CLANKIE_MEMORY_ADDR": "127.0.0.1:99999"}, "0 to 65535"},
		{"person cache of nothing", "memory", map[string]string{"CLANKIE_MEMORY_CACHE_MB": "0"}, "between 1 and 65536"},
		{"person cache past 64 GiB", "memory", map[string]string{"CLANKIE_MEMORY_CACHE_MB": "65537"}, "between 1 and 65536"},
		{"person cache that is not a number", "memory", map[string]string{"CLANKIE_MEMORY_CACHE_MB": secret}, "malformed"},
		{"store with a malformed URL", "memory",
			map[string]string{"CLANKIE_MEMORY_STORE": "postgres://u:" + secret + "@[bad"}, "not a PostgreSQL connection string"},
		{"PostgreSQL store without the bearers", "memory",
			map[string]string{"CLANKIE_MEMORY_STORE": "postgres://clankie:" + secret + "@db.example/clankie"}, "CLANKIE_OPERATOR_TOKEN"},
		{"realtime URL without a key", "voice",
			map[string]string{"CLANKIE_REALTIME_URL": "wss://realtime.example/v1/realtime"}, "CLANKIE_REALTIME_API_KEY is required"},
		{"the voice bridge's Discord token for the text bridge", "text",
			map[string]string{"DISCORD_VOICE_BOT_TOKEN": "discord-token-text"}, "DISCORD_TEXT_BOT_TOKEN and DISCORD_VOICE_BOT_TOKEN are the same token"},
		{"the text bridge's Discord token for the voice bridge", "voice",
			map[string]string{"DISCORD_TEXT_BOT_TOKEN": "discord-token-voice"}, "the same token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			t.Setenv("DISCORD_TEXT_BOT_TOKEN", "discord-token-text")
			t.Setenv("DISCORD_VOICE_BOT_TOKEN", "discord-token-voice")
			var variable string
			for k, v := range tt.env {
				t.Setenv(k, v)
				variable = k
			}
			err := loadAll()[tt.load]()
			if err == nil {
				t.Fatalf("%s accepted", variable)
			}
			msg := err.Error()
			if !strings.Contains(msg, variable) || !strings.Contains(msg, tt.reason) {
				t.Errorf("error %q does not name %s and say %q", msg, variable, tt.reason)
			}
			for _, leak := range []string{secret, secret[:10], "api-key=", "clankie:"} {
				if strings.Contains(msg, leak) {
					t.Errorf("error echoes the value (%q): %q", leak, msg)
				}
			}
		})
	}
}

// TestConfigAcceptsRealisticURLs: the checks above refuse only what they
// name; the defaults and an api-key realtime URL (Azure's style) still load.
func TestConfigAcceptsRealisticURLs(t *testing.T) {
	cleanEnv(t)
	t.Setenv("DISCORD_VOICE_BOT_TOKEN", "discord-token-voice")
	t.Setenv("CLANKIE_REALTIME_URL", "wss://realtime.example/openai/realtime?api-version=2025-04-01&api-key="+secret)
	if _, err := LoadVoiceBridge(); err != nil {
		t.Fatalf("voice bridge: %v", err)
	}
	t.Setenv("DISCORD_TEXT_BOT_TOKEN", "discord-token-text")
	if _, err := LoadTextBridge(); err != nil {
		t.Fatalf("text bridge: %v", err)
	}
}

// TestEnvParseErrorsNeverEchoValues covers caarlos0/env's own errors, whose
// text can quote a value (a parser's message), so explain never passes
// their text on.
func TestEnvParseErrorsNeverEchoValues(t *testing.T) {
	agg := env.AggregateError{Errors: []error{
		env.ParseError{Name: "Level", Type: nil, Err: errors.New(`strconv: parsing "` + secret + `"`)},
		env.ParseValueError{Msg: "parse error", Err: errors.New(`bad value "` + secret + `"`)},
	}}
	msg := explain(agg, map[string]string{"Level": "CLANKIE_LOG_LEVEL"}).Error()
	if strings.Contains(msg, secret) || !strings.Contains(msg, "CLANKIE_LOG_LEVEL") {
		t.Fatalf("explain: %q", msg)
	}
}

// TestLaneTokensMustBeDistinct: a bearer decides the lane, so one token for
// two lanes would make the text bridge a voice bridge, or a bridge the
// operator. The service refuses to start, naming both variables.
func TestLaneTokensMustBeDistinct(t *testing.T) {
	const a, b = "aaaaaaaaaaaaaaaa-" + secret, "bbbbbbbbbbbbbbbb-" + secret
	tests := []struct {
		name string
		env  map[string]string
		want []string // variables the error names; nil: accepted
	}{
		{"text equals voice", map[string]string{"CLANKIE_TEXT_BRIDGE_TOKEN": a, "CLANKIE_VOICE_BRIDGE_TOKEN": a},
			[]string{"CLANKIE_TEXT_BRIDGE_TOKEN", "CLANKIE_VOICE_BRIDGE_TOKEN"}},
		{"operator equals text", map[string]string{"CLANKIE_OPERATOR_TOKEN": a, "CLANKIE_TEXT_BRIDGE_TOKEN": a},
			[]string{"CLANKIE_OPERATOR_TOKEN", "CLANKIE_TEXT_BRIDGE_TOKEN"}},
		{"operator equals voice", map[string]string{"CLANKIE_OPERATOR_TOKEN": a, "CLANKIE_VOICE_BRIDGE_TOKEN": a, "CLANKIE_TEXT_BRIDGE_TOKEN": b},
			[]string{"CLANKIE_OPERATOR_TOKEN", "CLANKIE_VOICE_BRIDGE_TOKEN"}},
		{"gameplay equals operator", map[string]string{"CLANKIE_GAMEPLAY_TOKEN": a, "CLANKIE_OPERATOR_TOKEN": a},
			[]string{"CLANKIE_OPERATOR_TOKEN", "CLANKIE_GAMEPLAY_TOKEN"}},
		{"all distinct", map[string]string{"CLANKIE_OPERATOR_TOKEN": a, "CLANKIE_TEXT_BRIDGE_TOKEN": b}, nil},
		{"unset ones are minted, not equal", map[string]string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cleanEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := LoadMemory()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the same token for two lanes was accepted")
			}
			for _, v := range tt.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error echoes the token: %q", err)
			}
		})
	}
}

// TestEachVariableDeclaredOnce: All walks every declaration once, so a
// variable declared in two places (a token in Tokens and again in a
// client's struct) would be listed twice.
func TestEachVariableDeclaredOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All() {
		if seen[v.Name] {
			t.Errorf("%s is declared more than once", v.Name)
		}
		seen[v.Name] = true
	}
	for _, name := range []string{"CLANKIE_OPERATOR_TOKEN", "CLANKIE_TEXT_BRIDGE_TOKEN", "CLANKIE_VOICE_BRIDGE_TOKEN", "CLANKIE_GAMEPLAY_TOKEN", "CLANKIE_MEMORY_DIR"} {
		if !seen[name] {
			t.Errorf("All does not list %s", name)
		}
	}
}

// TestEachProcessReadsItsToken: the one declaration of a token reaches the
// service (all four) and the one client that holds it.
func TestEachProcessReadsItsToken(t *testing.T) {
	cleanEnv(t)
	vals := map[string]string{
		"CLANKIE_OPERATOR_TOKEN":     "operator-token-0123456789",
		"CLANKIE_TEXT_BRIDGE_TOKEN":  "text-token-0123456789ab",
		"CLANKIE_VOICE_BRIDGE_TOKEN": "voice-token-0123456789ab",
		"CLANKIE_GAMEPLAY_TOKEN":     "gameplay-token-0123456789",
		"DISCORD_TEXT_BOT_TOKEN":     "discord-text",
		"DISCORD_VOICE_BOT_TOKEN":    "discord-voice",
	}
	for k, v := range vals {
		t.Setenv(k, v)
	}
	m, err := LoadMemory()
	if err != nil {
		t.Fatal(err)
	}
	text, err := LoadTextBridge()
	if err != nil {
		t.Fatal(err)
	}
	voice, err := LoadVoiceBridge()
	if err != nil {
		t.Fatal(err)
	}
	op, err := LoadOperator()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ got, want string }{
		{m.Tokens.Operator, vals["CLANKIE_OPERATOR_TOKEN"]},
		{m.Tokens.TextBridge, vals["CLANKIE_TEXT_BRIDGE_TOKEN"]},
		{m.Tokens.VoiceBridge, vals["CLANKIE_VOICE_BRIDGE_TOKEN"]},
		{m.Tokens.Gameplay, vals["CLANKIE_GAMEPLAY_TOKEN"]},
		{text.TextBridge, vals["CLANKIE_TEXT_BRIDGE_TOKEN"]},
		{voice.VoiceBridge, vals["CLANKIE_VOICE_BRIDGE_TOKEN"]},
		{op.Operator, vals["CLANKIE_OPERATOR_TOKEN"]},
	} {
		if c.got != c.want {
			t.Errorf("read %q, want %q", c.got, c.want)
		}
	}
}

// TestUpWarnsOfVoiceModelSettingsWithoutTheVoiceBridge: a realtime URL with
// no voice bridge token is valid but does nothing, so clankie up says so;
// with the token (or without the URL) there is nothing to say.
func TestUpWarnsOfVoiceModelSettingsWithoutTheVoiceBridge(t *testing.T) {
	cleanEnv(t)
	t.Setenv("CLANKIE_REALTIME_URL", "wss://realtime.example/v1/realtime")
	t.Setenv("CLANKIE_REALTIME_API_KEY", secret)
	w := BridgeWarnings()
	if len(w) != 1 || !strings.Contains(w[0], "DISCORD_VOICE_BOT_TOKEN is not") || strings.Contains(w[0], secret) {
		t.Fatalf("warnings = %q", w)
	}
	if err := ValidateBridges(); err != nil {
		t.Fatalf("a valid but idle setting refused: %v", err)
	}
	t.Setenv("DISCORD_VOICE_BOT_TOKEN", "discord-token-voice")
	if w := BridgeWarnings(); len(w) != 0 {
		t.Fatalf("warnings with the token set: %q", w)
	}
	t.Setenv("DISCORD_TEXT_BOT_TOKEN", "discord-token-voice")
	if err := ValidateBridges(); err == nil || !strings.Contains(err.Error(), "same token") {
		t.Fatalf("clankie up accepted one Discord token for both bridges: %v", err)
	}
}
