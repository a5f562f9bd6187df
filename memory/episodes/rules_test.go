package episodes

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"ep-abcdefghij":         true,
		"A.b_c:d-9":             true,
		strings.Repeat("x", 64): true,
		strings.Repeat("x", 65): false,
		"":                      false,
		"has space":             false,
		"slash/no":              false,
		"émoji":                 false,
		"new\nline":             false,
	} {
		if got := validID(id); got != want {
			t.Errorf("validID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestCheckSummary(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"  a note  ", "a note", true},
		{"two\nlines", "two\nlines", true},
		{strings.Repeat("é", 512), strings.Repeat("é", 512), true}, // runes, not bytes
		{strings.Repeat("é", 513), "", false},
		{"   \n ", "", false},
		{"tab\there", "", false},
		{"cr\rhere", "", false},
		{"sep\u2028here", "", false},
		{"bad \xff utf8", "", false},
	}
	for _, c := range cases {
		got, err := checkSummary(c.in)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("checkSummary(%q) = %q, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "here") {
			t.Errorf("error %q echoes the summary", err)
		}
	}
}

func TestEffectiveVisibility(t *testing.T) {
	cases := []struct {
		lane        api.Lane
		given, want api.EpisodeVisibility
	}{
		{api.LaneOperator, "", api.EpisodeOperatorPrivate},
		{api.LaneOperator, api.EpisodeShareable, api.EpisodeShareable},
		{api.LaneDiscordPresence, "", api.EpisodeShareable},
		{api.LaneDiscordVoice, "", api.EpisodeShareable},
		{api.LaneGameplay, "", api.EpisodeShareable},
		{api.LaneGameplay, api.EpisodeOperatorPrivate, api.EpisodeOperatorPrivate},
	}
	for _, c := range cases {
		if got := effectiveVisibility(c.lane, c.given); got != c.want {
			t.Errorf("effectiveVisibility(%s, %q) = %s, want %s", c.lane, c.given, got, c.want)
		}
	}
}

func TestVisibleTo(t *testing.T) {
	private := api.Episode{Lane: api.LaneOperator, Visibility: api.EpisodeOperatorPrivate}
	shared := api.Episode{Lane: api.LaneOperator, Visibility: api.EpisodeShareable}
	for _, lane := range api.AllLanes() {
		if !visibleTo(lane, shared) {
			t.Errorf("%s cannot see a shareable note", lane)
		}
		if got := visibleTo(lane, private); got != (lane == api.LaneOperator) {
			t.Errorf("visibleTo(%s, operator_private) = %v", lane, got)
		}
	}
}

func TestMayCorrect(t *testing.T) {
	cases := []struct {
		lane, author api.Lane
		vis          api.EpisodeVisibility
		want         bool
	}{
		{api.LaneOperator, api.LaneDiscordPresence, api.EpisodeShareable, true},
		{api.LaneOperator, api.LaneGameplay, api.EpisodeOperatorPrivate, true},
		{api.LaneDiscordPresence, api.LaneDiscordPresence, api.EpisodeShareable, true},
		{api.LaneDiscordPresence, api.LaneOperator, api.EpisodeShareable, false},              // visible, not author
		{api.LaneDiscordPresence, api.LaneDiscordVoice, api.EpisodeShareable, false},          // sibling lane
		{api.LaneDiscordPresence, api.LaneDiscordPresence, api.EpisodeOperatorPrivate, false}, // author, not visible
		{api.LaneGameplay, api.LaneOperator, api.EpisodeOperatorPrivate, false},
	}
	for _, c := range cases {
		ep := api.Episode{Lane: c.author, Visibility: c.vis}
		if got := mayCorrect(c.lane, ep); got != c.want {
			t.Errorf("mayCorrect(%s, by %s %s) = %v, want %v", c.lane, c.author, c.vis, got, c.want)
		}
	}
}

func TestDecideRetain(t *testing.T) {
	cases := []struct {
		asked, already bool
		count          int
		want           bool
		reason         bool
	}{
		{false, false, 0, false, false},
		{true, false, 0, true, false},
		{true, false, api.RetainedCapacity - 1, true, false},
		{true, false, api.RetainedCapacity, false, true},
		{false, true, api.RetainedCapacity, true, false}, // never un-keeps
		{true, true, api.RetainedCapacity, true, false},
	}
	for _, c := range cases {
		got, reason := decideRetain(c.asked, c.already, c.count)
		if got != c.want || (reason != "") != c.reason {
			t.Errorf("decideRetain(%v, %v, %d) = %v, %q", c.asked, c.already, c.count, got, reason)
		}
		if reason != "" && !strings.Contains(reason, "1024") {
			t.Errorf("reason %q does not name the capacity", reason)
		}
	}
}

func TestDeriveRing(t *testing.T) {
	var list []*rec
	for i := range 140 {
		ep := episode(fmt.Sprintf("e%03d", i), api.LaneGameplay, base.Add(time.Duration(i)*time.Minute), i%10 == 0)
		r, err := newRec(ep)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, r)
	}
	// 14 retained (i%10==0), 126 unretained: nothing to evict.
	if kept, ev := deriveRing(list); len(kept) != 140 || len(ev) != 0 {
		t.Fatalf("under capacity: kept %d evicted %d", len(kept), len(ev))
	}
	for i := 140; i < 150; i++ {
		r, _ := newRec(episode(fmt.Sprintf("e%03d", i), api.LaneGameplay, base.Add(time.Duration(i)*time.Minute), false))
		list = append(list, r)
	}
	// 136 unretained: the 8 oldest unretained go, retained ones stay.
	kept, ev := deriveRing(list)
	if len(ev) != 8 || len(kept) != 142 {
		t.Fatalf("kept %d evicted %d, want 142 and 8", len(kept), len(ev))
	}
	want := []string{"e001", "e002", "e003", "e004", "e005", "e006", "e007", "e008"}
	for i, r := range ev {
		if r.ep.EpisodeID != want[i] || r.ep.Retained {
			t.Errorf("evicted[%d] = %s (retained %v), want %s", i, r.ep.EpisodeID, r.ep.Retained, want[i])
		}
	}
	if kept[0].ep.EpisodeID != "e000" {
		t.Errorf("the oldest retained note was evicted")
	}
}

