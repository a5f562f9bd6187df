package commands

import (
	"strings"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/lang"
)

// The replies of /person-memory, in the invoker's language (say). Each is
// built line by line with one fact per line and its summary first, so when
// the router cuts a long reply at a line ("…and N more") it drops whole
// facts and never the summary. A fact applies on arrival: the wording says
// it is remembered, never that it waits for anyone. The service's own
// sentences (why nothing was replaced) are shown as it wrote them, in
// English.

// rememberedReply returns the reply to a proposal, the same text whether
// replayed or not: what was remembered, about whom, where it is visible and
// until when, and what it replaced or pushed out.
func rememberedReply(say *lang.Printer, invokerID string, resp api.ProposalResponse, now time.Time) string {
	if resp.Fact == nil {
		return replayedGoneReply(say, resp)
	}
	f := *resp.Fact
	lines := []string{
		say.Say(lang.Remembered, lang.Args{"Fact": code(f.FactID), "Who": who(say, invokerID, f.Subject.UserID),
			"Kind": kindWord(say, f.Kind), "Confidence": confidenceWord(say, f.Confidence),
			"Visibility": visibilityPhrase(say, f.Visibility), "Expiry": expiryPhrase(say, f, now)}),
		"> " + factText(f.Body, maxBodyOnLine),
	}
	switch {
	case resp.Superseded && f.SupersedesFactID != "":
		lines = append(lines, say.Say(lang.ReplacedFact, lang.Args{"Fact": code(f.SupersedesFactID)}))
	case resp.Superseded:
		lines = append(lines, say.Say(lang.ReplacedCorrected, nil))
	case resp.Reason != "":
		lines = append(lines, say.Say(lang.NothingReplaced, lang.Args{"Reason": sentence(resp.Reason)}))
	}
	if resp.Evicted > 0 {
		lines = append(lines, say.Count(lang.Evicted, resp.Evicted,
			lang.Args{"Who": who(say, invokerID, f.Subject.UserID), "Max": api.MaxFactsPerPerson}))
	}
	return strings.Join(lines, "\n")
}

// replayedGoneReply is the reply to a redelivered proposal whose fact has since been
// forgotten or replaced: nothing new was stored.
func replayedGoneReply(say *lang.Printer, resp api.ProposalResponse) string {
	if resp.Reason != "" {
		return sentence(resp.Reason)
	}
	return say.Say(lang.ReplayedGone, nil)
}

// recallReply lists the facts visible in this channel, newest first as the
// service returns them, or says in one sentence that there are none.
func recallReply(say *lang.Printer, invokerID, subjectID string, searched bool, resp api.RecallResponse, now time.Time) string {
	whom := who(say, invokerID, subjectID)
	if len(resp.Facts) == 0 {
		if searched {
			return say.Say(lang.RecallNoneSearched, lang.Args{"Who": whom})
		}
		return say.Say(lang.RecallNone, lang.Args{"Who": whom})
	}
	header := say.Say(lang.RecallHeader, lang.Args{"Who": whom})
	if resp.Total > len(resp.Facts) {
		header = say.Say(lang.RecallHeaderPart, lang.Args{"Who": whom, "Shown": len(resp.Facts), "Total": resp.Total})
	}
	lines := []string{header}
	for _, f := range resp.Facts {
		lines = append(lines, factLine(say, f, now))
	}
	return strings.Join(lines, "\n")
}

// mineReply shows a person everything kept about them in this server, with
// where each fact is visible, who proposed it and its expiry, and the count
// against the per-person bound.
func mineReply(say *lang.Printer, invokerID string, resp api.RecallResponse, now time.Time) string {
	count := max(resp.Total, len(resp.Facts))
	capacity := resp.Capacity
	if capacity <= 0 {
		capacity = api.MaxFactsPerPerson
	}
	if count == 0 {
		return say.Say(lang.MineNone, lang.Args{"Capacity": capacity})
	}
	lines := []string{say.Say(lang.MineHeader, lang.Args{"Count": count, "Capacity": capacity})}
	for _, f := range resp.Facts {
		lines = append(lines, mineLine(say, invokerID, f, now))
	}
	return strings.Join(lines, "\n")
}

