package voice

import (
	"testing"
	"time"

	"github.com/clankie/clankie/voice/voiceapi"
)

// The echo of the bot's own op 4 is told from news by channel and order,
// and an echo Discord never sent stops being awaited at its deadline: a
// count that waited for Discord would swallow the next real disconnect.
func TestEchoesExpireAndMatchInOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		sent    []string // op 4s, one second apart, each awaited 10 s
		updates []string // then these updates, at at
		at      time.Duration
		want    []bool
	}{
		{"each answered", []string{"A", "", "A"}, []string{"A", "", "A"}, 3 * time.Second, []bool{true, true, true}},
		{"a leave's echo after the next join's", []string{"A", "", "A"}, []string{"A", "A", ""}, 3 * time.Second, []bool{true, true, false}},
		{"an unanswered join, then a disconnect", []string{"A"}, []string{""}, time.Second, []bool{false}},
		{"a move elsewhere is news", []string{"A"}, []string{"A", "B"}, time.Second, []bool{true, false}},
		{"an expired join does not swallow its channel's news", []string{"A"}, []string{"A"}, 12 * time.Second, []bool{false}},
		{"a later answer supersedes an earlier unanswered op", []string{"", "A"}, []string{"A", ""}, 3 * time.Second, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e echoes
			for i, ch := range tc.sent {
				e.expect(ch, t0.Add(time.Duration(i)*time.Second+10*time.Second))
			}
			for i, u := range tc.updates {
				if got := e.match(u, t0.Add(tc.at)); got != tc.want[i] {
					t.Fatalf("update %d (%q): echo %t, want %t", i, u, got, tc.want[i])
				}
			}
		})
	}
}

// The daily budget counts sessions' time per server and UTC day, a live
// session's so far included, and starts over at midnight.
func TestBudgetCountsPerServerAndUTCDay(t *testing.T) {
	b := newBudget(90 * time.Minute)
	day := time.Date(2026, 12, 2, 22, 0, 0, 0, time.UTC)
	b.start("g1", day)
	if left := b.left("g1", day.Add(30*time.Minute)); left != time.Hour {
		t.Fatalf("left after 30m live: %v", left)
	}
	if lasted := b.stop("g1", day.Add(40*time.Minute)); lasted != 40*time.Minute {
		t.Fatalf("lasted %v", lasted)
	}
	if left := b.left("g2", day); left != 90*time.Minute {
		t.Fatalf("another server's budget: %v", left)
	}
	// A session across midnight: only the new day's part counts then.
	b.start("g1", day.Add(time.Hour+50*time.Minute))
	st := b.status("g1", day.Add(2*time.Hour+20*time.Minute))
	want := voiceapi.Budget{Limit: 90 * time.Minute, Used: 20 * time.Minute, ResetsAt: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
	if st != want {
		t.Fatalf("status %+v, want %+v", st, want)
	}
	b.stop("g1", day.Add(3*time.Hour+30*time.Minute))
	if left := b.left("g1", day.Add(4*time.Hour)); left != 0 {
		t.Fatalf("left after 90m today: %v", left)
	}
	if left := newBudget(0).left("g1", day); left <= 24*time.Hour {
		t.Fatalf("no budget: %v left", left)
	}
}

// Human durations, as /voice status and the leave sentences write them.
func TestHumanDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 1500 * time.Millisecond: "2s", 90 * time.Second: "1m30s", 2 * time.Minute: "2m",
		2 * time.Hour: "2h", 90 * time.Minute: "1h30m", 5*time.Minute + 3*time.Second: "5m3s",
	} {
		if got := voiceapi.Human(d); got != want {
			t.Errorf("Human(%v) = %q, want %q", d, got, want)
		}
	}
}
