package personfiles

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/clankie/clankie/api"
)

// A proposal encodes its new fact once for the journal and the log, a
// compaction every fact of the person; a first start after an upgrade
// encodes every migrated fact. (The proposal's digest, in the domain, is
// json.Marshal's.) json.Marshal did both by reflection: about a tenth of the
// service's CPU with 64 writers when it was measured. Measured again on 2
// shared cores (3 alternating rounds, medians), json.Marshal in their
// place left the proposal figures within the fsync's noise (64 writers:
// 6986 writes/s against 6469) but made BenchmarkFirstStart/schema-1
// (10000 files × 10 facts migrated) take 6.9 s against 6.0 s, so they
// stay, inside the engine: the HTTP answers are the codec's (memory/http.go).
// These write the same bytes by hand, and
// report false for what they do not write the way json.Marshal does (a
// time outside UTC, a float that is not finite): the caller then asks
// json.Marshal, so the bytes never differ
// (FuzzFactJSONAgreesWithEncodingJSON holds them equal).

// appendFactJSON appends json.Marshal(f)'s bytes to b.
func appendFactJSON(b []byte, f *api.Fact) ([]byte, error) {
	if out, ok := appendFact(b, f); ok {
		return out, nil
	}
	j, err := json.Marshal(f)
	if err != nil {
		return b, err
	}
	return append(b, j...), nil
}

// appendFact appends json.Marshal(f)'s bytes to b, or returns b unchanged
// and false.
func appendFact(b []byte, f *api.Fact) ([]byte, bool) {
	start := len(b)
	b = append(b, `{"factId":`...)
	b = appendJSONString(b, f.FactID)
	b = append(b, `,"subject":`...)
	b = appendSubject(b, f.Subject)
	b, ok := appendFactCore(b, f.Kind, f.Body, f.Visibility, f.Confidence)
	if !ok || !utc(f.CreatedAt) || !utc(f.UpdatedAt) {
		return b[:start], false
	}
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, f.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = appendTime(b, f.UpdatedAt)
	if b, ok = appendFactTail(b, f.ExpiresAt, f.SupersedesFactID, f.Provenance); !ok {
		return b[:start], false
	}
	if f.Expired {
		b = append(b, `,"expired":true`...)
	}
	return append(b, '}'), true
}

func appendSubject(b []byte, s api.Subject) []byte {
	b = append(b, `{"guildId":`...)
	b = appendJSONString(b, s.GuildID)
	b = append(b, `,"userId":`...)
	b = appendJSONString(b, s.UserID)
	return append(b, '}')
}

// appendFactCore appends the fields Fact and FactInput share between
// subject and the times, each with its leading comma.
func appendFactCore(b []byte, kind api.Kind, body string, v api.Visibility, confidence float64) ([]byte, bool) {
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(kind))
	b = append(b, `,"body":`...)
	b = appendJSONString(b, body)
	b = append(b, `,"visibility":{"scope":`...)
	b = appendJSONString(b, string(v.Scope))
	if v.ChannelID != "" {
		b = append(b, `,"channelId":`...)
		b = appendJSONString(b, v.ChannelID)
	}
	b = append(b, `},"confidence":`...)
	return appendFloat(b, confidence)
}

// appendFactTail appends the fields Fact and FactInput share after the
// times.
func appendFactTail(b []byte, expires *time.Time, supersedes string, p api.Provenance) ([]byte, bool) {
	if expires != nil {
		if !utc(*expires) {
			return b, false
		}
		b = append(b, `,"expiresAt":`...)
		b = appendTime(b, *expires)
	}
	if supersedes != "" {
		b = append(b, `,"supersedesFactId":`...)
		b = appendJSONString(b, supersedes)
	}
	b = append(b, `,"provenance":{`...)
	first := true
	for _, fld := range [...]struct{ name, v string }{
		{`"sourceSurface":`, string(p.SourceSurface)}, {`"sourceEventId":`, p.SourceEventID},
		{`"correlationId":`, p.CorrelationID}, {`"proposerUserId":`, p.ProposerUserID}, {`"channelId":`, p.ChannelID},
		{`"sourceMessageId":`, p.SourceMessageID},
	} {
		if fld.v == "" {
			continue // every provenance field is omitempty
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, fld.name...)
		b = appendJSONString(b, fld.v)
	}
	return append(b, '}'), true
}

// utc reports whether t is in UTC with a four-digit year: then
// time.Time.MarshalJSON writes exactly appendTime's bytes.
func utc(t time.Time) bool {
	y := t.Year()
	return t.Location() == time.UTC && y >= 0 && y <= 9999
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat appends f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 or from 1e21,
// with a one-digit negative exponent unpadded (1e-7, not 1e-07).
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false // json.Marshal refuses them
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}
