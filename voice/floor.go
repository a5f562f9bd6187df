package voice

import (
	"strings"
	"sync"
	"time"
	"unicode"
)

// floor decides, in a group call, when Clankie answers: the bridge, not
// the model's server, creates each response. With two or more people in
// the channel he answers a turn only when it addresses him (one of his
// names, as a word) or when it is a follow-up by the person he just
// answered, within the follow-up window after his answer ended; alone with
// one person he answers every turn. A turn whose transcription failed is
// not addressed: he stays silent. While he answers, only the person he is
// answering can cut him off; someone else who addresses him meanwhile gets
// the floor next.
type floor struct {
	names    names // lower case
	followup time.Duration
	now      func() time.Time

	mu        sync.Mutex
	speakers  map[uint64]string    // an utterance's speaker, until its transcript
	early     map[uint64]heardTurn // a transcript that came before its speaker was noted
	answering bool
	holder    string // whom he answers, or answered last
	endedAt   time.Time
	next      []string // addressed while he answered someone else, in order
	answered  uint64
	silent    uint64
}

// maxQueuedTurns bounds the addressed turns waiting for the floor.
const maxQueuedTurns = 8

func newFloor(names []string, followup time.Duration, now func() time.Time) *floor {
	f := &floor{followup: followup, now: now, speakers: map[uint64]string{}, early: map[uint64]heardTurn{}}
	for _, n := range names {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			f.names = append(f.names, n)
		}
	}
	return f
}

// heardTurn is a transcript waiting for its utterance's speaker.
type heardTurn struct {
	text   string
	ok     bool
	people int
}

// utterance records who spoke utterance seq. Its transcript may have come
// already (the model's server can answer before the sender notes the
// speaker): respond then says whether to answer it now.
func (f *floor) utterance(seq uint64, userID string) (respond bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.speakers) > 256 || len(f.early) > 256 { // transcripts that never came, or utterances never noted
		clear(f.speakers)
		clear(f.early)
	}
	if h, ok := f.early[seq]; ok {
		delete(f.early, seq)
		return f.decideLocked(userID, h)
	}
	f.speakers[seq] = userID
	return false
}

// transcript decides on utterance seq's turn: respond reports whether a
// response is to be created now, for its speaker. people is how many
// humans are in the channel.
func (f *floor) transcript(seq uint64, text string, ok bool, people int) (respond bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := heardTurn{text: text, ok: ok, people: people}
	speaker, known := f.speakers[seq]
	if !known {
		f.early[seq] = h
		return false
	}
	delete(f.speakers, seq)
	return f.decideLocked(speaker, h)
}

// decideLocked is the floor's rule for one turn. f.mu is held.
func (f *floor) decideLocked(speaker string, h heardTurn) (respond bool) {
	text, ok, people := h.text, h.ok, h.people
	addressed := ok && (people <= 1 || f.names.mentioned(text) ||
		(speaker == f.holder && (f.answering || f.now().Sub(f.endedAt) <= f.followup)))
	if !addressed {
		f.silent++
		return false
	}
	if f.answering && speaker != f.holder {
		if len(f.next) < maxQueuedTurns {
			f.next = append(f.next, speaker)
		}
		return false
	}
	f.answering, f.holder = true, speaker
	f.answered++
	return true
}

// responseDone ends the current answer; respond reports whether the next
// addressed turn gets a response now.
func (f *floor) responseDone() (respond bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answering, f.endedAt = false, f.now()
	if len(f.next) == 0 {
		return false
	}
	f.holder, f.next = f.next[0], f.next[1:]
	f.answering = true
	f.answered++
	return true
}

// lost forgets the answer in progress and the turns waiting: the model's
// connection went, and its answer with it; the next addressed turn starts
// afresh.
func (f *floor) lost() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answering, f.next = false, nil
	clear(f.speakers)
	clear(f.early)
}

// mayBargeIn reports whether userID's speech may cut Clankie off: only the
// person he is answering.
func (f *floor) mayBargeIn(userID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answering && userID == f.holder
}

// counts are the turns answered and those he stayed silent for.
func (f *floor) counts() (answered, silent uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answered, f.silent
}

// names are Clankie's names (CLANKIE_VOICE_NAMES), lower case.
type names []string

// mentioned reports whether text holds one of the names as words of their
// own, case-insensitively: "Clankie," and "hey clankie" do, "clankies"
// does not; a name of several words matches them in a row.
func (n names) mentioned(text string) bool {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, name := range n {
		parts := strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if len(parts) == 0 {
			continue
		}
		for i := 0; i+len(parts) <= len(words); i++ {
			match := true
			for j, p := range parts {
				if words[i+j] != p {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}
