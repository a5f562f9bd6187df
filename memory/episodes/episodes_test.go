package episodes

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/fault"
)

func TestRingKeepsNewest128AcrossLanes(t *testing.T) {
	e := newEnv(t)
	type written struct {
		id string
		at time.Time
	}
	var all []written
	for i := range 200 {
		lane := api.AllLanes()[i%4]
		// (i*73)%200 is a permutation of 0..199: dates interleave across
		// lanes and arrive out of order.
		at := base.Add(time.Duration((i*73)%200) * time.Minute)
		resp, _ := e.record(lane, request(lane, "room", fmt.Sprintf("note %d", i), at))
		all = append(all, written{resp.Episode.EpisodeID, at})
	}
	slices.SortFunc(all, func(a, b written) int { return b.at.Compare(a.at) })
	want := map[string]bool{}
	for _, w := range all[:128] {
		want[w.id] = true
	}
	check := func(name string, s *Store, onDisk map[string]bool) {
		st := s.Stats()
		if st.Total != 128 || st.Unretained != 128 || st.Retained != 0 {
			t.Errorf("%s: stats %+v, want 128 unretained", name, st)
		}
		for _, w := range all {
			_, ok := s.Get(w.id)
			if ok != want[w.id] {
				t.Errorf("%s: present(%s at %s) = %v, want %v", name, w.id, w.at.Format(time.TimeOnly), ok, want[w.id])
			}
			if onDisk != nil && onDisk[w.id] != want[w.id] {
				t.Errorf("%s: on disk(%s) = %v, want %v", name, w.id, onDisk[w.id], want[w.id])
			}
		}
	}
	onDisk := map[string]bool{}
	for id := range e.diskIDs() {
		onDisk[id] = true
	}
	if len(onDisk) != 128 {
		t.Errorf("%d episodes on disk, want 128", len(onDisk))
	}
	check("memory", e.s, onDisk)
	check("reloaded", e.reopen().s, nil)
}

func TestOldDatedNoteRecordedLastIsEvictedFirst(t *testing.T) {
	t.Run("evicted by a later write", func(t *testing.T) {
		e := newEnv(t)
		for i := range 127 {
			e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base.Add(time.Duration(i)*time.Minute)))
		}
		old, info := e.record(api.LaneOperator, request(api.LaneOperator, "r", "old", base.Add(-time.Hour)))
		if info.Evicted != 0 {
			t.Fatalf("127+1 evicted %d", info.Evicted)
		}
		_, info = e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base.Add(time.Hour)))
		if info.Evicted != 1 {
			t.Fatalf("129th write evicted %d, want 1", info.Evicted)
		}
		if _, ok := e.s.Get(old.Episode.EpisodeID); ok {
			t.Error("the old-dated note recorded last survived; an older-recorded one went instead")
		}
		if _, ok := e.diskIDs()[old.Episode.EpisodeID]; ok {
			t.Error("the evicted note is still on disk")
		}
	})
	t.Run("evicted by its own write", func(t *testing.T) {
		e := newEnv(t)
		for i := range 128 {
			e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base.Add(time.Duration(i)*time.Minute)))
		}
		before := e.files()
		resp, info := e.record(api.LaneOperator, request(api.LaneOperator, "r", "ancient", base.Add(-24*time.Hour)))
		if !info.Created || info.Evicted != 1 {
			t.Fatalf("info %+v, want created with 1 evicted", info)
		}
		if resp.Episode.Summary != "ancient" || resp.Episode.EpisodeID == "" {
			t.Errorf("answer does not describe the note: %+v", resp.Episode)
		}
		if _, ok := e.s.Get(resp.Episode.EpisodeID); ok {
			t.Error("a note older than the newest 128 unretained survived its own write")
		}
		if st := e.s.Stats(); st.Unretained != 128 {
			t.Errorf("stats %+v", st)
		}
		if after := e.files(); !bytes.Equal(before[api.LaneOperator], after[api.LaneOperator]) || !bytes.Equal(before[api.LaneGameplay], after[api.LaneGameplay]) {
			t.Error("a write whose note was evicted at once changed files")
		}
	})
}

// fullShelf seeds 1024 retained notes spread over the lanes.
func fullShelf(t testing.TB, root *os.Root) []api.Episode {
	var eps []api.Episode
	for i := range api.RetainedCapacity {
		eps = append(eps, episode(fmt.Sprintf("kept-%04d", i), api.AllLanes()[i%4], base.Add(time.Duration(i)*time.Minute), true))
	}
	seed(t, root, eps)
	return eps
}

