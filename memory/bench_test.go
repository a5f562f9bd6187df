package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// The benchmarks here compare a route with the floor under it, measured in
// the same run: a proposal with the bare durable write of a person file of
// the same size, a recall with reading and decoding that person's file.
// Each reports its median as p50-µs (the machine may be shared, and a
// median shrugs off the odd slow fsync) beside the usual mean in ns/op.

const (
	benchGuild   = "100000000000000001"
	benchChannel = "100000000000000011"
	// benchPeople is how many people the proposal benchmark rotates over.
	benchPeople = 64
)

var benchWords = strings.Fields("plays bass in a jazz trio on thursdays prefers tea over coffee learning portuguese " +
	"for a trip to lisbon has two cats named pixel and byte runs the server's minecraft nights likes quiet " +
	"voice channels after midnight studies marine biology and collects old maps of the harbour")

// benchBody answers a fact of the length people tend to write: 90 to 160
// characters of ordinary words, different for every i.
func benchBody(i int) string {
	want := 90 + (i*37)%71
	var sb strings.Builder
	for j := 0; sb.Len() < want; j++ {
		if j > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(benchWords[(i*11+j*7)%len(benchWords)])
	}
	return sb.String()
}

// benchUser answers the i-th member's Discord id.
func benchUser(i int) string { return fmt.Sprintf("2000000000%08d", i) }

// benchLogger logs like the binary does by default (JSON, info), into
// io.Discard, so each request pays for its receipt as in production.
func benchLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(io.Discard), zap.InfoLevel))
}

const benchIDAlphabet = "abcdefghijkmnpqrstuvwxyz23456789"

// benchFactID answers a fact id of the store's form ("f" and seven
// characters of its alphabet), unique per n.
func benchFactID(n int) string {
	b := []byte("f0000000")
	for i := 7; i >= 1; i-- {
		b[i] = benchIDAlphabet[n%len(benchIDAlphabet)]
		n /= len(benchIDAlphabet)
	}
	return string(b)
}

// seedPeople writes n people with facts facts each (and the proposal
// record of each fact, as the store keeps them) under dir, which must not
// be served yet. It answers the subjects.
func seedPeople(b *testing.B, dir string, n, facts int) []api.Subject {
	b.Helper()
	pdir := filepath.Join(dir, people.Dir)
	if err := os.MkdirAll(pdir, durable.DirMode); err != nil {
		b.Fatal(err)
	}
	base := time.Now().UTC().Add(-30 * 24 * time.Hour)
	subjects := make([]api.Subject, n)
	for p := range n {
		s := api.Subject{GuildID: benchGuild, UserID: benchUser(p)}
		subjects[p] = s
		var seeded []api.Fact
		var proposals []string
		for i := range facts {
			at := base.Add(time.Duration(p*facts+i) * time.Second)
			id := benchFactID(i)
			event := fmt.Sprintf("13%017d", p*facts+i)
			seeded = append(seeded, api.Fact{
				FactID: id, Subject: s, Kind: api.KindPersonFact, Body: benchBody(p*facts + i),
				Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.9, CreatedAt: at, UpdatedAt: at,
				Provenance: api.Provenance{SourceSurface: api.SurfaceDiscordText, SourceEventID: event,
					CorrelationID: fmt.Sprintf("%016x", p*facts+i), ProposerUserID: s.UserID, ChannelID: benchChannel},
			})
			proposals = append(proposals, "discord-interaction-"+event)
		}
		data, err := people.EncodeFile(s, seeded, proposals)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pdir, people.FileName(s)), data, durable.FileMode); err != nil {
			b.Fatal(err)
		}
	}
	return subjects
}

// benchService is the real service (Start, Serve) on dir over loopback,
// with a keep-alive client.
type benchService struct {
	url    string
	client *http.Client
}

func startBenchService(b *testing.B, dir string) *benchService {
	b.Helper()
	srv, err := Start(config.Memory{Addr: "127.0.0.1:0", Dir: dir, Tokens: testTokens}, benchLogger())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		if err := <-done; err != nil {
			b.Errorf("memory service stopped with %v", err)
		}
	})
	return &benchService{url: "http://" + srv.Addr, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// call does one request and answers the status and the whole body.
func (s *benchService) call(b *testing.B, token, method, route string, body []byte) (int, []byte) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+route, rd)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	return resp.StatusCode, out
}

