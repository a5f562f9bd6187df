package personfiles

import (
	"context"
	"slices"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// The engine's tests drive it the way the service does, through the person
// memory; these adapters keep their calls short.

func (s *Store) Propose(who api.Principal, req api.ProposalRequest) (api.ProposalResponse, people.ProposeInfo, error) {
	return people.New(s).Propose(context.Background(), who, req)
}

func (s *Store) Recall(subject api.Subject, q people.RecallQuery) (api.RecallResponse, error) {
	return people.New(s).Recall(context.Background(), subject, q)
}

func (s *Store) Mine(subject api.Subject, requesterUserID string) (api.RecallResponse, error) {
	return people.New(s).Mine(context.Background(), subject, requesterUserID)
}

func (s *Store) Export(subject api.Subject) (api.RecallResponse, error) {
	return people.New(s).Export(context.Background(), subject)
}

func (s *Store) Forget(who api.Principal, subject api.Subject, factID, requesterUserID string) (api.Fact, error) {
	return people.New(s).Forget(context.Background(), who, subject, factID, requesterUserID)
}

func (s *Store) Edit(subject api.Subject, factID string, p api.FactPatch) (api.Fact, error) {
	return people.New(s).Edit(context.Background(), subject, factID, p)
}

func (s *Store) ForgetPerson(subject api.Subject) ([]string, error) {
	return people.New(s).ForgetPerson(context.Background(), subject)
}

func (s *Store) Briefing(req api.BriefingRequest, notes []api.Episode) (string, api.BriefingCounts, error) {
	return people.New(s).Briefing(context.Background(), req, notes)
}

func (s *Store) Put(p *people.Person, dryRun bool) (bool, error) {
	return people.New(s).Put(context.Background(), p, dryRun)
}

// snapshot returns a copy of a person's facts, in stored order.
func (s *Store) snapshot(subject api.Subject) ([]api.Fact, error) {
	var out []api.Fact
	err := s.View(context.Background(), subject, func(facts []api.Fact, _ time.Time) { out = slices.Clone(facts) })
	return out, err
}