func TestRetainedShelfRefusesAtCapacity(t *testing.T) {
	root := openRoot(t)
	kept := fullShelf(t, root)
	e := openEnv(t, root)
	if st := e.s.Stats(); st.Retained != 1024 || st.Unretained != 0 {
		t.Fatalf("seeded stats %+v", st)
	}

	req := request(api.LaneGameplay, "arena", "worth keeping", base.Add(2000*time.Hour))
	req.Retain = true
	resp, info := e.record(api.LaneGameplay, req)
	if resp.Retained || resp.Episode.Retained || !info.Created {
		t.Fatalf("retain at capacity answered %+v %+v", resp, info)
	}
	if !strings.Contains(resp.RetainReason, "1024") {
		t.Errorf("reason %q does not name the capacity", resp.RetainReason)
	}
	id := resp.Episode.EpisodeID
	if card := e.s.Card(api.LaneGameplay); !strings.Contains(card.Card, id) {
		t.Errorf("the refused-keep note is not in the recent card:\n%s", card.Card)
	}
	if st := e.s.Stats(); st.Retained != 1024 || st.Unretained != 1 {
		t.Errorf("stats after refusal %+v", st)
	}

	// Keeping via Patch at capacity is a Conflict naming 1024, nothing changes.
	before := e.files()
	yes, no := true, false
	summary := "edited too"
	_, err := e.s.Patch(id, api.EpisodePatch{Retained: &yes, Summary: &summary})
	if f := wantFault(t, err, fault.Conflict); !strings.Contains(f.Message, "1024") {
		t.Errorf("conflict %q does not name the capacity", f.Message)
	}
	if got, _ := e.s.Get(id); got.Retained || got.Summary != "worth keeping" || got.CorrectedAt != nil {
		t.Errorf("a refused patch changed the note: %+v", got)
	}
	if after := e.files(); !maps2Equal(before, after) {
		t.Error("a refused patch changed files")
	}

	// Releasing one makes room; the released note rejoins the ring.
	released, err := e.s.Patch(kept[5].EpisodeID, api.EpisodePatch{Retained: &no})
	if err != nil || released.Retained {
		t.Fatalf("release: %+v %v", released, err)
	}
	if st := e.s.Stats(); st.Retained != 1023 || st.Unretained != 2 {
		t.Errorf("stats after release %+v", st)
	}
	got, err := e.s.Patch(id, api.EpisodePatch{Retained: &yes})
	if err != nil || !got.Retained {
		t.Fatalf("keep after release: %+v %v", got, err)
	}
	req2 := request(api.LaneGameplay, "arena", "one more", base)
	req2.Retain = true
	if resp, _ := e.record(api.LaneGameplay, req2); resp.Retained {
		t.Error("the shelf took a 1025th note")
	}
	r := e.reopen()
	if st := r.s.Stats(); st.Retained != 1024 {
		t.Errorf("reloaded retained %d, want 1024", st.Retained)
	}
	if got, _ := r.s.Get(id); !got.Retained {
		t.Error("the kept note is not kept after reload")
	}
}

func maps2Equal(a, b map[api.Lane][]byte) bool {
	for _, lane := range api.AllLanes() {
		if !bytes.Equal(a[lane], b[lane]) {
			return false
		}
	}
	return true
}

func TestRetainSucceedsUnderCapacity(t *testing.T) {
	e := newEnv(t)
	req := request(api.LaneDiscordVoice, "vc", "keep me", base)
	req.Retain = true
	resp, _ := e.record(api.LaneDiscordVoice, req)
	if !resp.Retained || !resp.Episode.Retained || resp.RetainReason != "" {
		t.Fatalf("retain answered %+v", resp)
	}
	// A kept note is outside the ring: 128 newer unretained notes do not evict it.
	for i := range 130 {
		e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base.Add(time.Duration(i+1)*time.Minute)))
	}
	if _, ok := e.reopen().s.Get(resp.Episode.EpisodeID); !ok {
		t.Error("a retained note aged out of the ring")
	}
}

func TestForgetReachesCardAndKeptSetAtOnce(t *testing.T) {
	e := newEnv(t)
	req := request(api.LaneDiscordPresence, "#general", "a kept memory", base)
	req.Retain = true
	kept, _ := e.record(api.LaneDiscordPresence, req)
	plain, _ := e.record(api.LaneDiscordPresence, request(api.LaneDiscordPresence, "#general", "a plain memory", base.Add(time.Minute)))
	id := kept.Episode.EpisodeID
	if c := e.s.Card(api.LaneDiscordPresence); !strings.Contains(c.Card, id+", kept)") {
		t.Fatalf("kept note missing from card:\n%s", c.Card)
	}
	if err := e.s.Forget(id); err != nil {
		t.Fatal(err)
	}
	if c := e.s.Card(api.LaneDiscordPresence); strings.Contains(c.Card, id) || c.Count != 1 {
		t.Errorf("forgotten note still in card:\n%s", c.Card)
	}
	if c, _ := e.s.Search(api.LaneOperator, "kept", 32); c.Count != 0 {
		t.Errorf("forgotten note still found:\n%s", c.Card)
	}
	if st := e.s.Stats(); st.Retained != 0 || st.Total != 1 || st.PerLane[api.LaneDiscordPresence] != 1 {
		t.Errorf("stats after forget %+v", st)
	}
	if _, ok := e.diskIDs()[id]; ok {
		t.Error("forgotten note still on disk")
	}
	if _, ok := e.reopen().s.Get(id); ok {
		t.Error("forgotten note back after reload")
	}
	wantFault(t, e.s.Forget(id), fault.NotFound)
	if _, ok := e.s.Get(plain.Episode.EpisodeID); !ok {
		t.Error("forget removed the wrong note")
	}
}

