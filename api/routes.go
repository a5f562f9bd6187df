package api

import "net/http"

// Route is one operation of the contract: its method and path pattern (in
// net/http's ServeMux syntax, as api/openapi.yaml writes it), who may call
// it, the success status and, for a mutation or a briefing, the receipt the
// service writes. The service binds a handler to each; the client builds its
// paths from Path; the contract test checks the table against the document.
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

const (
	pathCatalog   = "/v1/memory"
	PathPeople    = "/v1/memory/discord-people"
	pathPerson    = PathPeople + "/{guildId}/{userId}"
	PathEpisodes  = "/v1/memory/captain-episodes"
	pathEpisode   = PathEpisodes + "/{episodeId}"
	pathProposals = PathPeople + "/proposals"
)

// The routes of the memory service.
var (
	RouteCatalog       = Route{http.MethodGet, pathCatalog, OperatorOnly, http.StatusOK, ""}
	RoutePeople        = Route{http.MethodGet, PathPeople, OperatorOnly, http.StatusOK, ""}
	RouteCorrupt       = Route{http.MethodGet, PathPeople + "/corrupt", OperatorOnly, http.StatusOK, ""}
	RoutePropose       = Route{http.MethodPost, pathProposals, DiscordLanes, http.StatusCreated, "person_fact.propose"}
	RouteRecall        = Route{http.MethodGet, pathPerson, DiscordLanes, http.StatusOK, ""}
	RouteMine          = Route{http.MethodGet, pathPerson + "/mine", DiscordLanes, http.StatusOK, ""}
	RouteExport        = Route{http.MethodGet, pathPerson + "/export", OperatorOnly, http.StatusOK, ""}
	RouteEditFact      = Route{http.MethodPatch, pathPerson + "/{factId}", OperatorOnly, http.StatusOK, "person_fact.edit"}
	RouteForgetFact    = Route{http.MethodDelete, pathPerson + "/{factId}", DiscordLanes, http.StatusNoContent, "person_fact.forget"}
	RouteForgetPerson  = Route{http.MethodDelete, pathPerson, OperatorOnly, http.StatusOK, "person.forget"}
	RouteBriefing      = Route{http.MethodPost, "/v1/discord/voice-briefing", VoiceOnly, http.StatusOK, "voice.briefing"}
	RouteRecordEpisode = Route{http.MethodPost, PathEpisodes, AnyLane, http.StatusCreated, "episode.record"}
	RouteEpisodes      = Route{http.MethodGet, PathEpisodes, AnyLane, http.StatusOK, ""}
	RouteEditEpisode   = Route{http.MethodPatch, pathEpisode, OperatorOnly, http.StatusOK, "episode.edit"}
	RouteForgetEpisode = Route{http.MethodDelete, pathEpisode, OperatorOnly, http.StatusNoContent, "episode.forget"}
)
