package personfiles

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// checkDecodeLine fails unless decodeLine's hand reading, whenever it
// accepts a line, gives what the codec (jsonv2.Unmarshal) gives, and
// decodeLine as a whole agrees with the codec on every line, accepted or
// not. It reports whether the hand reading accepted the line.
func checkDecodeLine(t *testing.T, line []byte) bool {
	t.Helper()
	// The buffers a log's lines share hold what the line before left in
	// them: nothing of it may show in this one.
	bufs, in := &lineBufs{}, &interner{}
	for _, before := range []string{
		`{"seq":4,"remove":["fa","fb","fc"],"clearDigest":["fa","fb"],"put":[{"factId":"fx","kind":"k","body":"stale","visibility":{"scope":"channel","channelId":"9"},"expiresAt":"2027-01-01T00:00:00Z","supersedesFactId":"fa","provenance":{"sourceMessageId":"5"}},{"factId":"fy","body":"stale"}],"proposal":{"proposalId":"stale","digest":"d","factId":"fx"}}`,
		`{"fact":{"factId":"fz","body":"stale","expiresAt":"2027-01-01T00:00:00Z","provenance":{"sourceEventId":"7"}}}`,
		`{"schemaVersion":2,"subject":{"guildId":"stale","userId":"stale"},"seq":7}`,
	} {
		var l people.Change
		if err := (&lineReader{b: []byte(before), s: before, in: in, bufs: bufs}).change(&l); err != nil {
			t.Fatalf("%s: %v", before, err)
		}
	}
	var fast people.Change
	fastErr := (&lineReader{b: line, s: string(line), in: in, bufs: bufs}).change(&fast)
	var want people.Change
	wantErr := jsonv2.Unmarshal(line, &want)
	if fastErr == nil && (wantErr != nil || !reflect.DeepEqual(fast, want)) {
		t.Fatalf("%q: read by hand as\n%+v\nthe codec: %+v, %v", line, fast, want, wantErr)
	}
	var got people.Change
	err := decodeLine(line, string(line), &got, &interner{}, nil)
	if (err == nil) != (wantErr == nil) || err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: decodeLine %+v, %v; the codec %+v, %v", line, got, err, want, wantErr)
	}
	// A read of the facts alone skips what recordLine says is a record
	// line unread: it must be one, or a line that is refused.
	if recordLine(line) && err == nil && !reflect.DeepEqual(got, people.Change{Proposal: got.Proposal}) {
		t.Fatalf("%q: skipped as a record line by a read of the facts alone, but it reads as %+v", line, got)
	}
	return fastErr == nil
}

