package memory

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// credentialSentence names the credential a route needs and where it comes
// from, by variable only: an unauthenticated caller learns nothing of the
// server's filesystem.
func credentialSentence(a api.Access) string {
	const where = "set it in the environment of the caller, or leave it unset on the memory service's host to use the one the service minted on first start"
	if len(a) == 1 {
		info, _ := a[0].Info()
		return "This route needs " + info.Credential + ": send Authorization: Bearer <" + info.TokenVar + ">; " + where + "."
	}
	var vars []string
	for _, l := range api.Lanes() {
		vars = append(vars, l.TokenVar)
	}
	last := len(vars) - 1
	return "This route needs a memory bearer token (" + strings.Join(vars[:last], ", ") + " or " + vars[last] + ") in Authorization: Bearer <token>; " + where + "."
}

// request is what an authenticated handler gets.
type request struct {
	*http.Request
	who           api.Principal
	correlationID string
}

// reply is what a handler returns: the value to encode (nil: no body),
// whether a create was a replay (200 instead of the route's status) and the
// content-free fields of the route's receipt.
type reply struct {
	body     any
	replayed bool
	receipt  []zap.Field
}

// handlerFunc serves one route of the table.
type handlerFunc func(r *request) (reply, error)

// binding is one row of the service's route table: the contract's route
// (pattern, who may call, success status, receipt name) and its handler.
type binding struct {
	api.Route
	handle handlerFunc
}

// routes returns the route table; Handler serves exactly these, the
// contract test checks them against api/openapi.yaml.
func (s *Service) routes() []binding {
	return []binding{
		{api.RouteCatalog, s.catalog},
		{api.RoutePeople, s.listPeople},
		{api.RouteCorrupt, s.listCorrupt},
		{api.RoutePropose, s.propose},
		{api.RouteRecall, s.recall},
		{api.RouteMine, s.mine},
		{api.RouteExport, s.export},
		{api.RouteEditFact, s.editFact},
		{api.RouteForgetFact, s.forgetFact},
		{api.RouteForgetPerson, s.forgetPerson},
		{api.RouteBriefing, s.briefing},
		{api.RouteRecordEpisode, s.recordEpisode},
		{api.RouteEpisodes, s.episodeCard},
		{api.RouteEditEpisode, s.editEpisode},
		{api.RouteForgetEpisode, s.forgetEpisode},
		{api.RouteClaimInteraction, s.claimInteraction},
	}
}

// serve wraps a row of the table with authentication, lane access, the
// receipt and error mapping.
func (s *Service) serve(b binding) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who, ok := s.bearers.Authenticate(r.Header.Get("Authorization"))
		if !ok {
			writeError(w, http.StatusUnauthorized, "unauthorized", credentialSentence(b.Access))
			return
		}
		setLane(r, who.Lane)
		if !b.Access.Allows(who.Lane) {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("The %s bearer may not use this route.", who.Lane))
			return
		}
		start := time.Now()
		req := &request{Request: r, who: who, correlationID: correlationID(r)}
		rep, err := b.handle(req)
		if b.Receipt != "" {
			s.receipt(req, b.Receipt, err, start, rep.receipt...)
		}
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		status := b.Status
		if rep.replayed {
			status = http.StatusOK
		}
		if rep.body == nil {
			w.WriteHeader(status)
			return
		}
		if r, ok := rep.body.(recallAnswer); ok {
			b, err := s.facts.encodeRecall(r.RecallResponse, r.epoch)
			writeBody(w, status, b, err)
			s.facts.release(b)
			return
		}
		writeJSON(w, status, rep.body)
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

// The service's one JSON codec: go-json-experiment/json (encoding/json/v2,
// which Go 1.26 ships only behind GOEXPERIMENT=jsonv2) with encoding/json's
// semantics (jsonv1.DefaultOptionsV1: the same field names, omitempty, nil
// slices as null, sorted map keys, case-insensitive names, duplicates
// merged), so every answer and every request means what it meant under
// encoding/json. Two settings differ: answers do not escape HTML (<, > and
// & are written as they are; the API is not HTML and every JSON reader
// reads both the same), and a request member the contract does not name is
// refused. Measured on a proposal body (internal figures, 2 shared cores):
// encoding/json's Decoder 10–16 µs and 26 allocations, this 4–5 µs and one,
// about what the hand-written parser it replaces took (2–3 µs); a recall
// answer of 128 facts encodes in about the time encoding/json takes.

// encodeAnswer returns the JSON of an answer.
func encodeAnswer(v any) ([]byte, error) {
	return json.Marshal(v, jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := encodeAnswer(v)
	writeBody(w, status, b, err)
}

// writeBody writes an encoded answer, or the codec's failure to encode it.
func writeBody(w http.ResponseWriter, status int, b []byte, err error) {
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
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

// readBody reads the whole body (limitBody bounds it), into one buffer of
// the announced length when there is one.
func readBody(r *request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= api.MaxBodyBytes {
		buf.Grow(int(n) + 1) // +1: the read that finds the end
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, fault.New(fault.Invalid, "unreadable_body", "The request body could not be read.")
	}
	return buf.Bytes(), nil
}

// decodeBytes is decode's rules on a body already read.
func decodeBytes(body []byte, v any) error {
	err := json.Unmarshal(body, v, jsonv1.DefaultOptionsV1(), jsonv1.ReportErrorsWithLegacySemantics(false), json.RejectUnknownMembers(true))
	if err != nil {
		return fault.New(fault.Invalid, "invalid_json", "%s", jsonSentence(body, err))
	}
	return nil
}

// jsonSentence explains a decode error without echoing the input (a
// SemanticError carries the offending value: it is never read here).
func jsonSentence(body []byte, err error) string {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "The request body is empty or cut short."
	case errors.As(err, &syn) && trailing(body):
		return "The request body must hold exactly one JSON object."
	case errors.As(err, &syn):
		return fmt.Sprintf("The request body is not valid JSON (at byte %d).", syn.ByteOffset)
	case errors.As(err, &sem) && errors.Is(sem.Err, json.ErrUnknownName):
		return fmt.Sprintf("Unknown field %q; this service accepts only the fields of its contract.", sem.JSONPointer.LastToken())
	case errors.As(err, &sem) && sem.Err == nil && sem.GoType != nil && sem.JSONPointer != "":
		field := strings.ReplaceAll(strings.TrimPrefix(string(sem.JSONPointer), "/"), "/", ".")
		return fmt.Sprintf("Field %q must be %s.", field, sem.GoType.String())
	}
	return "The request body is not valid JSON for this route."
}

// trailing reports whether body is one JSON value followed by more than
// white space; only a refused body is asked.
func trailing(body []byte) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadValue(); err != nil {
		return false
	}
	return len(bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")) > 0
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
