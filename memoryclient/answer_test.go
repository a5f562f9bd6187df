package memoryclient

import (
	"testing"

	"github.com/clankie/clankie/api"
)

// TestErrorInAPITerms: callers (the slash commands) read a failure as
// "unreachable" plus the service's status and body, never as a Kind.
func TestErrorInAPITerms(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         *Error
		unreachable bool
		status      int
	}{
		{"connection refused", &Error{Kind: KindUnavailable}, true, 0},
		{"503 outcome unknown", &Error{Kind: KindUnavailable, Status: 503, Code: "outcome_unknown"}, true, 503},
		{"429", &Error{Kind: KindUnavailable, Status: 429}, true, 429},
		{"timeout", &Error{Kind: KindTimeout}, true, 0},
		{"canceled", &Error{Kind: KindCanceled}, true, 0},
		{"422", &Error{Kind: KindInvalid, Status: 422, Code: "person_at_capacity", Message: "full"}, false, 422},
		{"refused before sending", invalidArg("forget", "invalid_parameter", "factId is empty"), false, 400},
		{"403", &Error{Kind: KindForbidden, Status: 403}, false, 403},
		{"404", &Error{Kind: KindNotFound, Status: 404}, false, 404},
		{"409", &Error{Kind: KindConflict, Status: 409}, false, 409},
		{"500", &Error{Kind: KindInternal, Status: 500}, false, 500},
		{"a 2xx body outside the contract", &Error{Kind: KindUnexpected, Status: 200}, false, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Unreachable(); got != tc.unreachable {
				t.Fatalf("Unreachable() = %v", got)
			}
			status, body := tc.err.Answer()
			if status != tc.status || body != (api.Error{Code: tc.err.Code, Message: tc.err.Message}) {
				t.Fatalf("Answer() = %d, %+v", status, body)
			}
		})
	}
}
