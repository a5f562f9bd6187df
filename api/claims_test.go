package api

import (
	"strings"
	"testing"
)

func TestValidInteractionID(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"1", true},
		{"1234567890123456789", true},
		{"18446744073709551615", true},
		{"", false},
		{strings.Repeat("1", 21), false},
		{"12a4", false},
		{"-1", false},
		{"+1", false},
		{" 1", false},
		{"１２", false}, // full-width digits are not ASCII
		{"..", false},
	} {
		if got := ValidInteractionID(tt.in); got != tt.want {
			t.Errorf("ValidInteractionID(%q) = %v", tt.in, got)
		}
	}
}
