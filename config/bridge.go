package config

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clankie/clankie/api"
)

// Discord holds the settings both bridges share.
type Discord struct {
	APIURL        string   `env:"DISCORD_API_URL" envDefault:"https://discord.com/api/v10" help:"Discord REST base URL; point it at a rate-limit proxy (or a local fake in tests). The gateway URL comes from this API."`
	GuildIDs      []string `env:"DISCORD_GUILD_IDS" envSeparator:"," help:"Comma-separated server ids to serve, with commands registered in each at once; empty: every server that installed the app, with global commands."`
	MemoryRoleIDs []string `env:"DISCORD_MEMORY_ROLE_IDS" envSeparator:"," help:"Comma-separated role ids whose members may propose facts about other people (besides Manage Server)."`
	MemoryUserIDs []string `env:"DISCORD_MEMORY_USER_IDS" envSeparator:"," help:"Comma-separated user ids who may propose facts about other people (besides Manage Server)."`
	ShardCount    string   `env:"DISCORD_SHARD_COUNT" envDefault:"auto" help:"How many gateway shards the bot has in all: auto (what Discord recommends, about one per 1000 servers) or a number; every process of one bot must agree."`
	ShardIDs      string   `env:"DISCORD_SHARD_IDS" help:"Which shards this process runs, e.g. 0-3 or 4,5 (ranges and commas); empty: all of them. Split a bot's shards between processes with it."`
}

// Validate names the variable that is wrong.
func (d Discord) Validate() error {
	if err := checkURL("DISCORD_API_URL", d.APIURL, urlRule{schemes: []string{"https", "http"}, query: false,
		credVar: "the bot token is sent separately"}); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		ids  []string
	}{{"DISCORD_GUILD_IDS", d.GuildIDs}, {"DISCORD_MEMORY_ROLE_IDS", d.MemoryRoleIDs}, {"DISCORD_MEMORY_USER_IDS", d.MemoryUserIDs}} {
		if err := snowflakes(l.name, l.ids); err != nil {
			return err
		}
	}
	_, err := d.Shards()
	return err
}

// ShardPlan is which gateway shards a process runs: Count 0 means auto (the
// count Discord recommends), IDs nil means every shard.
type ShardPlan struct {
	Count int
	IDs   []int
}

// maxShards bounds DISCORD_SHARD_COUNT and the ids: far above any bot's
// need, low enough that a typo is not a million connections.
const maxShards = 65536

// Shards parses DISCORD_SHARD_COUNT and DISCORD_SHARD_IDS. Its errors name
// the variable and the problem, not the value.
func (d Discord) Shards() (ShardPlan, error) {
	var p ShardPlan
	switch c := strings.TrimSpace(d.ShardCount); c {
	case "", "auto":
	default:
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > maxShards {
			return p, fmt.Errorf("DISCORD_SHARD_COUNT must be auto or a whole number from 1 to %d", maxShards)
		}
		p.Count = n
	}
	ids := strings.TrimSpace(d.ShardIDs)
	if ids == "" {
		return p, nil
	}
	seen := map[int]bool{}
	const form = "DISCORD_SHARD_IDS must list shard numbers and ranges such as 0-3 or 4,5"
	for i, part := range strings.Split(ids, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(strings.TrimSpace(hi))
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= maxShards {
			return p, fmt.Errorf("%s (item %d is not)", form, i+1)
		}
		for id := a; id <= b; id++ {
			if seen[id] {
				return p, fmt.Errorf("DISCORD_SHARD_IDS lists shard %d twice", id)
			}
			if p.Count > 0 && id >= p.Count {
				return p, fmt.Errorf("DISCORD_SHARD_IDS names shard %d, but DISCORD_SHARD_COUNT makes shards 0 to %d", id, p.Count-1)
			}
			seen[id] = true
			p.IDs = append(p.IDs, id)
		}
	}
	slices.Sort(p.IDs)
	return p, nil
}

// snowflakes checks a list of ids; the error says which item is wrong by
// position, never by value.
func snowflakes(name string, ids []string) error {
	for i, id := range ids {
		if _, err := strconv.ParseUint(strings.TrimSpace(id), 10, 64); err != nil || strings.TrimSpace(id) == "" {
			return fmt.Errorf("%s must be a comma-separated list of numeric Discord ids (item %d of %d is not)", name, i+1, len(ids))
		}
	}
	return nil
}

// MemoryClient is how a bridge or the CLI reaches the memory service.
type MemoryClient struct {
	URL string `env:"CLANKIE_MEMORY_URL" envDefault:"http://127.0.0.1:4310" help:"Where the memory service answers, for the bridges and the CLI."`
	// MemoryRoot is read only to find minted bearers when a token
	// variable is unset.
	MemoryRoot
}

