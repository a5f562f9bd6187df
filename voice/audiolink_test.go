package voice

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
	"github.com/clankie/clankie/voice/pcm"
	"github.com/clankie/clankie/voice/pcm/pcmtest"
	"github.com/clankie/clankie/voice/realtime"
)

// audioModel is the model connection as a session sees it: it keeps the
// input audio it is sent and the barge-in events, and hands the test the
// session's listener so the "model" can speak.
type audioModel struct {
	mu        sync.Mutex
	out       realtime.Listener
	audio     []byte
	labels    []string
	responses int
	cancels   int
	truncates []int
}

// Utterance keeps a speaker's turn: its label and its audio (heard).
func (a *audioModel) Utterance(label string, pcm []byte) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.labels = append(a.labels, label)
	a.audio = append(a.audio, pcm...)
	return uint64(len(a.labels)), true
}

func (a *audioModel) CreateResponse() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.responses++
	return true
}

func (a *audioModel) FunctionOutput(string, string) bool { return true }

func (a *audioModel) Brief(context.Context, string, bool) error { return nil }
func (a *audioModel) State() realtime.State                     { return realtime.State{} }
func (a *audioModel) Stats() realtime.Stats                     { return realtime.Stats{} }
func (a *audioModel) Close() error                              { return nil }
func (a *audioModel) Forget()                                   {}

func (a *audioModel) AppendAudio(pcm []byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.audio = append(a.audio, pcm...)
	return true
}

func (a *audioModel) CancelResponse(string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cancels++
	return true
}

func (a *audioModel) Truncate(_ string, _ int, audioEndMs int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.truncates = append(a.truncates, audioEndMs)
	return true
}

func (a *audioModel) heard() []int16 {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, _ := pcm.AppendFromLE(nil, a.audio)
	return s
}

// TestSessionAudioBothWays wires a session to a fake voice server: a
// consented person's 440 Hz tone, sent as Opus by another voice client,
// reaches the model as 24 kHz PCM; the model's 600 Hz answer reaches the
// person; speech started stops it and truncates the item; an opt-out
// stops the person's audio reaching the model. It runs in a call without
// end-to-end encryption and in one with DAVE, where the bot is a member of
// the group with the person.
func TestSessionAudioBothWays(t *testing.T) {
	for _, e2ee := range []bool{false, true} {
		name := "protocol 0"
		if e2ee {
			name = "DAVE"
		}
		t.Run(name, func(t *testing.T) { testSessionAudioBothWays(t, e2ee) })
	}
}

