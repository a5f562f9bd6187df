package commands

import (
	"strconv"
	"strings"
	"time"

	"github.com/clankie/clankie/lang"
)

// Expiry bounds and forms.
const (
	maxExpiry  = 365 * 24 * time.Hour
	dateLayout = "2006-01-02"
	// maxDurationDigits keeps n×unit far from overflowing a time.Duration
	// (999999 weeks is about 19000 years), so the bound check is honest.
	maxDurationDigits = 6
	// discordEpochMs is the start of Discord's snowflake clock.
	discordEpochMs = 1420070400000
	// maxInteractionAge is how long Discord lets an interaction be answered;
	// an older "interaction time" is not one Discord could have delivered.
	maxInteractionAge = 15 * time.Minute
	maxClockSkew      = time.Minute
)

// parseExpires reads the `expires` option: empty (no expiry), one number and
// a unit (90m, 12h, 7d, 2w; counted from base), or a date (2027-01-31). A
// date means the fact is kept through that whole day in UTC: it expires at
// the start of the next day, which is what "until the 31st" means to most
// people and needs no time of day. Either way the expiry must be after now
// and at most 365 days after now; a refusal is a sentence with examples.
func parseExpires(say *lang.Printer, text string, base, now time.Time) (*time.Time, error) {
	text = strings.ToLower(strings.TrimSpace(text))
	if text == "" {
		return nil, nil
	}
	at, ok := expiryDuration(text, base)
	if !ok {
		at, ok = expiryDate(text)
	}
	if !ok {
		return nil, refusal(say, lang.ExpiryUnreadable, lang.Args{"Examples": expiryExamples(say, now)})
	}
	if !at.After(now) {
		return nil, refusal(say, lang.ExpiryPast, lang.Args{"Examples": expiryExamples(say, now)})
	}
	if at.After(now.Add(maxExpiry)) {
		return nil, refusal(say, lang.ExpiryTooFar, lang.Args{"Date": latestExpiryDate(now).Format(dateLayout)})
	}
	at = at.UTC()
	return &at, nil
}

// expiryDuration reads "<digits><unit>", counted from base.
func expiryDuration(text string, base time.Time) (time.Time, bool) {
	unit, ok := expiryUnit(text[len(text)-1])
	digits := text[:len(text)-1]
	if !ok || digits == "" || len(digits) > maxDurationDigits {
		return time.Time{}, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || strings.ContainsAny(digits, "+-") {
		return time.Time{}, false
	}
	return base.Add(time.Duration(n) * unit), true
}

// expiryUnit returns the length of one m, h, d or w.
func expiryUnit(c byte) (time.Duration, bool) {
	switch c {
	case 'm':
		return time.Minute, true
	case 'h':
		return time.Hour, true
	case 'd':
		return 24 * time.Hour, true
	case 'w':
		return 7 * 24 * time.Hour, true
	}
	return 0, false
}

// expiryDate reads "YYYY-MM-DD" as the end of that day in UTC.
func expiryDate(text string) (time.Time, bool) {
	day, err := time.ParseInLocation(dateLayout, text, time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	return day.AddDate(0, 0, 1), true
}

// latestExpiryDate is the last date whose end is still within 365 days of now.
func latestExpiryDate(now time.Time) time.Time {
	return now.UTC().Add(maxExpiry).Truncate(24*time.Hour).AddDate(0, 0, -1)
}

// expiryExamples says what the option accepts, with a date example that is
// valid today.
func expiryExamples(say *lang.Printer, now time.Time) string {
	return say.Say(lang.ExpiryExamples, lang.Args{"Date": now.UTC().AddDate(0, 1, 0).Format(dateLayout)})
}

// issuedAt returns when Discord created the interaction (its id is a
// snowflake that carries the time). Relative expiries count from it rather
// than from the clock, so a redelivered interaction sends the same expiresAt,
// and the service, which keys proposals by the interaction, answers with the
// fact stored the first time instead of a conflict. An id that is not a
// snowflake of the last few minutes (a test id, a skewed clock) counts from
// now.
func issuedAt(interactionID string, now time.Time) time.Time {
	id, err := strconv.ParseUint(interactionID, 10, 64)
	if err != nil {
		return now
	}
	at := time.UnixMilli(int64(id>>22) + discordEpochMs)
	if at.Before(now.Add(-maxInteractionAge)) || at.After(now.Add(maxClockSkew)) {
		return now
	}
	return at
}

// ParseExpires reads an expiry as the `expires` option does (90m, 12h, 7d,
// 2w counted from now, or a date; in the future and at most 365 days
// ahead), so the operator CLI's --expires takes the same forms. A refusal
// is a UserError whose sentence, in say's language, gives examples.
func ParseExpires(say *lang.Printer, text string, now time.Time) (*time.Time, error) {
	return parseExpires(say, text, now, now)
}