func TestCorrectionAuthority(t *testing.T) {
	shared := api.EpisodeShareable
	private := api.EpisodeOperatorPrivate
	cases := []struct {
		name      string
		author    api.Lane
		vis       api.EpisodeVisibility
		corrector api.Lane
		unknown   bool
		want      bool
	}{
		{"presence cannot correct operator's shareable note", api.LaneOperator, shared, api.LaneDiscordPresence, false, false},
		{"presence corrects its own", api.LaneDiscordPresence, "", api.LaneDiscordPresence, false, true},
		{"presence cannot correct operator-private", api.LaneOperator, private, api.LaneDiscordPresence, false, false},
		{"gameplay cannot correct presence's note", api.LaneDiscordPresence, shared, api.LaneGameplay, false, false},
		{"presence cannot correct its own private note", api.LaneDiscordPresence, private, api.LaneDiscordPresence, false, false},
		{"operator corrects any lane", api.LaneDiscordVoice, shared, api.LaneOperator, false, true},
		{"unknown id writes a new note", api.LaneGameplay, shared, api.LaneGameplay, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			orig := request(c.author, "the bridge", "original memory", base)
			orig.Visibility = c.vis
			orig.Provenance = api.EpisodeProvenance{CharacterID: "char-1", SessionID: "sess-orig", SelfAuthored: true}
			o, _ := e.record(c.author, orig)
			target := o.Episode.EpisodeID
			if c.unknown {
				target = "ep-nosuchnote"
			}
			e.clock.Set(base.Add(72 * time.Hour))
			fix := request(c.corrector, "elsewhere", "corrected memory", base.Add(time.Hour))
			fix.Corrects = target
			resp, info := e.record(c.corrector, fix)
			if resp.Corrected == nil || *resp.Corrected != c.want {
				t.Fatalf("corrected = %v, want %v", resp.Corrected, c.want)
			}
			now, _ := e.s.Get(o.Episode.EpisodeID)
			if !c.want {
				if !info.Created || resp.Episode.EpisodeID == o.Episode.EpisodeID || resp.Episode.Lane != c.corrector {
					t.Errorf("refused correction did not write a new note: %+v %+v", resp.Episode, info)
				}
				if !strings.Contains(resp.CorrectReason, "nothing was corrected") || strings.Contains(resp.CorrectReason, "memory\"") {
					t.Errorf("reason %q", resp.CorrectReason)
				}
				if now != o.Episode {
					t.Errorf("original changed: %+v", now)
				}
				if st := e.s.Stats(); st.Total != 2 {
					t.Errorf("total %d, want 2", st.Total)
				}
				return
			}
			if info.Created || resp.Episode.EpisodeID != o.Episode.EpisodeID {
				t.Errorf("correction created a note: %+v %+v", resp.Episode, info)
			}
			want := o.Episode
			want.Summary = "corrected memory"
			stamp := base.Add(72 * time.Hour)
			want.CorrectedAt = &stamp
			if now.CorrectedAt == nil || !now.CorrectedAt.Equal(stamp) {
				t.Fatalf("correctedAt %v, want %v", now.CorrectedAt, stamp)
			}
			now.CorrectedAt = want.CorrectedAt
			if now != want {
				t.Errorf("corrected note\n got %+v\nwant %+v (id, lane, room, occurredAt, provenance must stay)", now, want)
			}
			if st := e.s.Stats(); st.Total != 1 {
				t.Errorf("total %d, want 1", st.Total)
			}
			if card := e.s.Card(api.LaneOperator); !strings.Contains(card.Card, o.Episode.EpisodeID+", corrected)") {
				t.Errorf("card lacks the corrected mark:\n%s", card.Card)
			}
			if got, _ := e.reopen().s.Get(o.Episode.EpisodeID); got.Summary != "corrected memory" || got.CorrectedAt == nil {
				t.Errorf("correction not durable: %+v", got)
			}
		})
	}
}

func TestCorrectionVisibilityAndRetain(t *testing.T) {
	e := newEnv(t)
	o, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, "world", "first take", base))
	id := o.Episode.EpisodeID
	fix := request(api.LaneGameplay, "world", "second take", base)
	fix.Corrects, fix.Retain, fix.Visibility = id, true, api.EpisodeOperatorPrivate
	resp, _ := e.record(api.LaneGameplay, fix)
	if !*resp.Corrected || !resp.Retained || resp.Episode.Visibility != api.EpisodeOperatorPrivate {
		t.Fatalf("correction with visibility and retain: %+v", resp)
	}
	// retain:false on a correction does not release.
	fix2 := request(api.LaneOperator, "x", "third take", base)
	fix2.Corrects = id
	resp, _ = e.record(api.LaneOperator, fix2)
	if !resp.Retained || resp.Episode.Visibility != api.EpisodeOperatorPrivate {
		t.Errorf("correction without retain or visibility changed them: %+v", resp)
	}
	if st := e.s.Stats(); st.Retained != 1 || st.Total != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestCorrectionRetainAtCapacity(t *testing.T) {
	root := openRoot(t)
	fullShelf(t, root)
	e := openEnv(t, root)
	o, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, "world", "first take", base))
	fix := request(api.LaneGameplay, "world", "second take", base)
	fix.Corrects, fix.Retain = o.Episode.EpisodeID, true
	resp, _ := e.record(api.LaneGameplay, fix)
	if !*resp.Corrected || resp.Retained || !strings.Contains(resp.RetainReason, "1024") {
		t.Errorf("correction at capacity: %+v", resp)
	}
}

