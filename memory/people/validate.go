package people

import (
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

func invalid(format string, args ...any) error {
	return fault.New(fault.Invalid, "invalid_request", format, args...)
}

// ValidSubject checks both ids of a key.
func ValidSubject(s api.Subject) error {
	if err := api.CheckID(s.GuildID); err != nil {
		return invalid("guildId %v.", err)
	}
	if err := api.CheckID(s.UserID); err != nil {
		return invalid("userId %v.", err)
	}
	return nil
}

// validToken checks a short opaque token such as a proposal or event id
// (api.CheckToken), naming the field.
func validToken(name, v string, required bool) error {
	if v == "" {
		if required {
			return invalid("%s is required.", name)
		}
		return nil
	}
	if err := api.CheckToken(v); err != nil {
		return invalid("%s %v.", name, err)
	}
	return nil
}

// validFactID checks a fact id the caller names (api.ValidFactID): ids are
// assigned by the service and never hold a space or a control character,
// so an id that fails the rule can name no fact.
func validFactID(name, id string) error {
	if !api.ValidFactID(id) {
		return invalid("%s is not a fact id: fact ids are 1 to %d characters with no spaces or control characters.", name, api.MaxIDLength)
	}
	return nil
}

// cleanBody trims a fact body and checks it (api.CleanFactBody), in the
// service's sentences.
func cleanBody(body string) (string, error) {
	body, n, problem := api.CleanFactBody(body)
	switch problem {
	case api.BodyNotUTF8:
		return "", invalid("The fact must be valid UTF-8.")
	case api.BodyEmpty:
		return "", invalid("The fact is empty after trimming.")
	case api.BodyTooLong:
		return "", invalid("The fact is %d characters; at most %d are kept.", n, api.MaxFactBody)
	case api.BodyControl:
		return "", invalid("The fact must not contain control characters other than newlines.")
	}
	return body, nil
}

func validKind(k api.Kind) error {
	if api.ValidKind(k) {
		return nil
	}
	return invalid("kind must be person-fact, preference or relationship-note.")
}

func validVisibility(who api.Principal, v api.Visibility) error {
	switch v.Scope {
	case api.ScopeGuild:
		if v.ChannelID != "" {
			return invalid("A guild-scoped fact takes no channelId.")
		}
	case api.ScopeChannel:
		if v.ChannelID == "" {
			return invalid("A channel-scoped fact needs visibility.channelId.")
		}
		if err := api.CheckID(v.ChannelID); err != nil {
			return invalid("visibility.channelId %v.", err)
		}
	case api.ScopeOperatorPrivate:
		if v.ChannelID != "" {
			return invalid("An operator_private fact takes no channelId.")
		}
		if !who.Operator() {
			return fault.New(fault.Forbidden, "forbidden_visibility", "Only the operator may write operator_private facts.")
		}
	default:
		return invalid("visibility.scope must be guild, channel or operator_private.")
	}
	return nil
}

func validConfidence(v float64) error {
	if v < 0 || v > 1 {
		return invalid("confidence must be between 0 and 1.")
	}
	return nil
}

func validExpiry(t *time.Time, now time.Time) error {
	if t != nil && !t.After(now) {
		return invalid("expiresAt must be in the future.")
	}
	return nil
}

// validateProposal checks everything a proposal carries before anything is
// read or written, and fills provenance.sourceSurface from the caller: the
// one place a proposal is validated (api holds the shape rules it calls).
func validateProposal(who api.Principal, req *api.ProposalRequest) error {
	if req.SchemaVersion != api.SchemaVersion {
		return invalid("schemaVersion must be %d.", api.SchemaVersion)
	}
	if err := validToken("proposalId", req.ProposalID, true); err != nil {
		return err
	}
	f := &req.Fact
	if err := ValidSubject(f.Subject); err != nil {
		return err
	}
	if err := validKind(f.Kind); err != nil {
		return err
	}
	body, err := cleanBody(f.Body)
	if err != nil {
		return err
	}
	f.Body = body
	if err := validVisibility(who, f.Visibility); err != nil {
		return err
	}
	if err := validConfidence(f.Confidence); err != nil {
		return err
	}
	if f.SupersedesFactID != "" {
		if err := validFactID("supersedesFactId", f.SupersedesFactID); err != nil {
			return err
		}
	}
	p := &f.Provenance
	if p.SourceSurface != "" && p.SourceSurface != who.Surface() {
		return fault.New(fault.Forbidden, "forbidden_surface", "provenance.sourceSurface names another surface than this bearer's; the bearer decides who is asking.")
	}
	p.SourceSurface = who.Surface()
	for _, t := range []struct {
		name, v string
	}{{"provenance.sourceEventId", p.SourceEventID}, {"provenance.correlationId", p.CorrelationID}} {
		if err := validToken(t.name, t.v, false); err != nil {
			return err
		}
	}
	for _, t := range []struct {
		name, v string
	}{{"provenance.proposerUserId", p.ProposerUserID}, {"provenance.channelId", p.ChannelID}} {
		if t.v == "" {
			if !who.Operator() {
				return invalid("%s is required for a Discord proposal.", t.name)
			}
			continue
		}
		if err := api.CheckID(t.v); err != nil {
			return invalid("%s %v.", t.name, err)
		}
	}
	// The source message is optional (a fact from "Remember this" on a
	// message names it); it becomes a link, so it must be a real snowflake.
	if p.SourceMessageID != "" {
		if err := api.CheckSnowflake(p.SourceMessageID); err != nil {
			return invalid("provenance.sourceMessageId %v.", err)
		}
	}
	if !who.Operator() && f.Visibility.Scope == api.ScopeChannel && f.Visibility.ChannelID != p.ChannelID {
		return invalid("A Discord proposal may scope a fact only to the channel it was proposed in.")
	}
	return nil
}
