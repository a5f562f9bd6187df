// Package config reads every setting from the environment (caarlos0/env).
// Each variable is declared once, here, with its default and a help string:
// `clankie env`, --help and the README table are generated from these tags,
// so the documentation cannot drift from what the code reads.
//
// Tags: env (the variable), envDefault, secret:"true" (never printed),
// help (one sentence for an operator).
package config

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/caarlos0/env/v11"

	"github.com/clankie/clankie/api"
)

// Log configures logging for every process.
type Log struct {
	Level  string `env:"CLANKIE_LOG_LEVEL" envDefault:"info" help:"Log level: debug, info, warn or error."`
	Format string `env:"CLANKIE_LOG_FORMAT" envDefault:"json" help:"Log format: json for machines, console for people."`
}

// Validate names the variable that is wrong.
func (l Log) Validate() error {
	switch l.Level {
	case "debug", "info", "warn", "error":
	default:
		return errors.New("CLANKIE_LOG_LEVEL must be debug, info, warn or error")
	}
	switch l.Format {
	case "json", "console":
	default:
		return errors.New("CLANKIE_LOG_FORMAT must be json or console")
	}
	return nil
}

// Each memory bearer's variable is declared once, in its own struct, which
// Tokens (the service, all four) and the one client that holds it embed:
// OperatorToken in Operator, TextBridgeToken in TextBridge,
// VoiceBridgeToken in VoiceBridge. An empty one is minted by the service
// into <root>/bearers.json on first start and read from there by local
// clients (ResolveBearer).

// OperatorToken is the operator lane's bearer.
type OperatorToken struct {
	Operator string `env:"CLANKIE_OPERATOR_TOKEN" secret:"true" help:"Bearer of the operator lane (CLI, every operator route). Minted into the memory root when unset."`
}

// TextBridgeToken is the text bridge's bearer (discord_presence lane).
type TextBridgeToken struct {
	TextBridge string `env:"CLANKIE_TEXT_BRIDGE_TOKEN" secret:"true" help:"Bearer of the text bridge (discord_presence lane). Minted into the memory root when unset."`
}

// VoiceBridgeToken is the voice bridge's bearer (discord_voice lane).
type VoiceBridgeToken struct {
	VoiceBridge string `env:"CLANKIE_VOICE_BRIDGE_TOKEN" secret:"true" help:"Bearer of the voice bridge (discord_voice lane). Minted into the memory root when unset."`
}

// GameplayToken is the gameplay lane's bearer.
type GameplayToken struct {
	Gameplay string `env:"CLANKIE_GAMEPLAY_TOKEN" secret:"true" help:"Bearer of the gameplay lane. Minted into the memory root when unset."`
}

// Tokens are the four memory bearers, as the service reads them.
type Tokens struct {
	OperatorToken
	TextBridgeToken
	VoiceBridgeToken
	GameplayToken
}

// ByLane returns the tokens keyed by lane; the variable behind each is the
// lane's api.LaneInfo.TokenVar (a test checks the tags match).
func (t Tokens) ByLane() map[api.Lane]string {
	return map[api.Lane]string{
		api.LaneOperator:        t.Operator,
		api.LaneDiscordPresence: t.TextBridge,
		api.LaneDiscordVoice:    t.VoiceBridge,
		api.LaneGameplay:        t.Gameplay,
	}
}

// Validate refuses tokens too short to be secrets and one token for two
// lanes (the bearer decides the lane, so a shared one would make the text
// bridge a voice bridge, or a bridge the operator), naming the variables and
// never echoing a token.
func (t Tokens) Validate() error {
	byLane := t.ByLane()
	var fields []struct{ name, v string }
	for _, l := range api.Lanes() {
		fields = append(fields, struct{ name, v string }{l.TokenVar, byLane[l.Lane]})
	}
	for i, f := range fields {
		if f.v == "" {
			continue
		}
		for _, g := range fields[i+1:] {
			if subtle.ConstantTimeCompare([]byte(f.v), []byte(g.v)) == 1 {
				return fmt.Errorf("%s and %s hold the same token; each lane needs its own (leave one unset to have it minted)", f.name, g.name)
			}
		}
		if len(f.v) < 16 {
			return fmt.Errorf("%s must be at least 16 characters (it is a secret; leave it unset to have one minted)", f.name)
		}
		if strings.ContainsAny(f.v, " \t\r\n") {
			return fmt.Errorf("%s must not contain whitespace", f.name)
		}
	}
	return nil
}

