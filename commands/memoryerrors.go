package commands

import (
	"errors"
	"net/http"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/lang"
)

// effect says whether a failed call could have changed memory, which decides
// what a person is told when the service is out of reach.
type effect int

const (
	readEffect effect = iota
	writeEffect
)

// The sentences for failures at the memory edge are the catalog's
// (lang.UnavailableWrite, …); the English keeps the spec's words ("memory
// is unavailable right now; nothing was saved") verbatim. After a 503
// outcome_unknown the service's database took the write and did not
// confirm it, so "nothing was saved" would lie: lang.OutcomeUnknown says so.

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
func memoryError(say *lang.Printer, err error, e effect) error {
	var f memoryFailure
	if !errors.As(err, &f) {
		return err
	}
	status, body := f.Answer()
	switch {
	case body.Code == codeOutcomeUnknown && e == writeEffect:
		return refusal(say, lang.OutcomeUnknown, nil)
	case f.Unreachable() && e == writeEffect:
		return refusal(say, lang.UnavailableWrite, nil)
	case f.Unreachable():
		return refusal(say, lang.UnavailableRead, nil)
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
		return refusal(say, lang.MemoryRefused, lang.Args{"Reason": serviceSentence(say, body)})
	case status == http.StatusConflict:
		return refusal(say, lang.Conflict, nil)
	}
	return err
}

// forgetError adds forget's own sentences: the service refuses (403) a person
// who is neither the fact's subject nor its proposer, and answers 404 for a
// fact that is not there.
func forgetError(say *lang.Printer, err error, subjectID string) error {
	var f memoryFailure
	if errors.As(err, &f) && !f.Unreachable() {
		switch status, _ := f.Answer(); status {
		case http.StatusForbidden:
			return refusal(say, lang.ForgetForbidden, nil)
		case http.StatusNotFound:
			return refusal(say, lang.NoSuchFact, lang.Args{"Who": mention(subjectID)})
		}
	}
	return memoryError(say, err, writeEffect)
}

// serviceSentence is the service's sentence (its own words, in English),
// shown safely.
func serviceSentence(say *lang.Printer, body api.Error) string {
	if body.Message != "" {
		return sentence(body.Message)
	}
	return say.Say(lang.InvalidRequest, nil)
}
