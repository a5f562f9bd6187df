package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/commands"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/lang"
)

// The service's page of people: its default and its ceiling.
const (
	defaultPeoplePage = 100
	maxPeoplePage     = 1000
)

func newPeopleCommand() *cobra.Command {
	var (
		fl     opFlags
		limit  int
		cursor string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "people [--limit N] [--cursor C] [--all]",
		Short: "List every person memory keeps facts about, with their fact counts",
		Long: `List the people (guild id, user id) the memory service keeps facts about, with
how many facts each has, one page at a time. When there are more, it prints
the --cursor to pass for the next page; --all follows every page. With --json
it prints the service's page (with --all: every person in one answer).`,
		Example: `  clankie memory people
  clankie memory people --limit 50 --cursor p-123456789012345678_234567890123456789.json
  clankie memory people --all --json | jq -r '.people[] | "\(.subject.guildId) \(.subject.userId)"'`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLimit(cmd, limit, maxPeoplePage); err != nil {
				return err
			}
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				page, err := s.client.People(ctx, cursor, limit)
				if err != nil {
					return err
				}
				for all && page.NextCursor != "" {
					next, err := s.client.People(ctx, page.NextCursor, limit)
					if err != nil {
						return err
					}
					if next.NextCursor != "" && next.NextCursor == page.NextCursor {
						return fmt.Errorf("the memory service answered the same page twice; stopped paging")
					}
					page.People = append(page.People, next.People...)
					page.Total = next.Total
					page.NextCursor = next.NextCursor
				}
				if s.json {
					return writeJSON(s.out, page)
				}
				return renderPeople(s.out, page, cursor != "", limit)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("people per page (default %d, at most %d)", defaultPeoplePage, maxPeoplePage))
	cmd.Flags().StringVar(&cursor, "cursor", "", "start after this cursor, printed at the end of the previous page")
	cmd.Flags().BoolVar(&all, "all", false, "follow every page and list everyone")
	return operatorCommand(cmd, &fl)
}

func newPersonCommand() *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "person GUILD USER",
		Short: "Export every fact kept about one person, private and expired ones included",
		Long: `Export everything the memory service keeps about one person, keyed by the
Discord guild id and user id: every fact, operator_private ones and expired
ones included (expired ones are marked in EXPIRES; they are no longer shown to
anyone in Discord). Bodies are flattened to one line and cut in the table;
--json prints them whole, exactly as stored.`,
		Example: `  clankie memory person 123456789012345678 234567890123456789
  clankie memory person 123456789012345678 234567890123456789 --json`,
		Args: argsNamed("GUILD", "USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				r, err := s.client.Export(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, r)
				}
				return renderExport(s.out, args[0], args[1], r)
			})
		},
	}
	return operatorCommand(cmd, &fl)
}

func newFactCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "fact edit|forget GUILD USER FACTID",
		Short: "Edit or forget one fact about a person",
		Long: `Edit or forget one fact about a person. The fact id is the ID column of
'clankie memory person GUILD USER'.`,
		Example: `  clankie memory fact edit 123456789012345678 234567890123456789 fq7mk2xa --body "prefers tea"
  clankie memory fact forget 123456789012345678 234567890123456789 fq7mk2xa`,
	})
	cmd.AddCommand(newFactEditCommand(), newFactForgetCommand())
	return cmd
}

