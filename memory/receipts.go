package memory

import (
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/memory/fault"
)

// Outcome is what a receipt says a call came to: OutcomeOK, OutcomeError
// (a failure of the service's own) or the code of the refusal
// (invalid_request, forbidden_visibility, …). Receipts are the service's
// own record, so the type lives with the service.
type Outcome string

// The outcomes that are not a refusal's code.
const (
	OutcomeOK    Outcome = "ok"
	OutcomeError Outcome = "error"
)

// outcomeOf returns the outcome of a call that returned err.
func outcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	if fe, ok := fault.As(err); ok {
		return Outcome(fe.Code)
	}
	return OutcomeError
}

// receipt writes the structured record of a mutation or briefing: type,
// correlation id, lane, outcome, counts, lengths, record ids and duration.
// Callers pass only such fields; a receipt never holds a body, a summary,
// a briefing, a name or a token.
func (s *Service) receipt(r *request, typ string, err error, start time.Time, fields ...zap.Field) {
	base := []zap.Field{
		zap.String("receipt", typ),
		zap.String("correlationId", r.correlationID),
		zap.String("lane", string(r.who.Lane)),
		zap.String("outcome", string(outcomeOf(err))),
		zap.Duration("duration", time.Since(start)),
	}
	s.log.Info("receipt", append(base, fields...)...)
}
