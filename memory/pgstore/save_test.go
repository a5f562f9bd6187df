package pgstore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// saved returns a person of n facts, each with its proposal's record, as
// the database holds them after readRows (ords 0..n-1).
func saved(n int) *stored {
	subject := api.Subject{GuildID: "10", UserID: "20"}
	st := newStored(subject, "p", 1)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := range n {
		f := api.Fact{FactID: fmt.Sprintf("f%d", i), Subject: subject, Kind: api.KindPersonFact, Body: fmt.Sprintf("body %d", i),
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: at, UpdatedAt: at}
		r, err := newFactRow(&f)
		if err != nil {
			panic(err)
		}
		st.person.Facts = append(st.person.Facts, f)
		st.factRows = append(st.factRows, ordered[factRow]{int64(i), r})
		rec := people.ProposalRecord{ProposalID: fmt.Sprintf("p%d", i), Digest: "d", FactID: f.FactID}
		st.person.Proposals = append(st.person.Proposals, rec)
		st.recordRows = append(st.recordRows, ordered[recordRow]{int64(i), recordRow{rec.Digest, rec.FactID}})
	}
	st.nextFact, st.nextRecord = int64(n), int64(n)
	st.person.Seq = uint64(n)
	return st
}

// statements names what a batch would run: the statement's verb and
// table, and the fact or proposal id it names.
func statements(b *pgx.Batch) []string {
	var out []string
	for _, q := range b.QueuedQueries {
		words := strings.Fields(q.SQL)
		what := words[0]
		for i, w := range words {
			if w == "INTO" || w == "FROM" || (w == "UPDATE" && i == 0) {
				what += " " + words[i+1]
				break
			}
		}
		if len(q.Arguments) > 1 && what != "UPDATE person" {
			what += fmt.Sprintf(" %v", q.Arguments[1])
		}
		if q.SQL == replaceFact || q.SQL == replaceRecord {
			what += fmt.Sprintf(" (was %v)", q.Arguments[len(q.Arguments)-1])
		}
		out = append(out, what)
	}
	return out
}

// TestSaveWritesWhatTheChangeChanged holds save to the writes a change
// needs, whatever it had to find out of place, and to rows that line up
// with the facts and records it returns.
func TestSaveWritesWhatTheChangeChanged(t *testing.T) {
	newFact := func(st *stored, id string) api.Fact {
		f := st.person.Facts[0]
		f.FactID, f.Body = id, "new"
		return f
	}
	for _, tc := range []struct {
		name   string
		change func(st *stored, p *people.Person)
		want   []string
	}{
		{"nothing changed", func(*stored, *people.Person) {}, nil},
		{"a superseding proposal", func(st *stored, p *people.Person) {
			p.Apply(&people.Change{Seq: 5, Remove: []string{"f1"}, ClearDigest: []string{"f1"}, Put: []api.Fact{newFact(st, "fx")},
				Proposal: &people.ProposalRecord{ProposalID: "px", Digest: "d", FactID: "fx"}})
		}, []string{"UPDATE person_fact fx (was f1)", "UPDATE person_proposal p1", "INSERT person_proposal px"}},
		{"an eviction whose record takes a gone one's row", func(st *stored, p *people.Person) {
			p.Apply(&people.Change{Seq: 5, Remove: []string{"f0"}, ClearDigest: []string{"f0"}, Put: []api.Fact{newFact(st, "fx")},
				Proposal: &people.ProposalRecord{ProposalID: "px", Digest: "d", FactID: "fx"}})
			p.Proposals = p.Proposals[1:] // pruned, as pruneProposals does past MaxGoneRecords
		}, []string{"UPDATE person_fact fx (was f0)", "UPDATE person_proposal px (was p0)"}},
		{"more facts in than out", func(st *stored, p *people.Person) {
			p.Apply(&people.Change{Seq: 5, Remove: []string{"f3"}, Put: []api.Fact{newFact(st, "fx"), newFact(st, "fy")}})
		}, []string{"UPDATE person_fact fx (was f3)", "INSERT person_fact fy"}},
		{"more facts out than in", func(st *stored, p *people.Person) {
			p.Apply(&people.Change{Seq: 5, Remove: []string{"f1", "f2"}, Put: []api.Fact{newFact(st, "fx")}})
		}, []string{"UPDATE person_fact fx (was f1)", "DELETE person_fact f2"}},
		{"a fact changed in place", func(_ *stored, p *people.Person) {
			p.Facts[2].Body = "changed"
		}, []string{"UPDATE person_fact f2"}},
		{"the first fact moved last", func(_ *stored, p *people.Person) {
			p.Facts = append(p.Facts[1:], p.Facts[0])
		}, []string{"UPDATE person_fact f0"}},
		{"the last fact moved first", func(_ *stored, p *people.Person) {
			p.Facts = append([]api.Fact{p.Facts[3]}, p.Facts[:3]...)
		}, []string{"UPDATE person_fact f0", "UPDATE person_fact f1", "UPDATE person_fact f2"}},
		{"everything gone", func(_ *stored, p *people.Person) {
			p.Facts, p.Proposals = []api.Fact{}, nil
		}, []string{"DELETE person_fact f0", "DELETE person_fact f1", "DELETE person_fact f2", "DELETE person_fact f3",
			"DELETE person_proposal p0", "DELETE person_proposal p1", "DELETE person_proposal p2", "DELETE person_proposal p3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := saved(4)
			after := st.person.Clone()
			tc.change(st, after)
			b := &pgx.Batch{}
			next, err := st.save(b, after, 2)
			if err != nil {
				t.Fatal(err)
			}
			got := statements(b)
			if last := got[len(got)-1]; last != "UPDATE person" {
				t.Fatalf("the last statement is %q, want the person's row", last)
			}
			if got = got[:len(got)-1]; !slices.Equal(got, tc.want) {
				t.Errorf("writes %q, want %q", got, tc.want)
			}
			// The rows line up with after and their ords keep its order.
			if len(next.factRows) != len(after.Facts) || len(next.recordRows) != len(after.Proposals) {
				t.Fatalf("%d fact rows for %d facts, %d record rows for %d records", len(next.factRows), len(after.Facts), len(next.recordRows), len(after.Proposals))
			}
			for i, r := range next.factRows {
				if want, _ := newFactRow(&after.Facts[i]); r.row != want || i > 0 && r.ord <= next.factRows[i-1].ord {
					t.Errorf("fact row %d: %+v at ord %d, want %+v in order", i, r.row, r.ord, want)
				}
			}
			for i, r := range next.recordRows {
				rec := after.Proposals[i]
				if r.row != (recordRow{rec.Digest, rec.FactID}) || i > 0 && r.ord <= next.recordRows[i-1].ord {
					t.Errorf("record row %d: %+v at ord %d, want %s in order", i, r.row, r.ord, rec.ProposalID)
				}
			}
		})
	}
}