// MemoryRoot is CLANKIE_MEMORY_DIR, declared once: the service keeps its
// data there, and local clients find minted bearers there.
type MemoryRoot struct {
	Dir string `env:"CLANKIE_MEMORY_DIR,expand" envDefault:"${HOME}/.clankie/memory" help:"Data root of the memory service: plain files, 0700 directories, 0600 files."`
}

// Memory configures `clankie memory serve`.
type Memory struct {
	Addr string `env:"CLANKIE_MEMORY_ADDR" envDefault:"127.0.0.1:4310" help:"Address the memory service listens on (host:port)."`
	MemoryRoot
	Store   string `env:"CLANKIE_MEMORY_STORE" secret:"true" help:"Where memory is kept: unset or file for plain files under CLANKIE_MEMORY_DIR (one service process); postgres://user:password@host/db for PostgreSQL (several service processes may share it; every process then needs the four CLANKIE_*_TOKEN bearers set, none is minted; pool_max_conns=N in it gives each process N connections, default and least 8)."`
	CacheMB int    `env:"CLANKIE_MEMORY_CACHE_MB" envDefault:"128" help:"MiB of decoded people the memory service keeps in memory (1 to 65536); 128 holds about 1,500 people of 128 facts. An idle service holds none of it. With PostgreSQL each person held is checked against the database on every use."`
	Tokens  Tokens
	Log     Log
	Metrics Metrics
}

// maxCacheMB bounds CLANKIE_MEMORY_CACHE_MB at 64 GiB, so the byte count
// fits an int on every platform the binary is built for.
const maxCacheMB = 64 << 10

// CacheBytes is CLANKIE_MEMORY_CACHE_MB in bytes.
func (m Memory) CacheBytes() int { return m.CacheMB << 20 }

// Validate names the variable that is wrong.
func (m Memory) Validate() error {
	if err := checkListenAddr("CLANKIE_MEMORY_ADDR", m.Addr, "127.0.0.1:4310"); err != nil {
		return err
	}
	if err := validDir(m.Dir); err != nil {
		return err
	}
	if m.CacheMB < 1 || m.CacheMB > maxCacheMB {
		return fmt.Errorf("CLANKIE_MEMORY_CACHE_MB must be a whole number of MiB between 1 and %d", maxCacheMB)
	}
	if m.Store != "" && m.Store != "file" && !m.Postgres() {
		return errors.New("CLANKIE_MEMORY_STORE must be unset, file, or a postgres:// (postgresql://) connection string")
	}
	if m.Postgres() {
		if u, err := url.Parse(m.Store); err != nil || u.Host == "" && u.Query().Get("host") == "" {
			return errors.New("CLANKIE_MEMORY_STORE is not a PostgreSQL connection string (postgres://user:password@host:port/database?sslmode=…)")
		}
	}
	if err := m.Tokens.Validate(); err != nil {
		return err
	}
	if m.Postgres() {
		// Several processes share one database; a token each minted on
		// its own host would be refused by every other.
		var missing []string
		byLane := m.Tokens.ByLane()
		for _, l := range api.Lanes() {
			if byLane[l.Lane] == "" {
				missing = append(missing, l.TokenVar)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("with CLANKIE_MEMORY_STORE set, every service process needs the same bearers: set %s (none is minted, since one process's token would be refused by another)", strings.Join(missing, ", "))
		}
	}
	if err := m.Metrics.Validate(); err != nil {
		return err
	}
	return m.Log.Validate()
}

// Postgres reports whether CLANKIE_MEMORY_STORE names PostgreSQL.
func (m Memory) Postgres() bool {
	return strings.HasPrefix(m.Store, "postgres://") || strings.HasPrefix(m.Store, "postgresql://")
}

// LoadMemory reads and validates the service's settings.
func LoadMemory() (Memory, error) { return load[Memory]() }

func load[T Validator]() (T, error) {
	c, err := parse[T]()
	if err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// parse reads T from the environment without validating it.
func parse[T any]() (T, error) {
	var c T
	if err := env.Parse(&c); err != nil {
		return c, explain(err, fieldVars(reflect.TypeOf(c)))
	}
	return c, nil
}

// explain turns caarlos0/env's aggregate error into one line per variable,
// without echoing values (a value may be a secret).
func explain(err error, vars map[string]string) error {
	var agg env.AggregateError
	if errors.As(err, &agg) {
		var lines []string
		for _, e := range agg.Errors {
			var pe env.ParseError
			var ve env.VarIsNotSetError
			var ee env.EmptyVarError
			switch {
			case errors.As(e, &pe):
				lines = append(lines, fmt.Sprintf("%s has a malformed value", varName(vars, pe.Name)))
			case errors.As(e, &ve):
				lines = append(lines, fmt.Sprintf("%s is required and not set", ve.Key))
			case errors.As(e, &ee):
				lines = append(lines, fmt.Sprintf("%s is required and empty", ee.Key))
			default:
				// Other errors' text can quote a value (a parser's message).
				lines = append(lines, fmt.Sprintf("a setting could not be read (%T)", e))
			}
		}
		return errors.New(strings.Join(lines, "; "))
	}
	return fmt.Errorf("the settings could not be read (%T)", err)
}

func varName(vars map[string]string, field string) string {
	if v, ok := vars[field]; ok {
		return v
	}
	return "a setting"
}

// fieldVars maps Go field names to the variables they read, so a parse
// error can name the variable rather than the field.
func fieldVars(t reflect.Type) map[string]string {
	m := map[string]string{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
				m[f.Name] = name
			} else if f.Type.Kind() == reflect.Struct {
				walk(f.Type)
			}
		}
	}
	walk(t)
	return m
}

