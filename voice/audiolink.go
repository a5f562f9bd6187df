package voice

import (
	"context"
	"crypto/tls"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"go.uber.org/zap"

	"github.com/clankie/clankie/voice/audio"
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
	DAVE func(botID, channelID string, allow func(userID string) bool) (media.DAVE, error)
}

// voiceServer is what VOICE_SERVER_UPDATE tells about a server's voice
// endpoint.
type voiceServer struct{ endpoint, token string }

// audioLink is a running voice connection and audio path of a session.
type audioLink struct {
	server voiceServer
	cancel context.CancelFunc
	dave   media.DAVE // nil: protocol 0
	// conn is the voice connection once dialled and path its audio path
	// (their counters).
	conn atomic.Pointer[media.Conn]
	path atomic.Pointer[audio.Path]
}

// OnVoiceServerUpdate records a server's voice endpoint and token and
// (re)connects the session's audio to it: a new endpoint means a new
// connection. It never blocks on the network.
func (m *Manager) OnVoiceServerUpdate(_ *discordgo.Session, u *discordgo.VoiceServerUpdate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.voiceServers == nil {
		m.voiceServers = map[string]voiceServer{}
	}
	m.voiceServers[u.GuildID] = voiceServer{endpoint: u.Endpoint, token: u.Token}
	if s := m.sessions[u.GuildID]; s != nil {
		m.linkAudioLocked(s)
	}
}

// botVoiceStateLocked records the bot's own voice session id, which the
// voice connection identifies with. m.mu is held.
func (m *Manager) botVoiceStateLocked(u *discordgo.VoiceStateUpdate) {
	if m.botSessions == nil {
		m.botSessions = map[string]string{}
	}
	m.botSessions[u.GuildID] = u.SessionID
	if s := m.sessions[u.GuildID]; s != nil && u.ChannelID == s.channelID {
		m.linkAudioLocked(s)
	}
}

// linkAudioLocked starts the session's audio once the endpoint, token and
// the bot's session id are known, replacing a link to an older endpoint.
// m.mu is held.
func (m *Manager) linkAudioLocked(s *Session) {
	vs, ok := m.voiceServers[s.guildID]
	sessionID := m.botSessions[s.guildID]
	if m.Audio == nil || m.Audio.Codec == nil || !ok || vs.endpoint == "" || sessionID == "" || m.botID == "" {
		return
	}
	if s.link != nil {
		if s.link.server == vs {
			return
		}
		s.link.cancel()
		s.link = nil
	}
	cfg := media.Config{Endpoint: vs.endpoint, ServerID: s.guildID, UserID: m.botID, SessionID: sessionID, Token: vs.token,
		TLS: m.Audio.TLS, Allow: s.Consented, Log: m.log.Named("media")}
	if m.Audio.DAVE != nil {
		d, err := m.Audio.DAVE(m.botID, s.channelID, s.Consented)
		if err != nil {
			m.log.Warn("DAVE session could not be made; no audio", zap.String("errorType", "dave_setup"))
			return
		}
		cfg.DAVE = d
	}
	ctx, cancel := context.WithCancel(context.Background())
	link := &audioLink{server: vs, cancel: cancel, dave: cfg.DAVE}
	s.link = link
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		select {
		case <-s.done:
			return
		default:
		}
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := m.runAudio(ctx, s, link, cfg)
		if c, ok := cfg.DAVE.(interface{ Close() }); ok {
			c.Close() // the connection is closed: forget every key
		}
		if ctx.Err() == nil && needsRejoin(err) {
			m.rejoinAudio(ctx, s, link)
		}
	}()
}

// needsRejoin reports whether a connection's end calls for a fresh voice
// session: a close Discord documents as rejoin, or a dial that failed
// (the endpoint may have moved). Closes that stop (4004, 4014, 4022)
// stay stopped.
func needsRejoin(err error) bool {
	if err == nil || errors.Is(err, media.ErrClosed) {
		return false
	}
	var ce *media.CloseError
	if errors.As(err, &ce) {
		return ce.Action == media.Rejoin
	}
	return true
}

