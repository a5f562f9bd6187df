package dave

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/disgoorg/godave"
)

// NewGodave returns a godave.SessionCreateFunc, so that disgo's voice
// package (which speaks the voice gateway and hands DAVE to a godave.Session)
// can run on this package instead of the cgo libdave bindings. allow is
// Options.Allow (nil allows everyone); the channel id comes later through
// SetChannelID.
func NewGodave(allow func(UserID) bool) godave.SessionCreateFunc {
	return func(logger *slog.Logger, userID godave.UserID, callbacks godave.Callbacks) godave.Session {
		g := &godaveSession{log: logger, cb: callbacks}
		u, err := ParseUserID(string(userID))
		if err == nil {
			g.s, err = New(Options{UserID: u, Allow: allow})
		}
		if err != nil {
			logger.Error("dave: cannot start a session; frames will be refused", slog.String("error", err.Error()))
		}
		return g
	}
}

var _ godave.Session = (*godaveSession)(nil)

// godaveSession adapts Session to godave.Session: handlers send their
// replies through the callbacks instead of returning them.
type godaveSession struct {
	s   *Session
	log *slog.Logger
	cb  godave.Callbacks
}

// Session returns the underlying session (nil if it could not start), for
// Stats and Skip.
func (g *godaveSession) Session() *Session { return g.s }

func (g *godaveSession) send(out []Message, err error) {
	if err != nil {
		g.log.Warn("dave: gateway message refused", slog.String("error", err.Error()))
	}
	for _, m := range out {
		var serr error
		switch m.Op {
		case OpMLSKeyPackage:
			serr = g.cb.SendMLSKeyPackage(m.Payload)
		case OpMLSCommitWelcome:
			serr = g.cb.SendMLSCommitWelcome(m.Payload)
		case OpReadyForTransition:
			serr = g.cb.SendReadyForTransition(m.TransitionID)
		case OpMLSInvalidCommitWelcome:
			serr = g.cb.SendInvalidCommitWelcome(m.TransitionID)
		}
		if serr != nil {
			g.log.Warn("dave: sending to the voice gateway failed", slog.Int("op", int(m.Op)), slog.String("error", serr.Error()))
		}
	}
}

func (g *godaveSession) MaxSupportedProtocolVersion() int {
	if g.s == nil {
		return 0
	}
	return MaxProtocolVersion
}

func (g *godaveSession) Ready() bool { return g.s != nil && g.s.Ready() }

func (g *godaveSession) Close() error {
	if g.s != nil {
		g.s.Close()
	}
	return nil
}

func (g *godaveSession) SetChannelID(id godave.ChannelID) {
	if g.s != nil {
		g.s.SetChannelID(uint64(id))
	}
}

// AssignSsrcToCodec is a no-op: only Opus audio is sent, and Opus frames
// are encrypted whole.
func (g *godaveSession) AssignSsrcToCodec(uint32, godave.Codec) {}

func (g *godaveSession) MaxEncryptedFrameSize(n int) int { return MaxEncryptedSize(n) }

func (g *godaveSession) Encrypt(_ uint32, frame, dst []byte) (int, error) {
	if g.s == nil {
		return 0, ErrNoEncryptKey
	}
	out, err := g.s.Encrypt(dst[:0], frame)
	if err != nil {
		return 0, err
	}
	if len(out) > len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return 0, fmt.Errorf("dave: encrypted frame of %d bytes does not fit a %d-byte buffer", len(out), len(dst))
	}
	return len(out), nil
}

func (g *godaveSession) MaxDecryptedFrameSize(_ godave.UserID, n int) int { return n }

func (g *godaveSession) Decrypt(userID godave.UserID, frame, dst []byte) (int, error) {
	u, err := ParseUserID(string(userID))
	if err != nil {
		return 0, err
	}
	if g.s == nil {
		return 0, ErrNoKey
	}
	out, err := g.s.Decrypt(u, dst[:0], frame)
	if errors.Is(err, ErrRecoveryDue) {
		// Sustained failures from this sender: op 31 and a new key
		// package, through the same callbacks the handlers use.
		g.send(g.s.RecoverDecryption())
	}
	if err != nil {
		return 0, err
	}
	if len(out) > len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
		return 0, fmt.Errorf("dave: decrypted frame of %d bytes does not fit a %d-byte buffer", len(out), len(dst))
	}
	return len(out), nil
}

func (g *godaveSession) AddUser(userID godave.UserID) {
	if u, err := ParseUserID(string(userID)); err == nil && g.s != nil {
		g.s.AddUser(u)
	}
}

func (g *godaveSession) RemoveUser(userID godave.UserID) {
	if u, err := ParseUserID(string(userID)); err == nil && g.s != nil {
		g.s.RemoveUser(u)
	}
}

func (g *godaveSession) OnSelectProtocolAck(version uint16) {
	if g.s != nil {
		g.send(g.s.OnSelectProtocolAck(version))
	}
}

func (g *godaveSession) OnDavePrepareTransition(transitionID, version uint16) {
	if g.s != nil {
		g.send(g.s.OnPrepareTransition(transitionID, version), nil)
	}
}

func (g *godaveSession) OnDaveExecuteTransition(transitionID uint16) {
	if g.s != nil {
		g.s.OnExecuteTransition(transitionID)
	}
}

func (g *godaveSession) OnDavePrepareEpoch(epoch int, version uint16) {
	if g.s != nil && epoch >= 0 {
		g.send(g.s.OnPrepareEpoch(uint64(epoch), version))
	}
}

func (g *godaveSession) OnDaveMLSExternalSenderPackage(pkg []byte) {
	if g.s != nil {
		g.send(g.s.OnExternalSender(pkg))
	}
}

func (g *godaveSession) OnDaveMLSProposals(proposals []byte) {
	if g.s != nil {
		g.send(g.s.OnProposals(proposals))
	}
}

func (g *godaveSession) OnDaveMLSPrepareCommitTransition(transitionID uint16, commit []byte) {
	if g.s != nil {
		g.send(g.s.OnAnnounceCommit(transitionID, commit))
	}
}

func (g *godaveSession) OnDaveMLSWelcome(transitionID uint16, welcome []byte) {
	if g.s != nil {
		g.send(g.s.OnWelcome(transitionID, welcome))
	}
}