func TestReadVisibility(t *testing.T) {
	e := newEnv(t)
	priv, _ := e.record(api.LaneOperator, request(api.LaneOperator, "console", "alpha private plan", base))
	pub := request(api.LaneOperator, "console", "alpha public plan", base.Add(time.Minute))
	pub.Visibility = api.EpisodeShareable
	shared, _ := e.record(api.LaneOperator, pub)
	if priv.Episode.Visibility != api.EpisodeOperatorPrivate {
		t.Fatalf("operator default visibility %s", priv.Episode.Visibility)
	}
	for _, lane := range api.AllLanes() {
		search, err := e.s.Search(lane, "alpha plan", 32)
		if err != nil {
			t.Fatal(err)
		}
		for name, card := range map[string]api.Card{"search": search, "card": e.s.Card(lane)} {
			hasPriv := strings.Contains(card.Card, priv.Episode.EpisodeID)
			if hasPriv != (lane == api.LaneOperator) {
				t.Errorf("%s %s shows operator_private = %v", lane, name, hasPriv)
			}
			if !strings.Contains(card.Card, shared.Episode.EpisodeID) {
				t.Errorf("%s %s misses the shareable note", lane, name)
			}
		}
	}
	if vc := e.s.Card(api.LaneDiscordVoice); vc.Count != 1 || strings.Contains(vc.Card, "private") {
		t.Errorf("voice card %+v", vc)
	}
}

func TestSearch(t *testing.T) {
	e := newEnv(t)
	ids := map[string]string{}
	notes := []struct{ key, room, summary string }{
		{"a", "#lobby", "Built a redstone clock with Ana"},
		{"b", "nether fortress", "Lost the redstone stash"},
		{"c", "#lobby", "talked about music"},
		{"d", "#Redstone-Lab", "quiet evening"},
		{"e", "#lobby", "REDSTONE again, clock fixed"},
	}
	for i, n := range notes {
		resp, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, n.room, n.summary, base.Add(time.Duration(i)*time.Hour)))
		ids[n.key] = resp.Episode.EpisodeID
	}
	for i := range 40 {
		e.record(api.LaneGameplay, request(api.LaneGameplay, "farm", fmt.Sprintf("wheat harvest %d", i), base.Add(time.Duration(i)*time.Minute)))
	}
	cases := []struct {
		q     string
		limit int
		want  []string // keys, newest first; nil with n>0 means count only
		n     int
	}{
		{"redstone", 0, []string{"e", "d", "b", "a"}, 4},
		{"redstone clock", 0, []string{"e", "a"}, 2},
		{"REDSTONE LOBBY", 0, []string{"e", "a"}, 2}, // room term + summary term
		{"redstone", 2, []string{"e", "d"}, 2},
		{"redstone kitchen", 0, nil, 0},
		{"wheat", 0, nil, 8},
		{"wheat", 32, nil, 32},
		{"harvest  wheat", 5, nil, 5},
	}
	for _, c := range cases {
		card, err := e.s.Search(api.LaneDiscordPresence, c.q, c.limit)
		if err != nil {
			t.Fatalf("Search(%q, %d): %v", c.q, c.limit, err)
		}
		lines := strings.Split(card.Card, "\n")
		if c.n == 0 {
			if card.Card != "" || card.Count != 0 {
				t.Errorf("Search(%q) = %+v, want empty", c.q, card)
			}
			continue
		}
		if card.Count != c.n || len(lines) != c.n+1 || lines[0] != searchHeader {
			t.Errorf("Search(%q, %d): count %d, %d lines, want %d:\n%s", c.q, c.limit, card.Count, len(lines)-1, c.n, card.Card)
			continue
		}
		for i, key := range c.want {
			if !strings.Contains(lines[i+1], ids[key]) {
				t.Errorf("Search(%q) line %d = %q, want note %s", c.q, i+1, lines[i+1], key)
			}
		}
	}
	for _, limit := range []int{33, -1} {
		_, err := e.s.Search(api.LaneOperator, "redstone", limit)
		wantFault(t, err, fault.Invalid)
	}
}

func TestRecordIdempotency(t *testing.T) {
	e := newEnv(t)
	req := request(api.LaneDiscordPresence, "#general", "we named the cat", base)
	req.EpisodeID = "ep-1"
	first, info := e.record(api.LaneDiscordPresence, req)
	if !info.Created || first.Episode.EpisodeID != "ep-1" {
		t.Fatalf("first record %+v %+v", first, info)
	}
	files := e.files()

	// Identical retry (and one spelling the default visibility) replays.
	for _, retry := range []api.EpisodeRequest{req, func() api.EpisodeRequest {
		r := req
		r.Visibility = api.EpisodeShareable
		r.Summary = "  we named the cat\n"
		return r
	}()} {
		again, info := e.record(api.LaneDiscordPresence, retry)
		if !info.Replayed || info.Created || again.Episode != first.Episode {
			t.Errorf("retry answered %+v %+v", again, info)
		}
	}

	changes := map[string]func(*api.EpisodeRequest){
		"summary":    func(r *api.EpisodeRequest) { r.Summary = "we renamed the cat" },
		"room":       func(r *api.EpisodeRequest) { r.Room = "#random" },
		"visibility": func(r *api.EpisodeRequest) { r.Visibility = api.EpisodeOperatorPrivate },
		"occurredAt": func(r *api.EpisodeRequest) { r.OccurredAt = base.Add(time.Minute) },
		"provenance": func(r *api.EpisodeRequest) { r.Provenance.SessionID = "other" },
		"retain":     func(r *api.EpisodeRequest) { r.Retain = true },
	}
	for name, change := range changes {
		r := req
		change(&r)
		_, _, err := e.s.Record(api.LaneDiscordPresence, r)
		if f := wantFault(t, err, fault.Conflict); strings.Contains(f.Message, "cat") {
			t.Errorf("%s: conflict message carries content: %q", name, f.Message)
		}
	}
	// Another bearer re-declaring the id is a conflict too, never an upsert.
	other := req
	other.Lane = api.LaneGameplay
	_, _, err := e.s.Record(api.LaneGameplay, other)
	wantFault(t, err, fault.Conflict)
	// A body naming another lane than the bearer's is Forbidden.
	_, _, err = e.s.Record(api.LaneGameplay, req)
	wantFault(t, err, fault.Forbidden)

	if !maps2Equal(files, e.files()) {
		t.Error("a refused record changed files")
	}
	if got, _ := e.s.Get("ep-1"); got != first.Episode {
		t.Errorf("stored note changed: %+v", got)
	}
	if st := e.s.Stats(); st.Total != 1 {
		t.Errorf("total %d", st.Total)
	}
}

