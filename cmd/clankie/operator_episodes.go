package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clankie/clankie/api"
)

func newEpisodesCommand() *cobra.Command {
	var (
		fl     opFlags
		search string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "episodes [--search TERMS] [--limit N]",
		Short: "Show Clankie's episode card, or search his episodes",
		Long: `Show the card of Clankie's newest 8 episodes across every lane, as the
operator sees it (operator_private ones included). With --search (or
'episodes search TERMS…'), show the episodes whose summary or room holds every
term, newest first, at most --limit (default 8, at most 32). Each line carries
the date, lane, room, episode id and whether it was corrected or kept; the id
is what 'clankie memory episode' takes. --json prints the same episodes as a
JSON array of the records the service stores (episodeId, lane, room,
occurredAt, retained, correctedAt, visibility, summary, …): the shape every
'clankie memory episode' command prints for one.`,
		Example: `  clankie memory episodes
  clankie memory episodes --search "lighthouse storm" --limit 20
  clankie memory episodes search lighthouse storm
  clankie memory episodes --json | jq -r '.[] | "\(.occurredAt) \(.episodeId) \(.summary)"'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && args[0] != "search" {
				return usagef(cmd, "unexpected argument %q; search with --search TERMS or 'episodes search TERMS'", oneLine(args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			searching := cmd.Flags().Changed("search")
			if len(args) > 0 { // episodes search TERMS…
				if searching {
					return usagef(cmd, "give the search terms once: --search TERMS or 'episodes search TERMS'")
				}
				searching, search = true, strings.Join(args[1:], " ")
			}
			if searching && strings.TrimSpace(search) == "" {
				return usagef(cmd, "a search needs at least one term")
			}
			if cmd.Flags().Changed("limit") {
				if !searching {
					return usagef(cmd, "--limit applies to a search; the card always shows the newest %d", api.EpisodeCardSize)
				}
				if err := checkLimit(cmd, limit, api.MaxEpisodeSearch); err != nil {
					return err
				}
			}
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				card, err := s.client.Episodes(ctx, search, limit)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, episodeRecords(card.Episodes))
				}
				return renderCard(s.out, card, searching)
			})
		},
	}
	cmd.Flags().StringVar(&search, "search", "", "show only episodes whose summary or room holds every term")
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("at most this many matches (default %d, at most %d); with --search only", api.EpisodeCardSize, api.MaxEpisodeSearch))
	return operatorCommand(cmd, &fl)
}

func newEpisodeCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "episode keep|release|edit|forget ID",
		Short: "Keep, release, edit or forget one of Clankie's episodes",
		Long: `Act on one episode by its id (shown on every line of 'clankie memory
episodes'): keep it for good, release it back into the recent window, edit its
summary or visibility, or forget it.`,
		Example: `  clankie memory episode keep ep-kq3mw7xzb2
  clankie memory episode release ep-kq3mw7xzb2
  clankie memory episode edit ep-kq3mw7xzb2 --summary "Helped Ana fix the lighthouse lamp" --visibility shareable
  clankie memory episode forget ep-kq3mw7xzb2`,
	})
	cmd.AddCommand(
		newEpisodeRetainCommand(true),
		newEpisodeRetainCommand(false),
		newEpisodeEditCommand(),
		newEpisodeForgetCommand(),
	)
	return cmd
}

// newEpisodeRetainCommand is `episode keep` (keep true) or `episode release`.
func newEpisodeRetainCommand(keep bool) *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "keep ID",
		Short: "Keep an episode for good: it no longer ages out",
		Long: `Keep an episode: it leaves the recent window of 128 and never ages out. At
most 1024 episodes are kept; at that ceiling the service refuses (exit 4)
until one is released or forgotten. 'clankie memory status' shows the
headroom. --json prints the episode as stored.`,
		Example: `  clankie memory episode keep ep-kq3mw7xzb2`,
	}
	if !keep {
		cmd.Use = "release ID"
		cmd.Short = "Release a kept episode back into the recent window"
		cmd.Long = `Release a kept episode: it goes back into the recent window of 128 episodes
across every lane and ages out with them; if it is older than the newest 128
unretained ones, releasing it lets it go at once. --json prints the episode
as it was last stored.`
		cmd.Example = `  clankie memory episode release ep-kq3mw7xzb2`
	}
	cmd.Args = argsNamed("ID")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return fl.connect(cmd, func(ctx context.Context, s *session) error {
			ep, err := s.client.EditEpisode(ctx, args[0], api.EpisodePatch{Retained: &keep})
			if err != nil {
				return err
			}
			if s.json {
				return writeJSON(s.out, ep)
			}
			if keep {
				fmt.Fprintf(s.out, "Kept episode %s; it no longer ages out.\n", oneLine(ep.EpisodeID))
			} else {
				fmt.Fprintf(s.out, "Released episode %s into the recent window; it ages out with the newest %d.\n", oneLine(ep.EpisodeID), api.EpisodeRingCapacity)
			}
			return renderEpisode(s.out, ep)
		})
	}
	return operatorCommand(cmd, &fl)
}

func newEpisodeEditCommand() *cobra.Command {
	var (
		fl                  opFlags
		summary, visibility string
	)
	cmd := &cobra.Command{
		Use:   "edit ID [--summary S] [--visibility operator_private|shareable]",
		Short: "Correct an episode's summary or change its visibility",
		Long: `Correct an episode in place: a new summary (1 to 512 characters) and/or a
visibility, operator_private (the operator alone sees it) or shareable (every
lane may). Its id, lane, room, time and provenance never change; the card
marks it corrected. --json prints the episode as stored.`,
		Example: `  clankie memory episode edit ep-kq3mw7xzb2 --summary "Helped Ana fix the lighthouse lamp"
  clankie memory episode edit ep-kq3mw7xzb2 --visibility operator_private`,
		Args: argsNamed("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var p api.EpisodePatch
			if cmd.Flags().Changed("summary") {
				if strings.TrimSpace(summary) == "" {
					return usagef(cmd, "--summary must not be empty; to remove the episode use 'clankie memory episode forget'")
				}
				p.Summary = &summary
			}
			if cmd.Flags().Changed("visibility") {
				v := api.EpisodeVisibility(visibility)
				if v != api.EpisodeOperatorPrivate && v != api.EpisodeShareable {
					return usagef(cmd, "--visibility must be %s or %s (got %q)", api.EpisodeOperatorPrivate, api.EpisodeShareable, oneLine(visibility))
				}
				p.Visibility = &v
			}
			if p.Summary == nil && p.Visibility == nil {
				return usagef(cmd, "nothing to change: give --summary or --visibility")
			}
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				ep, err := s.client.EditEpisode(ctx, args[0], p)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, ep)
				}
				fmt.Fprintf(s.out, "Edited episode %s.\n", oneLine(ep.EpisodeID))
				return renderEpisode(s.out, ep)
			})
		},
	}
	cmd.Flags().StringVar(&summary, "summary", "", "the corrected summary (1 to 512 characters)")
	cmd.Flags().StringVar(&visibility, "visibility", "", "operator_private or shareable")
	return operatorCommand(cmd, &fl)
}

func newEpisodeForgetCommand() *cobra.Command {
	var fl opFlags
	cmd := &cobra.Command{
		Use:   "forget ID",
		Short: "Forget one episode, kept or not",
		Long: `Forget one episode, from whichever lane holds it. An unknown id exits 3. The
service answers with no body; --json prints
{"schemaVersion":1,"episodeId":"…","forgotten":true}.`,
		Example: `  clankie memory episode forget ep-kq3mw7xzb2`,
		Args:    argsNamed("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fl.connect(cmd, func(ctx context.Context, s *session) error {
				if err := s.client.ForgetEpisode(ctx, args[0]); err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, forgottenEpisode{SchemaVersion: api.SchemaVersion, EpisodeID: args[0], Forgotten: true})
				}
				_, err := fmt.Fprintf(s.out, "Forgot episode %s.\n", oneLine(args[0]))
				return err
			})
		},
	}
	return operatorCommand(cmd, &fl)
}

// forgottenEpisode is what --json prints for a forgotten episode: the
// service returns 204 with no body.
type forgottenEpisode struct {
	SchemaVersion int    `json:"schemaVersion"`
	EpisodeID     string `json:"episodeId"`
	Forgotten     bool   `json:"forgotten"`
}

// episodeRecords is what `memory episodes --json` prints: the service's
// records as stored (the shape `memory episode … --json` prints for one),
// always an array, [] when there are none.
func episodeRecords(eps []api.Episode) []api.Episode {
	if eps == nil {
		return []api.Episode{}
	}
	return eps
}