func newFactEditCommand() *cobra.Command {
	var (
		fl                     opFlags
		body, kind, visibility string
		expires                string
		confidence             float64
		noExpiry               bool
	)
	cmd := &cobra.Command{
		Use:   "edit GUILD USER FACTID [--body S] [--kind K] [--visibility V] [--confidence F] [--expires WHEN|--no-expiry]",
		Short: "Change a fact's body, kind, visibility, confidence or expiry",
		Long: `Change one fact. Give at least one of the flags; what is not given stays as it
is. The fact keeps its id, subject, creation time and provenance.

  --kind        person-fact, preference or relationship-note
  --visibility  guild (every room of the guild), channel:<id> (that room
                only) or operator_private (never shown in Discord)
  --confidence  0 to 1
  --expires     as /person-memory's expires option: 90m, 12h, 7d, 2w (from
                now) or a date such as 2027-01-31 (kept through that day,
                UTC); at most 365 days ahead
  --no-expiry   keep the fact until it is forgotten

It prints the fact as stored; --json prints the service's answer.`,
		Example: `  clankie memory fact edit 123456789012345678 234567890123456789 fq7mk2xa --body "prefers green tea"
  clankie memory fact edit 123456789012345678 234567890123456789 fq7mk2xa --visibility channel:345678901234567890 --confidence 0.6
  clankie memory fact edit 123456789012345678 234567890123456789 fq7mk2xa --visibility operator_private --no-expiry`,
		Args: argsNamed("GUILD", "USER", "FACTID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p api.FactPatch
			f := cmd.Flags()
			if f.Changed("body") {
				if strings.TrimSpace(body) == "" {
					return usagef(cmd, "--body must not be empty; to remove the fact use 'clankie memory fact forget'")
				}
				p.Body = &body
			}
			if f.Changed("kind") {
				k := api.Kind(kind)
				if !api.ValidKind(k) {
					return usagef(cmd, "--kind must be %s, %s or %s (got %q)", api.KindPersonFact, api.KindPreference, api.KindRelationshipNote, oneLine(kind))
				}
				p.Kind = &k
			}
			if f.Changed("visibility") {
				v, err := parseFactVisibility(visibility)
				if err != nil {
					return usageError(cmd, err)
				}
				p.Visibility = &v
			}
			if f.Changed("confidence") {
				if math.IsNaN(confidence) || confidence < 0 || confidence > 1 {
					return usagef(cmd, "--confidence must be between 0 and 1 (got %s)", strconv.FormatFloat(confidence, 'g', -1, 64))
				}
				p.Confidence = &confidence
			}
			if f.Changed("expires") && noExpiry {
				return usagef(cmd, "give --expires or --no-expiry, not both")
			}
			if f.Changed("expires") {
				t, err := parseExpires(expires, time.Now())
				if err != nil {
					return usageError(cmd, err)
				}
				p.ExpiresAt = api.OptionalTime{Set: true, Value: t}
			}
			if noExpiry {
				p.ExpiresAt = api.OptionalTime{Set: true}
			}
			if p.Body == nil && p.Kind == nil && p.Visibility == nil && p.Confidence == nil && !p.ExpiresAt.Set {
				return usagef(cmd, "nothing to change: give --body, --kind, --visibility, --confidence, --expires or --no-expiry")
			}
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				fact, err := s.client.EditFact(ctx, args[0], args[1], args[2], p)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, api.FactResponse{SchemaVersion: api.SchemaVersion, Fact: fact})
				}
				fmt.Fprintf(s.out, "Updated fact %s about user %s in guild %s.\n", oneLine(fact.FactID), oneLine(args[1]), oneLine(args[0]))
				return renderFacts(s.out, []api.Fact{fact})
			})
		},
	}
	cmd.Flags().StringVar(&body, "body", "", "the new body (1 to 2048 characters)")
	cmd.Flags().StringVar(&kind, "kind", "", "person-fact, preference or relationship-note")
	cmd.Flags().StringVar(&visibility, "visibility", "", "guild, channel:<id> or operator_private")
	cmd.Flags().Float64Var(&confidence, "confidence", 0, "how sure Clankie is, 0 to 1")
	cmd.Flags().StringVar(&expires, "expires", "", "when the fact expires: 90m, 12h, 7d, 2w or a date such as 2027-01-31, at most a year ahead")
	cmd.Flags().BoolVar(&noExpiry, "no-expiry", false, "clear the expiry: keep the fact until it is forgotten")
	return operatorCommand(cmd, &fl)
}

// parseFactVisibility reads guild, channel:<id> or operator_private.
func parseFactVisibility(s string) (api.Visibility, error) {
	channel := string(api.ScopeChannel) + ":"
	switch {
	case api.Scope(s) == api.ScopeGuild:
		return api.Visibility{Scope: api.ScopeGuild}, nil
	case api.Scope(s) == api.ScopeOperatorPrivate:
		return api.Visibility{Scope: api.ScopeOperatorPrivate}, nil
	case strings.HasPrefix(s, channel) && len(s) > len(channel):
		return api.Visibility{Scope: api.ScopeChannel, ChannelID: strings.TrimPrefix(s, channel)}, nil
	}
	return api.Visibility{}, fmt.Errorf("--visibility must be guild, channel:<id> or operator_private (got %q)", oneLine(s))
}

