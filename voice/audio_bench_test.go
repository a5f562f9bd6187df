package voice

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/config"
	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
	"github.com/clankie/clankie/voice/realtime"
)

// timedModel notes when each input chunk arrives.
type timedModel struct {
	audioModel
	chunks chan time.Time
}

// Utterance notes when a speaker's turn arrives.
func (m *timedModel) Utterance(string, []byte) (uint64, bool) {
	select {
	case m.chunks <- time.Now():
	default:
	}
	return 1, true
}

// BenchmarkSessionAudioLatency measures, on loopback through the fake
// voice server with real UDP, the latency the bridge adds end to end:
// in: from the last frame of a person's 200 ms utterance handed to their
// voice client to the utterance at the model, less the silence that ends
// it (the person's pacer, the relay, the bot's receive, consent, decode,
// resample, the utterance's hand-over); out: from a model delta (20 ms) to the
// frame arriving at the person's client (encode, pacing, DAVE hook,
// transport, relay). Real time: one frame per 20 ms.
func BenchmarkSessionAudioLatency(b *testing.B) {
	ctx := context.Background()
	srv := voicetest.New(b, voicetest.Options{})
	gid := srv.ServerID()
	rt, err := opus.NewRuntime(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	model := &timedModel{chunks: make(chan time.Time, 64)}
	var once sync.Once
	opened := make(chan struct{})
	opener := func(_ context.Context, out realtime.Listener) (Model, error) {
		model.mu.Lock()
		model.out = out
		model.mu.Unlock()
		once.Do(func() { close(opened) })
		return model, nil
	}
	audioCfg := &AudioConfig{Codec: func(context.Context) (*opus.Runtime, error) { return rt, nil }, TLS: srv.ClientTLS()}
	const silence = 200 * time.Millisecond // the shortest CLANKIE_VOICE_UTTERANCE_SILENCE
	m := startManager(b, Config{Model: opener, Audio: audioCfg, Group: config.VoiceGroup{UtteranceSilence: silence}}, answeredBy(srv), gid, voiceStates(lounge, ana)...)
	if _, err := m.Join(ctx, gid, ana, "", ""); err != nil {
		b.Fatal(err)
	}
	<-opened
	creds := srv.Join(ana)
	person, err := media.Dial(ctx, media.Config{Endpoint: creds.Endpoint, ServerID: creds.ServerID, UserID: ana,
		SessionID: creds.SessionID, Token: creds.Token, TLS: srv.ClientTLS(), Allow: func(id string) bool { return id == botUser }})
	if err != nil {
		b.Fatal(err)
	}
	defer person.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !srv.Connected(botUser) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}

	enc, err := rt.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close(ctx)
	tone := pcmtest.NewTone(440, opus.SampleRate, 8000)
	frames := make([][]byte, 50)
	for i := range frames {
		out := make([]byte, opus.MaxPacketBytes)
		n, _ := enc.Encode(ctx, pcmtest.AppendStereo(nil, tone.Append(nil, opus.FrameSamples)), out)
		frames[i] = out[:n]
	}
	delta := pcm.AppendLE(nil, pcmtest.NewTone(600, realtime.SampleRate, 8000).Append(nil, realtime.SampleRate/50))

	b.Run("in", func(b *testing.B) {
		var lat []time.Duration
		for i := 0; b.Loop(); i++ {
			for len(model.chunks) > 0 {
				<-model.chunks
			}
			// Play returns as the person's pacer takes the frame for its
			// slot: last is when the utterance's last frame left.
			var last time.Time
			for j := range 10 {
				if err := person.Play(ctx, frames[(i*10+j)%len(frames)]); err != nil {
					b.Fatal(err)
				}
				last = time.Now()
			}
			select {
			case at := <-model.chunks:
				lat = append(lat, at.Sub(last)-silence)
			case <-time.After(5 * time.Second):
				b.Fatal("no utterance reached the model")
			}
		}
		reportLatency(b, lat)
	})
	// out-first: the first frame of an answer after silence (both pacers
	// idle), what decides how soon Clankie is heard; out-stream: frames
	// of an answer whose deltas come in real time, each waiting for its
	// 20 ms slot.
	for _, first := range []bool{true, false} {
		name := "out-stream"
		if first {
			name = "out-first"
		}
		b.Run(name, func(b *testing.B) { benchOut(b, model, person, delta, first) })
	}
}

func benchOut(b *testing.B, model *timedModel, person *media.Conn, delta []byte, first bool) {
	{
		model.mu.Lock()
		out := model.out
		model.mu.Unlock()
		var lat []time.Duration
		slot := time.Now()
		for i := 0; b.Loop(); i++ {
			gap := 20 * time.Millisecond
			if first {
				gap = 150 * time.Millisecond // past both pacers' silence tails
			}
			slot = slot.Add(gap)
			time.Sleep(time.Until(slot))
			item := "item"
			if first {
				item = "item_" + strconv.Itoa(i)
			}
			start := time.Now()
			out.OutputAudio("resp", item, delta)
			for {
				select {
				case f := <-person.Frames():
					if opus.IsSilence(f.Opus) {
						continue
					}
					lat = append(lat, f.Arrived.Sub(start))
				case <-time.After(time.Second):
					b.Fatal("no audio reached the person")
				}
				break
			}
		}
		reportLatency(b, lat)
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(at(0.5), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
