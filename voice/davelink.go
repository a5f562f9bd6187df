package voice

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/media"
)

// NewDAVE makes a voice connection's end-to-end encryption session: our
// own DAVE member (voice/dave) driven by the connection (media.DAVE). allow
// is asked again before any DAVE decryption (the connection asks first, at
// the packet), so an unconsented speaker's frame never reaches a key.
// Its signature is AudioConfig.DAVE's.
func NewDAVE(botID, channelID string, allow func(userID string) bool) (media.DAVE, error) {
	self, err := dave.ParseUserID(botID)
	if err != nil {
		return nil, err
	}
	channel, err := strconv.ParseUint(channelID, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("dave: channel id is not a snowflake: %w", err)
	}
	opts := dave.Options{UserID: self, ChannelID: channel}
	if allow != nil {
		opts.Allow = func(u dave.UserID) bool { return allow(strconv.FormatUint(uint64(u), 10)) }
	}
	s, err := dave.New(opts)
	if err != nil {
		return nil, err
	}
	return &daveLink{s: s}, nil
}

// daveLink adapts a dave.Session to what a media.Conn drives: the
// connection hands it opcodes as they come and a Signal for the replies.
type daveLink struct {
	s   *dave.Session
	mu  sync.Mutex
	sig media.Signal
}

func (d *daveLink) MaxProtocolVersion() int { return dave.MaxProtocolVersion }

func (d *daveLink) Start(version int, _ string, sig media.Signal) error {
	d.mu.Lock()
	d.sig = sig
	d.mu.Unlock()
	if version < 0 || version > dave.MaxProtocolVersion {
		return media.ErrDAVEUnsupported
	}
	out, err := d.s.OnSelectProtocolAck(uint16(version))
	return errors.Join(err, d.send(out))
}

func (d *daveLink) HandleJSON(op media.Opcode, data json.RawMessage) error {
	out, err := d.s.HandleJSON(dave.Opcode(op), data)
	return errors.Join(err, d.send(out))
}

func (d *daveLink) HandleBinary(op media.Opcode, seq uint16, payload []byte) error {
	// voice/dave parses the message whole: sequence number, opcode, body.
	msg := binary.BigEndian.AppendUint16(make([]byte, 0, 3+len(payload)), seq)
	msg = append(append(msg, byte(op)), payload...)
	_, out, err := d.s.HandleBinary(msg)
	return errors.Join(err, d.send(out))
}

func (d *daveLink) UsersConnected(userIDs []string) {
	for _, id := range userIDs {
		if u, err := dave.ParseUserID(id); err == nil {
			d.s.AddUser(u)
		}
	}
}

func (d *daveLink) UserDisconnected(userID string) {
	if u, err := dave.ParseUserID(userID); err == nil {
		d.s.RemoveUser(u)
	}
}

// CanEncrypt is false from the moment the call turns end-to-end encrypted
// until our sender key exists: the connection holds our frames meanwhile.
func (d *daveLink) CanEncrypt() bool { return d.s.Ready() }

func (d *daveLink) Encrypt(dst, frame []byte) ([]byte, error) { return d.s.Encrypt(dst, frame) }

func (d *daveLink) Decrypt(dst []byte, userID string, frame []byte) ([]byte, error) {
	u, err := dave.ParseUserID(userID)
	if err != nil {
		return nil, err
	}
	return d.s.Decrypt(u, dst, frame)
}

// send hands DAVE's replies to the voice gateway.
func (d *daveLink) send(out []dave.Message) error {
	d.mu.Lock()
	sig := d.sig
	d.mu.Unlock()
	if sig == nil {
		return nil
	}
	var errs []error
	for _, m := range out {
		if m.Binary() {
			errs = append(errs, sig.SendBinary(media.Opcode(m.Op), m.Payload))
		} else {
			errs = append(errs, sig.SendJSON(media.Opcode(m.Op), map[string]uint16{"transition_id": m.TransitionID}))
		}
	}
	return errors.Join(errs...)
}