func newFactForgetCommand() *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "forget GUILD USER FACTID",
		Short: "Forget one fact about a person",
		Long: `Forget one fact about a person, whoever proposed it and whatever its
visibility. An unknown fact id exits 3. The service answers with no body;
--json prints {"schemaVersion":1,"subject":{…},"factId":"…","forgotten":true}.`,
		Example: `  clankie memory fact forget 123456789012345678 234567890123456789 fq7mk2xa`,
		Args:    argsNamed("GUILD", "USER", "FACTID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				// An empty requester: the operator, who may forget any fact.
				if err := s.client.Forget(ctx, args[0], args[1], args[2], ""); err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, forgottenFact{SchemaVersion: api.SchemaVersion,
						Subject: api.Subject{GuildID: args[0], UserID: args[1]}, FactID: args[2], Forgotten: true})
				}
				_, err := fmt.Fprintf(s.out, "Forgot fact %s about user %s in guild %s.\n", oneLine(args[2]), oneLine(args[1]), oneLine(args[0]))
				return err
			})
		},
	}
	return operatorCommand(cmd, &fl)
}

// forgottenFact is what --json prints for a forgotten fact: the service
// answers 204 with no body.
type forgottenFact struct {
	SchemaVersion int         `json:"schemaVersion"`
	Subject       api.Subject `json:"subject"`
	FactID        string      `json:"factId"`
	Forgotten     bool        `json:"forgotten"`
}

func newForgetPersonCommand() *cobra.Command {
	var (
		fl  opFlags
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "forget-person GUILD USER --yes",
		Short: "Forget everything kept about a person (irreversible; needs --yes)",
		Long: `Forget a person: every fact kept about them in that guild is deleted, with no
way back. It refuses to run without --yes. It prints how many facts were
removed; --json prints the service's answer with their ids.`,
		Example: `  clankie memory forget-person 123456789012345678 234567890123456789 --yes
  clankie memory forget-person 123456789012345678 234567890123456789 --yes --json | jq '.removed | length'`,
		Args: argsNamed("GUILD", "USER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return usagef(cmd, "forgetting a person deletes every fact about them and cannot be undone; nothing was deleted. Add --yes to confirm")
			}
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				r, err := s.client.ForgetPerson(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, r)
				}
				if len(r.Removed) == 0 {
					_, err = fmt.Fprintf(s.out, "Nothing was kept about user %s in guild %s; 0 facts removed.\n", oneLine(args[1]), oneLine(args[0]))
					return err
				}
				_, err = fmt.Fprintf(s.out, "Forgot user %s in guild %s: %d fact%s removed.\n", oneLine(args[1]), oneLine(args[0]), len(r.Removed), plural(len(r.Removed)))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm: delete every fact about this person, irreversibly")
	return operatorCommand(cmd, &fl)
}

// parseExpires reads --expires with /person-memory's own parser, so the CLI
// and the slash command accept the same forms and bounds; its refusal
// sentence (with examples) becomes a usage error.
func parseExpires(text string, now time.Time) (*time.Time, error) {
	cat, err := lang.Load()
	if err != nil {
		return nil, err
	}
	t, err := commands.ParseExpires(cat.English(), text, now)
	if ue, ok := interaction.AsUserError(err); ok {
		if rest, ok := strings.CutPrefix(ue.Sentence, "I couldn't read that expiry. "); ok {
			return nil, fmt.Errorf("--expires %q is not a duration or a date. %s", oneLine(text), rest)
		}
		// The bot speaks in the first person; the CLI does not.
		return nil, fmt.Errorf("--expires %q: %s", oneLine(text), strings.ReplaceAll(ue.Sentence, "the latest date I accept is", "the latest date accepted is"))
	}
	if err == nil && t == nil {
		return nil, errors.New("--expires needs a value; to remove an expiry use --no-expiry")
	}
	return t, err
}
