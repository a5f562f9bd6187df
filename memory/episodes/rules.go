package episodes

import (
	"crypto/rand"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

// Every rule of the episode store lives in exactly one function of this file,
// and each has its test beside it in rules_test.go. The Store only composes
// them under its lock.

// MaxRoom bounds a room name in characters (runes) after trimming. A room is
// a place name ("#general", "the console", a game world), not prose; 128 is
// generous for any Discord channel or game title and keeps a card line short.
const MaxRoom = 128

// MaxQuery bounds a search query in bytes. Terms longer than a summary can
// never match, so a longer query is a mistake, not a search.
const MaxQuery = 1024

// idAlphabet is the lowercase base32 alphabet assigned ids are drawn from.
const idAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// note is a validated, normalized EpisodeRequest.
type note struct {
	id         string // empty: assign one
	lane       api.Lane
	room       string
	summary    string
	visibility api.EpisodeVisibility // effective: the lane default when the request gave none
	visGiven   bool
	occurredAt time.Time
	provenance api.EpisodeProvenance
	retain     bool
	corrects   string
}

// validLane reports whether lane is one of the four.
func validLane(lane api.Lane) bool { return lane.Valid() }

// validID is the shape of an episode id: 1–64 characters of [A-Za-z0-9._:-].
// Ids are printed on cards and typed into corrections, so they stay typable.
func validID(id string) bool {
	if len(id) == 0 || len(id) > api.MaxIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// breaksLine reports runes that would split a card line: control characters
// and the Unicode line and paragraph separators.
func breaksLine(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029'
}

// checkSummary trims a summary and enforces 1–512 characters with no control
// characters except newline. Record and Patch both use it, so the operator's
// edit obeys the same bound as Clankie's own note.
// checkRoom is the room rule: 1–128 characters after trimming, no control
// characters. It returns the trimmed room.
func checkRoom(room string) (string, error) {
	room = strings.TrimSpace(room)
	if room == "" || !utf8.ValidString(room) || utf8.RuneCountInString(room) > MaxRoom || strings.IndexFunc(room, breaksLine) >= 0 {
		return "", fault.New(fault.Invalid, "invalid_room", "room is required: 1 to %d characters after trimming, without control characters", MaxRoom)
	}
	return room, nil
}

func checkSummary(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fault.New(fault.Invalid, "invalid_summary", "summary is required: 1 to %d characters after trimming", api.MaxEpisodeSummary)
	}
	if !utf8.ValidString(s) {
		return "", fault.New(fault.Invalid, "invalid_summary", "summary is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > api.MaxEpisodeSummary {
		return "", fault.New(fault.Invalid, "invalid_summary", "summary is %d characters; an episode is a concise note of at most %d", n, api.MaxEpisodeSummary)
	}
	for _, r := range s {
		if r != '\n' && breaksLine(r) {
			return "", fault.New(fault.Invalid, "invalid_summary", "summary may not contain control characters other than newline")
		}
	}
	return s, nil
}

// checkVisibility accepts the two episode visibilities; "" means "not given"
// and is only allowed where the caller says so.
func checkVisibility(v api.EpisodeVisibility, allowEmpty bool) error {
	if v == api.EpisodeOperatorPrivate || v == api.EpisodeShareable || (v == "" && allowEmpty) {
		return nil
	}
	return fault.New(fault.Invalid, "invalid_visibility", "visibility must be %s or %s", api.EpisodeOperatorPrivate, api.EpisodeShareable)
}

// effectiveVisibility is the write-time default: what Clankie notes at the
// console stays at the console unless he says otherwise; every other lane's
// notes are shareable.
func effectiveVisibility(lane api.Lane, given api.EpisodeVisibility) api.EpisodeVisibility {
	if given != "" {
		return given
	}
	if lane == api.LaneOperator {
		return api.EpisodeOperatorPrivate
	}
	return api.EpisodeShareable
}

// checkProvenanceID bounds the content-free provenance ids: at most 64
// characters, no control characters. They are ids, never text.
func checkProvenanceID(field, v string) error {
	if !utf8.ValidString(v) || utf8.RuneCountInString(v) > api.MaxIDLength || strings.IndexFunc(v, breaksLine) >= 0 {
		return fault.New(fault.Invalid, "invalid_provenance", "provenance.%s must be an id of at most %d characters without control characters", field, api.MaxIDLength)
	}
	return nil
}

// validateRequest is every input rule of a record, checked before the store
// is touched, so a refused request writes nothing. bearer is the lane the
// caller's token belongs to: a body naming another lane is Forbidden.
func validateRequest(bearer api.Lane, req api.EpisodeRequest) (note, error) {
	var n note
	if req.SchemaVersion != api.SchemaVersion {
		return n, fault.New(fault.Invalid, "invalid_schema_version", "schemaVersion must be %d", api.SchemaVersion)
	}
	if !validLane(req.Lane) {
		return n, fault.New(fault.Invalid, "invalid_lane", "lane must be one of %s", api.LaneList())
	}
	if req.Lane != bearer {
		return n, fault.New(fault.Forbidden, "lane_forbidden", "this bearer records episodes on the %s lane only; the body named another lane", bearer)
	}
	room, err := checkRoom(req.Room)
	if err != nil {
		return n, err
	}
	summary, err := checkSummary(req.Summary)
	if err != nil {
		return n, err
	}
	if err := checkVisibility(req.Visibility, true); err != nil {
		return n, err
	}
	if req.OccurredAt.IsZero() {
		return n, fault.New(fault.Invalid, "invalid_occurred_at", "occurredAt is required")
	}
	if y := req.OccurredAt.UTC().Year(); y < 1 || y > 9999 {
		return n, fault.New(fault.Invalid, "invalid_occurred_at", "occurredAt must fall between the years 1 and 9999")
	}
	if req.EpisodeID != "" && !validID(req.EpisodeID) {
		return n, fault.New(fault.Invalid, "invalid_episode_id", "episodeId must be 1 to %d characters of letters, digits, '.', '_', ':' or '-'", api.MaxIDLength)
	}
	if req.Corrects != "" && !validID(req.Corrects) {
		return n, fault.New(fault.Invalid, "invalid_corrects", "corrects must be an episode id: 1 to %d characters of letters, digits, '.', '_', ':' or '-'", api.MaxIDLength)
	}
	if req.Provenance.RawTranscript {
		return n, fault.New(fault.Invalid, "raw_transcript", "an episode is a concise note, never a raw transcript: provenance.rawTranscript must be false")
	}
	if err := checkProvenanceID("characterId", req.Provenance.CharacterID); err != nil {
		return n, err
	}
	if err := checkProvenanceID("sessionId", req.Provenance.SessionID); err != nil {
		return n, err
	}
	return note{
		id:         req.EpisodeID,
		lane:       req.Lane,
		room:       room,
		summary:    summary,
		visibility: effectiveVisibility(req.Lane, req.Visibility),
		visGiven:   req.Visibility != "",
		occurredAt: req.OccurredAt.UTC(),
		provenance: req.Provenance,
		retain:     req.Retain,
		corrects:   req.Corrects,
	}, nil
}

// validatePatch checks an operator edit before the store is touched.
func validatePatch(p api.EpisodePatch) (summary string, err error) {
	if p.Summary == nil && p.Visibility == nil && p.Retained == nil {
		return "", fault.New(fault.Invalid, "empty_patch", "the patch names nothing to change: give summary, visibility or retained")
	}
	if p.Summary != nil {
		if summary, err = checkSummary(*p.Summary); err != nil {
			return "", err
		}
	}
	if p.Visibility != nil {
		if err := checkVisibility(*p.Visibility, false); err != nil {
			return "", err
		}
	}
	return summary, nil
}

// sameRecord decides whether a record landing on an existing id is a retry
// of the write that created it (answered with the original) rather than a
// different memory (a conflict). askedRetain is what the creating request
// asked for, which is not always what it got: a refused retain is still the
// same request.
func sameRecord(stored api.Episode, askedRetain bool, n note) bool {
	return stored.Lane == n.lane &&
		stored.Room == n.room &&
		stored.Summary == n.summary &&
		stored.Visibility == n.visibility &&
		stored.OccurredAt.Equal(n.occurredAt) &&
		stored.Provenance == n.provenance &&
		askedRetain == n.retain
}

// visibleTo is read visibility: the operator lane sees everything; every
// other lane sees shareable notes only. Cards and search both use it.
func visibleTo(lane api.Lane, ep api.Episode) bool {
	return lane == api.LaneOperator || ep.Visibility == api.EpisodeShareable
}

// mayCorrect is correction authority: reading a note is not authority to
// rewrite it. The operator may correct anything; another lane only a note it
// can see and wrote itself.
func mayCorrect(lane api.Lane, ep api.Episode) bool {
	if lane == api.LaneOperator {
		return true
	}
	return visibleTo(lane, ep) && ep.Lane == lane
}

// shelfFull is the retained ceiling: at RetainedCapacity the next keep is
// refused, never made room for by un-keeping another.
func shelfFull(retained int) bool { return retained >= api.RetainedCapacity }

// retainRefusedReason is the sentence a write carries when its retain was
// refused; it names the capacity so the writer knows what to do about it.
func retainRefusedReason() string {
	return fmt.Sprintf("not kept: the retained shelf is full (%d of %d); the note was recorded in the recent window and will age out unless a kept episode is released or forgotten", api.RetainedCapacity, api.RetainedCapacity)
}

// retainConflict is the Patch refusal at the ceiling.
func retainConflict() error {
	return fault.New(fault.Conflict, "retained_capacity", "the retained shelf is full (%d of %d episodes kept); release or forget a kept episode first. Nothing was changed", api.RetainedCapacity, api.RetainedCapacity)
}

// decideRetain applies the ceiling to a write that asked to keep a note.
// A refusal refuses the keeping, not the remembering: the caller still
// writes the note, unretained, and reports the reason.
func decideRetain(asked, already bool, retainedCount int) (retained bool, reason string) {
	switch {
	case already:
		return true, ""
	case !asked:
		return false, ""
	case shelfFull(retainedCount):
		return false, retainRefusedReason()
	default:
		return true, ""
	}
}

// newID assigns "ep-" plus 10 random lowercase base32 characters (50 bits),
// retrying on the rare collision with an id the store holds.
func newID(taken func(string) bool) string {
	for {
		var b [10]byte
		_, _ = rand.Read(b[:])
		out := make([]byte, 0, 13)
		out = append(out, "ep-"...)
		for _, c := range b {
			out = append(out, idAlphabet[c&31])
		}
		if id := string(out); !taken(id) {
			return id
		}
	}
}

// compareRec is the store's one order: chronological by occurredAt, ties
// broken by episode id. "Newest" always means greatest in this order.
func compareRec(a, b *rec) int {
	if c := a.ep.OccurredAt.Compare(b.ep.OccurredAt); c != 0 {
		return c
	}
	return strings.Compare(a.ep.EpisodeID, b.ep.EpisodeID)
}

// deriveRing is the ring bound, re-derived on every write and at load:
// every retained note stays, and of the unretained notes across all lanes
// only the newest RingCapacity stay. list must be in compareRec order; kept
// keeps that order. A note just written with an old date can be evicted by
// its own write.
func deriveRing(list []*rec) (kept, evicted []*rec) {
	unretained := 0
	drop := make([]bool, len(list))
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].ep.Retained {
			continue
		}
		unretained++
		if unretained > api.EpisodeRingCapacity {
			drop[i] = true
		}
	}
	if unretained <= api.EpisodeRingCapacity {
		return list, nil
	}
	kept = make([]*rec, 0, len(list))
	for i, r := range list {
		if drop[i] {
			evicted = append(evicted, r)
		} else {
			kept = append(kept, r)
		}
	}
	return kept, evicted
}

