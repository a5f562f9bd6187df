package memory

import (
	"net/http"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

func (s *Service) catalog(r *request) (int, any, error) {
	if err := refresh(s.people); err != nil {
		return 0, nil, err
	}
	if err := refresh(s.episodes); err != nil {
		return 0, nil, err
	}
	ps := s.people.Stats()
	es := s.episodes.Stats()
	return http.StatusOK, api.Catalog{
		SchemaVersion:    api.SchemaVersion,
		People:           ps.People,
		Facts:            ps.Facts,
		Episodes:         es.Total,
		Unretained:       es.Unretained,
		RingCapacity:     api.EpisodeRingCapacity,
		Retained:         es.Retained,
		RetainedCapacity: api.RetainedCapacity,
		EpisodesPerLane:  es.PerLane,

		CorruptPersonFiles: len(s.corruptFiles()),
	}, nil
}

func (s *Service) listPeople(r *request) (int, any, error) {
	limit, err := intParam(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	cursor := r.URL.Query().Get("cursor")
	if err := people.ValidCursor(cursor); err != nil {
		return 0, nil, err
	}
	resp, err := s.people.List(cursor, limit)
	return http.StatusOK, resp, err
}

func (s *Service) propose(r *request) (int, any, error) {
	start := time.Now()
	var req api.ProposalRequest
	if err := decode(r, &req); err != nil {
		s.receipt(r, "person_fact.propose", err, start)
		return 0, nil, err
	}
	resp, info, err := s.people.Propose(caller(r.who), req)
	fields := []zap.Field{zap.Bool("replayed", info.Replayed), zap.Bool("superseded", info.Superseded),
		zap.Int("evicted", info.Evicted), zap.Int("bodyLength", info.BodyLength)}
	if resp.Fact != nil {
		fields = append(fields, zap.String("factId", resp.Fact.FactID))
	}
	s.receipt(r, "person_fact.propose", err, start, fields...)
	if err != nil {
		return 0, nil, err
	}
	if info.Replayed {
		return http.StatusOK, resp, nil
	}
	return http.StatusCreated, resp, nil
}

func (s *Service) recall(r *request) (int, any, error) {
	q := r.URL.Query()
	scope := people.ReadScope{Operator: r.who.Operator(), ChannelID: q.Get("channelId")}
	if !scope.Operator && scope.ChannelID == "" {
		return 0, nil, fault.New(fault.Invalid, "channel_required", "A Discord read must name channelId: recall always happens in a room.")
	}
	if scope.ChannelID != "" {
		if err := people.ValidID(scope.ChannelID); err != nil {
			return 0, nil, fault.New(fault.Invalid, "invalid_parameter", "channelId %v.", err)
		}
	}
	limit, err := intParam(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	if query := q.Get("query"); !utf8.ValidString(query) || utf8.RuneCountInString(query) > api.MaxRecallQuery {
		return 0, nil, fault.New(fault.Invalid, "invalid_parameter", "query must be at most %d characters of UTF-8.", api.MaxRecallQuery)
	}
	resp, err := s.people.RecallJSON(subjectOf(r), people.RecallQuery{Scope: scope, Query: q.Get("query"), Limit: limit})
	return http.StatusOK, rawJSON(resp), err
}

func (s *Service) mine(r *request) (int, any, error) {
	resp, err := s.people.Mine(subjectOf(r), r.URL.Query().Get("requesterUserId"))
	return http.StatusOK, resp, err
}

func (s *Service) export(r *request) (int, any, error) {
	resp, err := s.people.Export(subjectOf(r))
	return http.StatusOK, resp, err
}

func (s *Service) editFact(r *request) (int, any, error) {
	start := time.Now()
	var p api.FactPatch
	if err := decode(r, &p); err != nil {
		s.receipt(r, "person_fact.edit", err, start)
		return 0, nil, err
	}
	f, err := s.people.Edit(subjectOf(r), r.PathValue("factId"), p)
	s.receipt(r, "person_fact.edit", err, start, zap.String("factId", r.PathValue("factId")))
	return http.StatusOK, api.FactResponse{SchemaVersion: api.SchemaVersion, Fact: f}, err
}

func (s *Service) forgetFact(r *request) (int, any, error) {
	start := time.Now()
	_, err := s.people.Forget(caller(r.who), subjectOf(r), r.PathValue("factId"), r.URL.Query().Get("requesterUserId"))
	s.receipt(r, "person_fact.forget", err, start, zap.String("factId", r.PathValue("factId")))
	return http.StatusNoContent, nil, err
}

func (s *Service) forgetPerson(r *request) (int, any, error) {
	start := time.Now()
	ids, err := s.people.ForgetPerson(subjectOf(r))
	s.receipt(r, "person.forget", err, start, zap.Int("factsRemoved", len(ids)))
	return http.StatusOK, api.ForgetPersonResponse{SchemaVersion: api.SchemaVersion, Subject: subjectOf(r), Removed: ids}, err
}

func (s *Service) briefing(r *request) (int, any, error) {
	start := time.Now()
	var req api.BriefingRequest
	if err := decode(r, &req); err != nil {
		s.receipt(r, "voice.briefing", err, start)
		return 0, nil, err
	}
	if req.CorrelationID != "" && isToken(req.CorrelationID) {
		r.correlationID = req.CorrelationID
	}
	if err := refresh(s.episodes); err != nil {
		s.receipt(r, "voice.briefing", err, start)
		return 0, nil, err
	}
	text, counts, err := s.people.Briefing(req, s.episodes.VoiceNotes())
	s.receipt(r, "voice.briefing", err, start,
		zap.Int("consentedUsers", counts.ConsentedUsers), zap.Int("usersWithFacts", counts.UsersWithFacts),
		zap.Int("facts", counts.Facts), zap.Int("episodes", counts.Episodes), zap.Int("briefingLength", len(text)))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.BriefingResponse{SchemaVersion: api.SchemaVersion, Briefing: text, Counts: counts, RefreshedAt: s.now().UTC()}, nil
}
