package discordtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Routes the fake serves, as "METHOD /path" below the API base. They name
// routes in SetDelay, FailNext and Request.Route.
const (
	RouteGateway                 = "GET /gateway"
	RouteGatewayBot              = "GET /gateway/bot"
	RouteCurrentUser             = "GET /users/@me"
	RouteCurrentUserGuilds       = "GET /users/@me/guilds"
	RouteUser                    = "GET /users/{user}"
	RouteCurrentApplication      = "GET /applications/@me"
	RouteOAuth2Application       = "GET /oauth2/applications/@me" // discordgo's Application("@me")
	RouteGlobalCommands          = "GET /applications/{app}/commands"
	RouteOverwriteGlobalCommands = "PUT /applications/{app}/commands"
	RouteGuildCommands           = "GET /applications/{app}/guilds/{guild}/commands"
	RouteOverwriteGuildCommands  = "PUT /applications/{app}/guilds/{guild}/commands"
	RouteInteractionCallback     = "POST /interactions/{interaction}/{token}/callback"
	RouteGetOriginal             = "GET /webhooks/{app}/{token}/messages/@original"
	RouteEditOriginal            = "PATCH /webhooks/{app}/{token}/messages/@original"
	RouteDeleteOriginal          = "DELETE /webhooks/{app}/{token}/messages/@original"
	RouteCreateFollowup          = "POST /webhooks/{app}/{token}"
	RouteGetFollowup             = "GET /webhooks/{app}/{token}/messages/{message}"
	RouteEditFollowup            = "PATCH /webhooks/{app}/{token}/messages/{message}"
	RouteDeleteFollowup          = "DELETE /webhooks/{app}/{token}/messages/{message}"
	RouteGuild                   = "GET /guilds/{guild}"
	RouteGuildMember             = "GET /guilds/{guild}/members/{user}"
	RouteGuildRoles              = "GET /guilds/{guild}/roles"
	RouteGuildChannels           = "GET /guilds/{guild}/channels"
	RouteChannel                 = "GET /channels/{channel}"

	// RouteAny in SetDelay applies to every REST route.
	RouteAny = "*"
)

// Discord JSON error codes the fake answers with.
const (
	CodeUnknownChannel      = 10003
	CodeUnknownGuild        = 10004
	CodeUnknownMember       = 10007
	CodeUnknownMessage      = 10008
	CodeUnknownUser         = 10013
	CodeUnknownWebhook      = 10015
	CodeUnknownInteraction  = 10062
	CodeMissingAccess       = 50001
	CodeEmptyMessage        = 50006
	CodeInvalidFormBody     = 50035
	CodeInvalidJSON         = 50109
	CodeAlreadyAcknowledged = 40060
)

// reply is what a route handler returns; body nil means 204 No Content.
type reply struct {
	status int
	body   any
}

func okJSON(body any) reply { return reply{http.StatusOK, body} }

func noContent() reply { return reply{status: http.StatusNoContent} }

func apiError(status, code int, msg string) reply {
	return reply{status, map[string]any{"message": msg, "code": code}}
}

type handlerFunc func(r *http.Request, body []byte) reply

func (f *Fake) routes() http.Handler {
	mux := http.NewServeMux()
	table := map[string]handlerFunc{
		RouteGateway:                 f.getGateway,
		RouteGatewayBot:              f.getGatewayBot,
		RouteCurrentUser:             f.getCurrentUser,
		RouteCurrentUserGuilds:       f.getCurrentUserGuilds,
		RouteUser:                    f.getUser,
		RouteCurrentApplication:      f.getApplication,
		RouteOAuth2Application:       f.getApplication,
		RouteGlobalCommands:          f.getCommands,
		RouteOverwriteGlobalCommands: f.putCommands,
		RouteGuildCommands:           f.getCommands,
		RouteOverwriteGuildCommands:  f.putCommands,
		RouteInteractionCallback:     f.postCallback,
		RouteGetOriginal:             f.getMessage,
		RouteEditOriginal:            f.editMessage,
		RouteDeleteOriginal:          f.deleteMessage,
		RouteCreateFollowup:          f.postFollowup,
		RouteGetFollowup:             f.getMessage,
		RouteEditFollowup:            f.editMessage,
		RouteDeleteFollowup:          f.deleteMessage,
		RouteGuild:                   f.getGuild,
		RouteGuildMember:             f.getGuildMember,
		RouteGuildRoles:              f.getGuildRoles,
		RouteGuildChannels:           f.getGuildChannels,
		RouteChannel:                 f.getChannel,
		RouteCreateMessage:           f.postMessage,
	}
	for route, h := range table {
		method, path, _ := strings.Cut(route, " ")
		mux.Handle(method+" "+apiPrefix+path, f.rest(route, h))
	}
	mux.HandleFunc("GET /gateway", f.serveGateway)
	mux.HandleFunc("GET /gateway/{$}", f.serveGateway)
	mux.Handle("/", f.rest("", nil))
	return mux
}