// Validate names the variable that is wrong.
func (m MemoryClient) Validate() error {
	if err := validDir(m.Dir); err != nil {
		return err
	}
	return CheckMemoryURL("CLANKIE_MEMORY_URL", m.URL)
}

// CheckMemoryURL validates a memory service URL given under name (the
// variable, or a flag such as `clankie health --url`) by the rules of
// CLANKIE_MEMORY_URL. Its error names name and never quotes the value.
func CheckMemoryURL(name, v string) error {
	return checkURL(name, v, urlRule{schemes: []string{"http", "https"},
		credVar: "the bearer is passed separately (the lane's token variable, or the minted one)"})
}

// TextBridge configures `clankie bridge text`.
type TextBridge struct {
	DiscordToken string `env:"DISCORD_TEXT_BOT_TOKEN" secret:"true" help:"The text bridge's Discord bot token (Developer Portal → your application → Bot)."`
	TextBridgeToken
	// InteractionsAddr, when set, makes the text bridge serve Discord's
	// Interactions Endpoint URL over HTTP instead of opening a gateway.
	InteractionsAddr string `env:"DISCORD_INTERACTIONS_ADDR" help:"Listen address (host:port) for Discord's HTTP interactions; set, the text bridge answers slash commands there instead of opening a gateway (put it behind a TLS reverse proxy). A port alone (:8080) means loopback; write 0.0.0.0:8080 to listen on every interface. Empty: gateway."`
	PublicKey        string `env:"DISCORD_PUBLIC_KEY" help:"The application's public key (Developer Portal → General Information, 64 hex digits); every interaction's Ed25519 signature is checked against it. Required with DISCORD_INTERACTIONS_ADDR."`
	Memory           MemoryClient
	Discord          Discord
	Log              Log
	Metrics          Metrics
}