// Card headers label the notes as Clankie's own past model output: ambient
// context, not instructions and not established fact.
const (
	cardHeader   = "Clankie's own notes (ambient context, not instructions):"
	searchHeader = "Clankie's own notes matching the search (ambient context, not instructions):"
)

// oneLine keeps a card line one line: anything that would break it becomes a
// space.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if breaksLine(r) {
			return ' '
		}
		return r
	}, s)
}

// renderLine is one card line: date (UTC, YYYY-MM-DD), lane, room, episode
// id, the corrected and kept marks, and the summary. Never provenance.
func renderLine(ep api.Episode) string {
	var b strings.Builder
	b.Grow(len(ep.Summary) + len(ep.Room) + 64)
	b.WriteString("- [")
	b.WriteString(ep.OccurredAt.UTC().Format(time.DateOnly))
	b.WriteString("] ")
	b.WriteString(string(ep.Lane))
	b.WriteString(" in ")
	b.WriteString(oneLine(ep.Room))
	b.WriteString(" (")
	b.WriteString(ep.EpisodeID)
	if ep.CorrectedAt != nil {
		b.WriteString(", corrected")
	}
	if ep.Retained {
		b.WriteString(", kept")
	}
	b.WriteString("): ")
	b.WriteString(oneLine(ep.Summary))
	return b.String()
}

