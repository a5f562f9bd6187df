package memory

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
)

// proposalSeeds are bodies parseProposal must take (the first ones, as
// clients write them) or must leave to encoding/json (the rest).
var proposalSeeds = []struct {
	body string
	fast bool
}{
	{`{"schemaVersion":1,"proposalId":"p-1","fact":{"subject":{"guildId":"100","userId":"200"},"kind":"preference","body":"likes green tea","visibility":{"scope":"channel","channelId":"300"},"confidence":0.8,"provenance":{"sourceSurface":"discord_text","sourceEventId":"9","correlationId":"c-1","proposerUserId":"200","channelId":"300"}}}`, true},
	{` { "schemaVersion" : 1 , "proposalId" : "p-2" , "fact" : { "subject" : { "guildId" : "1" , "userId" : "2" } , "kind" : "fact" , "body" : "héllo — ☕" , "visibility" : { "scope" : "guild" } , "confidence" : 1e-1 , "expiresAt" : "2027-01-02T03:04:05.5+01:00" , "supersedesFactId" : "fabcdefg" , "provenance" : { } } } ` + "\n", true},
	{`{"schemaVersion":1,"proposalId":"p-3","fact":{"subject":{"guildId":"100","userId":"200"},"kind":"person-fact","body":"plays bass","visibility":{"scope":"guild"},"confidence":0.9,"provenance":{"sourceSurface":"discord_text","sourceEventId":"9","proposerUserId":"201","channelId":"300","sourceMessageId":"1300000000000000077"}}}`, true},
	{`{}`, true},
	{`{"schemaVersion":-0,"fact":{"confidence":-1.25E+2}}`, true},
	// Left to encoding/json: escapes, nulls, other cases, duplicates,
	// unknown fields, numbers JSON does not allow, trailing data.
	{`{"proposalId":"p\u002d1"}`, false},
	{`{"fact":{"body":"a \"quoted\" word"}}`, false},
	{`{"fact":{"expiresAt":null}}`, false},
	{`{"ProposalId":"p"}`, false},
	{`{"proposalId":"a","proposalId":"b"}`, false},
	{`{"fact":{"subject":{"guildId":"1"},"subject":{"userId":"2"}}}`, false},
	{`{"extra":1}`, false},
	{`{"schemaVersion":1.0}`, false},
	{`{"schemaVersion":01}`, false},
	{`{"fact":{"confidence":.5}}`, false},
	{`{"fact":{"confidence":+1}}`, false},
	{`{"fact":{"confidence":1e400}}`, false},
	{`{"schemaVersion":99999999999999999999}`, false},
	{`{"fact":{"expiresAt":"tomorrow"}}`, false},
	{`{"fact":{"body":"` + "\xff" + `"}}`, false},
	{`{"fact":{"body":"tab	inside"}}`, false},
	{`{} {}`, false},
	{`{"proposalId":"p",}`, false},
	{`[]`, false},
	{``, false},
}

func TestParseProposalTakesWhatClientsWrite(t *testing.T) {
	for _, c := range proposalSeeds {
		var got api.ProposalRequest
		if ok := parseProposal([]byte(c.body), &got); ok != c.fast {
			t.Errorf("parseProposal(%q) = %v, want %v", c.body, ok, c.fast)
		}
	}
	var got api.ProposalRequest
	if !parseProposal([]byte(proposalSeeds[1].body), &got) {
		t.Fatal("the spaced seed was refused")
	}
	want := time.Date(2027, 1, 2, 2, 4, 5, 5e8, time.UTC)
	if got.Fact.Body != "héllo — ☕" || got.Fact.Confidence != 0.1 || got.Fact.ExpiresAt == nil || !got.Fact.ExpiresAt.Equal(want) ||
		got.Fact.Visibility.Scope != api.ScopeGuild || got.Fact.SupersedesFactID != "fabcdefg" {
		t.Fatalf("decoded %+v", got)
	}
	var fromMessage api.ProposalRequest
	if !parseProposal([]byte(proposalSeeds[2].body), &fromMessage) || fromMessage.Fact.Provenance.SourceMessageID != "1300000000000000077" {
		t.Fatalf("the source message was not read: %+v", fromMessage.Fact.Provenance)
	}
}

// FuzzParseProposalAgreesWithEncodingJSON holds parseProposal to its
// promise: whatever it takes, decode's rules take too, with the same value.
func FuzzParseProposalAgreesWithEncodingJSON(f *testing.F) {
	for _, c := range proposalSeeds {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast api.ProposalRequest
		if !parseProposal(body, &fast) {
			return
		}
		var std api.ProposalRequest
		if err := decodeBytes(body, &std); err != nil {
			t.Fatalf("parseProposal took %q, encoding/json refused it: %v", body, err)
		}
		if !reflect.DeepEqual(fast, std) {
			a, _ := json.Marshal(fast)
			b, _ := json.Marshal(std)
			t.Fatalf("%q decoded differently:\nfast %s\nstd  %s", body, a, b)
		}
	})
}
