package bot

// The English of the router's own sentences, which the tests expect
// when an interaction carries no locale the catalog translates.
const (
	genericFailure    = "Something went wrong on my side; nothing was changed. Please try again in a moment."
	memoryUnreachable = "I can't reach my memory right now, so I did nothing. Please try again in a moment."
)
