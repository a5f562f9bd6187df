package audio

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
)

const frameNanos = float64(FrameDuration)

// reportCPU adds the CPU time per 20 ms of audio as a fraction of 20 ms.
func reportCPU(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/frameNanos, "cpu/20ms")
}

// reportPercentiles adds p50 and p99 of latencies in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}

// speakerFrames is one second of Opus per speaker, each at its own pitch,
// encoded as a Discord client would.
func speakerFrames(b *testing.B, speakers int) [][][]byte {
	rt := newRuntime(b)
	out := make([][][]byte, speakers)
	for s := range out {
		out[s] = encodeTone(b, rt, 200+float64(s)*37, 50)
	}
	return out
}

// BenchmarkInbound25 is one 20 ms mix step for 25 consented speakers
// talking at once, as the Inbound's goroutine does it: 25 frames queued
// (copied, consent asked), 25 pure-Go decodes to mono, the mix, 48 → 24
// kHz and PCM16 LE packing. decode-only is the 25 bare decodes in the
// same run: the floor the pipeline adds to. cpu/20ms is the fraction of a
// core.
func BenchmarkInbound25(b *testing.B) {
	const speakers = 25
	frames := speakerFrames(b, speakers)
	ids := make([]string, speakers)
	consented := map[string]bool{}
	for i := range ids {
		ids[i] = strconv.Itoa(100000 + i)
		consented[ids[i]] = true
	}
	for _, channels := range []int{1, 2} {
		b.Run("decode-only/channels="+strconv.Itoa(channels), func(b *testing.B) {
			decs := make([]Decoder, speakers)
			for i := range decs {
				decs[i], _ = opus.NewGoDecoder(channels)
			}
			buf := make([]int16, 2*opus.MaxFrameSamples)
			for i := 0; b.Loop(); i++ {
				for s, d := range decs {
					if _, err := d.Decode(context.Background(), frames[s][i%50], buf); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportCPU(b)
		})
	}
	b.Run("inbound-step", func(b *testing.B) {
		chunks := 0
		in, err := NewInbound(InboundConfig{BotUserID: botID, Consented: func(id string) bool { return consented[id] },
			Sink: func([]byte) { chunks++ }})
		if err != nil {
			b.Fatal(err)
		}
		m := newMixer(context.Background(), in)
		defer m.close()
		now := time.Now()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			for s, id := range ids {
				m.handle(inEvent{userID: id, frame: append([]byte(nil), frames[s][i%50]...), arrived: now})
			}
			now = now.Add(FrameDuration)
		}
		reportCPU(b)
		if chunks != b.N || in.Stats().SpeakersActive != speakers && b.N > 1 {
			b.Fatalf("%d chunks for %d steps, %d speakers mixed", chunks, b.N, in.Stats().SpeakersActive)
		}
	})
}

// BenchmarkOutboundFrame is the speaking path's work per 20 ms frame: a
// 20 ms delta parsed, upsampled to 48 kHz stereo, encoded (libopus in
// wasm) and queued. encode-only is the bare encode in the same run.
func BenchmarkOutboundFrame(b *testing.B) {
	rt := newRuntime(b)
	speech := modelTone(600, time.Second)
	delta := func(i int) []byte { off := (i % 50) * 960; return speech[off : off+960] }
	b.Run("encode-only", func(b *testing.B) {
		enc := newEncoder(b, rt)
		up := pcm.NewUpsampler()
		var frames [][]int16
		for i := range 50 {
			s, _ := pcm.AppendFromLE(nil, delta(i))
			frames = append(frames, up.AppendStereo(nil, s))
		}
		out := make([]byte, opus.MaxPacketBytes)
		for i := 0; b.Loop(); i++ {
			if _, err := enc.Encode(context.Background(), frames[i%50], out); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b)
	})
	b.Run("outbound", func(b *testing.B) {
		o, err := NewOutbound(OutboundConfig{Encoder: newEncoder(b, rt), Send: discard})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			o.OutputAudio("resp", "item", delta(i))
			if i%1000 == 999 {
				o.mu.Lock()
				o.queue = o.queue[:0]
				o.mu.Unlock()
			}
		}
		reportCPU(b)
		if st := o.Stats(); st.Encoded < uint64(b.N)-1 || st.Errors != 0 {
			b.Fatalf("encoded %d of %d frames, %d errors", st.Encoded, b.N, st.Errors)
		}
	})
}

