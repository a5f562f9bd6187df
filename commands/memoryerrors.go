package commands

import (
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/memoryclient"
)

// effect says whether a failed call could have changed memory, which decides
// what a person is told when the service is out of reach.
type effect int

const (
	readEffect effect = iota
	writeEffect
)

// Sentences for failures at the memory edge. The spec's words ("memory is
// unavailable right now; nothing was saved") are kept verbatim inside them.
const (
	sayUnavailableWrite = "Sorry, memory is unavailable right now; nothing was saved."
	sayUnavailableRead  = "Sorry, memory is unavailable right now; please try again shortly."
	// sayOutcomeUnknown: the service's database took the write and did not
	// confirm it (a 503 outcome_unknown), so "nothing was saved" would lie.
	sayOutcomeUnknown  = "Sorry, memory did not confirm that, so it may or may not have been saved; please check before repeating it."
	sayConflict        = "That conflicts with what memory already holds for this command, so nothing was changed. Please run the command again."
	sayForgetForbidden = "You can only forget facts about you or facts you proposed."
	sayNoSuchFact      = "There is no fact with that id about %s."
	sayRefusedPrefix   = "Memory refused that: %s"
)

// memoryError turns a failed call into what the person sees. Out of reach
// (down, slow, canceled) is a sentence that says whether anything was saved;
// a refusal of the request is the service's own sentence, which its contract
// keeps free of memory content; a conflict is a sentence. Anything else is
// returned unchanged: the router logs its type and shows a generic sentence,
// because it is a fault of ours or the deployment's, not the person's.
func memoryError(err error, e effect) error {
	if me, ok := memoryclient.AsError(err); ok && me.Code == "outcome_unknown" && e == writeEffect {
		return interaction.UserErrorf(sayOutcomeUnknown)
	}
	switch memoryclient.KindOf(err) {
	case memoryclient.KindUnavailable, memoryclient.KindTimeout, memoryclient.KindCanceled:
		if e == writeEffect {
			return interaction.UserErrorf(sayUnavailableWrite)
		}
		return interaction.UserErrorf(sayUnavailableRead)
	case memoryclient.KindInvalid:
		return interaction.UserErrorf(sayRefusedPrefix, serviceSentence(err))
	case memoryclient.KindConflict:
		return interaction.UserErrorf(sayConflict)
	}
	return err
}

// forgetError adds forget's own answers: the service refuses (403) a person
// who is neither the fact's subject nor its proposer, and answers 404 for a
// fact that is not there.
func forgetError(err error, subjectID string) error {
	switch memoryclient.KindOf(err) {
	case memoryclient.KindForbidden:
		return interaction.UserErrorf(sayForgetForbidden)
	case memoryclient.KindNotFound:
		return interaction.UserErrorf(sayNoSuchFact, mention(subjectID))
	}
	return memoryError(err, writeEffect)
}

// serviceSentence is the service's sentence from err, shown safely.
func serviceSentence(err error) string {
	if e, ok := memoryclient.AsError(err); ok && e.Message != "" {
		return sentence(e.Message)
	}
	return "the request was not valid."
}
