package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/interaction"
)

// FuzzParseExpires feeds the `expires` option any text, at any instant from
// 2000 to 2199, counted from a base that is a plausible interaction time
// (up to 15 minutes before now, up to a minute after). It must never panic;
// an accepted expiry lies in (now, now+365d] and is UTC; a refusal is a
// sentence for the user; blank text means no expiry. The corpus is in
// testdata/fuzz/FuzzParseExpires.
func FuzzParseExpires(f *testing.F) {
	f.Add("7d", int64(0), int64(0))
	f.Add("2027-02-28", int64(-1), int64(-900_000))
	f.Fuzz(func(t *testing.T, text string, nowSeconds, baseSkewMillis int64) {
		const (
			from = 946684800                // 2000-01-01
			span = 200 * 365 * 24 * 60 * 60 // two centuries of seconds
		)
		now := time.Unix(from+fuzzMod(nowSeconds, span), 0).UTC()
		skew := time.Duration(fuzzMod(baseSkewMillis, int64((maxInteractionAge+maxClockSkew)/time.Millisecond)+1))*time.Millisecond - maxInteractionAge
		base := now.Add(skew)

		at, err := parseExpires(english(t), text, base, now)
		switch {
		case err != nil:
			if at != nil {
				t.Fatalf("parseExpires(%q) answered %v and an error", text, at)
			}
			ue, ok := interaction.AsUserError(err)
			if !ok || strings.TrimSpace(ue.Sentence) == "" {
				t.Fatalf("parseExpires(%q) refused without a sentence: %v", text, err)
			}
		case at == nil:
			if strings.TrimSpace(text) != "" {
				t.Fatalf("parseExpires(%q) answered no expiry for non-blank text", text)
			}
		default:
			if !at.After(now) || at.After(now.Add(365*24*time.Hour)) {
				t.Fatalf("parseExpires(%q) at %s accepted %s, outside (now, now+365d]", text, now, at)
			}
			if at.Location() != time.UTC {
				t.Fatalf("parseExpires(%q) answered %s, not UTC", text, at)
			}
		}
	})
}

// fuzzMod is the non-negative remainder, so any fuzzed int64 maps into [0, n).
func fuzzMod(v, n int64) int64 {
	r := v % n
	if r < 0 {
		r += n
	}
	return r
}
