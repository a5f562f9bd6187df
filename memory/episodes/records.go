package episodes

import "github.com/clankie/clankie/api"

// Records returns the episodes behind Card (q empty and limit 0: the
// newest 8) or Search (q's terms, at most limit) as records rather than a
// rendered card, newest first, under the same visibility rule, so a script
// reads fields instead of parsing card lines. Only the operator's route
// asks for them.
func (s *Store) Records(lane api.Lane, q string, limit int) ([]api.Episode, error) {
	n, err := searchLimit(limit)
	if err != nil {
		return nil, err
	}
	terms, err := searchTerms(q)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []api.Episode{}
	for _, r := range s.newest(lane, terms, n) {
		out = append(out, r.ep)
	}
	return out, nil
}
