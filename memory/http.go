package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// access lists which lanes may use a route. The operator is listed where it
// may; voice-briefing deliberately lists only the voice bridge.
type access []string

var (
	anyLane      = access{api.LaneOperator, api.LaneDiscordPresence, api.LaneDiscordVoice, api.LaneGameplay}
	peopleLanes  = access{api.LaneOperator, api.LaneDiscordPresence, api.LaneDiscordVoice}
	discordLanes = access{api.LaneDiscordPresence, api.LaneDiscordVoice, api.LaneOperator}
	operatorOnly = access{api.LaneOperator}
	voiceOnly    = access{api.LaneDiscordVoice}
)

func (a access) allows(lane string) bool {
	for _, l := range a {
		if l == lane {
			return true
		}
	}
	return false
}

// credentialSentence names the credential a route needs and where it comes
// from, by variable only: an unauthenticated caller learns nothing of the
// server's filesystem.
func (a access) credentialSentence() string {
	const where = "set it in the environment of the caller, or leave it unset on the memory service's host to use the one the service minted on first start"
	switch {
	case len(a) == 1 && a[0] == api.LaneOperator:
		return "This route needs the operator credential: send Authorization: Bearer <CLANKIE_OPERATOR_TOKEN>; " + where + "."
	case len(a) == 1 && a[0] == api.LaneDiscordVoice:
		return "This route needs the voice bridge credential: send Authorization: Bearer <CLANKIE_VOICE_BRIDGE_TOKEN>; " + where + "."
	default:
		return "This route needs a memory bearer token (CLANKIE_OPERATOR_TOKEN, CLANKIE_TEXT_BRIDGE_TOKEN, CLANKIE_VOICE_BRIDGE_TOKEN or CLANKIE_GAMEPLAY_TOKEN) in Authorization: Bearer <token>; " + where + "."
	}
}

// request is what an authenticated handler gets.
type request struct {
	*http.Request
	who           Principal
	correlationID string
}

// handlerFunc answers a status and a value to encode, or an error.
type handlerFunc func(r *request) (int, any, error)

// route wraps a handler with authentication, lane access and error mapping.
func (s *Service) route(a access, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.bearers.Authenticate(r.Header.Get("Authorization"))
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthorized", a.credentialSentence())
			return
		}
		setLane(r, who.Lane)
		if !a.allows(who.Lane) {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("The %s bearer may not use this route.", who.Lane))
			return
		}
		req := &request{Request: r, who: who, correlationID: correlationID(r)}
		status, body, err := h(req)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if status == http.StatusNoContent || body == nil {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
}

func (s *Service) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	if fe, ok := fault.As(err); ok {
		writeError(w, faultStatus(fe.Kind), fe.Code, fe.Message)
		return
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("The request body is larger than %d KiB.", api.MaxBodyBytes>>10))
		return
	}
	// The service's own failure. The error text is ours (no content is
	// wrapped into store errors), but log only its type and route to be sure.
	s.log.Error("request failed", zap.String("route", r.Pattern), zap.String("errorType", fmt.Sprintf("%T", errors.Unwrap(err))), zap.String("error", sanitize(err)))
	writeError(w, http.StatusInternalServerError, "internal", "The memory service failed to complete this request; nothing was changed that was not acknowledged.")
}

// sanitize keeps an internal error's text short; store errors carry file
// operations and codes, never memory content.
func sanitize(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

func faultStatus(k fault.Kind) int {
	switch k {
	case fault.Invalid:
		return http.StatusBadRequest
	case fault.Forbidden:
		return http.StatusForbidden
	case fault.NotFound:
		return http.StatusNotFound
	case fault.Conflict:
		return http.StatusConflict
	case fault.Unprocessable:
		return http.StatusUnprocessableEntity
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// rawJSON is an answer a store encoded already (people.Store.RecallJSON).
type rawJSON []byte

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	var err error
	if raw, ok := v.(rawJSON); ok {
		b = raw
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal","message":"The answer could not be encoded."}`)
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Said up front, a long answer (a recall of 128 facts) goes out in
	// one piece rather than chunked.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Code: code, Message: msg})
}

// decode reads one JSON value: at most 64 KiB, no unknown fields, no
// trailing data. Every failure is a client error with a sentence.
func decode(r *request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return fault.New(fault.Invalid, "unreadable_body", "The request body could not be read.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fault.New(fault.Invalid, "invalid_json", "%s", jsonSentence(err))
	}
	if dec.More() {
		return fault.New(fault.Invalid, "invalid_json", "The request body must hold exactly one JSON object.")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		return fault.New(fault.Invalid, "invalid_json", "The request body must hold exactly one JSON object.")
	}
	return nil
}

// jsonSentence explains a decode error without echoing the input.
func jsonSentence(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("The request body is not valid JSON (at byte %d).", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("Field %q must be %s.", te.Field, te.Type.String())
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "The request body is empty or cut short."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "Unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "; this service accepts only the fields of its contract."
	}
	return "The request body is not valid JSON for this route."
}

// jsonErrors makes the mux's own 404 and 405 answers JSON like every other.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusOnly{header: http.Header{}}
		mux.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch rec.code {
		case http.StatusMethodNotAllowed:
			writeError(w, rec.code, "method_not_allowed", "This route does not accept "+r.Method+".")
		default:
			writeError(w, http.StatusNotFound, "not_found", "There is no such route.")
		}
	})
}

// statusOnly keeps the status and headers of the mux's fallback answer and
// drops its plain-text body.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(code int)        { s.code = code }