// The store's own lines, of every kind it writes, take the hand path.
func TestDecodeLineReadsTheStoresLines(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC)
	exp := at.Add(time.Hour)
	subject := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000002"}
	f := api.Fact{FactID: "fabc2345", Subject: subject, Kind: api.KindPersonFact, Body: "plays \"bass\" <b>&</b> café 🎻 \u2028 tab\t",
		Visibility: api.Visibility{Scope: api.ScopeChannel, ChannelID: "100000000000000011"}, Confidence: 0.25,
		CreatedAt: at, UpdatedAt: at.Truncate(time.Second), ExpiresAt: &exp, SupersedesFactID: "fold2345",
		Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: "1300000000000000001",
			CorrelationID: "0123456789abcdef", ProposerUserID: "200000000000000002", ChannelID: "100000000000000011",
			SourceMessageID: "1300000000000000077"}}
	plain := f
	plain.ExpiresAt, plain.SupersedesFactID, plain.Provenance = nil, "", api.Provenance{}
	rec := people.ProposalRecord{ProposalID: "discord-interaction-1300000000000000001", Digest: "0123456789abcdef0123456789abcdef", FactID: f.FactID}
	var lines [][]byte
	for _, ch := range []*people.Change{
		{Seq: 9, Remove: []string{"fold2345", "fx"}, ClearDigest: []string{"fold2345"}, Put: []api.Fact{f}, Proposal: &rec},
		{Seq: 10, Put: []api.Fact{plain, f}},
		{Seq: 11, Remove: []string{"fabc2345"}},
		{Fact: &f},
		{Proposal: &people.ProposalRecord{ProposalID: "p", FactID: "f"}},
	} {
		line, err := encodeLine(ch)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, bytes.TrimSuffix(line, []byte("\n")))
	}
	// Members in another order than the store's, or left out, are read by
	// hand as well: names are matched ahead first, then looked up.
	lines = append(lines,
		[]byte(`{"proposal":{"factId":"f","proposalId":"p"},"seq":3}`),
		[]byte(`{"fact":{"provenance":{"channelId":"3","sourceSurface":"discord_text"},"body":"b","factId":"f","visibility":{"channelId":"3","scope":"channel"},"subject":{"userId":"2","guildId":"1"}}}`),
		[]byte(`{"fact":{}}`), []byte(`{}`),
		// A fact or record line with more than its one member.
		[]byte(`{"fact":{"factId":"f","subject":{"guildId":"1","userId":"2"},"kind":"k","body":"b","visibility":{"scope":"guild"},"confidence":1,"createdAt":"2026-12-02T12:00:00Z","updatedAt":"2026-12-02T12:00:00Z","provenance":{}},"seq":4}`),
		[]byte(`{"proposal":{"proposalId":"p","factId":"f"},"remove":["g"]}`),
		// A header as encodeSnapshot writes it, with and without a seq, and
		// with its subject's members in another order or left out.
		[]byte(`{"schemaVersion":2,"subject":{"guildId":"1","userId":"2"}}`),
		[]byte(`{"schemaVersion":2,"subject":{"guildId":"100000000000000001","userId":"200000000000000002"},"seq":18446744073709551615}`),
		[]byte(`{"schemaVersion":2,"subject":{"userId":"2","guildId":"1"},"seq":0}`), []byte(`{"schemaVersion":2,"subject":{}}`))
	for _, line := range lines {
		if !checkDecodeLine(t, line) {
			t.Errorf("%s: not read by hand", line)
		}
	}
	// What the codec reads differently, or refuses, is never read by hand.
	for _, line := range []string{
		`{"seq":1,"seq":2}`, `{"seq":01}`, `{"seq":1.0}`, `{"seq":-1}`, `{"seq":1} `, ` {"seq":1}`,
		`{"remove":["a\/b"]}`, `{"remove":["\x41"]}`, "{\"put\":[{\"kind\":\"\xd2\"}]}", "{\"remove\":[\"\\n\xd2\"]}", `{"remove":["a` + "\x01" + `"]}`, `{"remove":["\ud800"]}`,
		`{"fact":{"confidence":+1}}`, `{"fact":{"confidence":.5}}`, `{"fact":{"createdAt":"2026-12-02T12:00:00+01:00"}}`,
		`{"fact":{"createdAt":"2026-12-02T12:00:00,5Z"}}`, `{"fact":{"expired":true}}`, `{"fact":null}`, `{"put":[]}`,
		`{"fact":{"createdAt":"2024-02-29T23:59:59.5Z"}}`, `{"fact":{"createdAt":"2023-02-29T12:00:00Z"}}`,
		`{"fact":{"createdAt":"2100-02-29T12:00:00Z"}}`, `{"fact":{"createdAt":"2000-02-29T12:00:00Z"}}`,
		`{"fact":{"createdAt":"2026-04-31T12:00:00Z"}}`, `{"fact":{"createdAt":"2026-13-01T12:00:00Z"}}`,
		`{"fact":{"createdAt":"2026-00-01T12:00:00Z"}}`, `{"fact":{"createdAt":"2026-12-00T12:00:00Z"}}`,
		`{"fact":{"createdAt":"2026-12-02T24:00:00Z"}}`, `{"fact":{"createdAt":"2026-12-02T23:60:00Z"}}`,
		`{"fact":{"createdAt":"2026-12-31T23:59:60Z"}}`, `{"fact":{"createdAt":"0000-01-01T00:00:00.000000001Z"}}`,
		`{"fact":{"createdAt":"2026-12-02T12:00:00.1234567890Z"}}`, `{"fact":{"createdAt":"2026-12-02T12:00:00.Z"}}`,
		`{"fact":{"createdAt":"2026-1:-02T12:00:00Z"}}`, `{"fact":{"createdAt":"2026-12-02T12:0/:00Z"}}`,
		`{"fact":{"createdAt":"2026-12-02t12:00:00Z"}}`, `{"fact":{"createdAt":"2026-12-02T12:00:0AZ"}}`,
		`{"fact":{"createdAt":"2026/12-02T12:00:00Z"}}`, `{"fact":{"createdAt":"2026-12-02T12-00:00Z"}}`,
		`{"fact":{"createdAt":"2026-12-02T12:00:0\u0030Z"}}`, `{"fact":{"createdAt":"２026-12-02T12:00:00Z"}}`,
		`{"Seq":3}`, `{"proposal":{"factId":"f","factId":"g"}}`,
		`{"proposal":{"factId":"f","proposalId":"p","factId":"g"}}`, `{"fact":{"body":"a","kind":"k","body":"b"}}`,
		`{"schemaVersion":2,"seq":3,"subject":{"guildId":"1","userId":"2"}}`, `{"schemaVersion":2,"subject":{"guildId":"1"},"seq":3,"seq":4}`,
		`{"schemaVersion":2,"subject":{"guildId":"1"},"seq":3,"remove":["f"]}`, `{"schemaVersion":2.0,"subject":{"guildId":"1"}}`,
		`{"schemaVersion":2,"subject":null}`, `{"schemaVersion":99999999999,"subject":{"guildId":"1"}}`,
		`{"seq":1,"seqx":2}`, `{"se":1}`, `{"fact":{"factId" :"f"}}`, `{"fact":{"fact\u0049d":"f"}}`, `{"proposal":{"digest":"d",}}`,
	} {
		checkDecodeLine(t, []byte(line))
	}
}