// rest wraps a route: it reads and records the request, applies injected
// delay and faults, checks the bot token and writes the JSON answer.
func (f *Fake) rest(route string, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4*maxUploadBytes))
		rec := Request{Method: r.Method, Path: strings.TrimPrefix(r.URL.Path, apiPrefix),
			Query: r.URL.RawQuery, Route: route, Body: body, At: time.Now()}
		if !f.sleep(r.Context(), route) {
			rec.Status = 0
			f.record(rec)
			return
		}
		// An injected delay stands for a slow network, so it counts towards
		// an interaction's deadline; checking the request does not.
		r = r.WithContext(context.WithValue(r.Context(), arrivedKey{}, time.Now()))
		var rep reply
		var hdr map[string]string
		switch {
		case f.cfg.rejectToken || r.Header.Get("Authorization") != "Bot "+f.cfg.token:
			rep = apiError(http.StatusUnauthorized, 0, "401: Unauthorized")
		case route == "":
			rep = apiError(http.StatusNotFound, 0, "404: Not Found")
			f.t.Logf("discordtest: unexpected request %s %s", r.Method, r.URL.Path)
		default:
			checked, errs := r.Header, []fieldError(nil)
			if len(body) > 0 && isMultipart(r.Header) {
				// The JSON body is the payload_json part, checked as
				// any JSON body is; the uploads go to the route.
				var files []File
				if !acceptsFiles[route] {
					errs = []fieldError{{[]string{"headers", "Content-Type"}, "CONTENT_TYPE_INVALID", "This route takes no files"}}
				} else {
					body, files, errs = readMultipart(r.Header, body)
				}
				if len(errs) > 0 {
					// A body Discord cannot even read as a request:
					// refused before the route looks at it.
					rep = formError(errs)
					break
				}
				rec.Body = body
				checked = r.Header.Clone()
				checked.Set("Content-Type", "application/json")
				r = r.WithContext(context.WithValue(r.Context(), filesKey{}, files))
			}
			if errs = mergeFieldErrors(errs, f.checkRequest(r, checked, route, rec.Path, body)); len(errs) > 0 {
				bad := formError(errs)
				if !checksBodyItself[route] {
					rep = bad
					break
				}
				// The route finds its interaction or webhook first (an
				// unknown one is a 404 whatever the body) and records the
				// refused attempt.
				r = r.WithContext(context.WithValue(r.Context(), invalidKey{}, &bad))
			}
			var injected bool
			rep, hdr, injected = f.takeFault(route)
			if !injected {
				rep = h(r, body)
			}
		}
		rec.Status = rep.status
		f.record(rec)
		if rep.status == http.StatusBadRequest {
			// Every 400 is a request Discord refuses too.
			f.violate(Violation{Method: r.Method, Path: redactPath(rec.Path), Route: route, Status: rep.status,
				Answer: strings.TrimSpace(string(mustJSON(rep.body)))})
		}
		for k, v := range hdr {
			w.Header().Set(k, v)
		}
		if rep.body == nil {
			w.WriteHeader(rep.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_ = json.NewEncoder(w).Encode(rep.body)
	})
}

// checkRequest applies Discord's header rules, its OpenAPI description's
// request body schema and, for command overwrites, the documented command
// rules, so one answer lists every problem as Discord's does.
func (f *Fake) checkRequest(r *http.Request, hdr http.Header, route, path string, body []byte) []fieldError {
	errs := checkHeaders(hdr, body)
	if len(errs) > 0 {
		return errs
	}
	if f.cfg.spec != nil {
		errs = f.cfg.spec.checkBody(r.Method, path, body)
	}
	if len(errs) > 0 && (route == RouteOverwriteGlobalCommands || route == RouteOverwriteGuildCommands) {
		var ins []cmdIn
		if json.Unmarshal(body, &ins) == nil {
			errs = mergeFieldErrors(errs, validateCommands(ins, f.locales()))
		}
	}
	return errs
}

