package memoryclient

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/clankie/clankie/api"
)

const (
	invalidIDCode     = "invalid_id"
	invalidIDSentence = "the %s is empty or is \".\" or \"..\", which cannot be addressed in a URL path"
)

// checkIDs refuses ids that no escaping can carry as a path segment: an empty
// one would merge two segments, and "." or ".." would be cleaned away (or
// climb a level) by any server or proxy on the way. The sentence names which
// id, never its value.
func checkIDs(op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		what, id := pairs[i], pairs[i+1]
		if id == "" || id == "." || id == ".." {
			return invalidArg(op, invalidIDCode, invalidIDSentence, what)
		}
	}
	return nil
}

// query builds a query from name/value pairs, leaving out empty values so an
// unset option means the service's default, never an empty filter.
func query(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	return q
}

// terms is a search and each of its words, for redaction.
func terms(q string) []string { return append([]string{q}, strings.Fields(q)...) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func limitString(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Propose stores a person fact (POST /v1/memory/discord-people/proposals). It
// is retried on unavailability because a re-send with the same proposalId is
// idempotent by contract: the service answers 200 with the fact stored the
// first time, with Replayed set. SchemaVersion 0 is sent as
// api.SchemaVersion. A proposalId reused with a different fact is KindConflict.
func (cl *Client) Propose(ctx context.Context, req api.ProposalRequest) (api.ProposalResponse, error) {
	if req.SchemaVersion == 0 {
		req.SchemaVersion = api.SchemaVersion
	}
	var out api.ProposalResponse
	_, err := cl.do(ctx, call{op: "propose", route: api.RoutePropose,
		body: req, retry: true, content: []string{req.Fact.Body}}, &out)
	if err != nil {
		return api.ProposalResponse{}, err
	}
	return out, nil
}

// Recall returns the facts about a person visible in q.ChannelID (GET
// /v1/memory/discord-people/{guildId}/{userId}), newest first. A read: retried.
func (cl *Client) Recall(ctx context.Context, guildID, userID string, q api.RecallQuery) (api.RecallResponse, error) {
	const op = "recall"
	if err := checkIDs(op, "guild id", guildID, "user id", userID); err != nil {
		return api.RecallResponse{}, err
	}
	var out api.RecallResponse
	if _, err := cl.do(ctx, call{op: op, route: api.RouteRecall,
		args:    []string{guildID, userID},
		query:   query("channelId", q.ChannelID, "query", q.Query, "limit", limitString(q.Limit)),
		retry:   true,
		content: terms(q.Query)}, &out); err != nil {
		return api.RecallResponse{}, err
	}
	return out, nil
}

// Mine returns the subject's own view of what is kept about them in a guild
// (GET …/{guildId}/{userId}/mine?requesterUserId=); the service refuses it
// (KindForbidden) unless the requester is the subject. A read: retried.
func (cl *Client) Mine(ctx context.Context, guildID, userID, requesterUserID string) (api.RecallResponse, error) {
	const op = "mine"
	if err := checkIDs(op, "guild id", guildID, "user id", userID); err != nil {
		return api.RecallResponse{}, err
	}
	var out api.RecallResponse
	if _, err := cl.do(ctx, call{op: op, route: api.RouteMine,
		args:  []string{guildID, userID},
		query: query("requesterUserId", requesterUserID),
		retry: true}, &out); err != nil {
		return api.RecallResponse{}, err
	}
	return out, nil
}

// Forget removes one fact (DELETE …/{guildId}/{userId}/{factId}). A bridge
// names the Discord user asking in requesterUserID (the subject or the
// proposer may forget); the operator passes "" and the parameter is left out.
// Never retried: a repeated DELETE could turn a success into a 404.
func (cl *Client) Forget(ctx context.Context, guildID, userID, factID, requesterUserID string) error {
	const op = "forget"
	if err := checkIDs(op, "guild id", guildID, "user id", userID, "fact id", factID); err != nil {
		return err
	}
	_, err := cl.do(ctx, call{op: op, route: api.RouteForgetFact,
		args:  []string{guildID, userID, factID},
		query: query("requesterUserId", requesterUserID)}, nil)
	return err
}

// VoiceBriefing asks for the briefing of a voice channel's consented speakers
// (POST /v1/discord/voice-briefing; voice bridge only). It is retried: it has
// no effect but a receipt of counts, so a repeat after an unreachable attempt
// costs at most one extra receipt, while a missing briefing costs the session
// its memory. SchemaVersion 0 is sent as api.SchemaVersion.
func (cl *Client) VoiceBriefing(ctx context.Context, req api.BriefingRequest) (api.BriefingResponse, error) {
	if req.SchemaVersion == 0 {
		req.SchemaVersion = api.SchemaVersion
	}
	if req.ConsentedUserIDs == nil {
		req.ConsentedUserIDs = []string{} // the service expects an array, not null
	}
	var out api.BriefingResponse
	if _, err := cl.do(ctx, call{op: "voice_briefing", route: api.RouteBriefing,
		body: req, retry: true}, &out); err != nil {
		return api.BriefingResponse{}, err
	}
	return out, nil
}

// Catalog returns the operator's overview of both memories (GET /v1/memory).
func (cl *Client) Catalog(ctx context.Context) (api.Catalog, error) {
	var out api.Catalog
	if _, err := cl.do(ctx, call{op: "catalog", route: api.RouteCatalog,
		retry: true}, &out); err != nil {
		return api.Catalog{}, err
	}
	return out, nil
}

// People returns one page of every subject with its fact count (GET
// /v1/memory/discord-people; operator only). Pass the previous page's
// NextCursor, "" for the first page; limit 0 leaves the service's default.
func (cl *Client) People(ctx context.Context, cursor string, limit int) (api.PeopleResponse, error) {
	var out api.PeopleResponse
	if _, err := cl.do(ctx, call{op: "people", route: api.RoutePeople,
		query: query("cursor", cursor, "limit", limitString(limit)),
		retry: true}, &out); err != nil {
		return api.PeopleResponse{}, err
	}
	return out, nil
}

// Export returns every fact about a person, operator_private and expired ones
// included (GET …/{guildId}/{userId}/export; operator only).
func (cl *Client) Export(ctx context.Context, guildID, userID string) (api.RecallResponse, error) {
	const op = "export"
	if err := checkIDs(op, "guild id", guildID, "user id", userID); err != nil {
		return api.RecallResponse{}, err
	}
	var out api.RecallResponse
	if _, err := cl.do(ctx, call{op: op, route: api.RouteExport,
		args: []string{guildID, userID}, retry: true}, &out); err != nil {
		return api.RecallResponse{}, err
	}
	return out, nil
}

// EditFact applies the operator's edit to one fact (PATCH
// …/{guildId}/{userId}/{factId}) and returns the fact as stored. Not retried:
// an edit is sent once, and a caller that saw KindUnavailable re-reads first.
func (cl *Client) EditFact(ctx context.Context, guildID, userID, factID string, patch api.FactPatch) (api.Fact, error) {
	const op = "edit_fact"
	if err := checkIDs(op, "guild id", guildID, "user id", userID, "fact id", factID); err != nil {
		return api.Fact{}, err
	}
	var out api.FactResponse
	if _, err := cl.do(ctx, call{op: op, route: api.RouteEditFact,
		args: []string{guildID, userID, factID}, body: patch,
		content: []string{deref(patch.Body)}}, &out); err != nil {
		return api.Fact{}, err
	}
	return out.Fact, nil
}

// ForgetPerson removes every fact about a person (DELETE
// …/{guildId}/{userId}; operator only) and returns the ids removed. Not
// retried.
func (cl *Client) ForgetPerson(ctx context.Context, guildID, userID string) (api.ForgetPersonResponse, error) {
	const op = "forget_person"
	if err := checkIDs(op, "guild id", guildID, "user id", userID); err != nil {
		return api.ForgetPersonResponse{}, err
	}
	var out api.ForgetPersonResponse
	if _, err := cl.do(ctx, call{op: op, route: api.RouteForgetPerson,
		args: []string{guildID, userID}}, &out); err != nil {
		return api.ForgetPersonResponse{}, err
	}
	return out, nil
}

// RecordEpisode adds one of Clankie's own notes to the bearer's lane (POST
// /v1/memory/captain-episodes). Never retried: without an episodeId the
// service assigns one, so a repeat could store the note twice. SchemaVersion 0
// is sent as api.SchemaVersion.
func (cl *Client) RecordEpisode(ctx context.Context, req api.EpisodeRequest) (api.EpisodeResponse, error) {
	if req.SchemaVersion == 0 {
		req.SchemaVersion = api.SchemaVersion
	}
	var out api.EpisodeResponse
	if _, err := cl.do(ctx, call{op: "record_episode", route: api.RouteRecordEpisode,
		body: req, content: []string{req.Summary}}, &out); err != nil {
		return api.EpisodeResponse{}, err
	}
	return out, nil
}

// Episodes returns the bearer's lane card (GET /v1/memory/captain-episodes):
// the newest episodes when q is "", else those matching every term of q.
// limit 0 leaves the service's default. A read: retried.
func (cl *Client) Episodes(ctx context.Context, q string, limit int) (api.Card, error) {
	var out api.Card
	if _, err := cl.do(ctx, call{op: "episodes", route: api.RouteEpisodes,
		query: query("q", q, "limit", limitString(limit)),
		retry: true, content: terms(q)}, &out); err != nil {
		return api.Card{}, err
	}
	return out, nil
}

// EditEpisode applies the operator's edit, keep or release to one episode
// (PATCH /v1/memory/captain-episodes/{episodeId}) and returns it as stored.
// Not retried.
func (cl *Client) EditEpisode(ctx context.Context, episodeID string, patch api.EpisodePatch) (api.Episode, error) {
	const op = "edit_episode"
	if err := checkIDs(op, "episode id", episodeID); err != nil {
		return api.Episode{}, err
	}
	var out api.Episode
	if _, err := cl.do(ctx, call{op: op, route: api.RouteEditEpisode,
		args: []string{episodeID}, body: patch,
		content: []string{deref(patch.Summary)}}, &out); err != nil {
		return api.Episode{}, err
	}
	return out, nil
}

// ForgetEpisode removes one episode (DELETE
// /v1/memory/captain-episodes/{episodeId}; operator only). Not retried.
func (cl *Client) ForgetEpisode(ctx context.Context, episodeID string) error {
	const op = "forget_episode"
	if err := checkIDs(op, "episode id", episodeID); err != nil {
		return err
	}
	_, err := cl.do(ctx, call{op: op, route: api.RouteForgetEpisode,
		args: []string{episodeID}}, nil)
	return err
}

// CorruptFiles lists the person files the service set aside because they
// could not be parsed (operator only).
func (cl *Client) CorruptFiles(ctx context.Context) (api.CorruptFiles, error) {
	var out api.CorruptFiles
	if _, err := cl.do(ctx, call{op: "corrupt", route: api.RouteCorrupt,
		retry: true}, &out); err != nil {
		return api.CorruptFiles{}, err
	}
	return out, nil
}

// ClaimInteraction claims a Discord interaction id for this replica (POST
// /v1/memory/interactions/{interactionId}/claim; Discord lanes). It
// returns true when the service claimed it now, false (and no error) when
// it was claimed within the last 15 minutes: by another replica, by this
// one before a restart, or by an earlier delivery. Not retried: a retry of
// a claim whose answer was lost would find it claimed and refuse the
// interaction that made it; the caller fails closed instead.
func (cl *Client) ClaimInteraction(ctx context.Context, interactionID string) (bool, error) {
	const op = "claim_interaction"
	if !api.ValidSnowflake(interactionID) {
		return false, invalidArg(op, "invalid_request", "the interaction id must be a Discord snowflake (digits only)")
	}
	_, err := cl.do(ctx, call{op: op, route: api.RouteClaimInteraction, args: []string{interactionID}}, nil)
	var e *Error
	if errors.As(err, &e) && e.Kind == KindConflict && e.Code == "already_claimed" {
		return false, nil
	}
	return err == nil, err
}
