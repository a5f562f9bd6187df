package commands

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/interaction"
)

func TestParseExpires(t *testing.T) {
	now := testNow // 2026-03-01 12:00 UTC
	tests := []struct {
		in      string
		want    time.Time // zero: no expiry
		refused string    // a word the refusal must contain
	}{
		{in: "", want: time.Time{}},
		{in: "   ", want: time.Time{}},
		{in: "90m", want: now.Add(90 * time.Minute)},
		{in: "12h", want: now.Add(12 * time.Hour)},
		{in: "7d", want: now.AddDate(0, 0, 7)},
		{in: "2w", want: now.AddDate(0, 0, 14)},
		{in: " 7D ", want: now.AddDate(0, 0, 7)},
		{in: "365d", want: now.AddDate(0, 0, 365)},
		{in: "2027-01-31", want: time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
		{in: "2026-03-01", want: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}, // today: kept through today
		{in: "2027-02-28", want: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)}, // the latest date accepted
		{in: "366d", refused: "365 days"},
		{in: "53w", refused: "365 days"},
		{in: "2027-03-01", refused: "2027-02-28"},
		{in: "0m", refused: "future"},
		{in: "2026-02-28", refused: "future"},
		{in: "2020-01-01", refused: "future"},
		{in: "tomorrow", refused: "90m, 12h, 7d or 2w"},
		{in: "12x", refused: "90m, 12h, 7d or 2w"},
		{in: "m", refused: "90m"},
		{in: "-5d", refused: "90m"},
		{in: "+5d", refused: "90m"},
		{in: "1.5h", refused: "90m"},
		{in: "1h30m", refused: "90m"},
		{in: "9999999d", refused: "90m"},
		{in: "2027-02-30", refused: "90m"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseExpires(english(t), tt.in, now, now)
			if tt.refused != "" {
				ue, ok := interaction.AsUserError(err)
				if !ok {
					t.Fatalf("parseExpires(%q) = %v, %v; want a refusal", tt.in, got, err)
				}
				if !strings.Contains(ue.Sentence, tt.refused) {
					t.Fatalf("refusal %q does not contain %q", ue.Sentence, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseExpires(%q): %v", tt.in, err)
			}
			if tt.want.IsZero() {
				if got != nil {
					t.Fatalf("parseExpires(%q) = %v; want no expiry", tt.in, got)
				}
				return
			}
			if got == nil || !got.Equal(tt.want) || got.Location() != time.UTC {
				t.Fatalf("parseExpires(%q) = %v; want %v UTC", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseExpiresExampleDateIsValid(t *testing.T) {
	_, err := parseExpires(english(t), "tomorrow", testNow, testNow)
	ue, _ := interaction.AsUserError(err)
	example := testNow.AddDate(0, 1, 0).Format(dateLayout)
	if ue == nil || !strings.Contains(ue.Sentence, example) {
		t.Fatalf("refusal %v does not offer %s", err, example)
	}
	if _, err := parseExpires(english(t), example, testNow, testNow); err != nil {
		t.Fatalf("the example date is refused: %v", err)
	}
}

func TestIssuedAt(t *testing.T) {
	snowflake := func(at time.Time) string {
		return strconv.FormatUint(uint64(at.UnixMilli()-discordEpochMs)<<22|12345, 10)
	}
	tests := []struct {
		name string
		id   string
		want time.Time
	}{
		{"recent snowflake", snowflake(testNow.Add(-30 * time.Second)), testNow.Add(-30 * time.Second)},
		{"snowflake too old", snowflake(testNow.Add(-time.Hour)), testNow},
		{"snowflake in the future", snowflake(testNow.Add(time.Hour)), testNow},
		{"not a snowflake", "interaction-1", testNow},
		{"empty", "", testNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := issuedAt(tt.id, testNow); !got.Equal(tt.want) {
				t.Fatalf("issuedAt = %v; want %v", got, tt.want)
			}
		})
	}
}
