package voice

import (
	"testing"
	"time"
)

// The floor: addressed turns and follow-ups are answered in a group,
// every turn alone; a failed transcription is silence; only the person
// answered can cut in; someone addressing him meanwhile goes next.
func TestFloorAnswersWhenAddressed(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f := newFloor([]string{"Clankie", "Clankie Voice"}, 8*time.Second, func() time.Time { return now })
	seq := uint64(0)
	turn := func(speaker, text string, ok bool, people int) bool {
		seq++
		f.utterance(seq, speaker)
		return f.transcript(seq, text, ok, people)
	}
	steps := []struct {
		name    string
		do      func() bool
		respond bool
	}{
		{"B talks to A", func() bool { return turn(ben, "did you see the match", true, 3) }, false},
		{"a name inside a word", func() bool { return turn(ben, "the clankies are here", true, 3) }, false},
		{"A addresses him", func() bool { return turn(ana, "Clankie, what do you know about me?", true, 3) }, true},
		{"B cannot cut in", func() bool { return f.mayBargeIn(ben) }, false},
		{"A can", func() bool { return f.mayBargeIn(ana) }, true},
		{"B addresses him meanwhile: queued", func() bool { return turn(ben, "hey CLANKIE", true, 3) }, false},
		{"the answer ends: B next", func() bool { return f.responseDone() }, true},
		{"B's answer ends: nobody next", func() bool { return f.responseDone() }, false},
		{"B follows up within the window", func() bool { now = now.Add(7 * time.Second); return turn(ben, "and then?", true, 3) }, true},
		{"done", func() bool { return f.responseDone() }, false},
		{"B after the window", func() bool { now = now.Add(9 * time.Second); return turn(ben, "and then?", true, 3) }, false},
		{"A's follow-up is not B's", func() bool { return turn(ana, "and then?", true, 3) }, false},
		{"a name of two words", func() bool { return turn(cal, "clankie voice, hi", true, 3) }, true},
		{"done", func() bool { return f.responseDone() }, false},
		{"a failed transcription is silence", func() bool { return turn(ana, "", false, 3) }, false},
		{"alone, every turn", func() bool { return turn(ana, "what time is it", true, 1) }, true},
		{"done", func() bool { return f.responseDone() }, false},
		{"a transcript before its speaker is noted waits", func() bool { return f.transcript(999, "hi clankie", true, 3) }, false},
		{"and is answered when the speaker is", func() bool { return f.utterance(999, ben) }, true},
	}
	for i, st := range steps {
		if got := st.do(); got != st.respond {
			t.Fatalf("step %d (%s): %t, want %t", i, st.name, got, st.respond)
		}
	}
	if answered, silent := f.counts(); answered != 6 || silent != 5 {
		t.Fatalf("answered %d, silent %d; want 6 and 5", answered, silent)
	}
}
