package memory

import (
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
	"github.com/clankie/clankie/memory/people"
)

func (s *Service) catalog(r *request) (reply, error) {
	if err := s.people.Refresh(r.Context()); err != nil {
		return reply{}, err
	}
	if err := s.episodes.Refresh(r.Context()); err != nil {
		return reply{}, err
	}
	ps := s.people.Stats()
	es := s.episodes.Stats()
	return reply{body: api.Catalog{
		SchemaVersion:    api.SchemaVersion,
		Store:            ps.Store,
		People:           ps.People,
		Facts:            ps.Facts,
		Episodes:         es.Total,
		Unretained:       es.Unretained,
		RingCapacity:     api.EpisodeRingCapacity,
		Retained:         es.Retained,
		RetainedCapacity: api.RetainedCapacity,
		EpisodesPerLane:  es.PerLane,

		CorruptPersonFiles: len(s.corruptFiles()),
	}}, nil
}

func (s *Service) listPeople(r *request) (reply, error) {
	limit, err := intParam(r, "limit")
	if err != nil {
		return reply{}, err
	}
	resp, err := s.people.List(r.Context(), r.URL.Query().Get("cursor"), limit)
	return reply{body: resp}, err
}

func (s *Service) propose(r *request) (reply, error) {
	var req api.ProposalRequest
	if err := decode(r, &req); err != nil {
		return reply{}, err
	}
	resp, info, err := s.people.Propose(r.Context(), r.who, req)
	fields := []zap.Field{zap.Bool("replayed", resp.Replayed), zap.Bool("superseded", resp.Superseded),
		zap.Int("evicted", resp.Evicted), zap.Int("bodyLength", info.BodyLength)}
	if resp.Fact != nil {
		fields = append(fields, zap.String("factId", resp.Fact.FactID))
	}
	return reply{body: resp, replayed: resp.Replayed, receipt: fields}, err
}

func (s *Service) recall(r *request) (reply, error) {
	q := r.URL.Query()
	channelID := q.Get("channelId")
	if !r.who.Operator() && channelID == "" {
		return reply{}, fault.New(fault.Invalid, "channel_required", "A Discord read must name channelId: recall always happens in a room.")
	}
	if channelID != "" {
		if err := api.CheckID(channelID); err != nil {
			return reply{}, fault.New(fault.Invalid, "invalid_parameter", "channelId %v.", err)
		}
	}
	limit, err := intParam(r, "limit")
	if err != nil {
		return reply{}, err
	}
	if query := q.Get("query"); !utf8.ValidString(query) || utf8.RuneCountInString(query) > api.MaxRecallQuery {
		return reply{}, fault.New(fault.Invalid, "invalid_parameter", "query must be at most %d characters of UTF-8.", api.MaxRecallQuery)
	}
	epoch := s.facts.epoch()
	resp, err := s.people.Recall(r.Context(), subjectOf(r), people.RecallQuery{Who: r.who, RecallQuery: api.RecallQuery{ChannelID: channelID, Query: q.Get("query"), Limit: limit}})
	return reply{body: recallAnswer{resp, epoch}}, err
}

func (s *Service) mine(r *request) (reply, error) {
	resp, err := s.people.Mine(r.Context(), subjectOf(r), r.URL.Query().Get("requesterUserId"))
	return reply{body: resp}, err
}

func (s *Service) export(r *request) (reply, error) {
	resp, err := s.people.Export(r.Context(), subjectOf(r))
	return reply{body: resp}, err
}

func (s *Service) editFact(r *request) (reply, error) {
	var p api.FactPatch
	if err := decode(r, &p); err != nil {
		return reply{}, err
	}
	f, err := s.people.Edit(r.Context(), subjectOf(r), r.PathValue("factId"), p)
	s.facts.forget(subjectOf(r)) // the old body leaves the memo with the store
	return reply{body: api.FactResponse{SchemaVersion: api.SchemaVersion, Fact: f},
		receipt: []zap.Field{factIDField(r.PathValue("factId"), err)}}, err
}

func (s *Service) forgetFact(r *request) (reply, error) {
	_, err := s.people.Forget(r.Context(), r.who, subjectOf(r), r.PathValue("factId"), r.URL.Query().Get("requesterUserId"))
	s.facts.forget(subjectOf(r))
	return reply{receipt: []zap.Field{factIDField(r.PathValue("factId"), err)}}, err
}

// factIDField is the receipt's record of a path's factId. The segment is
// whatever a member typed into /person-memory forget (any 64 characters),
// so it is logged only when it named a fact: the call succeeded, or was
// refused about the fact it found. Otherwise only its length is logged.
func factIDField(id string, err error) zap.Field {
	found := err == nil
	if fe, ok := fault.As(err); ok {
		found = fe.Code == people.CodeNotSubjectOrProposer || fe.Code == people.CodeAtCapacity
	}
	if found {
		return zap.String("factId", id)
	}
	return zap.Int("factIdLength", len(id))
}

func (s *Service) forgetPerson(r *request) (reply, error) {
	ids, err := s.people.ForgetPerson(r.Context(), subjectOf(r))
	s.facts.forget(subjectOf(r))
	return reply{body: api.ForgetPersonResponse{SchemaVersion: api.SchemaVersion, Subject: subjectOf(r), Removed: ids},
		receipt: []zap.Field{zap.Int("factsRemoved", len(ids))}}, err
}

func (s *Service) briefing(r *request) (reply, error) {
	var req api.BriefingRequest
	if err := decode(r, &req); err != nil {
		return reply{}, err
	}
	if req.CorrelationID != "" && isToken(req.CorrelationID) {
		r.correlationID = req.CorrelationID
	}
	if err := s.episodes.Refresh(r.Context()); err != nil {
		return reply{}, err // the table's wrapper writes the receipt
	}
	text, counts, err := s.people.Briefing(r.Context(), req, s.episodes.VoiceNotes())
	fields := []zap.Field{zap.Int("consentedUsers", counts.ConsentedUsers), zap.Int("usersWithFacts", counts.UsersWithFacts),
		zap.Int("facts", counts.Facts), zap.Int("episodes", counts.Episodes), zap.Int("briefingLength", len(text))}
	return reply{body: api.BriefingResponse{SchemaVersion: api.SchemaVersion, Briefing: text, Counts: counts, RefreshedAt: s.now().UTC()},
		receipt: fields}, err
}
