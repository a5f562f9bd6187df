package voice

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/audio"
	"github.com/clankie/clankie/voice/realtime"
	"github.com/clankie/clankie/voice/realtime/realtimetest"
)

// BenchmarkGroupTranscriptToResponse (issue 27): an addressed utterance's
// transcript leaves the fake model, the floor decides, and response.create
// reaches the fake: measured from the transcript's hand-over (the fake's
// transcription script returning) to the response.create frame, with the
// real realtime client over loopback and every frame validated.
func BenchmarkGroupTranscriptToResponse(b *testing.B) {
	var transcribed atomic.Int64
	f := realtimetest.New(b, realtimetest.Transcribe(func([]byte) (string, bool) {
		transcribed.Store(time.Now().UnixNano())
		return "Clankie, how are you?", true
	}))
	opener := func(ctx context.Context, out realtime.Listener) (Model, error) {
		return realtime.Start(ctx, realtime.Config{URL: f.URL(), APIKey: realtimetest.DefaultKey, Model: realtimetest.DefaultModel,
			Instructions: "You are Clankie.", ManualTurns: true, TranscribeModel: "gpt-4o-mini-transcribe", Listener: out}, nil)
	}
	m := startManager(b, Config{Model: opener}, nil, guild, voiceStates(lounge, ana, ben)...)
	if _, err := m.Join(context.Background(), guild, ana, "", ""); err != nil {
		b.Fatal(err)
	}
	s := m.Session(guild)
	<-s.ready
	eventually(b, "the model ready", func() bool { return modelSays(b, m) == "Realtime voice model: ready." })
	sp := s.speech
	pcm := make([]byte, 9600) // 200 ms
	turn := func() time.Duration {
		before := len(f.ResponseCreates(1))
		sp.utterance(audio.Utterance{UserID: ana, PCM: pcm})
		var at time.Time
		eventually(b, "response.create", func() bool {
			rc := f.ResponseCreates(1)
			if len(rc) > before {
				at = rc[len(rc)-1]
				return true
			}
			return false
		})
		sp.ResponseDone("", "completed") // the answer ends: the floor is free
		return at.Sub(time.Unix(0, transcribed.Load()))
	}
	turn()
	samples := make([]time.Duration, 0, 256)
	for b.Loop() {
		samples = append(samples, turn())
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-µs")
}
