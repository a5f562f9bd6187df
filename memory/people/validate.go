package people

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

func invalid(format string, args ...any) error {
	return fault.New(fault.Invalid, "invalid_request", format, args...)
}

// ValidSubject checks both ids of a key.
func ValidSubject(s api.Subject) error {
	if err := ValidID(s.GuildID); err != nil {
		return invalid("guildId %v.", err)
	}
	if err := ValidID(s.UserID); err != nil {
		return invalid("userId %v.", err)
	}
	return nil
}

// validToken checks a short opaque token such as a proposal or event id.
func validToken(name, v string, required bool) error {
	if v == "" {
		if required {
			return invalid("%s is required.", name)
		}
		return nil
	}
	if utf8.RuneCountInString(v) > 128 || !utf8.ValidString(v) {
		return invalid("%s must be at most 128 characters of UTF-8.", name)
	}
	for _, r := range v {
		if r <= 0x20 || r == 0x7f {
			return invalid("%s must not contain spaces or control characters.", name)
		}
	}
	return nil
}

// CleanBody trims a fact body and checks it: 1–2048 characters, no control
// characters except newline.
func CleanBody(body string) (string, error) {
	body = strings.TrimSpace(body)
	if !utf8.ValidString(body) {
		return "", invalid("The fact must be valid UTF-8.")
	}
	n := utf8.RuneCountInString(body)
	if n == 0 {
		return "", invalid("The fact is empty after trimming.")
	}
	if n > api.MaxFactBody {
		return "", invalid("The fact is %d characters; at most %d are kept.", n, api.MaxFactBody)
	}
	for _, r := range body {
		if (r < 0x20 && r != '\n') || r == 0x7f {
			return "", invalid("The fact must not contain control characters other than newlines.")
		}
	}
	return body, nil
}

func validKind(k string) error {
	if api.ValidKind(k) {
		return nil
	}
	return invalid("kind must be person-fact, preference or relationship-note.")
}

func validVisibility(c Caller, v api.Visibility) error {
	switch v.Scope {
	case api.ScopeGuild:
		if v.ChannelID != "" {
			return invalid("A guild-scoped fact takes no channelId.")
		}
	case api.ScopeChannel:
		if v.ChannelID == "" {
			return invalid("A channel-scoped fact needs visibility.channelId.")
		}
		if err := ValidID(v.ChannelID); err != nil {
			return invalid("visibility.channelId %v.", err)
		}
	case api.ScopeOperatorPrivate:
		if v.ChannelID != "" {
			return invalid("An operator_private fact takes no channelId.")
		}
		if !c.Operator {
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
// read or written, and fills provenance.sourceSurface from the caller.
func validateProposal(c Caller, req *api.ProposalRequest, now time.Time) error {
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
	body, err := CleanBody(f.Body)
	if err != nil {
		return err
	}
	f.Body = body
	if err := validVisibility(c, f.Visibility); err != nil {
		return err
	}
	if err := validConfidence(f.Confidence); err != nil {
		return err
	}
	if err := validExpiry(f.ExpiresAt, now); err != nil {
		return err
	}
	if err := validToken("supersedesFactId", f.SupersedesFactID, false); err != nil {
		return err
	}
	p := &f.Provenance
	if p.SourceSurface != "" && p.SourceSurface != c.Surface {
		return fault.New(fault.Forbidden, "forbidden_surface", "provenance.sourceSurface names another surface than this bearer's; the bearer decides who is asking.")
	}
	p.SourceSurface = c.Surface
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
			if !c.Operator {
				return invalid("%s is required for a Discord proposal.", t.name)
			}
			continue
		}
		if err := ValidID(t.v); err != nil {
			return invalid("%s %v.", t.name, err)
		}
	}
	return nil
}
