package voice

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
	"github.com/clankie/clankie/voice/opus"
)

// AudioConfig turns on a session's audio: its own voice connection, and
// consented speakers' audio to the model and the model's audio back.
type AudioConfig struct {
	// Codec returns libopus compiled once for the process (the speaking
	// path's encoder; listening decodes in pure Go). It is asked when a
	// connection starts, so a bridge that never joins never compiles it.
	Codec func(context.Context) (*opus.Runtime, error)
	// TLS configures the voice websocket dial; nil trusts the system roots.
	TLS *tls.Config
	// DAVE makes each connection's end-to-end encryption session (NewDAVE);
	// allow is the session's consent. Nil is media.Passthrough, which
	// speaks protocol 0 only, so an end-to-end encrypted call is refused
	// rather than carried in the clear.
	// log hears one line per DAVE recovery (counts and ids only).
	DAVE func(botID, channelID string, allow func(userID string) bool, log *zap.Logger) (media.DAVE, error)
}

// voiceServer is what VOICE_SERVER_UPDATE tells about a server's voice
// endpoint: the address and the token for this session alone.
type voiceServer struct{ endpoint, token string }

// audioLink is one voice connection of a session (the audio path outlives
// it: see speech).
type audioLink struct {
	cancel context.CancelFunc
	dave   media.DAVE // nil: protocol 0
	// conn is the voice connection once dialled (its counters).
	conn atomic.Pointer[media.Conn]
}

// errAudioUnavailable: the connection came up but this process cannot carry
// audio (the codec or the audio path could not be made). A rejoin would
// fail the same way, so the session stays in the channel without audio.
var errAudioUnavailable = errors.New("voice: audio unavailable in this process")

// startLink dials the session's voice connection to vs as the bot's
// gateway session sessionID, and carries audio both ways on it. The loop
// hears evLinkUp once the connection is ready and evLinkDown when it ends
// (with why), unless the loop cancelled it first.
func (s *Session) startLink(vs voiceServer, sessionID string) *audioLink {
	m := s.m
	cfg := media.Config{Endpoint: vs.endpoint, ServerID: s.guildID, UserID: m.botUser(), SessionID: sessionID, Token: vs.token,
		TLS: m.cfg.Audio.TLS, Allow: s.Consented, Log: m.log.Named("media")}
	ctx, cancel := context.WithCancel(context.Background())
	link := &audioLink{cancel: cancel}
	if m.cfg.Audio.DAVE != nil {
		d, err := m.cfg.Audio.DAVE(cfg.UserID, s.channelID, s.Consented, m.log.Named("dave"))
		if err != nil {
			m.log.Warn("DAVE session could not be made; no audio", zap.String("errorType", "dave_setup"))
			cancel()
			go s.send(event{kind: evLinkDown, link: link, err: err})
			return link
		}
		cfg.DAVE, link.dave = d, d
	}
	s.mu.Lock()
	s.link = link
	s.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		err := s.runAudio(ctx, link, cfg)
		if c, ok := cfg.DAVE.(interface{ Close() }); ok {
			c.Close() // the connection is closed: forget every key
		}
		if ctx.Err() == nil {
			s.send(event{kind: evLinkDown, link: link, err: err})
		}
	}()
	return link
}

// runAudio connects to the voice server and carries audio both ways until
// ctx ends or the connection is lost for good, then writes a receipt of
// counts and durations. It returns why the connection ended.
func (s *Session) runAudio(ctx context.Context, link *audioLink, cfg media.Config) error {
	m := s.m
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	log := m.log.Named("audio")
	dialCtx, cancelDial := context.WithTimeout(ctx, 15*time.Second)
	conn, err := media.Dial(dialCtx, cfg)
	cancelDial()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("voice connection failed", zap.String("errorType", mediaErrorType(err)))
		}
		return err
	}
	defer conn.Close()
	link.conn.Store(conn)
	s.send(event{kind: evLinkUp, link: link})
	// The session's speech (its audio path, which outlives connections)
	// is built by the briefing loop; this connection feeds it.
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	s.mu.Lock()
	sp := s.speech
	s.mu.Unlock()
	if sp == nil || sp.path == nil {
		return errAudioUnavailable
	}
	path := sp.path
	sp.conn.Store(conn)
	defer sp.conn.CompareAndSwap(conn, nil)
	m.mu.Lock()
	m.links[link] = struct{}{}
	m.mu.Unlock()
	start := time.Now()
	defer func() {
		// The figures of a connection that ended go to the bridge's
		// totals, so its metrics never go down.
		m.mu.Lock()
		m.ended.addConn(conn.Stats(), link.dave)
		delete(m.links, link)
		m.mu.Unlock()
		st := conn.Stats()
		log.Info("receipt", zap.String("receipt", "voice.audio"), zap.Duration("connected", time.Since(start)),
			zap.Uint64("framesDelivered", st.FramesDelivered), zap.Uint64("droppedNoConsent", st.DroppedNoConsent))
	}()
	frames := conn.Frames()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-conn.Done():
			err := conn.Err()
			if err != nil && !errors.Is(err, media.ErrClosed) {
				log.Warn("voice connection lost", zap.String("errorType", mediaErrorType(err)))
			}
			return err
		case f, ok := <-frames:
			if !ok {
				frames = nil // closed ahead of Done: wait for Done and its error
				continue
			}
			path.Push(f.UserID, f.Opus)
		}
	}
}

// NewDAVE makes a voice connection's end-to-end encryption session, a
// voice/dave member behind media.DAVE (voice/davemedia); allow is asked
// again before any DAVE decryption. Its signature is AudioConfig.DAVE's.
func NewDAVE(botID, channelID string, allow func(userID string) bool, log *zap.Logger) (media.DAVE, error) {
	return davemedia.New(davemedia.Config{UserID: botID, ChannelID: channelID, Allow: allow, Log: log})
}

// mediaErrorType names an error's kind for a log without its text, which
// may carry an endpoint or a token.
func mediaErrorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, media.ErrDAVEUnsupported):
		return "dave_unsupported"
	case errors.Is(err, media.ErrClosed):
		return "closed"
	}
	var ce *media.CloseError
	if errors.As(err, &ce) {
		return "close_" + strconv.Itoa(ce.Code)
	}
	return "error"
}
