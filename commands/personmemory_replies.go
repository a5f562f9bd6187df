package commands

import (
	"fmt"
	"strings"
	"time"

	"github.com/clankie/clankie/api"
)

// The replies of /person-memory. Each is built line by line with one fact per
// line and its summary first, so when the router cuts a long reply at a line
// ("…and N more") it drops whole facts and never the summary. A fact applies
// on arrival: the wording says it is remembered, never that it waits for
// anyone.

// rememberedReply returns the reply to a proposal, the same text whether
// replayed or not: what was remembered, about whom, where it is visible and
// until when, and what it replaced or pushed out.
func rememberedReply(invokerID string, resp api.ProposalResponse, now time.Time) string {
	if resp.Fact == nil {
		return replayedGoneReply(resp)
	}
	f := *resp.Fact
	lines := []string{
		fmt.Sprintf("Remembered %s about %s (%s, %s), %s, %s.", code(f.FactID), who(invokerID, f.Subject.UserID),
			f.Kind, confidenceWord(f.Confidence), visibilityPhrase(f.Visibility), expiryPhrase(f, now)),
		"> " + factText(f.Body, maxBodyOnLine),
	}
	switch {
	case resp.Superseded && f.SupersedesFactID != "":
		lines = append(lines, fmt.Sprintf("It replaced %s, which is forgotten.", code(f.SupersedesFactID)))
	case resp.Superseded:
		lines = append(lines, "It replaced the fact it corrects, which is forgotten.")
	case resp.Reason != "":
		lines = append(lines, "Nothing was replaced: "+sentence(resp.Reason))
	}
	if resp.Evicted > 0 {
		lines = append(lines, evictedLine(resp.Evicted, who(invokerID, f.Subject.UserID)))
	}
	return strings.Join(lines, "\n")
}

// replayedGoneReply is the reply to a redelivered proposal whose fact has since been
// forgotten or replaced: nothing new was stored.
func replayedGoneReply(resp api.ProposalResponse) string {
	if resp.Reason != "" {
		return sentence(resp.Reason)
	}
	return "That fact was remembered earlier from this same command and has since been forgotten or replaced; nothing new was stored."
}

// evictedLine says that the oldest facts made room (the bound is per person).
func evictedLine(n int, whom string) string {
	if n == 1 {
		return fmt.Sprintf("The oldest fact about %s was forgotten to make room (I keep at most %d per person).", whom, api.MaxFactsPerPerson)
	}
	return fmt.Sprintf("The oldest %d facts about %s were forgotten to make room (I keep at most %d per person).", n, whom, api.MaxFactsPerPerson)
}

// recallReply lists the facts visible in this channel, newest first as the
// service returns them, or says in one sentence that there are none.
func recallReply(invokerID, subjectID string, searched bool, resp api.RecallResponse, now time.Time) string {
	whom := who(invokerID, subjectID)
	if len(resp.Facts) == 0 {
		if searched {
			return fmt.Sprintf("I don't remember anything about %s that matches that search and is visible here.", whom)
		}
		return fmt.Sprintf("I don't remember anything about %s that is visible here.", whom)
	}
	header := fmt.Sprintf("What I remember about %s that is visible here, newest first:", whom)
	if resp.Total > len(resp.Facts) {
		header = fmt.Sprintf("What I remember about %s that is visible here: the newest %d of %d (add a query to narrow it down):",
			whom, len(resp.Facts), resp.Total)
	}
	lines := []string{header}
	for _, f := range resp.Facts {
		lines = append(lines, factLine(f, now))
	}
	return strings.Join(lines, "\n")
}

// mineReply shows a person everything kept about them in this server, with
// where each fact is visible, who proposed it and its expiry, and the count
// against the per-person bound.
func mineReply(invokerID string, resp api.RecallResponse, now time.Time) string {
	count := max(resp.Total, len(resp.Facts))
	capacity := resp.Capacity
	if capacity <= 0 {
		capacity = api.MaxFactsPerPerson
	}
	if count == 0 {
		return fmt.Sprintf("I keep nothing about you in this server (0 of %d).", capacity)
	}
	lines := []string{fmt.Sprintf("Everything I keep about you in this server: %d of %d. Forget any of it with /person-memory forget.", count, capacity)}
	for _, f := range resp.Facts {
		lines = append(lines, mineLine(invokerID, f, now))
	}
	return strings.Join(lines, "\n")
}

// forgottenReply confirms a forget.
func forgottenReply(invokerID, subjectID, factID string) string {
	return fmt.Sprintf("Forgotten: %s about %s.", code(factID), who(invokerID, subjectID))
}

// factLine is one fact as recall shows it.
func factLine(f api.Fact, now time.Time) string {
	return fmt.Sprintf("• %s · %s · %s · %s%s — %s", code(f.FactID), f.Kind, confidenceWord(f.Confidence),
		expiryPhrase(f, now), sourceLink(f), factText(f.Body, maxBodyOnLine))
}

// mineLine is one fact as its subject sees it.
func mineLine(invokerID string, f api.Fact, now time.Time) string {
	return fmt.Sprintf("• %s · %s · %s · %s · %s · %s%s — %s", code(f.FactID), f.Kind, confidenceWord(f.Confidence),
		visibilityPhrase(f.Visibility), proposerPhrase(invokerID, f.Provenance.ProposerUserID),
		expiryPhrase(f, now), sourceLink(f), factText(f.Body, maxBodyOnLine))
}

// who is "you" for the invoker and a mention for anyone else.
func who(invokerID, userID string) string {
	if userID == invokerID {
		return "you"
	}
	return mention(userID)
}

// confidenceWord turns a stored confidence back into the word people chose.
func confidenceWord(c float64) string {
	switch {
	case c >= (confidenceHighValue+confidenceMedValue)/2:
		return "high confidence"
	case c >= (confidenceMedValue+confidenceLowValue)/2:
		return "medium confidence"
	}
	return "low confidence"
}

// visibilityPhrase says where a fact may be recalled.
func visibilityPhrase(v api.Visibility) string {
	switch v.Scope {
	case api.ScopeGuild:
		return "visible in this server"
	case api.ScopeChannel:
		return "visible only in " + channelMention(v.ChannelID)
	case api.ScopeOperatorPrivate:
		return "visible only to the operator"
	}
	return "visible as " + escapeMarkdown(flatten(string(v.Scope)))
}

// proposerPhrase says who told Clankie a fact; a fact with no proposer was
// written by the operator.
func proposerPhrase(invokerID, proposerID string) string {
	switch proposerID {
	case "":
		return "added by the operator"
	case invokerID:
		return "proposed by you"
	}
	return "proposed by " + mention(proposerID)
}

// expiryPhrase is when a fact will be forgotten, as a Discord relative
// timestamp.
func expiryPhrase(f api.Fact, now time.Time) string {
	switch {
	case f.ExpiresAt == nil:
		return "no expiry"
	case f.Expired || !f.ExpiresAt.After(now):
		return "expired"
	}
	return "expires " + relativeTime(*f.ExpiresAt)
}
