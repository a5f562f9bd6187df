package people

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/clankie/clankie/api"
)

// ApplyAll, and Replay fed from one reused Change, must leave exactly the
// state Apply leaves applying the same changes one by one: facts in the same order, the same idempotency
// records, the same seq, for histories of puts, replacements, removals,
// digest clearings, proposals past the record bound, stale lines, resets
// and erases.
func TestApplyAllIsApplyInTurn(t *testing.T) {
	for seed := range 400 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		subject := api.Subject{GuildID: "1", UserID: "2"}
		id := func() string { return fmt.Sprintf("f%d", rng.IntN(40)) }
		var changes []Change
		seq := uint64(0)
		for i := range 20 + rng.IntN(300) {
			ch := Change{}
			switch r := rng.IntN(400); {
			case r < 2:
				ch.Erase, ch.Seq = true, seq+1
			case r < 4:
				ch.Seq = seq + 1
				ch.Reset = []Change{{SchemaVersion: LogVersion, Subject: &subject}}
				for range rng.IntN(5) {
					f := api.Fact{FactID: id(), Body: fmt.Sprint("reset ", i)}
					ch.Reset = append(ch.Reset, Change{Fact: &f})
				}
				ch.Reset = append(ch.Reset, Change{Proposal: &ProposalRecord{ProposalID: fmt.Sprint("r", i), FactID: id()}})
			case r < 20:
				f := api.Fact{FactID: id(), Body: fmt.Sprint("snapshot line ", i)}
				ch.Fact = &f // a compacted history's fact line
			default:
				if rng.IntN(8) == 0 {
					ch.Seq = uint64(rng.IntN(int(seq) + 1)) // stale: skipped
				} else {
					ch.Seq = seq + 1
				}
				for range rng.IntN(3) {
					ch.Remove = append(ch.Remove, id())
				}
				for range rng.IntN(2) {
					ch.ClearDigest = append(ch.ClearDigest, id())
				}
				for range rng.IntN(3) {
					ch.Put = append(ch.Put, api.Fact{FactID: id(), Body: fmt.Sprint("put ", i)})
				}
				if rng.IntN(3) > 0 {
					ch.Proposal = &ProposalRecord{ProposalID: fmt.Sprint("p", i), Digest: fmt.Sprint("d", i), FactID: id()}
				}
			}
			if ch.Seq > seq {
				seq = ch.Seq
			}
			changes = append(changes, ch)
		}
		one := NewPerson(subject)
		for i := range changes {
			one.Apply(&changes[i])
		}
		all := NewPerson(subject)
		all.ApplyAll(changes)
		if !reflect.DeepEqual(one.Facts, all.Facts) {
			t.Logf("facts differ: %v vs %v", ids(all.Facts), ids(one.Facts))
		}
		if !reflect.DeepEqual(one.Proposals, all.Proposals) {
			t.Logf("records differ:\n%v\n%v", all.Proposals, one.Proposals)
		}
		if !reflect.DeepEqual(one, all) {
			t.Fatalf("seed %d: ApplyAll\n%+v\nApply in turn\n%+v", seed, all, one)
		}
		// A reader replays each line from the same Change, its buffers
		// reused: Replay must keep nothing of a line but its values.
		reused := NewPerson(subject)
		r := reused.Replay(0, 0)
		var l Change
		var fact api.Fact
		var rec ProposalRecord
		for i := range changes {
			c := &changes[i]
			l = Change{SchemaVersion: c.SchemaVersion, Subject: c.Subject, Seq: c.Seq, Reset: c.Reset, Erase: c.Erase,
				Remove: append(l.Remove[:0], c.Remove...), ClearDigest: append(l.ClearDigest[:0], c.ClearDigest...),
				Put: append(l.Put[:0], c.Put...)}
			if c.Fact != nil {
				fact, l.Fact = *c.Fact, &fact
			}
			if c.Proposal != nil {
				rec, l.Proposal = *c.Proposal, &rec
			}
			r.Add(&l)
			fact, rec = api.Fact{FactID: "scribbled"}, ProposalRecord{FactID: "scribbled"}
			for j := range l.Put {
				l.Put[j] = api.Fact{FactID: "scribbled"}
			}
			for j := range l.Remove {
				l.Remove[j] = "scribbled"
			}
			for j := range l.ClearDigest {
				l.ClearDigest[j] = "scribbled"
			}
		}
		r.Done()
		if !reflect.DeepEqual(one, reused) {
			t.Fatalf("seed %d: Replay of a reused line\n%+v\nApply in turn\n%+v", seed, reused, one)
		}
	}
}

func ids(fs []api.Fact) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.FactID)
	}
	return out
}
