package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
)

var allRoutes = []api.Route{
	api.RouteCatalog, api.RoutePeople, api.RouteCorrupt, api.RoutePropose, api.RouteRecall,
	api.RouteMine, api.RouteExport, api.RouteEditFact, api.RouteForgetFact, api.RouteForgetPerson,
	api.RouteBriefing, api.RouteRecordEpisode, api.RouteEpisodes, api.RouteEditEpisode, api.RouteForgetEpisode,
	api.RouteClaimInteraction,
}

// TestExpandReachesItsOwnRoute: a path Expand builds, served by a mux that
// holds every route of the table, reaches the route it was built from, and
// each value comes back whole from its wildcard however it is spelt ("."
// and ".." excepted: no escaping carries them, and the client refuses them
// before it builds a path).
func TestExpandReachesItsOwnRoute(t *testing.T) {
	values := []string{"g/1", "a b?#%", "f1"}
	for _, r := range allRoutes {
		mux := http.NewServeMux()
		for _, other := range allRoutes {
			mux.HandleFunc(other.Pattern(), func(w http.ResponseWriter, req *http.Request) {
				var got []string
				for _, seg := range strings.Split(other.Path, "/") {
					if name, ok := strings.CutPrefix(seg, "{"); ok {
						got = append(got, req.PathValue(strings.TrimSuffix(name, "}")))
					}
				}
				w.Header().Set("X-Pattern", other.Pattern())
				w.Header().Set("X-Values", strings.Join(got, "|"))
			})
		}
		n := strings.Count(r.Path, "{")
		path := r.Expand(values[:n]...)
		req := httptest.NewRequest(r.Method, "http://memory"+path, nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if got := rec.Header().Get("X-Pattern"); got != r.Pattern() {
			t.Errorf("%s: Expand gave %q, which the mux routes to %q (status %d)", r.Pattern(), path, got, rec.Code)
			continue
		}
		if got, want := rec.Header().Get("X-Values"), strings.Join(values[:n], "|"); got != want {
			t.Errorf("%s: Expand gave %q, whose values read back as %q, want %q", r.Pattern(), path, got, want)
		}
	}
}

func TestExpandPanicsOnAWrongCount(t *testing.T) {
	for _, c := range []struct {
		r      api.Route
		values []string
	}{{api.RouteRecall, []string{"g"}}, {api.RouteCatalog, []string{"x"}}, {api.RouteEditFact, []string{"g", "u", "f", "x"}}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with %d values did not panic", c.r.Pattern(), len(c.values))
				}
			}()
			c.r.Expand(c.values...)
		}()
	}
}
