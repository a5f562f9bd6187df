package audio

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestReceiptsHoldCountsOnly: what a receipt logs of both paths after real
// audio went through carries counts and durations, never a user id, an
// item id or audio.
func TestReceiptsHoldCountsOnly(t *testing.T) {
	rt := newRuntime(t)
	const alice, quiet = "313131313131313131", "424242424242424242"
	in := startInbound(t, newConsentSet(alice))
	for _, f := range toneOpus(t, rt, 440, 10) {
		in.in.Push(alice, f)
		in.in.Push(quiet, f)
		in.tick(t)
	}
	out := startOutbound(t, rt)
	speech := modelTone(600, 100*time.Millisecond)
	out.out.OutputAudio("resp_secret", "item_secret", speech)
	out.slot(t)
	out.media.waitFrames(t, 1)
	out.out.BargeIn()

	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	log.Info("voice receipt", zap.Object("in", in.in.Stats()), zap.Object("out", out.out.Stats()))

	entries := logs.All()
	if len(entries) != 1 {
		t.Fatalf("%d log entries, want 1", len(entries))
	}
	text := fmt.Sprint(entries[0].ContextMap())
	for _, secret := range []string{alice, quiet, "resp_secret", "item_secret",
		base64.StdEncoding.EncodeToString(speech[:48]), string(speech[:48])} {
		if strings.Contains(text, secret) {
			t.Errorf("receipt %q carries %q", text, secret)
		}
	}
	for _, field := range []string{"audio_in", "dropped_no_consent", "speakers_peak", "audio_out", "barge_ins"} {
		if !strings.Contains(text, field) {
			t.Errorf("receipt %q lacks %s", text, field)
		}
	}
	st := in.in.Stats()
	if st.DroppedNoConsent != 10 || st.SpeakersPeak != 1 || st.AudioIn < 200*time.Millisecond {
		t.Errorf("inbound stats %+v, want 10 frames dropped for lack of consent, one speaker, 200 ms in", st)
	}
}
