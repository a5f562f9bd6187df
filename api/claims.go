package api

import "time"

// InteractionClaimTTL is how long the memory service remembers a claimed
// Discord interaction id: the life of the interaction's token, after which
// Discord accepts no answer to it, so a replay can no longer be answered
// by anyone.
const InteractionClaimTTL = 15 * time.Minute