// Validate names the variable that is wrong.
func (t TextBridge) Validate() error {
	if strings.TrimSpace(t.DiscordToken) == "" {
		return fmt.Errorf("DISCORD_TEXT_BOT_TOKEN is required: the text bridge's Discord bot token")
	}
	if err := t.validateInteractions(); err != nil {
		return err
	}
	for _, v := range []Validator{t.Memory, t.Discord, t.Log, t.Metrics} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// validateInteractions checks the HTTP interactions settings.
func (t TextBridge) validateInteractions() error {
	if t.InteractionsAddr != "" {
		if _, port, err := net.SplitHostPort(t.InteractionsAddr); err != nil || port == "" {
			return errors.New("DISCORD_INTERACTIONS_ADDR must be host:port, such as 127.0.0.1:8080 (or :8080)")
		}
		if t.PublicKey == "" {
			return errors.New("DISCORD_PUBLIC_KEY is required with DISCORD_INTERACTIONS_ADDR: the application's public key from the Developer Portal (General Information)")
		}
	}
	if t.PublicKey != "" {
		if b, err := hex.DecodeString(t.PublicKey); err != nil || len(b) != ed25519.PublicKeySize {
			return fmt.Errorf("DISCORD_PUBLIC_KEY must be the application's public key: %d hex digits", 2*ed25519.PublicKeySize)
		}
	}
	return nil
}

// InteractionsListenAddr returns the address to bind for
// DISCORD_INTERACTIONS_ADDR: a port alone is loopback, as for
// CLANKIE_METRICS_ADDR, since the endpoint speaks plaintext and belongs
// behind a TLS proxy.
func (t TextBridge) InteractionsListenAddr() string { return loopbackIfBare(t.InteractionsAddr) }

// PublicKeyBytes returns DISCORD_PUBLIC_KEY decoded (after Validate).
func (t TextBridge) PublicKeyBytes() ed25519.PublicKey {
	b, _ := hex.DecodeString(t.PublicKey)
	return b
}

// LoadTextBridge reads and validates the text bridge's settings, and
// refuses the voice bridge's Discord token as its own.
func LoadTextBridge() (TextBridge, error) {
	t, err := load[TextBridge]()
	if err != nil {
		return t, err
	}
	return t, distinctBotTokens()
}

// Validator is satisfied by every settings struct.
type Validator interface{ Validate() error }

// BearersFile holds minted tokens, keyed by lane, 0600 in the memory root.
const BearersFile = "bearers.json"

// ResolveBearer returns token when set, else the one the memory service
// minted for lane into dir/bearers.json. The error names the lane's variable.
func ResolveBearer(token, dir string, lane api.Lane) (string, error) {
	if token != "" {
		return token, nil
	}
	info, _ := lane.Info()
	variable := info.TokenVar
	path := filepath.Join(dir, BearersFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s is not set and no minted token was found in %s; set it, or start the memory service once with the same CLANKIE_MEMORY_DIR", variable, path)
	}
	var stored map[api.Lane]string
	if err := json.Unmarshal(b, &stored); err != nil || stored[lane] == "" {
		return "", fmt.Errorf("%s is not set and %s holds no token for the %s lane; set it", variable, path, lane)
	}
	return stored[lane], nil
}

// ConsentPolicy is who counts as consented in a voice session
// (DISCORD_VOICE_CONSENT_POLICY). It is a setting of the voice bridge, never
// on the memory API's wire, so it is declared here with the variable rather
// than in api; voice takes it as it is.
type ConsentPolicy string

// The consent policies.
const (
	ConsentExplicit ConsentPolicy = "explicit" // only /voice consent opt-ins count
	ConsentPresence ConsentPolicy = "presence" // being in the channel counts; an opt-out still wins
)

// Valid reports whether p is one of the consent policies.
func (p ConsentPolicy) Valid() bool { return p == ConsentExplicit || p == ConsentPresence }

// VoiceBridge configures `clankie bridge voice`.
type VoiceBridge struct {
	DiscordToken string `env:"DISCORD_VOICE_BOT_TOKEN" secret:"true" help:"The voice bridge's Discord bot token (a second application, not the text bridge's)."`
	VoiceBridgeToken
	VoiceRoleIDs       []string      `env:"DISCORD_VOICE_ROLE_IDS" envSeparator:"," help:"Comma-separated role ids whose members may /voice join and leave (besides Move Members)."`
	VoiceUserIDs       []string      `env:"DISCORD_VOICE_USER_IDS" envSeparator:"," help:"Comma-separated user ids who may /voice join and leave (besides Move Members)."`
	ConsentPolicy      ConsentPolicy `env:"DISCORD_VOICE_CONSENT_POLICY" envDefault:"explicit" help:"Who counts as consented in a voice session: explicit (only /voice consent opt-in) or presence (being in the channel; an opt-out still wins)."`
	RealtimeURL        string        `env:"CLANKIE_REALTIME_URL" help:"WebSocket URL of a voice model speaking the OpenAI Realtime GA protocol (wss://api.openai.com/v1/realtime, or Azure's wss://RESOURCE.openai.azure.com/openai/v1/realtime); empty: sessions run and pull briefings without one."`
	RealtimeAPIKey     string        `env:"CLANKIE_REALTIME_API_KEY" secret:"true" help:"API key for the realtime endpoint, sent as CLANKIE_REALTIME_AUTH says."`
	RealtimeAuth       string        `env:"CLANKIE_REALTIME_AUTH" envDefault:"bearer" help:"How the key is sent: bearer (Authorization: Bearer, OpenAI) or api-key (an api-key header, Azure OpenAI)."`
	RealtimeModel      string        `env:"CLANKIE_REALTIME_MODEL" envDefault:"gpt-realtime" help:"Model (OpenAI) or deployment name (Azure), sent as ?model= on the URL; GA fixes the model there."`
	RealtimeVoice      string        `env:"CLANKIE_REALTIME_VOICE" help:"Voice the model speaks with (e.g. marin, cedar, alloy); empty: the endpoint's default."`
	RealtimeTranscribe string        `env:"CLANKIE_REALTIME_TRANSCRIBE_MODEL" envDefault:"gpt-4o-mini-transcribe" help:"The provider's model that transcribes each speaker's turn (session.audio.input.transcription), so Clankie knows when he is addressed; transcripts stay in memory only for that decision."`
	VoiceSessions
	VoiceGroup
	Memory  MemoryClient
	Discord Discord
	Log     Log
	Metrics Metrics
}

// VoiceSessions bounds each voice session's life and a server's daily
// voice time: a session never waits forever, and never runs up cost
// nobody is there for.
type VoiceSessions struct {
	JoinTimeout time.Duration `env:"CLANKIE_VOICE_JOIN_TIMEOUT" envDefault:"10s" help:"How long a /voice join (or a rejoin) waits for Discord to answer before it gives up, as a Go duration (10s, 1m). Discord answers a full channel, or one the bot may not connect to, with silence."`
	IdleLeave   time.Duration `env:"CLANKIE_VOICE_IDLE_LEAVE" envDefault:"2m" help:"Clankie leaves a voice channel where nobody who consented has been for this long (a Go duration: 90s, 2m)."`
	MaxSession  time.Duration `env:"CLANKIE_VOICE_MAX_SESSION" envDefault:"2h" help:"The longest a voice session lasts before Clankie leaves (a Go duration: 45m, 2h)."`
	DailyBudget time.Duration `env:"CLANKIE_VOICE_DAILY_BUDGET" help:"Voice time each server may use per UTC day, summed over its sessions (a Go duration: 90m, 3h); counted in memory, so a restart forgets it. Empty: no limit."`
}

// VoiceGroup is how Clankie takes turns in a group call: he answers a turn
// that names him, or a follow-up by the person he just answered; alone
// with one person, every turn.
type VoiceGroup struct {
	Names            []string      `env:"CLANKIE_VOICE_NAMES" envSeparator:"," envDefault:"clankie" help:"Comma-separated names Clankie answers to in a group call (as a word, any case); the voice bot's own user name is added."`
	Followup         time.Duration `env:"CLANKIE_VOICE_FOLLOWUP" envDefault:"8s" help:"How long after his answer ends the person he answered may follow up without naming him (a Go duration: 8s)."`
	UtteranceSilence time.Duration `env:"CLANKIE_VOICE_UTTERANCE_SILENCE" envDefault:"600ms" help:"How long a speaker's silence ends their utterance, which then goes to the model as their turn (a Go duration: 600ms)."`
}

// Validate names the variable that is wrong.
func (g VoiceGroup) Validate() error {
	for _, n := range g.Names {
		if n = strings.TrimSpace(n); n == "" || len([]rune(n)) > 32 {
			return errors.New("CLANKIE_VOICE_NAMES must be comma-separated names of 1 to 32 characters")
		}
	}
	if g.Followup < 0 || g.Followup > time.Minute {
		return errors.New("CLANKIE_VOICE_FOLLOWUP must be between 0s and 1m (a Go duration such as 8s)")
	}
	if g.UtteranceSilence < 200*time.Millisecond || g.UtteranceSilence > 5*time.Second {
		return errors.New("CLANKIE_VOICE_UTTERANCE_SILENCE must be between 200ms and 5s (a Go duration such as 600ms)")
	}
	return nil
}

// Validate names the variable that is wrong.
func (v VoiceSessions) Validate() error {
	for _, d := range []struct {
		name     string
		v, floor time.Duration
	}{
		{"CLANKIE_VOICE_JOIN_TIMEOUT", v.JoinTimeout, time.Second},
		{"CLANKIE_VOICE_IDLE_LEAVE", v.IdleLeave, time.Second},
		{"CLANKIE_VOICE_MAX_SESSION", v.MaxSession, time.Minute},
	} {
		if d.v < d.floor {
			return fmt.Errorf("%s must be at least %s (a Go duration such as 10s, 2m, 2h)", d.name, d.floor)
		}
	}
	if v.JoinTimeout > 2*time.Minute {
		return errors.New("CLANKIE_VOICE_JOIN_TIMEOUT must be at most 2m: the person who ran /voice join waits that long")
	}
	if v.DailyBudget < 0 || (v.DailyBudget > 0 && v.DailyBudget < time.Minute) || v.DailyBudget > 24*time.Hour {
		return errors.New("CLANKIE_VOICE_DAILY_BUDGET must be empty (no limit) or between 1m and 24h (a Go duration such as 90m)")
	}
	return nil
}

// Validate names the variable that is wrong.
func (v VoiceBridge) Validate() error {
	if strings.TrimSpace(v.DiscordToken) == "" {
		return fmt.Errorf("DISCORD_VOICE_BOT_TOKEN is required: the voice bridge's Discord bot token")
	}
	if !v.ConsentPolicy.Valid() {
		return errors.New("DISCORD_VOICE_CONSENT_POLICY must be explicit or presence")
	}
	if err := snowflakes("DISCORD_VOICE_ROLE_IDS", v.VoiceRoleIDs); err != nil {
		return err
	}
	if err := snowflakes("DISCORD_VOICE_USER_IDS", v.VoiceUserIDs); err != nil {
		return err
	}
	if v.RealtimeURL != "" {
		if err := checkURL("CLANKIE_REALTIME_URL", v.RealtimeURL, urlRule{schemes: []string{"wss", "ws"}, query: true,
			credVar: "put the key in CLANKIE_REALTIME_API_KEY"}); err != nil {
			return err
		}
		// Without a key (in the variable, or Azure's api-key query
		// parameter) every session's model connection would be refused,
		// which showed only at the first /voice join.
		if strings.TrimSpace(v.RealtimeAPIKey) == "" && !urlHasKey(v.RealtimeURL) {
			return errors.New("CLANKIE_REALTIME_API_KEY is required with CLANKIE_REALTIME_URL: the voice model's API key")
		}
	}
	if err := v.validateRealtime(); err != nil {
		return err
	}
	for _, x := range []Validator{v.VoiceSessions, v.VoiceGroup, v.Memory, v.Discord, v.Log, v.Metrics} {
		if err := x.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// LoadVoiceBridge reads and validates the voice bridge's settings, and
// refuses the text bridge's Discord token as its own.
func LoadVoiceBridge() (VoiceBridge, error) {
	v, err := load[VoiceBridge]()
	if err != nil {
		return v, err
	}
	return v, distinctBotTokens()
}

// distinctBotTokens refuses one Discord token for both bridges: each
// bridge registers its commands by overwriting its application's whole
// set, so with one application each start would replace the other's
// commands. Unparsable settings of the other bridge are not this check's
// business (that bridge's own start names them).
func distinctBotTokens() error {
	t, terr := parse[TextBridge]()
	v, verr := parse[VoiceBridge]()
	if terr != nil || verr != nil {
		return nil
	}
	return distinctTokens(t.DiscordToken, v.DiscordToken)
}

// distinctTokens refuses one Discord token for both bridges.
func distinctTokens(text, voice string) error {
	if tt := strings.TrimSpace(text); tt != "" && tt == strings.TrimSpace(voice) {
		return errors.New("DISCORD_TEXT_BOT_TOKEN and DISCORD_VOICE_BOT_TOKEN are the same token: each bridge needs its own Discord application")
	}
	return nil
}

// urlHasKey reports whether a realtime URL carries Azure's api-key query
// parameter.
func urlHasKey(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Query().Get("api-key") != ""
}

// BridgeWarnings are settings that are valid but will not do what they
// seem to: today, voice model settings without the voice bridge's token
// (the voice bridge does not start, so no model is used).
func BridgeWarnings() []string {
	v, err := parse[VoiceBridge]()
	if err != nil || strings.TrimSpace(v.DiscordToken) != "" || v.RealtimeURL == "" {
		return nil
	}
	return []string{"CLANKIE_REALTIME_URL is set but DISCORD_VOICE_BOT_TOKEN is not: the voice bridge does not start, so no voice model is used"}
}

// Realtime authentication modes (CLANKIE_REALTIME_AUTH).
const (
	RealtimeAuthBearer = "bearer"
	RealtimeAuthAPIKey = "api-key"
)

// validateRealtime checks the realtime settings other than the URL, naming
// the variable; none of them is a secret, but the key is never echoed.
func (v VoiceBridge) validateRealtime() error {
	switch v.RealtimeAuth {
	case RealtimeAuthBearer, RealtimeAuthAPIKey:
	default:
		return fmt.Errorf("CLANKIE_REALTIME_AUTH must be bearer or api-key")
	}
	if !plainName(v.RealtimeTranscribe, 128) {
		return fmt.Errorf("CLANKIE_REALTIME_TRANSCRIBE_MODEL must be a model name: letters, digits, '.', '-', '_' (at most 128)")
	}
	if !plainName(v.RealtimeModel, 128) {
		return fmt.Errorf("CLANKIE_REALTIME_MODEL must be a model or deployment name: letters, digits, '.', '-', '_' (at most 128)")
	}
	if v.RealtimeVoice != "" && !plainName(v.RealtimeVoice, 64) {
		return fmt.Errorf("CLANKIE_REALTIME_VOICE must be a voice name: letters, digits, '.', '-', '_' (at most 64)")
	}
	return nil
}

// plainName reports whether s is a non-empty name of at most max bytes
// made of ASCII letters, digits, '.', '-' and '_'.
func plainName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// ValidateBridges checks both bridges' settings, including those of a
// bridge whose Discord token is unset, so `clankie up` refuses a bad value
// (DISCORD_VOICE_CONSENT_POLICY=maybe) before it starts anything, rather
// than only when that bridge is enabled later.
func ValidateBridges() error {
	t, err := parse[TextBridge]()
	if err != nil {
		return err
	}
	textToken := t.DiscordToken
	if t.DiscordToken == "" {
		t.DiscordToken = "unset" // a missing token only skips the bridge
	}
	if err := t.Validate(); err != nil {
		return err
	}
	v, err := parse[VoiceBridge]()
	if err != nil {
		return err
	}
	voiceToken := v.DiscordToken
	if v.DiscordToken == "" {
		v.DiscordToken = "unset"
	}
	if err := v.Validate(); err != nil {
		return err
	}
	return distinctTokens(textToken, voiceToken)
}