func TestAssignedIDsAndDefaults(t *testing.T) {
	e := newEnv(t)
	a, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, " world ", " hello ", base.In(time.FixedZone("x", 3600))))
	b, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, "world", "hello", base))
	if a.Episode.EpisodeID == b.Episode.EpisodeID || !strings.HasPrefix(a.Episode.EpisodeID, "ep-") || len(a.Episode.EpisodeID) != 13 {
		t.Errorf("assigned ids %q %q", a.Episode.EpisodeID, b.Episode.EpisodeID)
	}
	if a.Episode.Room != "world" || a.Episode.Summary != "hello" || a.Episode.Visibility != api.EpisodeShareable ||
		a.Episode.OccurredAt.Location() != time.UTC || !a.Episode.OccurredAt.Equal(base) {
		t.Errorf("normalized episode %+v", a.Episode)
	}
	if a.Corrected != nil || a.CorrectReason != "" {
		t.Errorf("a plain record answers corrected: %+v", a)
	}
}

func TestValidationWritesNothing(t *testing.T) {
	ok := request(api.LaneGameplay, "world", "SECRET-SUMMARY", base)
	cases := []struct {
		name   string
		bearer api.Lane
		change func(*api.EpisodeRequest)
		kind   fault.Kind
	}{
		{"schema version 0", api.LaneGameplay, func(r *api.EpisodeRequest) { r.SchemaVersion = 0 }, fault.Invalid},
		{"schema version 2", api.LaneGameplay, func(r *api.EpisodeRequest) { r.SchemaVersion = 2 }, fault.Invalid},
		{"no lane", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Lane = "" }, fault.Invalid},
		{"unknown lane", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Lane = "discord_text" }, fault.Invalid},
		{"other lane", api.LaneDiscordVoice, func(r *api.EpisodeRequest) {}, fault.Forbidden},
		{"blank room", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Room = "   " }, fault.Invalid},
		{"long room", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Room = strings.Repeat("r", 129) }, fault.Invalid},
		{"room with newline", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Room = "a\nb" }, fault.Invalid},
		{"blank summary", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Summary = " \n " }, fault.Invalid},
		{"513 summary", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Summary = "SECRET-SUMMARY" + strings.Repeat("s", 499) }, fault.Invalid},
		{"control in summary", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Summary = "SECRET-SUMMARY\x07" + "x" }, fault.Invalid},
		{"bad visibility", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Visibility = "public" }, fault.Invalid},
		{"no occurredAt", api.LaneGameplay, func(r *api.EpisodeRequest) { r.OccurredAt = time.Time{} }, fault.Invalid},
		{"year 10000", api.LaneGameplay, func(r *api.EpisodeRequest) { r.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, fault.Invalid},
		{"bad episodeId", api.LaneGameplay, func(r *api.EpisodeRequest) { r.EpisodeID = "../etc" }, fault.Invalid},
		{"long episodeId", api.LaneGameplay, func(r *api.EpisodeRequest) { r.EpisodeID = strings.Repeat("e", 65) }, fault.Invalid},
		{"bad corrects", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Corrects = "not an id" }, fault.Invalid},
		{"raw transcript", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Provenance.RawTranscript = true }, fault.Invalid},
		{"long session id", api.LaneGameplay, func(r *api.EpisodeRequest) { r.Provenance.SessionID = strings.Repeat("s", 65) }, fault.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			r := ok
			c.change(&r)
			_, _, err := e.s.Record(c.bearer, r)
			f := wantFault(t, err, c.kind)
			if f.Code == "" || strings.Contains(f.Message, "SECRET") {
				t.Errorf("fault %s %q", f.Code, f.Message)
			}
			if st := e.s.Stats(); st.Total != 0 {
				t.Errorf("stats %+v", st)
			}
			for lane, b := range e.files() {
				if b != nil {
					t.Errorf("%s file written", lane)
				}
			}
		})
	}
	// The store refuses a bearer lane that is not a lane as its own failure.
	e := newEnv(t)
	if _, _, err := e.s.Record("nobody", ok); err == nil {
		t.Error("unknown bearer lane accepted")
	} else if _, isFault := fault.As(err); isFault {
		t.Error("unknown bearer lane reported as the client's fault")
	}
}

