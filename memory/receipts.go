package memory

import (
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/memory/fault"
)

// receipt writes the structured record of a mutation or briefing: type,
// correlation id, lane, outcome, counts, lengths, record ids and duration.
// Callers pass only such fields; a receipt never holds a body, a summary,
// a briefing, a name or a token.
func (s *Service) receipt(r *request, typ string, err error, start time.Time, fields ...zap.Field) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		if fe, ok := fault.As(err); ok {
			outcome = fe.Code
		}
	}
	base := []zap.Field{
		zap.String("receipt", typ),
		zap.String("correlationId", r.correlationID),
		zap.String("lane", string(r.who.Lane)),
		zap.String("outcome", outcome),
		zap.Duration("duration", time.Since(start)),
	}
	s.log.Info("receipt", append(base, fields...)...)
}
