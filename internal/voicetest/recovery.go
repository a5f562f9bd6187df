package voicetest

import (
	"errors"
	"fmt"

	"github.com/clankie/clankie/voice/dave/davetest"
)

// This file holds the controls that make the fake server misbehave the way
// a broken voice gateway or network would, so tests can drive a DAVE client
// through its recovery (op 31, then a new key package) and see it back in
// the group afterwards.

// InvalidReport is one op 31 (dave_mls_invalid_commit_welcome) a client
// sent: who, and the transition id it named.
type InvalidReport struct {
	UserID       string
	TransitionID uint16
}

// InvalidReports returns the op 31 reports the role received, oldest first.
func (d *DAVEServer) InvalidReports() []InvalidReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]InvalidReport(nil), d.reports...)
}

// KeyPackagesFrom reports how many key packages (op 26) userID sent: a
// client that recovers sends one more.
func (d *DAVEServer) KeyPackagesFrom(userID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.kpFrom[userID]
}

// LastTransition returns the id of the last transition the role announced
// (with a commit and its welcomes, a downgrade, or SendWelcomeAfterGroup):
// the one a member reporting sustained decryption failures names in op 31.
func (d *DAVEServer) LastTransition() uint16 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastTID
}

// ErrNotInGroup reports a control aimed at a user who is not a member of
// the established group.
var ErrNotInGroup = errors.New("voicetest: user is not in the established DAVE group")

// SendWelcomeAfterGroup sends userID, a member of the established group, a
// welcome (op 30: the last one the role relayed) under a fresh transition
// id, which it returns: what a confused gateway would do. A client cannot
// apply a welcome to a group it already holds; it should answer with op 31
// for that transition id and a new key package, which the role handles as
// any op 31 (removes the member's stale leaf, re-adds it).
func (d *DAVEServer) SendWelcomeAfterGroup(userID string) (uint16, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dp := d.peers[userID]
	if dp == nil || !d.established || !d.inGroup[userID] {
		return 0, fmt.Errorf("%w: %s", ErrNotInGroup, userID)
	}
	if d.lastWelcome == nil {
		return 0, errors.New("voicetest: no welcome relayed yet to send again")
	}
	tid := d.nextTIDLocked()
	d.log("welcome after the group to %s, transition %d", userID, tid)
	if err := dp.p.SendBinary(30, davetest.Binary(0, 30, tid, d.lastWelcome)[3:]); err != nil {
		return 0, fmt.Errorf("voicetest: sending the welcome: %w", err)
	}
	d.stats.Welcomes++
	return tid, nil
}

// CorruptDAVEFrames makes the relay corrupt the next n DAVE frames it
// carries from userID (n <= 0 cancels): one byte of each frame's
// ciphertext is flipped before the frame is re-encrypted for every
// receiver, so the transport layer accepts it and end-to-end decryption
// fails, as under keys that disagree. Silence and clear frames pass
// untouched.
func (s *Server) CorruptDAVEFrames(userID string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n <= 0 {
		delete(s.corrupt, userID)
		return
	}
	s.corrupt[userID] = n
}

// Corrupted reports how many DAVE frames the relay corrupted.
func (s *Server) Corrupted() uint64 { return s.corrupted.Load() }

// maybeCorrupt flips the first ciphertext byte of a DAVE frame from userID
// if CorruptDAVEFrames asked for it. plain is the packet's decrypted body.
func (s *Server) maybeCorrupt(userID string, hdr, plain []byte) {
	s.mu.Lock()
	n := s.corrupt[userID]
	if n > 0 {
		if n == 1 {
			delete(s.corrupt, userID)
		} else {
			s.corrupt[userID] = n - 1
		}
	}
	s.mu.Unlock()
	if n == 0 {
		return
	}
	if frame, ok := payloadOf(hdr, plain); ok && len(frame) > 0 {
		frame[0] ^= 0xFF
		s.corrupted.Add(1)
	}
}
