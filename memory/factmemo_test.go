package memory

import (
	"bytes"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// TestFactMemoAnswersWhatTheCodecWrites: a recall through the memo is,
// byte for byte, encodeAnswer of the answer, however the person's facts
// changed since the last answer, and the memo forgets what it is told to.
func TestFactMemoAnswersWhatTheCodecWrites(t *testing.T) {
	subject := api.Subject{GuildID: "10", UserID: "20"}
	base := make([]api.Fact, 3)
	for i := range base {
		base[i] = answerFact("fact <" + string(rune('a'+i)) + ">")
		base[i].FactID = "f" + string(rune('a'+i))
	}
	later := base[0].UpdatedAt.Add(time.Minute)
	answer := func(facts ...api.Fact) api.RecallResponse {
		return api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: facts, Total: len(facts) + 2}
	}
	edited := base[1]
	edited.Body = "an edited body"
	moved := base[2]
	exp := *moved.ExpiresAt
	exp = exp.Add(time.Second)
	moved.ExpiresAt = &exp
	sameExpiry := base[2]
	e2 := *base[2].ExpiresAt
	sameExpiry.ExpiresAt = &e2 // an equal expiry at another address
	touched := base[0]
	touched.UpdatedAt = later
	m := newFactMemo(1 << 20)
	for _, c := range []struct {
		name string
		resp api.RecallResponse
	}{
		{"fresh", answer(base...)},
		{"again", answer(base...)},
		{"reordered and cut", answer(base[2], base[0])},
		{"a body edited", answer(base[0], edited, base[2])},
		{"an expiry moved", answer(base[0], edited, moved)},
		{"an equal expiry elsewhere", answer(base[0], edited, sameExpiry)},
		{"a time changed", answer(touched, edited, sameExpiry)},
		{"none", answer()},
		{"no list", api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject}},
		{"back", answer(base...)},
	} {
		got, err := m.encodeRecall(c.resp, m.epoch())
		want, err2 := encodeAnswer(c.resp)
		if err != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s:\n got %s (%v)\nwant %s (%v)", c.name, got, err, want, err2)
		}
		m.release(got) // the next answer may be written into it
	}
	if m.size == 0 || len(m.people) != 1 {
		t.Fatalf("after the answers the memo holds %d people, %d bytes", len(m.people), m.size)
	}
	m.forget(subject)
	if m.size != 0 || len(m.people) != 0 {
		t.Fatalf("a forgotten person left %d people, %d bytes", len(m.people), m.size)
	}

	// The bound: past it everything goes, and an answer larger than it is
	// not kept at all.
	small := newFactMemo(1)
	if _, err := small.encodeRecall(answer(base...), small.epoch()); err != nil || small.size != 0 || len(small.people) != 0 {
		t.Fatalf("an answer over the bound was kept: %d bytes, %v", small.size, err)
	}
}

// TestFactMemoKeepsNothingReadBeforeAForget: a recall that read the store
// before a forget of the same person finishes after it; what it read may
// hold the forgotten fact, so the memo must not keep it, while its answer
// is still what the codec writes.
func TestFactMemoKeepsNothingReadBeforeAForget(t *testing.T) {
	subject := api.Subject{GuildID: "10", UserID: "20"}
	secret := answerFact("a fact forgotten meanwhile")
	secret.FactID = "fs"
	resp := api.RecallResponse{SchemaVersion: api.SchemaVersion, Subject: subject, Facts: []api.Fact{secret}, Total: 1}
	m := newFactMemo(1 << 20)
	epoch := m.epoch() // the recall reads the store now...
	m.forget(subject)  // ...a forget of this person lands...
	got, err := m.encodeRecall(resp, epoch)
	want, _ := encodeAnswer(resp)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("answer %s, %v", got, err)
	}
	if m.size != 0 || len(m.people) != 0 {
		t.Fatalf("the memo kept %d people, %d bytes read before the forget", len(m.people), m.size)
	}
	if _, err := m.encodeRecall(resp, m.epoch()); err != nil || len(m.people) != 1 {
		t.Fatalf("a recall after the forget is kept as usual: %d people, %v", len(m.people), err)
	}
}
