package voice

import "github.com/clankie/clankie/config"

// consent is one voice session's consent registry. It lives in memory only:
// leaving the channel, moving channel, a restart or revocation drops it, and
// nothing of it is ever written to disk.
type consent struct {
	policy config.ConsentPolicy
	// optedIn keeps the order people opted in, so the 25-speaker cap keeps
	// the earliest.
	optedIn  []string
	optedOut map[string]bool
}

func newConsent(policy config.ConsentPolicy) *consent {
	return &consent{policy: policy, optedOut: map[string]bool{}}
}

// optIn records an explicit opt-in. It is the person's own act, so it also
// lifts their earlier opt-out.
func (c *consent) optIn(userID string) {
	delete(c.optedOut, userID)
	for _, id := range c.optedIn {
		if id == userID {
			return
		}
	}
	c.optedIn = append(c.optedIn, userID)
}

// optOut removes a person and binds for the rest of the session: presence
// never counts them again.
func (c *consent) optOut(userID string) {
	c.optedOut[userID] = true
	c.drop(userID)
}

// left drops an opt-in when its holder leaves the channel. An opt-out stays:
// rejoining must not undo it.
func (c *consent) left(userID string) { c.drop(userID) }

func (c *consent) drop(userID string) {
	for i, id := range c.optedIn {
		if id == userID {
			c.optedIn = append(c.optedIn[:i], c.optedIn[i+1:]...)
			return
		}
	}
}

// Permitted is the one consent rule: the humans present in the channel who
// count as consented under the policy, at most max, never the bot. Under
// explicit only an opt-in counts; under presence being there counts; an
// opt-out always wins.
func (c *consent) permitted(present []string, max int) []string {
	here := make(map[string]bool, len(present))
	for _, id := range present {
		here[id] = true
	}
	var out []string
	seen := map[string]bool{}
	add := func(id string) {
		if len(out) < max && here[id] && !c.optedOut[id] && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, id := range c.optedIn {
		add(id)
	}
	if c.policy == config.ConsentPresence {
		for _, id := range present {
			add(id)
		}
	}
	return out
}