// urlRule is what a URL setting may hold.
type urlRule struct {
	schemes []string // accepted, the first is the example's
	query   bool     // whether a query is allowed (a realtime endpoint may need ?api-key=)
	credVar string   // where a credential belongs instead of the URL's userinfo
}

// checkURL validates a URL setting. Its errors name the variable and the
// problem and never quote the value or a part of it: a URL may carry a key in
// its query or a password in its userinfo, and a mistyped one may be a
// secret pasted into the wrong variable.
func checkURL(name, v string, r urlRule) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%s must be an absolute URL such as %s://host:port", name, r.schemes[0])
	}
	if !slices.Contains(r.schemes, u.Scheme) {
		return fmt.Errorf("%s must start with %s://", name, strings.Join(r.schemes, ":// or "))
	}
	if u.User != nil {
		return fmt.Errorf("%s must not carry credentials (user:password@); %s", name, r.credVar)
	}
	if !r.query && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "") {
		return fmt.Errorf("%s must not have a query or fragment", name)
	}
	return nil
}

// Var describes one environment variable for `clankie env` and the README.
type Var struct {
	Name    string
	Default string
	Secret  bool
	Help    string
}

// describe appends the variables of t in declaration order, walking each
// struct type once: a struct shared by several processes (Log, MemoryRoot,
// a token) is one declaration, listed where it first appears.
func describe(t reflect.Type, out *[]Var, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			if f.Type.Kind() == reflect.Struct {
				describe(f.Type, out, seen)
			}
			continue
		}
		name, _, _ = strings.Cut(name, ",")
		*out = append(*out, Var{
			Name:    name,
			Default: f.Tag.Get("envDefault"),
			Secret:  f.Tag.Get("secret") == "true",
			Help:    f.Tag.Get("help"),
		})
	}
}

// All lists every variable of every process, for `clankie env`: each
// declaration once, so a variable declared twice would be listed twice (a
// test refuses that).
func All() []Var {
	var out []Var
	seen := map[reflect.Type]bool{}
	for _, c := range []any{Memory{}, TextBridge{}, VoiceBridge{}, Operator{}} {
		describe(reflect.TypeOf(c), &out, seen)
	}
	return out
}

// validDir checks CLANKIE_MEMORY_DIR after expansion: with HOME unset the
// default would become /.clankie/memory, which is never what was meant.
func validDir(dir string) error {
	if strings.TrimSpace(dir) == "" || strings.HasPrefix(dir, "/.clankie") && os.Getenv("HOME") == "" {
		return errors.New("CLANKIE_MEMORY_DIR must name a directory (HOME is unset, so the default cannot be used)")
	}
	return nil
}

// checkListenAddr refuses what net.Listen would refuse later with a less
// helpful error: not host:port, or a port that is not 0–65535.
func checkListenAddr(name, addr, example string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%s must be host:port, such as %s", name, example)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s has no valid port: a number from 0 to 65535, such as %s", name, example)
	}
	return nil
}