// forgottenReply confirms a forget.
func forgottenReply(say *lang.Printer, invokerID, subjectID, factID string) string {
	return say.Say(lang.Forgotten, lang.Args{"Fact": code(factID), "Who": who(say, invokerID, subjectID)})
}

// factLine is one fact as recall shows it.
func factLine(say *lang.Printer, f api.Fact, now time.Time) string {
	return "• " + strings.Join([]string{code(f.FactID), kindWord(say, f.Kind), confidenceWord(say, f.Confidence),
		expiryPhrase(say, f, now)}, " · ") + sourceLink(f) + " — " + factText(f.Body, maxBodyOnLine)
}

// mineLine is one fact as its subject sees it.
func mineLine(say *lang.Printer, invokerID string, f api.Fact, now time.Time) string {
	return "• " + strings.Join([]string{code(f.FactID), kindWord(say, f.Kind), confidenceWord(say, f.Confidence),
		visibilityPhrase(say, f.Visibility), proposerPhrase(say, invokerID, f.Provenance.ProposerUserID),
		expiryPhrase(say, f, now)}, " · ") + sourceLink(f) + " — " + factText(f.Body, maxBodyOnLine)
}

// who is "you" for the invoker and a mention for anyone else.
func who(say *lang.Printer, invokerID, userID string) string {
	if userID == invokerID {
		return say.Say(lang.You, nil)
	}
	return mention(userID)
}

// kindWord names a fact's kind as the kind option's choice does in the
// reader's language; a kind the command does not offer is shown as
// stored, escaped.
func kindWord(say *lang.Printer, k api.Kind) string {
	id := kindChoiceID(k)
	if !api.ValidKind(k) {
		return escapeMarkdown(flatten(string(k)))
	}
	return say.Say(id, nil)
}

// confidenceWord turns a stored confidence back into the word people chose.
func confidenceWord(say *lang.Printer, c float64) string {
	switch {
	case c >= (confidenceHighValue+confidenceMedValue)/2:
		return say.Say(lang.ConfidenceHigh, nil)
	case c >= (confidenceMedValue+confidenceLowValue)/2:
		return say.Say(lang.ConfidenceMedium, nil)
	}
	return say.Say(lang.ConfidenceLow, nil)
}

// visibilityPhrase says where a fact may be recalled.
func visibilityPhrase(say *lang.Printer, v api.Visibility) string {
	switch v.Scope {
	case api.ScopeGuild:
		return say.Say(lang.VisibleGuild, nil)
	case api.ScopeChannel:
		return say.Say(lang.VisibleChannel, lang.Args{"Channel": channelMention(v.ChannelID)})
	case api.ScopeOperatorPrivate:
		return say.Say(lang.VisibleOperator, nil)
	}
	return say.Say(lang.VisibleAs, lang.Args{"Scope": escapeMarkdown(flatten(string(v.Scope)))})
}

// proposerPhrase says who told Clankie a fact; a fact with no proposer was
// written by the operator.
func proposerPhrase(say *lang.Printer, invokerID, proposerID string) string {
	switch proposerID {
	case "":
		return say.Say(lang.AddedByOperator, nil)
	case invokerID:
		return say.Say(lang.ProposedByYou, nil)
	}
	return say.Say(lang.ProposedBy, lang.Args{"Member": mention(proposerID)})
}

// expiryPhrase is when a fact will be forgotten, as a Discord relative
// timestamp (which each reader's client words in their own language).
func expiryPhrase(say *lang.Printer, f api.Fact, now time.Time) string {
	switch {
	case f.ExpiresAt == nil:
		return say.Say(lang.NoExpiry, nil)
	case f.Expired || !f.ExpiresAt.After(now):
		return say.Say(lang.Expired, nil)
	}
	return say.Say(lang.Expires, lang.Args{"When": relativeTime(*f.ExpiresAt)})
}
