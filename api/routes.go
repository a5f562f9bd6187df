package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Route is one operation of the contract: its method and path pattern (in
// net/http's ServeMux syntax, as api/openapi.yaml writes it), who may call
// it, the success status and, for a mutation or a briefing, the receipt the
// service writes. The service binds a handler to each; the client builds its
// paths with Expand; the contract test checks the table against the
// document.
type Route struct {
	Method string
	Path   string
	Access Access
	// Status is the success status; a replayed create answers 200 instead.
	Status int
	// Receipt names the receipt a call writes; empty for a read.
	Receipt string
}

// Pattern returns the route's ServeMux pattern, "METHOD /path".
func (r Route) Pattern() string { return r.Method + " " + r.Path }

// Expand returns the route's path with its wildcards ({guildId}, …) filled
// in order by values, each escaped as one path segment. A count that does
// not match the pattern's wildcards is a programming error and panics.
func (r Route) Expand(values ...string) string {
	var b strings.Builder
	rest, n := r.Path, 0
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			break
		}
		if n == len(values) {
			panic(fmt.Sprintf("api: %s needs more than %d path values", r.Pattern(), len(values)))
		}
		b.WriteString(rest[:open])
		b.WriteString(url.PathEscape(values[n]))
		rest, n = rest[open+end+1:], n+1
	}
	if n != len(values) {
		panic(fmt.Sprintf("api: %s takes %d path values, not %d", r.Pattern(), n, len(values)))
	}
	b.WriteString(rest)
	return b.String()
}

const (
	pathCatalog   = "/v1/memory"
	pathPeople    = "/v1/memory/discord-people"
	pathPerson    = pathPeople + "/{guildId}/{userId}"
	pathEpisodes  = "/v1/memory/captain-episodes"
	pathEpisode   = pathEpisodes + "/{episodeId}"
	pathProposals = pathPeople + "/proposals"
)

// The routes of the memory service.
var (
	RouteCatalog       = Route{http.MethodGet, pathCatalog, OperatorOnly, http.StatusOK, ""}
	RoutePeople        = Route{http.MethodGet, pathPeople, OperatorOnly, http.StatusOK, ""}
	RouteCorrupt       = Route{http.MethodGet, pathPeople + "/corrupt", OperatorOnly, http.StatusOK, ""}
	RoutePropose       = Route{http.MethodPost, pathProposals, DiscordLanes, http.StatusCreated, "person_fact.propose"}
	RouteRecall        = Route{http.MethodGet, pathPerson, DiscordLanes, http.StatusOK, ""}
	RouteMine          = Route{http.MethodGet, pathPerson + "/mine", DiscordLanes, http.StatusOK, ""}
	RouteExport        = Route{http.MethodGet, pathPerson + "/export", OperatorOnly, http.StatusOK, ""}
	RouteEditFact      = Route{http.MethodPatch, pathPerson + "/{factId}", OperatorOnly, http.StatusOK, "person_fact.edit"}
	RouteForgetFact    = Route{http.MethodDelete, pathPerson + "/{factId}", DiscordLanes, http.StatusNoContent, "person_fact.forget"}
	RouteForgetPerson  = Route{http.MethodDelete, pathPerson, OperatorOnly, http.StatusOK, "person.forget"}
	RouteBriefing      = Route{http.MethodPost, "/v1/discord/voice-briefing", VoiceOnly, http.StatusOK, "voice.briefing"}
	RouteRecordEpisode = Route{http.MethodPost, pathEpisodes, AnyLane, http.StatusCreated, "episode.record"}
	RouteEpisodes      = Route{http.MethodGet, pathEpisodes, AnyLane, http.StatusOK, ""}
	RouteEditEpisode   = Route{http.MethodPatch, pathEpisode, OperatorOnly, http.StatusOK, "episode.edit"}
	RouteForgetEpisode = Route{http.MethodDelete, pathEpisode, OperatorOnly, http.StatusNoContent, "episode.forget"}
)

// RouteClaimInteraction claims a Discord interaction id for the replica
// about to answer it: 201 the first time within InteractionClaimTTL, 409
// already_claimed after, so replicas sharing one memory service answer
// each interaction once.
var RouteClaimInteraction = Route{http.MethodPost, "/v1/memory/interactions/{interactionId}/claim", DiscordLanes, http.StatusCreated, "interaction.claim"}