// checksBodyItself lists the routes that look up what they act on before
// answering a refused body (invalidReply), and record refused attempts.
var checksBodyItself = map[string]bool{
	RouteOverwriteGlobalCommands: true,
	RouteOverwriteGuildCommands:  true,
	RouteInteractionCallback:     true,
	RouteEditOriginal:            true,
	RouteEditFollowup:            true,
	RouteCreateFollowup:          true,
}

type invalidKey struct{}

type arrivedKey struct{}

// arrivedAt returns when the fake received the request.
func arrivedAt(r *http.Request) time.Time {
	if at, ok := r.Context().Value(arrivedKey{}).(time.Time); ok {
		return at
	}
	return time.Now()
}

// invalidReply returns the refusal checkRequest found for this request, or
// nil.
func invalidReply(r *http.Request) *reply {
	bad, _ := r.Context().Value(invalidKey{}).(*reply)
	return bad
}

// mergeFieldErrors adds more to errs, skipping ones already there.
func mergeFieldErrors(errs, more []fieldError) []fieldError {
	have := map[string]bool{}
	for _, e := range errs {
		have[strings.Join(e.path, "/")+"\x00"+e.code] = true
	}
	for _, e := range more {
		if k := strings.Join(e.path, "/") + "\x00" + e.code; !have[k] {
			have[k] = true
			errs = append(errs, e)
		}
	}
	return errs
}

func (f *Fake) violate(v Violation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.violations = append(f.violations, v)
}

func (f *Fake) record(r Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r)
	f.notifyLocked()
}

// ---- latency and fault injection ----

// SetDelay makes the fake wait d before answering route (a Route* constant, or
// RouteAny for all), to simulate a slow Discord. Zero removes the delay.
func (f *Fake) SetDelay(route string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		delete(f.delays, route)
		return
	}
	f.delays[route] = d
}

// sleep applies the configured delay; false when the client gave up or the
// fake closed first.
func (f *Fake) sleep(ctx context.Context, route string) bool {
	f.mu.Lock()
	d := f.delays[route]
	if all := f.delays[RouteAny]; all > d {
		d = all
	}
	f.mu.Unlock()
	if d == 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-f.closed:
		return false
	}
}

type fault struct {
	status    int
	remaining int
}

// FailNext makes the next n requests to route answer status with a
// Discord-shaped error body instead of being handled (the request is still
// recorded). 429 comes with retry_after and rate limit headers, which
// discordgo honours by sleeping and retrying; 502 is retried by discordgo up
// to Session.MaxRestRetries.
func (f *Fake) FailNext(route string, status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n <= 0 {
		delete(f.faults, route)
		return
	}
	f.faults[route] = &fault{status: status, remaining: n}
}

func (f *Fake) takeFault(route string) (reply, map[string]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := f.faults[route]
	if ft == nil {
		return reply{}, nil, false
	}
	ft.remaining--
	if ft.remaining <= 0 {
		delete(f.faults, route)
	}
	if ft.status == http.StatusTooManyRequests {
		return reply{ft.status, map[string]any{"message": "You are being rate limited.", "retry_after": 0.05, "global": false}},
			map[string]string{"Retry-After": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": "0.050", "X-RateLimit-Scope": "user"}, true
	}
	return apiError(ft.status, 0, strconv.Itoa(ft.status)+": "+http.StatusText(ft.status)), nil, true
}

// ---- identity routes ----

func (f *Fake) getGateway(*http.Request, []byte) reply {
	return okJSON(map[string]any{"url": f.gatewayURL})
}

func (f *Fake) getGatewayBot(*http.Request, []byte) reply { return f.getGatewayBotRoute() }

func (f *Fake) getCurrentUser(*http.Request, []byte) reply { return okJSON(f.botUserWire()) }

// getCurrentUserGuilds lists the servers the bot is in as Discord does:
// ordered by id, a page of limit (1–200, default 200) after or before an
// id, each a partial guild (MyGuildResponse's required fields).
func (f *Fake) getCurrentUserGuilds(r *http.Request, _ []byte) reply {
	q := r.URL.Query()
	limit := 200
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return formError([]fieldError{{path: []string{"limit"}, code: "NUMBER_TYPE_MAX", message: "int value should be less than or equal to 200."}})
		}
		limit = n
	}
	after, before := q.Get("after"), q.Get("before")
	f.mu.Lock()
	ids := slices.Clone(f.guildOrder)
	names := map[string]string{}
	for _, id := range ids {
		names[id] = f.guilds[id].g.Name
	}
	f.mu.Unlock()
	slices.SortFunc(ids, compareSnowflakes)
	out := []map[string]any{}
	for _, id := range ids {
		if after != "" && compareSnowflakes(id, after) <= 0 || before != "" && compareSnowflakes(id, before) >= 0 {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, map[string]any{"id": id, "name": names[id], "icon": nil, "banner": nil, "owner": false,
			"permissions": "0", "features": []string{}})
	}
	return okJSON(out)
}