func testSessionAudioBothWays(t *testing.T, e2ee bool) {
	ctx := context.Background()
	opts := voicetest.Options{}
	var group *voicetest.DAVEServer
	if e2ee {
		channel, _ := strconv.ParseUint(lounge, 10, 64)
		var err error
		if group, err = voicetest.NewDAVEServer(voicetest.DAVEServerOptions{ChannelID: channel}); err != nil {
			t.Fatal(err)
		}
		defer group.Close()
		opts.DAVE, opts.RequireDAVE = group, true
	}
	srv := voicetest.New(t, opts)
	gid := srv.ServerID()
	rt, err := opus.NewRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)

	model := &audioModel{}
	opened := make(chan struct{})
	opener := func(_ context.Context, out realtime.Listener) (Model, error) {
		model.mu.Lock()
		model.out = out
		model.mu.Unlock()
		close(opened)
		return model, nil
	}
	audioCfg := &AudioConfig{Codec: func(context.Context) (*opus.Runtime, error) { return rt, nil }, TLS: srv.ClientTLS()}
	if e2ee {
		audioCfg.DAVE = NewDAVE
	}
	// The gateway answers the bot's move with the voice server's session.
	m := startManager(t, Config{Model: opener, Audio: audioCfg}, answeredBy(srv), gid, voiceStates(lounge, ana, cal)...)
	if _, err := m.Join(ctx, gid, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	<-opened
	eventually(t, "the bot's voice connection", func() bool { return srv.Connected(botUser) })

	// Ana's own client hears the bot.
	creds := srv.Join(ana)
	hearsBot := func(id string) bool { return id == botUser }
	var personDAVE media.DAVE
	if e2ee {
		if personDAVE, err = NewDAVE(ana, lounge, hearsBot, nil); err != nil {
			t.Fatal(err)
		}
	}
	person, err := media.Dial(ctx, media.Config{Endpoint: creds.Endpoint, ServerID: creds.ServerID, UserID: ana,
		SessionID: creds.SessionID, Token: creds.Token, TLS: srv.ClientTLS(), DAVE: personDAVE, Allow: hearsBot})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	// Cal is in the channel and never consented; he talks at 700 Hz at the
	// same time as Ana. In the DAVE call he is a member of the group.
	calCreds := srv.Join(cal)
	var calDAVE media.DAVE
	if e2ee {
		if calDAVE, err = NewDAVE(cal, lounge, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	calConn, err := media.Dial(ctx, media.Config{Endpoint: calCreds.Endpoint, ServerID: calCreds.ServerID, UserID: cal,
		SessionID: calCreds.SessionID, Token: calCreds.Token, TLS: srv.ClientTLS(), DAVE: calDAVE})
	if err != nil {
		t.Fatal(err)
	}
	defer calConn.Close()
	if e2ee {
		eventually(t, "the DAVE group of bot, Ana and Cal", func() bool {
			return personDAVE.CanEncrypt() && calDAVE.CanEncrypt() &&
				len(personDAVE.(*davemedia.Session).DAVE().Members()) == 3 && len(calDAVE.(*davemedia.Session).DAVE().Members()) == 3
		})
		time.Sleep(50 * time.Millisecond) // the bot executes the same transition
	}
	calEnc, err := rt.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer calEnc.Close(ctx)
	calTalks := make(chan struct{})
	calSpeaks := func() {
		defer close(calTalks)
		calTone := pcmtest.NewTone(700, opus.SampleRate, 8000)
		out := make([]byte, opus.MaxPacketBytes)
		for range 50 {
			n, err := calEnc.Encode(ctx, pcmtest.AppendStereo(nil, calTone.Append(nil, opus.FrameSamples)), out)
			if err != nil || calConn.Send(ctx, out[:n]) != nil {
				return
			}
		}
	}
	enc, err := rt.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close(ctx)
	tone := pcmtest.NewTone(440, opus.SampleRate, 8000)
	speak := func(frames int) {
		out := make([]byte, opus.MaxPacketBytes)
		for range frames {
			n, err := enc.Encode(ctx, pcmtest.AppendStereo(nil, tone.Append(nil, opus.FrameSamples)), out)
			if err != nil {
				t.Fatal(err)
			}
			if err := person.Send(ctx, out[:n]); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Ana speaks for a second: the model hears 440 Hz, and nothing of Cal.
	go calSpeaks()
	speak(50)
	<-calTalks
	eventually(t, "a second of Ana at the model", func() bool { return len(model.heard()) >= 20000 })
	heard := model.heard()
	if dom := pcmtest.DominantFrequency(heard[2400:], realtime.SampleRate, 100, 4000); dom < 437 || dom > 443 {
		t.Errorf("the model hears %.1f Hz, want 440 ± 3", dom)
	}
	{
		if amp := pcmtest.Amplitude(heard, realtime.SampleRate, 700); amp > 40 {
			t.Errorf("Cal's 700 Hz at amplitude %.0f in the model's audio; he never consented", amp)
		}
		// Cal's packets were dropped at the packet, undecrypted: the
		// connection's transport opens are Ana's alone.
		m.mu.Lock()
		conn := m.sessions[gid].link.conn.Load()
		m.mu.Unlock()
		eventually(t, "Cal's packets counted as dropped", func() bool { return conn.Stats().DroppedNoConsent >= 45 })
		if st := conn.Stats(); st.TransportOpens > st.FramesDelivered+st.TransportFailures+5 {
			t.Errorf("transport opens %d for %d frames delivered: something undelivered was decrypted", st.TransportOpens, st.FramesDelivered)
		}
	}

	// The model answers at 600 Hz: Ana hears it.
	answer := pcm.AppendLE(nil, pcmtest.NewTone(600, realtime.SampleRate, 8000).Append(nil, realtime.SampleRate))
	model.mu.Lock()
	out := model.out
	model.mu.Unlock()
	for i := 0; i < len(answer); i += 4801 {
		out.OutputAudio("resp_1", "item_1", answer[i:min(i+4801, len(answer))])
	}
	dec, err := opus.NewGoDecoder(2)
	if err != nil {
		t.Fatal(err)
	}
	var got []int16
	buf := make([]int16, 2*opus.MaxFrameSamples)
	deadline := time.After(10 * time.Second)
	for len(got) < 15*opus.FrameSamples {
		select {
		case f := <-person.Frames():
			if opus.IsSilence(f.Opus) {
				continue
			}
			n, err := dec.Decode(ctx, f.Opus, buf)
			if err != nil {
				t.Fatal(err)
			}
			got = pcm.AppendMono(got, buf[:2*n])
		case <-deadline:
			t.Fatalf("Ana heard %d samples of the answer", len(got))
		}
	}
	if dom := pcmtest.DominantFrequency(got[5*opus.FrameSamples:], opus.SampleRate, 100, 4000); dom < 597 || dom > 603 {
		t.Errorf("Ana hears %.1f Hz, want 600 ± 3", dom)
	}
	if e2ee {
		// Both ways the audio was end-to-end encrypted, not passed through.
		m.mu.Lock()
		botDAVE := m.sessions[gid].link.dave.(*davemedia.Session).DAVE()
		m.mu.Unlock()
		anaID, _ := dave.ParseUserID(ana)
		botID, _ := dave.ParseUserID(botUser)
		if st := botDAVE.Stats(anaID); st.Successes < 40 || st.Failures != 0 {
			t.Errorf("the bot's DAVE decryptions of Ana: %+v, want ≥ 40 successes and no failures", st)
		}
		calID, _ := dave.ParseUserID(cal)
		if st := botDAVE.Stats(calID); st.Attempts != 0 || st.Successes != 0 {
			t.Errorf("the bot's DAVE work on Cal's frames: %+v, want none: he never consented", st)
		}
		if st := personDAVE.(*davemedia.Session).DAVE().Stats(botID); st.Successes < 15 || st.Failures != 0 {
			t.Errorf("Ana's DAVE decryptions of the bot: %+v, want ≥ 15 successes and no failures", st)
		}
	}

	// Ana speaks up: Clankie stops and the item is truncated.
	out.SpeechStarted(0)
	model.mu.Lock()
	cancels, truncates := model.cancels, model.truncates
	model.mu.Unlock()
	if cancels != 1 || len(truncates) != 1 || truncates[0] < 300 || truncates[0] >= 1000 {
		t.Errorf("barge-in: %d cancels, truncates at %v ms; want 1 and one between 300 and 1000", cancels, truncates)
	}

	// Ana opts out mid-utterance: nothing more of her reaches the model.
	before := len(model.heard())
	if err := m.Consent(ctx, gid, ana, false); err != nil {
		t.Fatal(err)
	}
	speak(25)
	time.Sleep(100 * time.Millisecond)
	after := model.heard()[before:]
	if amp := pcmtest.Amplitude(after, realtime.SampleRate, 440); len(after) > 0 && amp > 40 {
		t.Errorf("Ana's 440 Hz at amplitude %.0f after her opt-out", amp)
	}
}

// TestSessionAudioFollowsTheVoiceServer: a new endpoint from the gateway
// (Discord moved the call to another voice server) replaces the voice
// connection, and ending the session closes it.
func TestSessionAudioFollowsTheVoiceServer(t *testing.T) {
	ctx := context.Background()
	// A closed connection ends its server session after the resume window.
	first := voicetest.New(t, voicetest.Options{ResumeWindow: 200 * time.Millisecond})
	second := voicetest.New(t, voicetest.Options{ResumeWindow: 200 * time.Millisecond})
	gid := first.ServerID() // the fake servers share one guild id
	rt, err := opus.NewRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	opener := func(context.Context, realtime.Listener) (Model, error) { return &audioModel{}, nil }
	tlsCfg := first.ClientTLS()
	tlsCfg.RootCAs = tlsCfg.RootCAs.Clone() // trust both test CAs
	tlsCfg.RootCAs.AppendCertsFromPEM(mustRead(t, second.CAFile()))
	audioCfg := &AudioConfig{Codec: func(context.Context) (*opus.Runtime, error) { return rt, nil }, TLS: tlsCfg}
	m := startManager(t, Config{Model: opener, Audio: audioCfg}, answeredBy(first), gid, voiceStates(lounge, ana)...)
	if _, err := m.Join(ctx, gid, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bot on the first voice server", func() bool { return first.Connected(botUser) })
	// Discord moves the call to another voice server: a new
	// VOICE_SERVER_UPDATE, with its own token.
	creds := second.Admit(botUser, "bot-session")
	m.OnVoiceServerUpdate(nil, &discordgo.VoiceServerUpdate{GuildID: gid, Endpoint: creds.Endpoint, Token: creds.Token})
	eventually(t, "the bot on the second voice server", func() bool { return second.Connected(botUser) })
	eventually(t, "the first connection closed", func() bool { return !first.Connected(botUser) })
	if err := m.Leave(ctx, gid); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the connection closed with the session", func() bool { return !second.Connected(botUser) })
}

// answeredBy is a gateway that answers the bot's op 4 with srv's admission:
// the endpoint, token and session id Discord would give.
func answeredBy(srv *voicetest.Server) *gatewayRec {
	g := newGateway()
	g.server = func() (string, string, string) {
		c := srv.Admit(botUser, "bot-session") // the main gateway's session id
		return c.Endpoint, c.Token, c.SessionID
	}
	return g
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// holdingDAVE is a voice server that turns the call end-to-end encrypted
// and never completes the group: it counts the key packages it receives.
type holdingDAVE struct {
	voicetest.NoDAVE
	keyPackages atomic.Int64
}

func (*holdingDAVE) ProtocolVersion(int) int { return 1 }

func (h *holdingDAVE) Binary(_ voicetest.Peer, op int, _ []byte) error {
	if op == int(media.OpDAVEMLSKeyPackage) {
		h.keyPackages.Add(1)
	}
	return nil
}

// TestSessionAudioNeverLeavesInTheClearUnderDAVE: in an end-to-end
// encrypted call whose group is not established yet, the bot joins as a
// DAVE member (its key package reaches the server) and holds the model's
// audio: not one packet reaches the relay.
func TestSessionAudioNeverLeavesInTheClearUnderDAVE(t *testing.T) {
	ctx := context.Background()
	role := &holdingDAVE{}
	srv := voicetest.New(t, voicetest.Options{DAVE: role, RequireDAVE: true})
	gid := srv.ServerID()
	rt, err := opus.NewRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	model := &audioModel{}
	opened := make(chan struct{})
	opener := func(_ context.Context, out realtime.Listener) (Model, error) {
		model.mu.Lock()
		model.out = out
		model.mu.Unlock()
		close(opened)
		return model, nil
	}
	audioCfg := &AudioConfig{Codec: func(context.Context) (*opus.Runtime, error) { return rt, nil }, TLS: srv.ClientTLS(), DAVE: NewDAVE}
	m := startManager(t, Config{Model: opener, Audio: audioCfg}, answeredBy(srv), gid, voiceStates(lounge, ana)...)
	if _, err := m.Join(ctx, gid, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	<-opened
	eventually(t, "the bot connected to the E2EE call", func() bool { return srv.Connected(botUser) })
	eventually(t, "the bot's DAVE key package", func() bool { return role.keyPackages.Load() >= 1 })

	creds := srv.Join(ana)
	personDAVE, err := NewDAVE(ana, lounge, func(id string) bool { return id == botUser }, nil)
	if err != nil {
		t.Fatal(err)
	}
	person, err := media.Dial(ctx, media.Config{Endpoint: creds.Endpoint, ServerID: creds.ServerID, UserID: ana,
		SessionID: creds.SessionID, Token: creds.Token, TLS: srv.ClientTLS(), DAVE: personDAVE,
		Allow: func(id string) bool { return id == botUser }})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()

	model.mu.Lock()
	out := model.out
	model.mu.Unlock()
	out.OutputAudio("resp_1", "item_1", pcm.AppendLE(nil, pcmtest.NewTone(600, realtime.SampleRate, 8000).Append(nil, realtime.SampleRate/2)))
	select {
	case f := <-person.Frames():
		t.Fatalf("a frame of %d bytes reached the person before the E2EE group existed", len(f.Opus))
	case <-time.After(700 * time.Millisecond):
	}
	if n := srv.Relayed(); n != 0 {
		t.Errorf("the relay carried %d packets before the E2EE group existed, want 0", n)
	}
}

// TestSessionAudioRejoinsWhenTheVoiceSessionIsInvalid: a close that needs
// a fresh voice session (4006) makes the bot send its voice state again
// and dial the endpoint the gateway then gives; the person is heard again.
func TestSessionAudioRejoinsWhenTheVoiceSessionIsInvalid(t *testing.T) {
	ctx := context.Background()
	srv := voicetest.New(t, voicetest.Options{ResumeWindow: 200 * time.Millisecond})
	gid := srv.ServerID()
	rt, err := opus.NewRuntime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	model := &audioModel{}
	opener := func(context.Context, realtime.Listener) (Model, error) { return model, nil }
	gw := answeredBy(srv)
	audioCfg := &AudioConfig{Codec: func(context.Context) (*opus.Runtime, error) { return rt, nil }, TLS: srv.ClientTLS()}
	m := startManager(t, Config{Model: opener, Audio: audioCfg, RejoinBackoff: 10 * time.Millisecond}, gw, gid, voiceStates(lounge, ana)...)
	if _, err := m.Join(ctx, gid, ana, "", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bot connected", func() bool { return srv.Connected(botUser) && m.AudioCounters(gid, ana).Connected })
	joins := len(gw.sent())

	srv.CloseWith(botUser, media.CloseSessionInvalid)
	// The gateway answers with a fresh session and endpoint.
	eventually(t, "the bot's voice state sent again", func() bool { return len(gw.sent()) > joins })
	eventually(t, "the bot connected again", func() bool { return srv.Connected(botUser) })

	creds := srv.Join(ana)
	person, err := media.Dial(ctx, media.Config{Endpoint: creds.Endpoint, ServerID: creds.ServerID, UserID: ana,
		SessionID: creds.SessionID, Token: creds.Token, TLS: srv.ClientTLS()})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	enc, err := rt.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close(ctx)
	tone := pcmtest.NewTone(440, opus.SampleRate, 8000)
	out := make([]byte, opus.MaxPacketBytes)
	for range 25 {
		n, err := enc.Encode(ctx, pcmtest.AppendStereo(nil, tone.Append(nil, opus.FrameSamples)), out)
		if err != nil {
			t.Fatal(err)
		}
		if err := person.Send(ctx, out[:n]); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "Ana heard after the rejoin", func() bool { return len(model.heard()) >= 10000 })
}
