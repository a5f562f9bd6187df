package api

import "time"

// InteractionClaimTTL is how long the memory service remembers a claimed
// Discord interaction id: the life of the interaction's token, after which
// Discord accepts no answer to it, so a replay can no longer be answered
// by anyone.
const InteractionClaimTTL = 15 * time.Minute

// MaxInteractionIDLength bounds an interaction id: a Discord snowflake is
// an unsigned 64-bit integer, at most 20 decimal digits.
const MaxInteractionIDLength = 20

// ValidInteractionID reports whether id can be a Discord interaction id
// (a snowflake): 1–20 ASCII digits and nothing else.
func ValidInteractionID(id string) bool {
	if id == "" || len(id) > MaxInteractionIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}