// compareSnowflakes orders two snowflakes by value (shorter is smaller).
func compareSnowflakes(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func (f *Fake) getUser(r *http.Request, _ []byte) reply {
	id := r.PathValue("user")
	if id == f.cfg.botID {
		return okJSON(f.botUserWire())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, gid := range f.guildOrder {
		if m, ok := f.guilds[gid].member(id); ok {
			return okJSON(userWire(m.UserID, m.Username, m.GlobalName, m.Bot))
		}
	}
	return apiError(http.StatusNotFound, CodeUnknownUser, "Unknown User")
}

func (f *Fake) getApplication(*http.Request, []byte) reply {
	return okJSON(map[string]any{
		"id": f.cfg.appID, "name": f.cfg.botName, "icon": nil, "description": "", "summary": "",
		"type": nil, "bot_public": true, "bot_require_code_grant": false, "verify_key": randomHex(32),
		"flags": 0, "hook": true, "is_monetized": false, "bot": f.botUserWire(),
		"owner": map[string]any{"id": "1", "username": "owner", "discriminator": "0", "global_name": nil, "avatar": nil, "public_flags": 0},
		"team":  nil, "guild_id": nil, "tags": []string{}, "redirect_uris": []string{},
		"integration_types_config": map[string]any{"0": map[string]any{}},
	})
}

// ---- guild routes ----

func (f *Fake) guildFor(r *http.Request) (*guildState, *reply) {
	gs, ok := f.guilds[r.PathValue("guild")]
	if !ok {
		rep := apiError(http.StatusNotFound, CodeUnknownGuild, "Unknown Guild")
		return nil, &rep
	}
	return gs, nil
}

func (f *Fake) getGuild(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, bad := f.guildFor(r)
	if bad != nil {
		return *bad
	}
	return okJSON(gs.guildObject())
}

func (f *Fake) getGuildMember(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, bad := f.guildFor(r)
	if bad != nil {
		return *bad
	}
	m, ok := gs.member(r.PathValue("user"))
	if !ok {
		return apiError(http.StatusNotFound, CodeUnknownMember, "Unknown Member")
	}
	return okJSON(memberWire(m, gs.joinedAt, true))
}

func (f *Fake) getGuildRoles(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, bad := f.guildFor(r)
	if bad != nil {
		return *bad
	}
	roles := make([]wireRole, len(gs.g.Roles))
	for i, ro := range gs.g.Roles {
		roles[i] = roleWire(ro)
	}
	return okJSON(roles)
}

func (f *Fake) getGuildChannels(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	gs, bad := f.guildFor(r)
	if bad != nil {
		return *bad
	}
	chs := make([]wireChannel, len(gs.g.Channels))
	for i, c := range gs.g.Channels {
		chs[i] = channelWire(c, gs.g.ID, i)
	}
	return okJSON(chs)
}

func (f *Fake) getChannel(r *http.Request, _ []byte) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := r.PathValue("channel")
	for _, gid := range f.guildOrder {
		gs := f.guilds[gid]
		for i, c := range gs.g.Channels {
			if c.ID == id {
				return okJSON(channelWire(c, gs.g.ID, i))
			}
		}
	}
	return apiError(http.StatusNotFound, CodeUnknownChannel, "Unknown Channel")
}