func TestCompareRecTieBreaksByID(t *testing.T) {
	a, _ := newRec(episode("a", api.LaneGameplay, base, false))
	b, _ := newRec(episode("b", api.LaneOperator, base, false))
	c, _ := newRec(episode("0", api.LaneOperator, base.Add(time.Nanosecond), false))
	if compareRec(a, b) >= 0 || compareRec(b, c) >= 0 || compareRec(c, a) <= 0 {
		t.Fatal("order is not (occurredAt, id)")
	}
}

func TestSameRecord(t *testing.T) {
	n := note{lane: api.LaneGameplay, room: "r", summary: "s", visibility: api.EpisodeShareable,
		occurredAt: base, provenance: api.EpisodeProvenance{SessionID: "x"}, retain: true}
	stored := api.Episode{Lane: n.lane, Room: n.room, Summary: n.summary, Visibility: n.visibility,
		OccurredAt: base.In(time.FixedZone("x", 3600)), Provenance: n.provenance}
	if !sameRecord(stored, true, n) {
		t.Fatal("identical request (refused retain, other offset) is not the same record")
	}
	changes := map[string]func(*note){
		"lane":       func(n *note) { n.lane = api.LaneOperator },
		"room":       func(n *note) { n.room = "other" },
		"summary":    func(n *note) { n.summary = "other" },
		"visibility": func(n *note) { n.visibility = api.EpisodeOperatorPrivate },
		"occurredAt": func(n *note) { n.occurredAt = base.Add(time.Second) },
		"provenance": func(n *note) { n.provenance.SelfAuthored = true },
		"retain":     func(n *note) { n.retain = false },
	}
	for name, change := range changes {
		m := n
		change(&m)
		if sameRecord(stored, true, m) {
			t.Errorf("a changed %s is still the same record", name)
		}
	}
}

func TestNewID(t *testing.T) {
	shape := regexp.MustCompile(`^ep-[a-z2-7]{10}$`)
	seen := map[string]bool{}
	first := ""
	for range 200 {
		id := newID(func(id string) bool {
			if first == "" {
				first = id
				return true // force one retry
			}
			return seen[id]
		})
		if !shape.MatchString(id) || !validID(id) {
			t.Fatalf("id %q has the wrong shape", id)
		}
		if seen[id] || id == first {
			t.Fatalf("id %q assigned twice", id)
		}
		seen[id] = true
	}
}

