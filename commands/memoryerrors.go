package commands

import (
	"errors"
	"net/http"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
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

// codeOutcomeUnknown is the service's code for a write its database took
// and did not confirm (503).
const codeOutcomeUnknown = "outcome_unknown"

// memoryFailure is a failed memory call in the api's terms: whether the
// service answered in time, and if so with which HTTP status and error
// body. memoryclient's errors implement it, so commands names no client
// type and switches on none of its kinds.
type memoryFailure interface {
	error
	// Unreachable reports whether memory gave no usable answer in time
	// (down, overloaded, slow or canceled).
	Unreachable() bool
	// Answer returns the status the service answered (400 for a request
	// refused before sending, 0 when nothing answered) and its error body.
	Answer() (status int, body api.Error)
}

// memoryError turns a failed call into what the person sees. Out of reach
// (down, slow, canceled) is a sentence that says whether anything was saved;
// a refusal of the request is the service's own sentence, which its contract
// keeps free of memory content; a conflict is a sentence. Anything else is
// returned unchanged: the router logs its type and shows a generic sentence,
// because it is a fault of ours or the deployment's, not the person's.
func memoryError(err error, e effect) error {
	var f memoryFailure
	if !errors.As(err, &f) {
		return err
	}
	status, body := f.Answer()
	switch {
	case body.Code == codeOutcomeUnknown && e == writeEffect:
		return interaction.UserErrorf(sayOutcomeUnknown)
	case f.Unreachable() && e == writeEffect:
		return interaction.UserErrorf(sayUnavailableWrite)
	case f.Unreachable():
		return interaction.UserErrorf(sayUnavailableRead)
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
		return interaction.UserErrorf(sayRefusedPrefix, serviceSentence(body))
	case status == http.StatusConflict:
		return interaction.UserErrorf(sayConflict)
	}
	return err
}

// forgetError adds forget's own sentences: the service refuses (403) a person
// who is neither the fact's subject nor its proposer, and answers 404 for a
// fact that is not there.
func forgetError(err error, subjectID string) error {
	var f memoryFailure
	if errors.As(err, &f) && !f.Unreachable() {
		switch status, _ := f.Answer(); status {
		case http.StatusForbidden:
			return interaction.UserErrorf(sayForgetForbidden)
		case http.StatusNotFound:
			return interaction.UserErrorf(sayNoSuchFact, mention(subjectID))
		}
	}
	return memoryError(err, writeEffect)
}

// serviceSentence is the service's sentence, shown safely.
func serviceSentence(body api.Error) string {
	if body.Message != "" {
		return sentence(body.Message)
	}
	return "the request was not valid."
}
