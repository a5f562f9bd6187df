package interaction

import (
	"strings"
	"testing"
)

// TestComponentPrefixRoutesByTheKeyAndRefusesWhatDiscordWouldNot: a click
// is routed by the part before the first ':', and a custom_id no message
// could carry routes nowhere.
func TestComponentPrefixRoutesByTheKeyAndRefusesWhatDiscordWouldNot(t *testing.T) {
	for _, tc := range []struct {
		customID string
		want     string
		ok       bool
	}{
		{"voice-consent:vs-0123abcd:in", "voice-consent", true},
		{"demo:abc", "demo", true},
		{"demo", "demo", true},
		{"demo:", "demo", true},
		{strings.Repeat("d", MaxCustomID), strings.Repeat("d", MaxCustomID), true},
		{"é" + strings.Repeat("d", MaxCustomID-1), "é" + strings.Repeat("d", MaxCustomID-1), true}, // characters, not bytes
		{"", "", false},
		{":abc", "", false},
		{"demo:" + strings.Repeat("a", MaxCustomID-4), "", false}, // 101 characters
		{"demo:a\nb", "", false},
		{"demo\x00:a", "", false},
		{"demo:\x7f", "", false},
		{"demo:\xff", "", false},
	} {
		got, ok := ComponentPrefix(tc.customID)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ComponentPrefix(%q) = %q, %v; want %q, %v", tc.customID, got, ok, tc.want, tc.ok)
		}
	}
}