func FuzzDecodeLineAgreesWithTheCodec(f *testing.F) {
	for _, s := range []string{
		`{"seq":9,"remove":["fold2345"],"clearDigest":["fold2345"],"put":[{"factId":"fabc2345","subject":{"guildId":"1","userId":"2"},"kind":"person-fact","body":"plays bass","visibility":{"scope":"guild"},"confidence":0.9,"createdAt":"2026-12-02T12:00:00.123456789Z","updatedAt":"2026-12-02T12:00:00Z","provenance":{"sourceSurface":"discord_text","channelId":"3"}}],"proposal":{"proposalId":"p1","digest":"ab","factId":"fabc2345"}}`,
		`{"fact":{"factId":"f","subject":{"guildId":"1","userId":"2"},"kind":"preference","body":"caf\u00e9 \"q\" \\ \n","visibility":{"scope":"channel","channelId":"3"},"confidence":1e-7,"createdAt":"0001-01-01T00:00:00Z","updatedAt":"9999-12-31T23:59:59.999999999Z","expiresAt":"2027-01-01T00:00:00Z","supersedesFactId":"g","provenance":{}}}`,
		`{"proposal":{"proposalId":"discord-interaction-1","factId":"f"}}`,
		`{"seq":3,"remove":[],"put":[]}`,
		`{"schemaVersion":2,"subject":{"guildId":"1","userId":"2"},"seq":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodeLine(t, line)
	})
}

// TestDecodeLogKeepsNothingOfItsInput: readLog reads every log into a
// buffer it then reuses for the next load, so a decoded person must hold
// none of the log's bytes, on the hand path or the codec's.
func TestDecodeLogKeepsNothingOfItsInput(t *testing.T) {
	log, subject := steadyLog(t)
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	escaped := api.Fact{FactID: "fesc", Subject: subject, Kind: api.KindPersonFact, Body: "café \"quoted\"\n🎻",
		Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.5, CreatedAt: at, UpdatedAt: at}
	line, err := encodeChange(&people.Change{Seq: 1 << 20, Put: []api.Fact{escaped}})
	if err != nil {
		t.Fatal(err)
	}
	log = append(log, line...)
	want, _, err := decodeLog(bytes.Clone(log))
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := decodeLog(log)
	if err != nil {
		t.Fatal(err)
	}
	for i := range log {
		log[i] = 'x'
	}
	if n := len(got.Facts); n != 129 || got.Facts[n-1].Body != escaped.Body {
		t.Fatalf("decoded %d facts, the last %q", n, got.Facts[n-1].Body)
	}
	if !people.SameState(&got.Person, &want.Person) {
		t.Fatal("the decoded person changed with the buffer it was read from")
	}
}

// TestDecodeLogIsApplyInTurn: decodeLog reads every line into the same
// buffers and replays it as it goes; what it gives must be what applying
// the lines one by one gives, for logs of fact and record lines, changes
// that put several facts, remove and clear, and lines the hand reading
// leaves to the codec (a reset).
func TestDecodeLogIsApplyInTurn(t *testing.T) {
	for seed := range 200 {
		changes := randomHistory(seed)
		var log []byte
		for i := range changes {
			line, err := encodeLine(&changes[i])
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, line...)
		}
		want := people.NewPerson(*changes[0].Subject)
		for i := range changes {
			want.Apply(&changes[i])
		}
		got, good, err := decodeLog(log)
		if err != nil || good != len(log) {
			t.Fatalf("seed %d: %v, %d of %d bytes", seed, err, good, len(log))
		}
		for i := range log {
			log[i] = 'x' // decodeLog keeps nothing of its input
		}
		if !people.SameState(&got.Person, want) || got.Seq != want.Seq {
			t.Fatalf("seed %d: decodeLog\n%+v\nApply in turn\n%+v", seed, got.Person, *want)
		}
	}
}

// randomHistory is a person log's lines, from seed: a header, then fact
// and record lines, changes that put several facts, remove and clear, and
// now and then a reset; fact ids are drawn from few, so lines replace,
// remove and name facts that are gone.
func randomHistory(seed int) []people.Change {
	subject := api.Subject{GuildID: "100000000000000001", UserID: "200000000000000002"}
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	id := func() string { return fmt.Sprintf("f%07d", rng.IntN(40)) }
	fact := func(i int) api.Fact {
		f := api.Fact{FactID: id(), Subject: subject, Kind: api.KindPersonFact, Body: fmt.Sprintf("body %d of seed %d", i, seed),
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.5, CreatedAt: at.Add(time.Duration(i) * time.Second),
			UpdatedAt:  at.Add(time.Duration(i) * time.Second),
			Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, ProposerUserID: fmt.Sprint(200000000000000000 + rng.IntN(3)), ChannelID: "100000000000000011"}}
		if rng.IntN(4) == 0 {
			f.Visibility = api.Visibility{Scope: api.ScopeChannel, ChannelID: fmt.Sprint(100000000000000000 + rng.IntN(3))}
		}
		return f
	}
	header := people.Change{SchemaVersion: logVersion, Subject: &subject}
	changes := []people.Change{header}
	seq := uint64(0)
	for i := range 10 + rng.IntN(200) {
		var ch people.Change
		switch r := rng.IntN(100); {
		case r < 2:
			seq++
			ch.Seq = seq
			ch.Reset = []people.Change{{SchemaVersion: logVersion, Subject: &subject, Seq: seq}}
			for range rng.IntN(4) {
				f := fact(i)
				ch.Reset = append(ch.Reset, people.Change{Fact: &f})
			}
		case r < 30:
			f := fact(i)
			ch.Fact = &f
		case r < 40:
			ch.Proposal = &people.ProposalRecord{ProposalID: fmt.Sprint("discord-interaction-", i), FactID: id()}
		default:
			seq++
			ch.Seq = seq
			for range rng.IntN(3) {
				ch.Remove = append(ch.Remove, id())
			}
			for range rng.IntN(2) {
				ch.ClearDigest = append(ch.ClearDigest, id())
			}
			for range rng.IntN(4) {
				ch.Put = append(ch.Put, fact(i))
			}
			ch.Proposal = &people.ProposalRecord{ProposalID: fmt.Sprint("p", i), Digest: fmt.Sprintf("%032x", i), FactID: id()}
		}
		changes = append(changes, ch)
	}
	return changes
}