// checkCatalog proves the service loaded what was seeded.
func (s *benchService) checkCatalog(b *testing.B, wantPeople, wantFacts int) {
	b.Helper()
	status, body := s.call(b, op, "GET", "/v1/memory", nil)
	var cat api.Catalog
	if err := json.Unmarshal(body, &cat); status != http.StatusOK || err != nil {
		b.Fatalf("catalog: %d %s", status, body)
	}
	if cat.People != wantPeople || cat.Facts != wantFacts {
		b.Fatalf("the service counts %d people and %d facts, seeded %d and %d", cat.People, cat.Facts, wantPeople, wantFacts)
	}
}

// meanFileBytes answers the mean size of the subjects' person files.
func meanFileBytes(b *testing.B, dir string, subjects []api.Subject) float64 {
	b.Helper()
	total := 0
	for _, s := range subjects {
		st, err := os.Stat(filepath.Join(dir, people.Dir, people.FileName(s)))
		if err != nil {
			b.Fatal(err)
		}
		total += int(st.Size())
	}
	return float64(total) / float64(len(subjects))
}

// reportPercentiles adds the median and 99th percentile of samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) time.Duration { return samples[int(q*float64(len(samples)-1)+0.5)] }
	b.ReportMetric(float64(at(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(at(0.99).Nanoseconds())/1e3, "p99-µs")
}

// proposalSizes are the person sizes the proposal benchmarks run at: a
// person with a typical handful of facts, and a person at the 128 cap.
var proposalSizes = []int{16, api.MaxFactsPerPerson}

// BenchmarkProposalRoundTrip proposes one fact per iteration over loopback
// HTTP to the real service, with a keep-alive client, rotating over 64
// people who each hold facts=N facts. Every proposal reads the person's
// file, decodes it, changes it and rewrites it durably; the files keep their
// size however long the benchmark runs: at facts=128 each proposal evicts the
// oldest fact (the cap), below it each corrects (supersedes) the person's
// oldest fact. Reports the mean person file size at the end as file-bytes.
func BenchmarkProposalRoundTrip(b *testing.B) {
	for _, n := range proposalSizes {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) { benchProposals(b, n) })
	}
}

func benchProposals(b *testing.B, facts int) {
	dir := filepath.Join(b.TempDir(), "memory")
	subjects := seedPeople(b, dir, benchPeople, facts)
	svc := startBenchService(b, dir)
	svc.checkCatalog(b, benchPeople, benchPeople*facts)
	full := facts >= api.MaxFactsPerPerson
	// oldest[p] holds person p's fact ids, oldest first.
	oldest := make([][]string, len(subjects))
	for p := range oldest {
		for i := range facts {
			oldest[p] = append(oldest[p], benchFactID(i))
		}
	}
	// The baseline is interleaved: after each proposal, a bare durable write
	// of a file of the same size in a sibling directory of the same disk,
	// so both see the same disk and the same load, iteration by iteration.
	base, baseData := interleavedBaseline(b, dir, subjects)
	samples := make([]time.Duration, 0, 1024)
	baseSamples := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		p := i % len(subjects)
		s := subjects[p]
		req := fact(fmt.Sprintf("bench-proposal-%d", i), s.GuildID, s.UserID, s.UserID, benchChannel, benchBody(i))
		if !full {
			req.Fact.SupersedesFactID = oldest[p][0]
		}
		body, err := json.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		status, answer := svc.call(b, txt, "POST", "/v1/memory/discord-people/proposals", body)
		var resp api.ProposalResponse
		if err := json.Unmarshal(answer, &resp); err != nil || status != http.StatusCreated || resp.Fact == nil ||
			full && resp.Evicted != 1 || !full && !resp.Superseded {
			b.Fatalf("proposal %d: %d %s", i, status, answer)
		}
		samples = append(samples, time.Since(start))
		oldest[p] = append(oldest[p][1:], resp.Fact.FactID)
		start = time.Now()
		if err := durable.WriteFile(base, fmt.Sprintf("p-%d.json", p), baseData[p]); err != nil {
			b.Fatal(err)
		}
		baseSamples = append(baseSamples, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(meanFileBytes(b, dir, subjects), "file-bytes")
	reportPercentiles(b, samples)
	slices.Sort(baseSamples)
	if len(baseSamples) > 0 {
		b.ReportMetric(float64(baseSamples[len(baseSamples)/2].Microseconds()), "baseline-p50-µs")
	}
}

// interleavedBaseline opens a sibling directory holding a copy of every
// seeded person file's bytes, for a bare durable write per proposal.
func interleavedBaseline(b *testing.B, dir string, subjects []api.Subject) (*os.Root, [][]byte) {
	b.Helper()
	baseDir := filepath.Join(filepath.Dir(dir), "baseline")
	root, err := durable.OpenRoot(baseDir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	data := make([][]byte, len(subjects))
	for i, s := range subjects {
		if data[i], err = os.ReadFile(filepath.Join(dir, people.Dir, people.FileName(s))); err != nil {
			b.Fatal(err)
		}
	}
	return root, data
}

// BenchmarkProposalBaselineWrite is the floor under
// BenchmarkProposalRoundTrip: a bare durable.WriteFile of each of the same 64
// person files (seeded alike, same directory, same bytes), nothing else.
func BenchmarkProposalBaselineWrite(b *testing.B) {
	for _, n := range proposalSizes {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) { benchBareWrites(b, n) })
	}
}

