package commands

import (
	"context"
	"sync"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/interaction"
	"github.com/clankie/clankie/memoryclient"
)

// The real client satisfies the handlers' interface, and its errors the
// interface the sentences are chosen by.
var (
	_ PeopleMemory  = (*memoryclient.Client)(nil)
	_ memoryFailure = (*memoryclient.Error)(nil)
)

// recallCall and friends record what a handler asked of memory.
type recallCall struct {
	GuildID, UserID string
	Query           api.RecallQuery
}

type mineCall struct{ GuildID, UserID, RequesterUserID string }

type forgetCall struct{ GuildID, UserID, FactID, RequesterUserID string }

// fakeMemory is an in-memory PeopleMemory: it records every call and returns
// what the test set.
type fakeMemory struct {
	mu sync.Mutex

	proposeResp api.ProposalResponse
	proposeErr  error
	recallResp  api.RecallResponse
	recallErr   error
	mineResp    api.RecallResponse
	mineErr     error
	forgetErr   error

	proposals []api.ProposalRequest
	recalls   []recallCall
	mines     []mineCall
	forgets   []forgetCall
}

func (f *fakeMemory) Propose(_ context.Context, req api.ProposalRequest) (api.ProposalResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposals = append(f.proposals, req)
	if f.proposeErr != nil {
		return api.ProposalResponse{}, f.proposeErr
	}
	resp := f.proposeResp
	if resp.Fact == nil && resp.Reason == "" {
		resp.Fact = storedFact(req)
	}
	return resp, nil
}

func (f *fakeMemory) Recall(_ context.Context, guildID, userID string, q api.RecallQuery) (api.RecallResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recalls = append(f.recalls, recallCall{guildID, userID, q})
	return f.recallResp, f.recallErr
}

func (f *fakeMemory) Mine(_ context.Context, guildID, userID, requesterUserID string) (api.RecallResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mines = append(f.mines, mineCall{guildID, userID, requesterUserID})
	return f.mineResp, f.mineErr
}

func (f *fakeMemory) Forget(_ context.Context, guildID, userID, factID, requesterUserID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgets = append(f.forgets, forgetCall{guildID, userID, factID, requesterUserID})
	return f.forgetErr
}

func (f *fakeMemory) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.proposals) + len(f.recalls) + len(f.mines) + len(f.forgets)
}

// storedFact is what the service would store for req.
func storedFact(req api.ProposalRequest) *api.Fact {
	in := req.Fact
	return &api.Fact{FactID: "fnew2345", Subject: in.Subject, Kind: in.Kind, Body: in.Body, Visibility: in.Visibility,
		Confidence: in.Confidence, CreatedAt: testNow, UpdatedAt: testNow, ExpiresAt: in.ExpiresAt,
		SupersedesFactID: in.SupersedesFactID, Provenance: in.Provenance}
}

// Fixtures.
const (
	testGuild   = "100000000000000001"
	testChannel = "200000000000000002"
	testInvoker = "300000000000000003"
	testOther   = "400000000000000004"
	testRole    = "500000000000000005"
	testInterID = "interaction-1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return testNow }

// invocation is a guild invocation of /person-memory <sub> by testInvoker.
func invocation(sub string, opts map[string]any) interaction.Invocation {
	return interaction.Invocation{ID: testInterID, GuildID: testGuild, ChannelID: testChannel,
		User: interaction.User{ID: testInvoker}, Command: personMemoryName, Subcommand: sub, Options: interaction.NewOptions(opts)}
}

func fact(id, subject, proposer, body string) api.Fact {
	return api.Fact{FactID: id, Subject: api.Subject{GuildID: testGuild, UserID: subject}, Kind: api.KindPersonFact,
		Body: body, Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: testNow,
		Provenance: api.Provenance{ProposerUserID: proposer, ChannelID: testChannel}}
}

// handle routes inv by its path, as the router's mux does.
func handle(ctx context.Context, c interaction.Command, inv interaction.Invocation) (interaction.Reply, error) {
	mux := interaction.NewMux()
	for sub, h := range c.Handlers {
		mux.Handle(interaction.Path(c.Definition.Name, sub), h)
	}
	return mux.Serve(ctx, inv)
}
