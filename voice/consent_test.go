package voice

import (
	"slices"
	"testing"

	"github.com/clankie/clankie/config"
)

func TestConsentRule(t *testing.T) {
	type step struct {
		op, user string
	}
	for _, tc := range []struct {
		name    string
		policy  config.ConsentPolicy
		steps   []step
		present []string
		max     int
		want    []string
	}{
		{"explicit counts only opt-ins", config.ConsentExplicit, []step{{"in", "a"}}, []string{"a", "b"}, 25, []string{"a"}},
		{"presence counts everyone here", config.ConsentPresence, nil, []string{"a", "b"}, 25, []string{"a", "b"}},
		{"opt-out wins over presence", config.ConsentPresence, []step{{"out", "b"}}, []string{"a", "b"}, 25, []string{"a"}},
		{"opt-out survives leaving and rejoining", config.ConsentPresence, []step{{"out", "b"}, {"left", "b"}}, []string{"a", "b"}, 25, []string{"a"}},
		{"leaving drops an opt-in", config.ConsentExplicit, []step{{"in", "a"}, {"left", "a"}}, []string{"a"}, 25, nil},
		{"an opt-in of someone absent does not count", config.ConsentExplicit, []step{{"in", "z"}}, []string{"a"}, 25, nil},
		{"own opt-in lifts own opt-out", config.ConsentExplicit, []step{{"out", "a"}, {"in", "a"}}, []string{"a"}, 25, []string{"a"}},
		{"the cap keeps the earliest opt-ins", config.ConsentExplicit, []step{{"in", "c"}, {"in", "a"}, {"in", "b"}}, []string{"a", "b", "c"}, 2, []string{"c", "a"}},
	} {
		c := newConsent(tc.policy)
		for _, s := range tc.steps {
			switch s.op {
			case "in":
				c.optIn(s.user)
			case "out":
				c.optOut(s.user)
			case "left":
				c.left(s.user)
			}
		}
		if got := c.permitted(tc.present, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
