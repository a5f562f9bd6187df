package personfiles

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// fuzzFact builds a fact (and the input it shares fields with) from fuzz
// arguments: zone 0 keeps the times in UTC, anything else moves them to a
// fixed zone of that many minutes, which the fast path must refuse.
func fuzzFact(id, guild, user, kind, body, scope, channel string, confidence float64, created, updated, expires int64,
	hasExpires bool, supersedes, surface, event, corr, proposer, provChannel, message string, expired bool, zone int16) api.Fact {
	at := func(n int64) time.Time {
		t := time.Unix(0, n).UTC()
		if zone != 0 {
			t = t.In(time.FixedZone("", int(zone)*60))
		}
		return t
	}
	f := api.Fact{
		FactID: id, Subject: api.Subject{GuildID: guild, UserID: user}, Kind: api.Kind(kind), Body: body,
		Visibility: api.Visibility{Scope: api.Scope(scope), ChannelID: channel}, Confidence: confidence,
		CreatedAt: at(created), UpdatedAt: at(updated), SupersedesFactID: supersedes, Expired: expired,
		Provenance: api.Provenance{SourceSurface: api.Surface(surface), SourceEventID: event, CorrelationID: corr,
			ProposerUserID: proposer, ChannelID: provChannel, SourceMessageID: message},
	}
	if hasExpires {
		e := at(expires)
		f.ExpiresAt = &e
	}
	return f
}

// checkAgrees fails unless the hand encoders write json.Marshal's bytes
// whenever they take the fast path, and appendFactJSON returns json.Marshal's
// result either way. It reports whether the fact took the fast path.
func checkAgrees(t *testing.T, f api.Fact) (fast bool) {
	t.Helper()
	for _, c := range []struct {
		what   string
		v      any
		append func([]byte) ([]byte, bool)
		whole  func() ([]byte, error)
	}{
		{"fact", &f, func(b []byte) ([]byte, bool) { return appendFact(b, &f) }, func() ([]byte, error) { return appendFactJSON(nil, &f) }},
	} {
		want, wantErr := json.Marshal(c.v)
		prefix := []byte("prefix")
		got, ok := c.append(prefix)
		switch {
		case ok && wantErr != nil:
			t.Fatalf("%s: the fast path wrote %s where json.Marshal failed: %v", c.what, got, wantErr)
		case ok && !bytes.Equal(got, append([]byte("prefix"), want...)):
			t.Fatalf("%s: the fast path wrote\n%s\njson.Marshal\n%s", c.what, got[len(prefix):], want)
		case !ok && !bytes.Equal(got, []byte("prefix")):
			t.Fatalf("%s: a refused fast path left %q behind", c.what, got)
		}
		whole, err := c.whole()
		if !bytes.Equal(whole, want) || (err == nil) != (wantErr == nil) {
			t.Fatalf("%s: got %s, %v; json.Marshal %s, %v", c.what, whole, err, want, wantErr)
		}
		if c.what == "fact" {
			fast = ok
		}
	}
	return fast
}

// TestFactJSONTakesTheFastPath holds the fast path to what the store
// meets: a stored fact of every shape takes it (else it would silently
// cost as much as before), and what it must refuse is refused.
func TestFactJSONTakesTheFastPath(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 59, 58, 123456789, time.UTC)
	exp := at.Add(24 * time.Hour)
	base := api.Fact{FactID: "fabc2345", Subject: api.Subject{GuildID: "100000000000000001", UserID: "200000000000000002"},
		Kind: api.KindPersonFact, Body: "plays bass in a jazz trio", Visibility: api.Visibility{Scope: api.ScopeGuild},
		Confidence: 0.9, CreatedAt: at, UpdatedAt: at,
		Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: "1300000000000000001",
			CorrelationID: "0123456789abcdef", ProposerUserID: "200000000000000002", ChannelID: "100000000000000011"}}
	cases := []struct {
		name string
		edit func(*api.Fact)
		fast bool
	}{
		{"a guild fact", func(*api.Fact) {}, true},
		{"a channel fact, expiring, superseding, expired", func(f *api.Fact) {
			f.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: "100000000000000011"}
			f.ExpiresAt, f.SupersedesFactID, f.Expired = &exp, "fold2345", true
		}, true},
		{"no provenance at all", func(f *api.Fact) { f.Provenance = api.Provenance{} }, true},
		{"taken from a message", func(f *api.Fact) { f.Provenance.SourceMessageID = "1300000000000000077" }, true},
		{"only a source message", func(f *api.Fact) { f.Provenance = api.Provenance{SourceMessageID: "1300000000000000077"} }, true},
		{"quotes, HTML, control characters and non-ASCII in the body", func(f *api.Fact) { f.Body = "say \"hi\" <b>&</b>\n\tcafé \u2028 \xff" }, true},
		{"confidence 0, 1, tiny and huge", func(f *api.Fact) { f.Confidence = 1e-7 }, true},
		{"a whole-second time", func(f *api.Fact) { f.CreatedAt, f.UpdatedAt = at.Truncate(time.Second), at.Truncate(time.Second) }, true},
		{"a time outside UTC", func(f *api.Fact) { f.UpdatedAt = at.In(time.FixedZone("CET", 3600)) }, false},
		{"an expiry outside UTC", func(f *api.Fact) { e := exp.In(time.FixedZone("", -7200)); f.ExpiresAt = &e }, false},
		{"a year past 9999", func(f *api.Fact) { f.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, false},
		{"a confidence that is not finite", func(f *api.Fact) { f.Confidence = math.Inf(1) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			if fast := checkAgrees(t, f); fast != tc.fast {
				t.Fatalf("fast path taken: %v, want %v", fast, tc.fast)
			}
		})
	}
	for _, c := range []float64{0, 1, 0.5, 1e-6, 1e-7, 1e21, 1e20, -0.25, 123456789.125} {
		f := base
		f.Confidence = c
		if !checkAgrees(t, f) {
			t.Fatalf("confidence %v left the fast path", c)
		}
	}
}

func FuzzFactJSONAgreesWithEncodingJSON(f *testing.F) {
	f.Add("fabc2345", "100000000000000001", "200000000000000002", "person-fact", "plays bass", "guild", "", 0.9,
		int64(1796169598123456789), int64(1796169598123456789), int64(0), false, "", "discord_text", "13", "ab", "2", "11", "", false, int16(0))
	f.Add("fabc2345", "1", "2", "person-fact", "from a message", "guild", "", 0.5,
		int64(1796169598123456789), int64(1796169598123456789), int64(0), false, "", "discord_text", "13", "", "2", "11", "1300000000000000077", false, int16(0))
	f.Add("f\"<>&", "g\u2028", "u\xff", "preference", "line\nbreak\ttab \x00 é", "channel", "c1", 1e-7,
		int64(-62135596800000000), int64(math.MaxInt64), int64(42), true, "fold", "", "", "", "", "", "m\"<1>", true, int16(90))
	f.Fuzz(func(t *testing.T, id, guild, user, kind, body, scope, channel string, confidence float64, created, updated, expires int64,
		hasExpires bool, supersedes, surface, event, corr, proposer, provChannel, message string, expired bool, zone int16) {
		checkAgrees(t, fuzzFact(id, guild, user, kind, body, scope, channel, confidence, created, updated, expires,
			hasExpires, supersedes, surface, event, corr, proposer, provChannel, message, expired, zone))
	})
}