func TestLoadTornLastLine(t *testing.T) {
	root := openRoot(t)
	seed(t, root, []api.Episode{
		episode("a", api.LaneGameplay, base, false),
		episode("b", api.LaneGameplay, base.Add(time.Minute), true),
	})
	name := FileName(api.LaneGameplay)
	data, _ := root.ReadFile(name)
	torn := append(data, []byte(`{"episodeId":"c","lane":"gameplay","room":"r","summary":"SECRET-TORN`)...)
	if err := root.WriteFile(name, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, root)
	if st := e.s.Stats(); st.Total != 2 || st.Retained != 1 {
		t.Errorf("stats %+v, want the two whole lines", st)
	}
	if got, _ := root.ReadFile(name); !bytes.Equal(got, torn) {
		t.Error("load rewrote the file")
	}
	warns := e.logs.FilterMessage("skipped an episode line").All()
	if len(warns) != 1 || warns[0].ContextMap()["line"] != int64(3) || warns[0].ContextMap()["lane"] != string(api.LaneGameplay) {
		t.Errorf("warnings %+v", warns)
	}
	e.assertNoContent("SECRET")
	// The next write, to any lane, re-derives the file without the torn line.
	e.record(api.LaneOperator, request(api.LaneOperator, "console", "later", base.Add(time.Hour)))
	if got, _ := root.ReadFile(name); !bytes.Equal(got, data) {
		t.Errorf("file after next write:\n%s\nwant:\n%s", got, data)
	}
}

func TestLoadGarbageMiddleLine(t *testing.T) {
	root := openRoot(t)
	seed(t, root, []api.Episode{episode("first", api.LaneDiscordVoice, base, false)})
	seed2 := []api.Episode{episode("third", api.LaneDiscordVoice, base.Add(2*time.Minute), false)}
	name := FileName(api.LaneDiscordVoice)
	a, _ := root.ReadFile(name)
	seed(t, root, seed2)
	c, _ := root.ReadFile(name)
	body := string(a) + "SECRET garbage {not json\n" + `{"episodeId":"wrong-lane","lane":"gameplay","visibility":"shareable","occurredAt":"2026-09-04T12:00:00Z"}` + "\n" + string(c)
	if err := root.WriteFile(name, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, root)
	if _, ok := e.s.Get("first"); !ok {
		t.Error("line before the garbage lost")
	}
	if _, ok := e.s.Get("third"); !ok {
		t.Error("line after the garbage lost")
	}
	if st := e.s.Stats(); st.Total != 2 {
		t.Errorf("stats %+v", st)
	}
	if n := e.logs.FilterMessage("skipped an episode line").Len(); n != 2 {
		t.Errorf("%d warnings, want 2", n)
	}
	e.assertNoContent("SECRET", "garbage")
}

func TestLoadLegacyRecordsUnretainedWithoutRewrite(t *testing.T) {
	root := openRoot(t)
	if err := os.Mkdir(root.Name()+"/"+Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	legacy := `{"episodeId":"old-1","lane":"operator","room":"console","summary":"before retention","visibility":"operator_private","occurredAt":"2025-01-02T03:04:05Z","provenance":{"characterId":"c","selfAuthored":true,"rawTranscript":false}}
{"lane":"operator","episodeId":"old-2","room":"console","summary":"field order differs","visibility":"shareable","occurredAt":"2025-01-03T03:04:05+02:00","provenance":{"selfAuthored":false,"rawTranscript":false}}
`
	name := FileName(api.LaneOperator)
	if err := root.WriteFile(name, []byte(legacy), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := root.Stat(name)
	e := openEnv(t, root)
	for _, id := range []string{"old-1", "old-2"} {
		ep, ok := e.s.Get(id)
		if !ok || ep.Retained || ep.CorrectedAt != nil {
			t.Errorf("%s loaded as %+v %v", id, ep, ok)
		}
	}
	if st := e.s.Stats(); st.Unretained != 2 || st.Retained != 0 {
		t.Errorf("stats %+v", st)
	}
	after, _ := root.Stat(name)
	got, _ := root.ReadFile(name)
	if string(got) != legacy || !after.ModTime().Equal(before.ModTime()) {
		t.Error("load rewrote a legacy file")
	}
	if c := e.s.Card(api.LaneOperator); c.Count != 2 || !strings.Contains(c.Card, "[2025-01-03] operator in console (old-2): field order differs") {
		t.Errorf("legacy card:\n%s", c.Card)
	}
}

func TestLoadOverfullRingPresentsNewest128(t *testing.T) {
	root := openRoot(t)
	var eps []api.Episode
	for i := range 131 {
		eps = append(eps, episode(fmt.Sprintf("n%03d", i), api.AllLanes()[i%4], base.Add(time.Duration(i)*time.Minute), false))
	}
	eps = append(eps, episode("kept-old", api.LaneGameplay, base.Add(-time.Hour), true))
	seed(t, root, eps)
	e := openEnv(t, root)
	before := e.files()
	if st := e.s.Stats(); st.Unretained != 128 || st.Retained != 1 {
		t.Errorf("stats %+v", st)
	}
	for _, id := range []string{"n000", "n001", "n002"} {
		if _, ok := e.s.Get(id); ok {
			t.Errorf("%s presented beyond the ring", id)
		}
	}
	if !maps2Equal(before, e.files()) {
		t.Error("load rewrote files")
	}
	if c, _ := e.s.Search(api.LaneOperator, "n000", 32); c.Count != 0 {
		t.Error("a hidden note is searchable")
	}
	e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "newest", base.Add(24*time.Hour)))
	disk := e.diskIDs()
	if len(disk) != 129 {
		t.Errorf("%d on disk after the next write, want 129", len(disk))
	}
	for _, id := range []string{"n000", "n001", "n002", "n003"} {
		if _, ok := disk[id]; ok {
			t.Errorf("%s still on disk after the next write", id)
		}
	}
}

