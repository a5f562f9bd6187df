package people

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/clankie/clankie/api"
)

// Expired reports whether a fact's expiry has passed. Expiry is honest at read
// time: nothing needs to sweep a file for an expired fact to disappear.
func Expired(f api.Fact, now time.Time) bool {
	return f.ExpiresAt != nil && !f.ExpiresAt.After(now)
}

// Visible is the one visibility rule of every ambient read (recall, briefing,
// autocomplete) by who in the room channelID: guild facts in every room of
// their guild (the guild is part of the key, so facts never cross guilds),
// channel facts only in that channel, operator_private facts only to the
// operator, expired facts never. A Discord read always names its room; the
// operator's may name none, and then sees every room. It takes a pointer: a
// fact is about 400 bytes, and a recall asks about each of up to 128.
func Visible(f *api.Fact, who api.Principal, channelID string, now time.Time) bool {
	if Expired(*f, now) {
		return false
	}
	switch f.Visibility.Scope {
	case api.ScopeGuild:
		return true
	case api.ScopeChannel:
		if who.Operator() && channelID == "" {
			return true
		}
		return channelID != "" && f.Visibility.ChannelID == channelID
	case api.ScopeOperatorPrivate:
		return who.Operator()
	}
	return false
}

// isHidden reports whether a fact is an operator-only note. Hidden notes and
// Discord-visible facts (guild and channel) are bounded apart, each class
// by its own cap (boundOf), and eviction in one class never touches the
// other: what a member is shown or counted never depends on notes they
// cannot see.
func isHidden(f *api.Fact) bool { return f.Visibility.Scope == api.ScopeOperatorPrivate }

// boundOf is the cap of a class of facts: api.MaxHiddenFactsPerPerson for
// operator-only notes, api.MaxFactsPerPerson for Discord-visible facts.
func boundOf(hidden bool) int {
	if hidden {
		return api.MaxHiddenFactsPerPerson
	}
	return api.MaxFactsPerPerson
}

// MaxFactsStored is the most facts a person holds: both classes full.
const MaxFactsStored = api.MaxFactsPerPerson + api.MaxHiddenFactsPerPerson

// countClass returns how many of facts are of the class hidden names,
// leaving out the fact at skip (-1: none).
func countClass(facts []api.Fact, hidden bool, skip int) int {
	n := 0
	for i := range facts {
		if i != skip && isHidden(&facts[i]) == hidden {
			n++
		}
	}
	return n
}

// The codes of refusals that name a fact the request found: the receipt
// logs the fact's id for these (any other refusal logs only its length).
const (
	CodeNotSubjectOrProposer = "not_subject_or_proposer"
	CodeAtCapacity           = "person_at_capacity"
)

// ReasonNoSuchFact is the reason a proposal gives when its supersedesFactId
// names no fact the caller's lane can see: a hidden fact answers exactly as
// a missing one.
const ReasonNoSuchFact = "no fact with that id is kept about this person, so nothing was replaced"

// MaySupersede is the authority rule of a correction: the operator may
// supersede any fact of the subject; a Discord proposer only one visible in
// the proposing channel that they proposed themselves or that is about them.
// It returns a content-free reason when the answer is no.
func MaySupersede(who api.Principal, old api.Fact, proposerUserID, channelID string, now time.Time) (bool, string) {
	if who.Operator() {
		return true, ""
	}
	if !LaneVisible(who, old) {
		return false, ReasonNoSuchFact
	}
	if !Visible(&old, who, channelID, now) {
		return false, "the fact named in supersedesFactId is not visible in this channel, so nothing was replaced"
	}
	if !api.AboutOrProposedBy(old, proposerUserID) {
		return false, "only the person a fact is about or the member who proposed it may supersede it, so nothing was replaced"
	}
	return true, ""
}

// MayForget is the subject's and proposer's right to remove a fact without
// an operator. operator_private facts are invisible to Discord and so absent.
func MayForget(f api.Fact, requesterUserID string) bool {
	return f.Visibility.Scope != api.ScopeOperatorPrivate && api.AboutOrProposedBy(f, requesterUserID)
}

// Evict keeps a person at the bound: while there are more than max facts it
// removes, of the facts mayEvict allows, expired ones first (oldest first),
// then the oldest. It returns the facts kept, in their original order, and
// how many were removed; ok is false, and facts are returned unchanged, when
// the allowed facts are too few to get back to the bound.
func Evict(facts []api.Fact, max int, now time.Time, mayEvict func(api.Fact) bool) (kept []api.Fact, evicted int, ok bool) {
	over := len(facts) - max
	if over <= 0 {
		return facts, 0, true
	}
	order := make([]int, 0, len(facts))
	for i, f := range facts {
		if mayEvict(f) {
			order = append(order, i)
		}
	}
	if len(order) < over {
		return facts, 0, false
	}
	sort.SliceStable(order, func(a, b int) bool {
		fa, fb := facts[order[a]], facts[order[b]]
		ea, eb := Expired(fa, now), Expired(fb, now)
		if ea != eb {
			return ea
		}
		return fa.CreatedAt.Before(fb.CreatedAt)
	})
	drop := make(map[int]bool, over)
	for _, i := range order[:over] {
		drop[i] = true
	}
	kept = make([]api.Fact, 0, max)
	for i, f := range facts {
		if !drop[i] {
			kept = append(kept, f)
		}
	}
	return kept, over, true
}

// LaneVisible reports whether a fact is visible to the caller's lane at all,
// in some room: the operator sees every fact, a Discord lane every fact that
// is not operator_private (what the subject's own view shows, expired ones
// included). A Discord lane may evict, supersede, forget, count or name only
// such facts.
func LaneVisible(who api.Principal, f api.Fact) bool {
	return who.Operator() || f.Visibility.Scope != api.ScopeOperatorPrivate
}

// NewestFirst orders facts by creation, newest first, ties by id.
func NewestFirst(facts []api.Fact) {
	slices.Reverse(facts)
	byValue := func(a, b api.Fact) int { return compareNewest(&a, &b) }
	if !slices.IsSortedFunc(facts, byValue) {
		slices.SortFunc(facts, byValue)
	}
}

// newestFirst is NewestFirst on pointers to one person's facts. A
// person's facts are kept in the order they were stored, which is nearly
// always the wanted order reversed: so both reverse them and sort only when
// that was not enough, and a recall of 128 facts costs 127 comparisons
// instead of a sort (the sort was half of its time). A person's fact ids
// are unique, so the order is total and any sort gives the one result a
// stable sort of the stored order would.
func newestFirst(facts []*api.Fact) {
	slices.Reverse(facts)
	if !slices.IsSortedFunc(facts, compareNewest) {
		slices.SortFunc(facts, compareNewest)
	}
}

// compareNewest is NewestFirst's order as a comparison: negative when a
// comes before b.
func compareNewest(a, b *api.Fact) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.FactID, a.FactID)
}
