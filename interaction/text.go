package interaction

import "strings"

// isBidiControl reports whether r is an explicit directional embedding,
// override or isolate control (U+202A–U+202E, U+2066–U+2069). They reorder
// the text that follows them, so a fact or an id holding one could show a
// reader something other than what it says ("gpj.exe" read as "exe.jpg"),
// or spill its direction into the bot's own words.
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