func TestPermissions(t *testing.T) {
	root := openRoot(t)
	if err := os.Mkdir(root.Name()+"/"+Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root.Name()+"/"+FileName(api.LaneGameplay), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, root)
	e.record(api.LaneOperator, request(api.LaneOperator, "c", "s", base))
	st, err := root.Stat(Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v %v, want 0700", st.Mode().Perm(), err)
	}
	for _, lane := range []api.Lane{api.LaneOperator, api.LaneGameplay} {
		st, err := root.Stat(FileName(lane))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s file mode %v %v, want 0600", lane, st.Mode().Perm(), err)
		}
	}
}

func TestOpenSweepsTempFiles(t *testing.T) {
	root := openRoot(t)
	seed(t, root, []api.Episode{episode("a", api.LaneGameplay, base, false)})
	if err := root.WriteFile(Dir+"/.tmp-leftover", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	openEnv(t, root)
	if _, err := root.Stat(Dir + "/.tmp-leftover"); !os.IsNotExist(err) {
		t.Errorf("temp file survived Open: %v", err)
	}
}

func TestPatch(t *testing.T) {
	s := func(v string) *string { return &v }
	vis := func(v api.EpisodeVisibility) *api.EpisodeVisibility { return &v }
	yes, no := true, false
	t.Run("edit stamps correctedAt, no-op writes nothing", func(t *testing.T) {
		e := newEnv(t)
		o, _ := e.record(api.LaneDiscordVoice, request(api.LaneDiscordVoice, "vc", "before", base))
		id := o.Episode.EpisodeID
		e.clock.Set(base.Add(5 * time.Hour))
		got, err := e.s.Patch(id, api.EpisodePatch{Summary: s("after"), Visibility: vis(api.EpisodeOperatorPrivate)})
		if err != nil || got.Summary != "after" || got.Visibility != api.EpisodeOperatorPrivate || got.CorrectedAt == nil || !got.CorrectedAt.Equal(base.Add(5*time.Hour)) {
			t.Fatalf("patch %+v %v", got, err)
		}
		if got.Room != "vc" || !got.OccurredAt.Equal(base) || got.Lane != api.LaneDiscordVoice {
			t.Errorf("patch changed identity: %+v", got)
		}
		if vc := e.s.Card(api.LaneDiscordVoice); vc.Count != 0 {
			t.Error("a note made operator_private still reaches the voice card")
		}
		files := e.files()
		e.clock.Set(base.Add(9 * time.Hour))
		again, err := e.s.Patch(id, api.EpisodePatch{Summary: s("after"), Retained: &no})
		if err != nil || !again.CorrectedAt.Equal(base.Add(5*time.Hour)) || !maps2Equal(files, e.files()) {
			t.Errorf("no-op patch wrote or stamped: %+v %v", again, err)
		}
		if r, _ := e.reopen().s.Get(id); r.Summary != "after" {
			t.Errorf("patch not durable: %+v", r)
		}
	})
	t.Run("release rejoins the ring and may be evicted at once", func(t *testing.T) {
		e := newEnv(t)
		req := request(api.LaneOperator, "console", "old but kept", base.Add(-time.Hour))
		req.Retain = true
		o, _ := e.record(api.LaneOperator, req)
		for i := range 128 {
			e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base.Add(time.Duration(i)*time.Minute)))
		}
		got, err := e.s.Patch(o.Episode.EpisodeID, api.EpisodePatch{Retained: &no})
		if err != nil || got.Retained {
			t.Fatalf("release %+v %v", got, err)
		}
		if _, ok := e.s.Get(o.Episode.EpisodeID); ok {
			t.Error("a released note older than the ring survived")
		}
		if _, ok := e.diskIDs()[o.Episode.EpisodeID]; ok {
			t.Error("the evicted note is on disk")
		}
		if st := e.s.Stats(); st.Total != 128 || st.Retained != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("keep and errors", func(t *testing.T) {
		e := newEnv(t)
		o, _ := e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "n", base))
		if got, err := e.s.Patch(o.Episode.EpisodeID, api.EpisodePatch{Retained: &yes}); err != nil || !got.Retained || got.CorrectedAt != nil {
			t.Errorf("keep %+v %v", got, err)
		}
		_, err := e.s.Patch("ep-missing", api.EpisodePatch{Retained: &yes})
		wantFault(t, err, fault.NotFound)
		_, err = e.s.Patch(o.Episode.EpisodeID, api.EpisodePatch{})
		wantFault(t, err, fault.Invalid)
		_, err = e.s.Patch(o.Episode.EpisodeID, api.EpisodePatch{Summary: s(strings.Repeat("x", 513))})
		wantFault(t, err, fault.Invalid)
	})
}

func TestCardShape(t *testing.T) {
	e := newEnv(t)
	if c := e.s.Card(api.LaneGameplay); c.Card != "" || c.Count != 0 {
		t.Fatalf("empty store card %+v", c)
	}
	for i := range 10 {
		r := request(api.LaneGameplay, "world", fmt.Sprintf("line one %d\nline two", i), base.Add(time.Duration(i)*24*time.Hour))
		r.Provenance.SessionID = "sess-hidden"
		e.record(api.LaneGameplay, r)
	}
	c := e.s.Card(api.LaneGameplay)
	lines := strings.Split(c.Card, "\n")
	if c.Count != 8 || len(lines) != 9 || lines[0] != cardHeader {
		t.Fatalf("card count %d, %d lines:\n%s", c.Count, len(lines), c.Card)
	}
	if !strings.HasPrefix(lines[1], "- [2026-09-13] gameplay in world (ep-") || !strings.HasSuffix(lines[1], "): line one 9 line two") {
		t.Errorf("newest line %q", lines[1])
	}
	if !strings.HasPrefix(lines[8], "- [2026-09-06] ") {
		t.Errorf("oldest line %q", lines[8])
	}
	if strings.Contains(c.Card, "sess-hidden") || strings.Contains(c.Card, "captain") {
		t.Error("card carries provenance")
	}
}