func benchBareWrites(b *testing.B, facts int) {
	dir := filepath.Join(b.TempDir(), "memory")
	subjects := seedPeople(b, dir, benchPeople, facts)
	root, err := durable.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	names := make([]string, len(subjects))
	data := make([][]byte, len(subjects))
	for i, s := range subjects {
		names[i] = path.Join(people.Dir, people.FileName(s))
		if data[i], err = root.ReadFile(names[i]); err != nil {
			b.Fatal(err)
		}
	}
	samples := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if err := durable.WriteFile(root, names[i%len(names)], data[i%len(data)]); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(meanFileBytes(b, dir, subjects), "file-bytes")
	reportPercentiles(b, samples)
}

// seedRecallPerson proposes 128 facts about one person through the running
// service (the real write path, so the file is exactly what the store
// writes) and answers the subject and the path of its file.
func seedRecallPerson(b *testing.B, svc *benchService, dir string) (api.Subject, string) {
	b.Helper()
	s := api.Subject{GuildID: benchGuild, UserID: benchUser(0)}
	for i := range api.MaxFactsPerPerson {
		req := fact(fmt.Sprintf("seed-%03d", i), s.GuildID, s.UserID, s.UserID, benchChannel, benchBody(i))
		body, _ := json.Marshal(req)
		if status, answer := svc.call(b, txt, "POST", "/v1/memory/discord-people/proposals", body); status != http.StatusCreated {
			b.Fatalf("seed %d: %d %s", i, status, answer)
		}
	}
	return s, filepath.Join(dir, people.Dir, people.FileName(s))
}

// BenchmarkRecall128 recalls a person holding 128 facts, all visible in the
// channel, over loopback HTTP with the text bridge's bearer. limit=20 is what
// /person-memory recall asks for; limit=128 sends every fact back.
func BenchmarkRecall128(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "memory")
	svc := startBenchService(b, dir)
	s, file := seedRecallPerson(b, svc, dir)
	st, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	for _, limit := range []int{20, api.MaxFactsPerPerson} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			route := fmt.Sprintf("/v1/memory/discord-people/%s/%s?channelId=%s&limit=%d", s.GuildID, s.UserID, benchChannel, limit)
			samples := make([]time.Duration, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				status, answer := svc.call(b, txt, "GET", route, nil)
				var resp api.RecallResponse
				if err := json.Unmarshal(answer, &resp); err != nil || status != http.StatusOK || resp.Total != api.MaxFactsPerPerson || len(resp.Facts) != limit {
					b.Fatalf("recall: %d %.200s", status, answer)
				}
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64(st.Size()), "file-bytes")
			reportPercentiles(b, samples)
		})
	}
}

// BenchmarkRecall128BaselineDecode is the floor under BenchmarkRecall128:
// os.ReadFile and json.Unmarshal of the same kind of person file (128 facts
// written by the real store) into the store's shape.
func BenchmarkRecall128BaselineDecode(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "memory")
	svc := startBenchService(b, dir)
	_, file := seedRecallPerson(b, svc, dir)
	samples := make([]time.Duration, 0, 4096)
	var size int
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		data, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		_, facts, err := people.DecodeFile(data)
		if err != nil || len(facts) != api.MaxFactsPerPerson {
			b.Fatalf("decode: %d facts, %v", len(facts), err)
		}
		size = len(data)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(size), "file-bytes")
	reportPercentiles(b, samples)
}
