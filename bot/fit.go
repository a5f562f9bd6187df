package bot

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxContent is Discord's limit for a message's content.
const MaxContent = 2000

// Fit cuts content to Discord's limit at a line boundary and says how many
// lines were left out ("…and N more"), so a long list never fails to send
// and never ends mid-word. A single line longer than the limit is cut at a
// rune boundary with an ellipsis.
func Fit(content string, limit int) string {
	if utf8.RuneCountInString(content) <= limit {
		return content
	}
	lines := strings.Split(content, "\n")
	for keep := len(lines) - 1; keep >= 1; keep-- {
		more := fmt.Sprintf("…and %d more", len(lines)-keep)
		head := strings.Join(lines[:keep], "\n")
		if utf8.RuneCountInString(head)+1+utf8.RuneCountInString(more) <= limit {
			return head + "\n" + more
		}
	}
	r := []rune(content)
	return string(r[:limit-1]) + "…"
}

// isBidiControl reports the explicit directional embedding, override and
// isolate controls (U+202A–U+202E, U+2066–U+2069). They reorder the text
// that follows them, so a fact or an id holding one could show a reader
// something other than what it says ("gpj.exe" read as "exe.jpg"), or spill
// its direction into the bot's own words.
func isBidiControl(r rune) bool {
	return r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069'
}

// Neutralize removes bidi embedding, override and isolate controls from text
// shown on Discord. Right-to-left script still shows right to left (the
// Unicode algorithm orders it without help); only the explicit controls go,
// and the implicit marks (U+200E, U+200F, U+061C), which reorder nothing
// beyond themselves, stay.
func Neutralize(s string) string {
	if !strings.ContainsFunc(s, isBidiControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isBidiControl(r) {
			return -1
		}
		return r
	}, s)
}