func TestStatsPerLane(t *testing.T) {
	e := newEnv(t)
	e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "a", base))
	e.record(api.LaneGameplay, request(api.LaneGameplay, "r", "b", base))
	r := request(api.LaneDiscordVoice, "r", "c", base)
	r.Retain = true
	e.record(api.LaneDiscordVoice, r)
	st := e.s.Stats()
	want := map[api.Lane]int{api.LaneOperator: 0, api.LaneDiscordVoice: 1, api.LaneDiscordPresence: 0, api.LaneGameplay: 2}
	if st.Total != 3 || st.Unretained != 2 || st.Retained != 1 || len(st.PerLane) != 4 {
		t.Errorf("stats %+v", st)
	}
	for lane, n := range want {
		if st.PerLane[lane] != n {
			t.Errorf("%s: %d, want %d", lane, st.PerLane[lane], n)
		}
	}
	st.PerLane[api.LaneGameplay] = 99
	if e.s.Stats().PerLane[api.LaneGameplay] != 2 {
		t.Error("Stats hands out its own map")
	}
}

func TestConcurrentRecordsLoseNothing(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	ids := make(chan string, 100)
	for g := range 4 {
		lane := api.AllLanes()[g]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				resp, _, err := e.s.Record(lane, request(lane, "r", "n", base.Add(time.Duration(g*25+i)*time.Second)))
				if err != nil {
					t.Error(err)
					return
				}
				ids <- resp.Episode.EpisodeID
				_ = e.s.Card(lane)
				_, _ = e.s.Search(lane, "n", 32)
				_ = e.s.Stats()
			}
		}()
	}
	wg.Wait()
	close(ids)
	r := e.reopen()
	n := 0
	for id := range ids {
		n++
		if _, ok := r.s.Get(id); !ok {
			t.Errorf("%s lost", id)
		}
	}
	if n != 100 || r.s.Stats().Total != 100 {
		t.Errorf("%d acknowledged, %d reloaded", n, r.s.Stats().Total)
	}
}

func TestNoContentInLogsOrErrors(t *testing.T) {
	root := openRoot(t)
	seed(t, root, []api.Episode{episode("a", api.LaneGameplay, base, false)})
	name := FileName(api.LaneGameplay)
	data, _ := root.ReadFile(name)
	if err := root.WriteFile(name, append(data, "SECRET-LINE\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	e := openEnv(t, root)
	r := request(api.LaneGameplay, "SECRET-ROOM", "SECRET-SUMMARY", base)
	r.EpisodeID = "x"
	e.record(api.LaneGameplay, r)
	r.Summary = "SECRET-OTHER"
	_, _, err := e.s.Record(api.LaneGameplay, r)
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("conflict error %v", err)
	}
	fix := request(api.LaneGameplay, "SECRET-ROOM", "SECRET-FIX", base)
	fix.Corrects = "nope"
	resp, _ := e.record(api.LaneGameplay, fix)
	if strings.Contains(resp.CorrectReason, "SECRET") {
		t.Errorf("correct reason %q", resp.CorrectReason)
	}
	if e.logs.Len() == 0 {
		t.Fatal("nothing logged; the check would be vacuous")
	}
	e.assertNoContent("SECRET")
}

func TestFailedWriteChangesNothingAndNextWriteReconciles(t *testing.T) {
	e := newEnv(t)
	var ops []string
	for i := range 128 {
		resp, _ := e.record(api.LaneOperator, request(api.LaneOperator, "c", "n", base.Add(time.Duration(i)*time.Minute)))
		ops = append(ops, resp.Episode.EpisodeID)
	}
	// Make the gameplay file impossible to replace: a non-empty directory
	// in its place. The next record evicts an operator note (operator file
	// is written first) and then fails on gameplay.
	block := e.root.Name() + "/" + FileName(api.LaneGameplay)
	if err := os.MkdirAll(block+"/x", 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.s.Record(api.LaneGameplay, request(api.LaneGameplay, "g", "n", base.Add(time.Hour*10)))
	if err == nil {
		t.Fatal("record over a blocked file succeeded")
	}
	if _, isFault := fault.As(err); isFault {
		t.Errorf("an I/O failure reported as the client's fault: %v", err)
	}
	if st := e.s.Stats(); st.Total != 128 || st.PerLane[api.LaneGameplay] != 0 {
		t.Errorf("a failed write changed memory: %+v", st)
	}
	if _, ok := e.s.Get(ops[0]); !ok {
		t.Error("a failed write evicted from memory")
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	// The next write, on a third lane, re-derives every lane it left stale.
	e.record(api.LaneDiscordVoice, request(api.LaneDiscordVoice, "vc", "n", base.Add(-time.Hour*10)))
	disk := e.diskIDs()
	if st := e.s.Stats(); len(disk) != st.Total {
		t.Errorf("%d on disk, %d in memory", len(disk), st.Total)
	}
	for _, id := range ops {
		if _, ok := disk[id]; !ok {
			t.Errorf("%s in memory but not on disk", id)
		}
	}
}
