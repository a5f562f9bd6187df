package personfiles

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// The hand-built encodings of change lines and snapshots must be what
// encoding/json writes, byte for byte, for every state a person can reach:
// the format on disk is json's, whoever writes it.
func TestLineEncodingsAreJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"plain", "", `quote " and \ backslash`, "<b>&amp;</b>", "a<b", "a>b", "a&b", `a"b`, `a\b`, "a\x01b", "tab\tnewline\n", "émoji 🎻 ü", "\u2028line sep", "\x7f", "discord-interaction-1300000000000000001"}
	pick := func() string { return strs[rng.IntN(len(strs))] }
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	for n := range 300 {
		pf := &personFile{Person: people.Person{Subject: api.Subject{GuildID: "g" + pick(), UserID: "u"}, Seq: uint64(n)}}
		for i := range rng.IntN(20) {
			f := api.Fact{FactID: fmt.Sprintf("f%07d", i), Subject: pf.Subject, Kind: api.KindPersonFact, Body: pick() + pick(),
				Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: pick()}, Confidence: rng.Float64(),
				CreatedAt: at.Add(time.Duration(i) * time.Minute), UpdatedAt: at, SupersedesFactID: pick(),
				Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: pick(), ProposerUserID: pick()}}
			if rng.IntN(3) == 0 {
				e := at.Add(time.Hour)
				f.ExpiresAt = &e
			}
			pf.Facts = append(pf.Facts, f)
			pf.Proposals = append(pf.Proposals, people.ProposalRecord{ProposalID: pick() + fmt.Sprint(i), Digest: []string{"", "ab12"}[rng.IntN(2)], FactID: f.FactID})
		}
		got, err := encodeSnapshot(pf)
		if err != nil {
			t.Fatal(err)
		}
		if want := snapshotByEncoder(t, pf); !bytes.Equal(got, want) {
			t.Fatalf("snapshot %d:\n got %s\nwant %s", n, got, want)
		}
		ch := &people.Change{Seq: uint64(n % 3)}
		if len(pf.Facts) > 0 && rng.IntN(2) == 0 {
			ch.Put = []api.Fact{pf.Facts[rng.IntN(len(pf.Facts))]}
		}
		if rng.IntN(2) == 0 {
			ch.Remove = []string{pick(), pick()}
		}
		if rng.IntN(2) == 0 {
			ch.ClearDigest = []string{pick()}
		}
		if rng.IntN(2) == 0 {
			ch.Proposal = &people.ProposalRecord{ProposalID: pick(), Digest: pick(), FactID: pick()}
		}
		got, err = encodeChange(ch)
		if err != nil {
			t.Fatal(err)
		}
		want, err := encodeLine(ch)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("change %d:\n got %s\nwant %s", n, got, want)
		}
	}
}

// snapshotByEncoder is the snapshot as json.Encoder writes it, one line
// after another: the reference encodeSnapshot must match.
func snapshotByEncoder(t *testing.T, pf *personFile) []byte {
	t.Helper()
	subject := pf.Subject
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	lines := []*people.Change{{SchemaVersion: logVersion, Subject: &subject, Seq: pf.Seq}}
	for i := range pf.Facts {
		lines = append(lines, &people.Change{Fact: &pf.Facts[i]})
	}
	for i := range pf.Proposals {
		lines = append(lines, &people.Change{Proposal: &pf.Proposals[i]})
	}
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
