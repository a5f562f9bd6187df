package api_test

import (
	"testing"

	"github.com/clankie/clankie/api"
)

func TestValidKind(t *testing.T) {
	for _, k := range api.Kinds() {
		if !api.ValidKind(k) {
			t.Errorf("ValidKind(%q) = false", k)
		}
	}
	for _, k := range []api.Kind{"", "fact", "Person-Fact"} {
		if api.ValidKind(k) {
			t.Errorf("ValidKind(%q) = true", k)
		}
	}
}
