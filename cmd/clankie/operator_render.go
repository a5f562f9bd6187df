package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clankie/clankie/api"
)

// bodyWidth is where a fact body is cut in a table; --json has it whole.
const bodyWidth = 60

// tableTime is how tables show a time: UTC, to the minute, no spaces.
const tableTime = "2006-01-02T15:04Z"

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// oneLine makes s fit one table cell or line: control characters (tabs,
// newlines, terminal escapes) and other spacing become one space, so stored
// text can neither break a table's columns nor drive the terminal.
func oneLine(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) || isBidiControl(r) {
			pending = b.Len() > 0
			continue
		}
		if pending {
			b.WriteByte(' ')
			pending = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isBidiControl reports the invisible direction overrides that can make a
// terminal show text in another order than it is stored.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f
}

// cut shortens s to at most n runes, marking a cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return strings.TrimRight(string(runes[:n-1]), " ") + "…"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// shellQuote quotes s for a command line a person copies.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:,+=/%@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(oneLine(s), "'", `'\''`) + "'"
}

func renderStatus(w io.Writer, url string, c api.Catalog) error {
	ring, shelf := c.RingCapacity, c.RetainedCapacity
	if ring <= 0 {
		ring = api.EpisodeRingCapacity
	}
	if shelf <= 0 {
		shelf = api.RetainedCapacity
	}
	headroom := max(shelf-c.Retained, 0)

	tw := newTable(w)
	fmt.Fprintf(tw, "Memory service\t%s\n", url)
	switch c.Store {
	case api.StorePostgres:
		fmt.Fprintf(tw, "Store\tPostgreSQL\t(CLANKIE_MEMORY_STORE; shared by every service process on it)\n")
	case api.StoreFile:
		fmt.Fprintf(tw, "Store\tfiles\t(the service's CLANKIE_MEMORY_DIR; one service process)\n")
	}
	fmt.Fprintf(tw, "People\t%d\n", c.People)
	fmt.Fprintf(tw, "Facts\t%d\n", c.Facts)
	fmt.Fprintf(tw, "Episodes\t%d\n", c.Episodes)
	fmt.Fprintf(tw, "  unretained\t%d of %d\t(the recent window across every lane; the oldest age out)\n", c.Unretained, ring)
	fmt.Fprintf(tw, "  retained\t%d of %d\t(kept for good; they never age out)\n", c.Retained, shelf)
	fmt.Fprintf(tw, "  headroom\t%d\t(how many more episodes can be kept)\n", headroom)
	if c.Store != api.StorePostgres { // PostgreSQL keeps no person files
		fmt.Fprintf(tw, "Corrupt person files\t%d\t(set aside as unreadable; 'clankie memory corrupt' lists them)\n", c.CorruptPersonFiles)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c.CorruptPersonFiles > 0 {
		fmt.Fprintf(w, "\nWarning: %d person file%s could not be read and %s set aside; those people started empty. 'clankie memory corrupt' lists them.\n",
			c.CorruptPersonFiles, plural(c.CorruptPersonFiles), map[bool]string{true: "were", false: "was"}[c.CorruptPersonFiles > 1])
	}
	if headroom == 0 {
		fmt.Fprintf(w, "\nWarning: %d of %d episodes are kept, the most there can be. Keeping another is refused until one is released ('clankie memory episode release ID') or forgotten.\n", c.Retained, shelf)
	}

	fmt.Fprintln(w, "\nEpisodes per lane:")
	tw = newTable(w)
	for _, lane := range laneOrder(c.EpisodesPerLane) {
		fmt.Fprintf(tw, "  %s\t%d\n", oneLine(string(lane)), c.EpisodesPerLane[lane])
	}
	return tw.Flush()
}

// laneOrder returns the four lanes in api's table order, then any other lane
// the service reports, sorted.
func laneOrder(per map[api.Lane]int) []api.Lane {
	lanes := api.AllLanes()
	var extra []api.Lane
	for l := range per {
		if !l.Valid() {
			extra = append(extra, l)
		}
	}
	slices.Sort(extra)
	return append(lanes, extra...)
}

func renderPeople(w io.Writer, page api.PeopleResponse, fromCursor bool, limit int) error {
	if len(page.People) == 0 {
		if fromCursor {
			_, err := fmt.Fprintln(w, "No more people after that cursor.")
			return err
		}
		_, err := fmt.Fprintln(w, "No facts are kept about anyone.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "GUILD\tUSER\tFACTS")
	for _, p := range page.People {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", oneLine(p.Subject.GuildID), oneLine(p.Subject.UserID), p.Facts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d of %d %s shown.\n", len(page.People), page.Total, map[bool]string{true: "person", false: "people"}[page.Total == 1])
	if page.NextCursor != "" {
		next := "clankie memory people --cursor " + shellQuote(page.NextCursor)
		if limit > 0 {
			next += " --limit " + strconv.Itoa(limit)
		}
		fmt.Fprintf(w, "More: %s (or --all for everyone)\n", next)
	}
	return nil
}

func renderExport(w io.Writer, guildID, userID string, r api.RecallResponse) error {
	if len(r.Facts) == 0 {
		_, err := fmt.Fprintf(w, "No facts are kept about user %s in guild %s.\n", oneLine(userID), oneLine(guildID))
		return err
	}
	capacity := r.Capacity
	if capacity <= 0 {
		capacity = api.MaxFactsPerPerson
	}
	expired, private := 0, 0
	for _, f := range r.Facts {
		if f.Expired {
			expired++
		}
		if f.Visibility.Scope == api.ScopeOperatorPrivate {
			private++
		}
	}
	fmt.Fprintf(w, "User %s in guild %s: %d of %d facts (%d expired, %d operator_private).\n\n",
		oneLine(userID), oneLine(guildID), len(r.Facts), capacity, expired, private)
	return renderFacts(w, r.Facts)
}

// expiryString is how EXPIRES shows an expiry. `--expires 2027-01-31` (and
// the slash command's date) means through that whole day in UTC, stored as
// the next midnight; shown as that midnight it read as a day later than the
// operator typed, so an expiry at midnight UTC shows the date it ends.
func expiryString(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.AddDate(0, 0, -1).Format("2006-01-02")
	}
	return t.Format(tableTime)
}

// renderFacts is the fact table. An expired fact's EXPIRES reads
// "expired:<time>"; bodies are one line, cut at bodyWidth.
func renderFacts(w io.Writer, facts []api.Fact) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tKIND\tVISIBILITY\tCONFIDENCE\tEXPIRES\tCREATED\tBODY")
	for _, f := range facts {
		expires := "-"
		if f.ExpiresAt != nil {
			expires = expiryString(*f.ExpiresAt)
			if f.Expired {
				expires = "expired:" + expires
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n",
			oneLine(f.FactID), oneLine(string(f.Kind)), visibilityString(f.Visibility), f.Confidence,
			expires, f.CreatedAt.UTC().Format(tableTime), cut(oneLine(f.Body), bodyWidth))
	}
	return tw.Flush()
}

// visibilityString is the form --visibility takes: guild, channel:<id> or
// operator_private.
func visibilityString(v api.Visibility) string {
	if v.Scope == api.ScopeChannel {
		return "channel:" + oneLine(v.ChannelID)
	}
	return oneLine(string(v.Scope))
}

func renderCard(w io.Writer, c api.Card, searching bool) error {
	if c.Count == 0 || strings.TrimSpace(c.Card) == "" {
		msg := "No episodes are kept yet."
		if searching {
			msg = "No episodes match that search."
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	for _, line := range strings.Split(c.Card, "\n") {
		if _, err := fmt.Fprintln(w, oneLine(line)); err != nil {
			return err
		}
	}
	return nil
}

// renderEpisode shows an episode record after a keep, release or edit.
func renderEpisode(w io.Writer, ep api.Episode) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "  id\t%s\n", oneLine(ep.EpisodeID))
	fmt.Fprintf(tw, "  lane\t%s\n", oneLine(string(ep.Lane)))
	fmt.Fprintf(tw, "  room\t%s\n", oneLine(ep.Room))
	fmt.Fprintf(tw, "  occurred\t%s\n", ep.OccurredAt.UTC().Format(tableTime))
	fmt.Fprintf(tw, "  visibility\t%s\n", oneLine(string(ep.Visibility)))
	fmt.Fprintf(tw, "  kept\t%s\n", map[bool]string{true: "yes", false: "no"}[ep.Retained])
	if ep.CorrectedAt != nil {
		fmt.Fprintf(tw, "  corrected\t%s\n", ep.CorrectedAt.UTC().Format(tableTime))
	}
	fmt.Fprintf(tw, "  summary\t%s\n", oneLine(ep.Summary))
	return tw.Flush()
}
