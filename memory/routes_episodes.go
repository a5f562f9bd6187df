package memory

import (
	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

func (s *Service) recordEpisode(r *request) (reply, error) {
	var req api.EpisodeRequest
	if err := decode(r, &req); err != nil {
		return reply{}, err
	}
	resp, info, err := s.episodes.Record(r.Context(), r.who.Lane, req)
	return reply{body: resp, replayed: info.Replayed, receipt: []zap.Field{
		zap.String("episodeId", resp.Episode.EpisodeID), zap.Bool("replayed", info.Replayed),
		zap.Bool("retained", resp.Retained), zap.Bool("corrected", resp.Corrected != nil && *resp.Corrected),
		zap.Int("evicted", info.Evicted), zap.Int("summaryLength", len(req.Summary))}}, err
}

func (s *Service) episodeCard(r *request) (reply, error) {
	q := r.URL.Query()
	limit, err := intParam(r, "limit")
	if err != nil {
		return reply{}, err
	}
	if err := s.episodes.Refresh(r.Context()); err != nil {
		return reply{}, err
	}
	var card api.Card
	if q.Has("q") {
		if card, err = s.episodes.Search(r.who.Lane, q.Get("q"), limit); err != nil {
			return reply{}, err
		}
	} else {
		card = s.episodes.Card(r.who.Lane)
	}
	if r.who.Lane == api.LaneOperator {
		// The operator may see every summary; a script wants fields.
		n := limit
		if !q.Has("q") {
			n = 0 // the card: the newest 8
		}
		if card.Episodes, err = s.episodes.Records(r.who.Lane, q.Get("q"), n); err != nil {
			return reply{}, err
		}
	}
	return reply{body: card}, nil
}

func (s *Service) editEpisode(r *request) (reply, error) {
	var p api.EpisodePatch
	if err := decode(r, &p); err != nil {
		return reply{}, err
	}
	ep, err := s.episodes.Patch(r.Context(), r.PathValue("episodeId"), p)
	return reply{body: ep, receipt: []zap.Field{zap.String("episodeId", r.PathValue("episodeId")),
		zap.Bool("retained", ep.Retained)}}, err
}

func (s *Service) forgetEpisode(r *request) (reply, error) {
	err := s.episodes.Forget(r.Context(), r.PathValue("episodeId"))
	return reply{receipt: []zap.Field{zap.String("episodeId", r.PathValue("episodeId"))}}, err
}