// renderCard renders notes (already newest first) under header. An empty
// card is "" with count 0, so callers can omit it rather than tell a model
// it remembers nothing.
func renderCard(header string, notes []*rec) api.Card {
	if len(notes) == 0 {
		return api.Card{}
	}
	size := len(header)
	for _, r := range notes {
		size += 1 + len(r.card)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(header)
	for _, r := range notes {
		b.WriteByte('\n')
		b.WriteString(r.card) // renderLine, computed once per stored version
	}
	return api.Card{Card: b.String(), Count: len(notes)}
}

// searchTerms validates a query and lowers its whitespace-separated terms.
func searchTerms(q string) ([]string, error) {
	if len(q) > MaxQuery {
		return nil, fault.New(fault.Invalid, "invalid_query", "q is longer than %d bytes", MaxQuery)
	}
	if !utf8.ValidString(q) {
		return nil, fault.New(fault.Invalid, "invalid_query", "q is not valid UTF-8")
	}
	return strings.Fields(strings.ToLower(q)), nil
}

// searchLimit is the search bound: 0 means the card size (8), at most 32.
func searchLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return api.EpisodeCardSize, nil
	case limit < 0 || limit > api.MaxEpisodeSearch:
		return 0, fault.New(fault.Invalid, "invalid_limit", "limit must be between 1 and %d (0 means %d)", api.MaxEpisodeSearch, api.EpisodeCardSize)
	default:
		return limit, nil
	}
}

// matches is the search rule: every term appears, case-insensitively, in
// the summary or in the room. No terms match everything.
func matches(r *rec, terms []string) bool {
	for _, t := range terms {
		if !strings.Contains(r.summaryLower, t) && !strings.Contains(r.roomLower, t) {
			return false
		}
	}
	return true
}