// maxRejoins bounds consecutive rejoins that never got a connection.
const maxRejoins = 5

// rejoinDelay spaces rejoins, so a voice server that keeps refusing the
// session is not hammered.
const rejoinDelay = time.Second

// rejoinAudio answers a close that needs a fresh voice session (4006,
// 4009, 4011, 4017): the bot's voice state is sent again, and the session
// waits for the gateway's fresh VOICE_SERVER_UPDATE before it dials.
func (m *Manager) rejoinAudio(ctx context.Context, s *Session, link *audioLink) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(rejoinDelay):
	}
	m.mu.Lock()
	if m.sessions[s.guildID] != s || s.link != link {
		m.mu.Unlock()
		return // ended or replaced meanwhile
	}
	if link.conn.Load() != nil {
		s.rejoins = 0
	}
	if s.rejoins++; s.rejoins > maxRejoins {
		m.mu.Unlock()
		m.log.Warn("voice connection keeps failing; audio stopped for this session", zap.Int("rejoins", maxRejoins))
		return
	}
	s.link = nil
	delete(m.voiceServers, s.guildID)
	m.mu.Unlock()
	m.log.Info("voice connection needs a fresh session; rejoining")
	if err := m.moveBot(s.guildID, s.channelID); err != nil {
		m.log.Warn("voice rejoin not sent", zap.String("errorType", "gateway"))
	}
}

// stopAudioLocked ends the session's audio. m.mu is held.
func (m *Manager) stopAudioLocked(s *Session) {
	if s.link != nil {
		s.link.cancel()
		s.link = nil
	}
}

// runAudio connects to the voice server and carries audio both ways until
// ctx ends or the connection is lost for good, then writes a receipt of
// counts and durations. It returns why the connection ended.
func (m *Manager) runAudio(ctx context.Context, s *Session, link *audioLink, cfg media.Config) error {
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
	codec, err := m.Audio.Codec(ctx)
	if err != nil {
		log.Warn("opus codec could not be compiled", zap.Error(err))
		return nil
	}
	enc, err := codec.NewEncoder(ctx, opus.DefaultEncoderConfig())
	if err != nil {
		log.Warn("opus encoder could not be made", zap.Error(err))
		return nil
	}
	defer enc.Close(context.WithoutCancel(ctx))
	path, err := audio.NewPath(audio.PathConfig{
		BotUserID: cfg.UserID,
		Consented: s.Consented,
		Model: func() audio.Model {
			if a := s.Audio(); a != nil {
				return a
			}
			return nil
		},
		Encoder: enc,
		// The connection paces, DAVE-encrypts and ends utterances with
		// silence itself; the path hands it frames in real time, so its
		// queue holds at most one and a barge-in stops within a frame.
		Send:          func(f []byte) { conn.TrySend(f) },
		SilenceFrames: -1,
	})
	if err != nil {
		log.Warn("audio path could not be made", zap.Error(err))
		return nil
	}
	link.path.Store(path)
	m.mu.Lock()
	if m.links == nil {
		m.links = map[*audioLink]struct{}{}
	}
	m.links[link] = struct{}{}
	m.mu.Unlock()
	s.SetOutput(path)
	defer s.SetOutput(nil)
	start := time.Now()
	pathDone := make(chan struct{})
	go func() { defer close(pathDone); _ = path.Run(ctx) }()
	defer func() {
		stop()
		<-pathDone
		// The figures of a connection that ended go to the bridge's
		// totals, so its metrics never go down.
		m.mu.Lock()
		m.ended.addPath(path.Stats(), conn.Stats(), link.dave)
		delete(m.links, link)
		m.mu.Unlock()
		log.Info("receipt", zap.String("receipt", "voice.audio"), zap.Duration("connected", time.Since(start)),
			zap.Object("audio", path.Stats()))
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
func NewDAVE(botID, channelID string, allow func(userID string) bool) (media.DAVE, error) {
	return davemedia.New(davemedia.Config{UserID: botID, ChannelID: channelID, Allow: allow})
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
