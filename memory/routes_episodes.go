package memory

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/api"
)

func (s *Service) recordEpisode(r *request) (int, any, error) {
	start := time.Now()
	var req api.EpisodeRequest
	if err := decode(r, &req); err != nil {
		s.receipt(r, "episode.record", err, start)
		return 0, nil, err
	}
	resp, info, err := s.episodes.Record(r.who.Lane, req)
	s.receipt(r, "episode.record", err, start,
		zap.String("episodeId", resp.Episode.EpisodeID), zap.Bool("replayed", info.Replayed),
		zap.Bool("retained", resp.Retained), zap.Bool("corrected", resp.Corrected != nil && *resp.Corrected),
		zap.Int("evicted", info.Evicted), zap.Int("summaryLength", len(req.Summary)))
	if err != nil {
		return 0, nil, err
	}
	if info.Replayed {
		return http.StatusOK, resp, nil
	}
	return http.StatusCreated, resp, nil
}

func (s *Service) episodeCard(r *request) (int, any, error) {
	q := r.URL.Query()
	limit, err := intParam(r, "limit")
	if err != nil {
		return 0, nil, err
	}
	if err := refresh(s.episodes); err != nil {
		return 0, nil, err
	}
	var card api.Card
	if q.Has("q") {
		if card, err = s.episodes.Search(r.who.Lane, q.Get("q"), limit); err != nil {
			return 0, nil, err
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
			return 0, nil, err
		}
	}
	return http.StatusOK, card, nil
}

func (s *Service) editEpisode(r *request) (int, any, error) {
	start := time.Now()
	var p api.EpisodePatch
	if err := decode(r, &p); err != nil {
		s.receipt(r, "episode.edit", err, start)
		return 0, nil, err
	}
	ep, err := s.episodes.Patch(r.PathValue("episodeId"), p)
	s.receipt(r, "episode.edit", err, start, zap.String("episodeId", r.PathValue("episodeId")),
		zap.Bool("retained", ep.Retained))
	return http.StatusOK, ep, err
}

func (s *Service) forgetEpisode(r *request) (int, any, error) {
	start := time.Now()
	err := s.episodes.Forget(r.PathValue("episodeId"))
	s.receipt(r, "episode.forget", err, start, zap.String("episodeId", r.PathValue("episodeId")))
	return http.StatusNoContent, nil, err
}