// BenchmarkInboundLatency is the delay the listening path adds, on the
// real clock with frames arriving in real time: from a frame pushed to its
// PCM at the sink, for one speaker and for the last of 25 speakers' frames
// of a step (which includes that step's 25 decodes).
func BenchmarkInboundLatency(b *testing.B) {
	for _, speakers := range []int{1, 25} {
		b.Run("speakers="+strconv.Itoa(speakers), func(b *testing.B) {
			frames := speakerFrames(b, speakers)
			ids := make([]string, speakers)
			for i := range ids {
				ids[i] = strconv.Itoa(100000 + i)
			}
			// The sink notes when each full step (all speakers mixed) lands.
			got := make(chan time.Time, 1024)
			var in *Inbound
			in, err := NewInbound(InboundConfig{BotUserID: botID, Consented: func(string) bool { return true },
				Sink: func([]byte) {
					if in.Stats().SpeakersActive == speakers {
						got <- time.Now()
					}
				}, Hangover: -1})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = in.Run(ctx) }()
			defer func() { cancel(); <-done }()
			// Frames come in real time, one per speaker per 20 ms, all
			// speakers in the same phase. Three rounds make everyone known
			// and settle the steps on the round's last frame.
			slot := time.Now()
			round := func(i int) time.Time {
				slot = slot.Add(FrameDuration)
				time.Sleep(time.Until(slot))
				for s := 0; s < speakers-1; s++ {
					in.Push(ids[s], frames[s][i%50])
				}
				start := time.Now()
				in.Push(ids[speakers-1], frames[speakers-1][i%50])
				return start
			}
			for i := range 3 {
				round(i)
			}
			time.Sleep(FrameDuration / 4)
			for len(got) > 0 {
				<-got
			}
			lat := make([]time.Duration, 0, b.N)
			missed := 0
			for i := 0; b.Loop(); i++ {
				start := round(i + 3)
			wait:
				for {
					select {
					case at := <-got:
						if !at.Before(start) {
							lat = append(lat, at.Sub(start))
							break wait
						}
					case <-time.After(5 * FrameDuration):
						missed++ // mixed in parts (a slow step let the tick cut in)
						break wait
					}
				}
			}
			reportPercentiles(b, lat)
			b.ReportMetric(float64(missed), "partial-steps")
		})
	}
}

// BenchmarkOutboundLatency is the delay the speaking path adds before the
// media connection, on the real clock: from a 20 ms delta handed over to
// its Opus frame at Send, whose connection takes it at once (the frame's
// slot is due: the connection's pacer, the one clock of the outgoing
// audio, is measured in voice/media and end to end in voice). first: each
// delta starts a new answer; stream: deltas of one answer arriving in real
// time, one per 20 ms.
func BenchmarkOutboundLatency(b *testing.B) {
	for _, first := range []bool{true, false} {
		name := "stream"
		if first {
			name = "first"
		}
		b.Run(name, func(b *testing.B) { benchOutboundLatency(b, first) })
	}
}

func benchOutboundLatency(b *testing.B, first bool) {
	rt := newRuntime(b)
	delta := modelTone(600, FrameDuration)
	sent := make(chan time.Time, 16)
	o, err := NewOutbound(OutboundConfig{Encoder: newEncoder(b, rt),
		Send: func(context.Context, []byte) error { sent <- time.Now(); return nil }})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = o.Run(ctx) }()
	defer func() { cancel(); <-done }()
	lat := make([]time.Duration, 0, b.N)
	slot := time.Now()
	for i := 0; b.Loop(); i++ {
		item := "item"
		if first {
			item = "item_" + strconv.Itoa(i)
		}
		slot = slot.Add(FrameDuration)
		time.Sleep(time.Until(slot))
		start := time.Now()
		o.OutputAudio("resp", item, delta)
		lat = append(lat, (<-sent).Sub(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkUtteranceEnd is the delay the utterance mode adds to handing an
// utterance over, on the real clock: from the end of speech (the last
// voiced frame pushed) plus the silence window to the Utterances callback,
// for one speaker's 100 ms of speech. The window is 50 ms rather than
// 600 ms so a run gathers hundreds of samples in seconds: the Inbound's
// timer is set for the window's end whatever its length, so the overhead
// does not depend on it. timer-only is a bare 50 ms timer's lateness on
// the same machine: the floor the Inbound adds to. Run it with
// -benchtime=300x or so.
func BenchmarkUtteranceEnd(b *testing.B) {
	const window = 50 * time.Millisecond
	b.Run("timer-only", func(b *testing.B) {
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			timer.Reset(window)
			<-timer.C
			lat = append(lat, time.Since(start)-window)
		}
		reportPercentiles(b, lat)
	})
	b.Run("inbound", func(b *testing.B) {
		frames := speakerFrames(b, 1)[0]
		got := make(chan time.Time, 1)
		in, err := NewInbound(InboundConfig{BotUserID: botID, Consented: func(string) bool { return true },
			Utterances: func(Utterance) { got <- time.Now() }, UtteranceSilence: window})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = in.Run(ctx) }()
		defer func() { cancel(); <-done }()
		lat := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			var last time.Time
			for f := range 5 {
				last = time.Now()
				in.Push("100000", frames[(5*i+f)%len(frames)])
			}
			select {
			case at := <-got:
				lat = append(lat, at.Sub(last)-window)
			case <-time.After(time.Second):
				b.Fatal("no utterance a second after its speech")
			}
		}
		reportPercentiles(b, lat)
	})
}
