package commands

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clankie/clankie/interaction"
)

// Rendering budgets. Discord cuts a message at 2000 characters and the router
// cuts a long reply at a line boundary, so one fact must stay one line well
// under that; the rest of a fact line (id, kind, visibility, proposer,
// expiry) takes at most about 200 characters.
const (
	maxBodyOnLine  = 1600
	maxPreview     = 80
	maxChoiceName  = 100
	ellipsis       = "…"
	newlineMark    = " ⏎ "
	zeroWidthSpace = "\u200b"
	// markdownChars are the characters Discord's markdown gives a meaning to
	// inside a line; each is shown literally when preceded by a backslash.
	// '<' is among them so a fact cannot form a channel, role, emoji or
	// timestamp tag.
	markdownChars = "\\*_~`|>#-[]()<"
)

// flatten puts text on one line, so that one fact is always one line of a
// reply and a cut at a line boundary never splits a fact. Line breaks become
// a visible mark; any other control or separator character becomes a space.
func flatten(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
			b.WriteString(newlineMark)
		case unicode.IsControl(r):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownUnits splits text into the pieces it is shown as, each escaped:
// markdown characters get a backslash, '@' is followed by a zero-width space
// (so "@everyone" and "<@id>" neither ping nor look like a mention; the
// router already sends no allowed mentions), and a leading "1." loses its
// list meaning. Units keep an escape and its character together, so a cut
// between units never leaves a dangling backslash.
func markdownUnits(s string) []string {
	units := make([]string, 0, len(s))
	leadingDigits := true
	for i, r := range s {
		switch {
		case strings.ContainsRune(markdownChars, r):
			units = append(units, `\`+string(r))
		case r == '@':
			units = append(units, "@"+zeroWidthSpace)
		case r == '.' && leadingDigits && i > 0:
			units = append(units, `\.`)
		default:
			units = append(units, string(r))
		}
		leadingDigits = leadingDigits && r >= '0' && r <= '9'
	}
	return units
}

// escapeMarkdown shows text literally in a Discord message.
func escapeMarkdown(s string) string { return strings.Join(markdownUnits(s), "") }

// factText renders a fact body (or any text people wrote) for a reply: on
// one line, escaped, and at most max characters, ending in "…" when cut.
func factText(body string, max int) string {
	units := markdownUnits(flatten(body))
	total := 0
	for _, u := range units {
		total += utf8.RuneCountInString(u)
	}
	if total <= max {
		return strings.Join(units, "")
	}
	var b strings.Builder
	used := 0
	for _, u := range units {
		n := utf8.RuneCountInString(u)
		if used+n+1 > max {
			break
		}
		b.WriteString(u)
		used += n
	}
	return b.String() + ellipsis
}

// clipRunes cuts plain text to max characters, ending in "…" when cut.
func clipRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return strings.TrimRightFunc(string(r[:max-1]), unicode.IsSpace) + ellipsis
}

// code shows an id as inline code (ids are what a person types back). Ids
// come from the memory service, where an operator can set them, so one is
// kept to one inert span: no backtick to end it, no line break, no bidi
// control to reorder it.
func code(id string) string {
	return "`" + interaction.Neutralize(flatten(strings.ReplaceAll(id, "`", "'"))) + "`"
}

// snowflake reports whether id can be a Discord id (digits only), the one
// shape that may go inside a mention tag.
func snowflake(id string) bool {
	return id != "" && strings.Trim(id, "0123456789") == ""
}

// mention names a user. It never pings: the router sends every reply with no
// allowed mentions. An id that cannot be a user's is shown as code rather
// than let it close the tag and add markdown of its own.
func mention(userID string) string {
	if !snowflake(userID) {
		return code(userID)
	}
	return "<@" + userID + ">"
}

// channelMention names a channel, like mention.
func channelMention(channelID string) string {
	if !snowflake(channelID) {
		return code(channelID)
	}
	return "<#" + channelID + ">"
}

// relativeTime is a Discord timestamp that each reader sees in their own
// locale and time zone ("in 3 days").
func relativeTime(t time.Time) string { return "<t:" + strconv.FormatInt(t.Unix(), 10) + ":R>" }

// sentence makes a service's sentence fit to show: one line, escaped, capitalised
// and ending in a full stop.
func sentence(s string) string {
	s = strings.TrimSpace(flatten(s))
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "!") && !strings.HasSuffix(s, "?") {
		s += "."
	}
	return escapeMarkdown(s)
}