func TestSearchLimit(t *testing.T) {
	for in, want := range map[int]int{0: 8, 1: 1, 8: 8, 32: 32, 33: -1, -1: -1} {
		got, err := searchLimit(in)
		if want < 0 {
			if err == nil {
				t.Errorf("searchLimit(%d) accepted", in)
			} else if f, ok := fault.As(err); !ok || f.Kind != fault.Invalid {
				t.Errorf("searchLimit(%d) error %v is not Invalid", in, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("searchLimit(%d) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestSearchTermsAndMatches(t *testing.T) {
	r, _ := newRec(api.Episode{Room: "#Lobby", Summary: "Built a Redstone clock"})
	cases := []struct {
		q    string
		want bool
	}{
		{"", true},
		{"redstone", true},
		{"REDSTONE  Clock", true},
		{"redstone lobby", true}, // one term in summary, one in room
		{"redstone kitchen", false},
		{"clock\tbuilt", true},
		{"lobbybuilt", false},
	}
	for _, c := range cases {
		terms, err := searchTerms(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := matches(r, terms); got != c.want {
			t.Errorf("matches(%q) = %v, want %v", c.q, got, c.want)
		}
	}
	if _, err := searchTerms(strings.Repeat("a", MaxQuery+1)); err == nil {
		t.Error("an over-long query was accepted")
	}
}

func TestRenderLine(t *testing.T) {
	at := time.Date(2026, 9, 4, 23, 30, 0, 0, time.FixedZone("pdt", -7*3600)) // 2026-09-05 UTC
	corrected := base
	ep := api.Episode{EpisodeID: "ep-x", Lane: api.LaneGameplay, Room: "the\u2028nether", Summary: "first\nsecond\r\nthird",
		OccurredAt: at, Retained: true, CorrectedAt: &corrected,
		Provenance: api.EpisodeProvenance{CharacterID: "char-secret", SessionID: "sess-secret"}}
	got := renderLine(ep)
	want := "- [2026-09-05] gameplay in the nether (ep-x, corrected, kept): first second  third"
	if got != want {
		t.Errorf("renderLine = %q\nwant          %q", got, want)
	}
	ep.CorrectedAt, ep.Retained = nil, false
	if got := renderLine(ep); strings.Contains(got, "corrected") || strings.Contains(got, "kept") {
		t.Errorf("marks on a plain note: %q", got)
	}
	if strings.Contains(got, "secret") {
		t.Errorf("card line carries provenance: %q", got)
	}
}

func TestRenderCard(t *testing.T) {
	if c := renderCard(cardHeader, nil); c.Card != "" || c.Count != 0 {
		t.Errorf("empty card = %+v", c)
	}
	a, _ := newRec(episode("a", api.LaneGameplay, base, false))
	b, _ := newRec(episode("b", api.LaneGameplay, base, false))
	c := renderCard(cardHeader, []*rec{a, b})
	lines := strings.Split(c.Card, "\n")
	if c.Count != 2 || len(lines) != 3 || lines[0] != cardHeader {
		t.Errorf("card = %+v", c)
	}
}

func TestValidatePatch(t *testing.T) {
	s := func(v string) *string { return &v }
	vis := func(v api.EpisodeVisibility) *api.EpisodeVisibility { return &v }
	yes := true
	cases := []struct {
		name string
		p    api.EpisodePatch
		ok   bool
	}{
		{"empty", api.EpisodePatch{}, false},
		{"summary", api.EpisodePatch{Summary: s(" fine ")}, true},
		{"blank summary", api.EpisodePatch{Summary: s("  ")}, false},
		{"long summary", api.EpisodePatch{Summary: s(strings.Repeat("a", 513))}, false},
		{"visibility", api.EpisodePatch{Visibility: vis(api.EpisodeShareable)}, true},
		{"empty visibility", api.EpisodePatch{Visibility: vis("")}, false},
		{"bad visibility", api.EpisodePatch{Visibility: vis("public")}, false},
		{"retained", api.EpisodePatch{Retained: &yes}, true},
	}
	for _, c := range cases {
		_, err := validatePatch(c.p)
		if c.ok != (err == nil) {
			t.Errorf("%s: err %v", c.name, err)
		}
		if err != nil {
			if f, ok := fault.As(err); !ok || f.Kind != fault.Invalid {
				t.Errorf("%s: %v is not Invalid", c.name, err)
			}
		}
	}
}
