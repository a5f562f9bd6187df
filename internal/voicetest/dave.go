package voicetest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// DAVEServer is the voice gateway's part in DAVE protocol version 1, as
// github.com/discord/dave-protocol's protocol.md describes it: the MLS
// delivery service and external sender. It sends each client the external
// sender package (op 25), turns key packages (op 26) into external add
// proposals and departures into remove proposals (op 27), accepts the first
// valid commit of each epoch (op 28) and announces it (op 29) to the group
// and welcomes (op 30) the added, runs transitions (21/22, waiting for 23 or
// a timeout), makes a lone DAVE client the sole member of its own group (op
// 24 epoch 1, op 21 transition 0) when it joins first or when the others
// leave, re-adds a member that reports an unusable commit or welcome (op
// 31), and downgrades to protocol version 0 while a client without DAVE is
// in the call and upgrades again when it leaves.
//
// Tests can also make it misbehave as a broken gateway or network would:
// SendWelcomeAfterGroup, and Server.CorruptDAVEFrames for the relay.
//
// Like Discord it ignores what is merely out of order (a commit for a past
// epoch, a ready for an unknown transition) and closes the socket with 4002
// for what cannot be decoded.
type DAVEServer struct {
	es      *davetest.ExternalSender
	pkg     []byte
	groupID []byte
	timeout time.Duration
	logf    func(format string, args ...any)
	tamper  func(op int, user string, body []byte) []byte

	mu          sync.Mutex
	closed      bool
	version     int
	peers       map[string]*davePeer
	established bool
	epoch       uint64
	roster      davetest.Roster
	inGroup     map[string]bool
	props       []*proposal // unrevoked proposals of this epoch
	lastTID     uint16
	trans       *transition
	stats       DAVEStats
	lastWelcome []byte // the last welcome relayed, for SendWelcomeAfterGroup
	reports     []InvalidReport
	kpFrom      map[string]int // key packages received, by user
}

// DAVEStats counts what the DAVE role did.
type DAVEStats struct {
	KeyPackages      int // op 26 received
	Proposals        int // proposals sent (add and remove)
	Revokes          int
	CommitsAccepted  int // op 28 announced
	CommitsIgnored   int // op 28 for a past epoch, or not valid
	Welcomes         int // op 30 sent
	Executed         int // op 22 sent
	TimedOut         int // transitions executed without every ready
	InvalidReports   int // op 31 received
	SoleMemberResets int
	Downgrades       int
	Upgrades         int
}

type davePeer struct {
	p   Peer
	id  uint64
	max int
	kp  []byte // the key package of a pending member
	// stale counts key packages still to arrive that op 24 superseded: a
	// client sends one on the session description and a new one on op 24
	// epoch 1, and only the second matches the group it will found.
	stale int
}

type proposal struct {
	msg, ref []byte
	add      bool
	user     string
	to       []string // who it was sent to
}

type transition struct {
	id      uint16
	version int
	members []string
	waiting map[string]bool
	timer   *time.Timer
}

// DAVEServerOptions configure a DAVEServer.
type DAVEServerOptions struct {
	// ChannelID is the voice channel's id, the MLS group id clients use.
	ChannelID uint64
	// TransitionTimeout is how long a transition waits for every member's
	// ready before executing anyway (default 3 s).
	TransitionTimeout time.Duration
	// Tamper, when set, sees every commit (op 29) and welcome (op 30) body
	// before it goes to user and returns what to send instead: a test
	// corrupts one to drive a member through op 31 recovery.
	Tamper func(op int, user string, body []byte) []byte
	// Logf, when set, receives one line per DAVE message the role sends or
	// receives (opcodes, user ids, epochs; never key material).
	Logf func(format string, args ...any)
}

// NewDAVEServer returns a DAVE role with a fresh external sender key.
func NewDAVEServer(opts DAVEServerOptions) (*DAVEServer, error) {
	es, err := davetest.NewExternalSender()
	if err != nil {
		return nil, err
	}
	if opts.TransitionTimeout <= 0 {
		opts.TransitionTimeout = 3 * time.Second
	}
	return &DAVEServer{
		es: es, pkg: es.Package(), groupID: binary.BigEndian.AppendUint64(nil, opts.ChannelID),
		timeout: opts.TransitionTimeout, version: 1, logf: opts.Logf, tamper: opts.Tamper,
		peers: map[string]*davePeer{}, inGroup: map[string]bool{}, kpFrom: map[string]int{},
	}, nil
}

func (d *DAVEServer) log(format string, args ...any) {
	if d.logf != nil {
		d.logf("dave role: "+format, args...)
	}
}

// Close stops a pending transition's timer; Server.Close calls it.
func (d *DAVEServer) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.trans != nil && d.trans.timer != nil {
		d.trans.timer.Stop()
	}
}

// Stats returns the role's counters.
func (d *DAVEServer) Stats() DAVEStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Version reports the call's protocol version.
func (d *DAVEServer) Version() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version
}

// Epoch reports the established group's epoch, 0 when there is none.
func (d *DAVEServer) Epoch() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.epoch
}

// Settled reports whether the call is end-to-end encrypted with exactly
// users in the established group, no proposal outstanding and no
// transition pending: every member sends and receives under the same epoch.
func (d *DAVEServer) Settled(users ...string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.version == 0 || !d.established || d.trans != nil || len(d.props) > 0 || len(d.inGroup) != len(users) {
		return false
	}
	for _, u := range users {
		if !d.inGroup[u] {
			return false
		}
	}
	return true
}

// ProtocolVersion is the call's version, or 0 for a client without DAVE
// (whose arrival downgrades the call).
func (d *DAVEServer) ProtocolVersion(maxVersion int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if maxVersion < 1 {
		return 0
	}
	return d.version
}

// Joined sends a DAVE client the external sender package, or downgrades
// the call for a client without DAVE.
func (d *DAVEServer) Joined(p Peer, maxVersion int) {
	id, err := strconv.ParseUint(p.UserID(), 10, 64)
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log("%s joined (max version %d)", p.UserID(), maxVersion)
	d.peers[p.UserID()] = &davePeer{p: p, id: id, max: maxVersion}
	if maxVersion < 1 {
		if d.version > 0 {
			d.downgradeLocked()
		}
		return
	}
	if d.version == 0 {
		return
	}
	if !d.established && d.daveClientsLocked() == 1 {
		// The first DAVE client in the call: Discord has it (re)create its
		// group as the sole member. Its answer to the session description
		// is still unread (this runs on its reader goroutine), and op 24
		// supersedes it: proposing it would let another joiner commit a
		// key package the client no longer holds.
		dp := d.peers[p.UserID()]
		d.soleMemberLocked(dp)
		dp.stale = 1
		return
	}
	_ = p.SendBinary(25, d.pkg)
}

// daveClientsLocked counts the connected clients that speak DAVE.
func (d *DAVEServer) daveClientsLocked() int {
	n := 0
	for _, dp := range d.peers {
		if dp.max >= 1 {
			n++
		}
	}
	return n
}

// Left proposes the departed member's removal (or resets a sole remaining
// member), revokes their pending add, and upgrades the call when the last
// client without DAVE left.
func (d *DAVEServer) Left(userID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dp := d.peers[userID]
	if dp == nil {
		return
	}
	delete(d.peers, userID)
	d.log("%s left (in group %v)", userID, d.inGroup[userID])
	if d.version == 0 {
		if dp.max < 1 && d.allSupportDAVELocked() && len(d.peers) > 0 {
			d.upgradeLocked()
		} else if d.trans != nil {
			d.readyLocked(userID, d.trans.id)
		}
		return
	}
	d.revokeAddLocked(userID)
	if d.trans != nil {
		d.readyLocked(userID, d.trans.id)
	}
	if d.inGroup[userID] {
		d.removeMemberLocked(userID, "")
	}
}

// JSON handles op 23 (ready for transition) and op 31 (invalid commit or
// welcome).
func (d *DAVEServer) JSON(p Peer, op int, raw json.RawMessage) error {
	var m struct {
		TransitionID *uint16 `json:"transition_id"`
	}
	if json.Unmarshal(raw, &m) != nil || m.TransitionID == nil {
		return CloseCode(4002)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.peers[p.UserID()] == nil {
		return nil
	}
	d.log("op %d from %s: transition %d", op, p.UserID(), *m.TransitionID)
	switch op {
	case 23:
		d.readyLocked(p.UserID(), *m.TransitionID)
	case 31:
		d.stats.InvalidReports++
		d.reports = append(d.reports, InvalidReport{UserID: p.UserID(), TransitionID: *m.TransitionID})
		if d.version == 0 {
			return nil
		}
		if d.trans != nil {
			d.readyLocked(p.UserID(), d.trans.id)
		}
		// The member reset itself and will send a new key package; its
		// stale leaf goes, and the key package brings it back.
		if d.inGroup[p.UserID()] {
			d.removeMemberLocked(p.UserID(), p.UserID())
		}
	}
	return nil
}

// Binary handles op 26 (key package) and op 28 (commit and welcome).
func (d *DAVEServer) Binary(p Peer, op int, payload []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	dp := d.peers[p.UserID()]
	if dp == nil || d.version == 0 {
		return nil
	}
	d.log("op %d from %s (%d bytes)", op, p.UserID(), len(payload))
	switch op {
	case 26:
		user, err := keyPackageUser(payload)
		if err != nil {
			return CloseCode(4002)
		}
		d.stats.KeyPackages++
		d.kpFrom[p.UserID()]++
		if user != dp.id {
			return nil // a key package for someone else is never proposed
		}
		if dp.stale > 0 {
			dp.stale--
			d.log("key package from %s superseded by op 24", p.UserID())
			return nil
		}
		return d.keyPackageLocked(dp, slices.Clone(payload))
	case 28:
		commit, welcome, err := dave.SplitCommitWelcome(payload)
		if err != nil {
			return CloseCode(4002)
		}
		c, err := parseCommit(commit)
		if err != nil {
			return CloseCode(4002)
		}
		d.commitLocked(dp, c, slices.Clone(commit), slices.Clone(welcome))
	}
	return nil
}

func (d *DAVEServer) keyPackageLocked(dp *davePeer, kp []byte) error {
	user := strconv.FormatUint(dp.id, 10)
	d.revokeAddLocked(user) // a pending member replaces its key package
	dp.kp = kp
	if d.established {
		d.proposeAddLocked(user, d.members())
		return nil
	}
	// No group yet: this member's add goes to the other pending members,
	// and it receives theirs (protocol.md, "Initial Group Creation").
	for _, o := range d.pendingPeers() {
		if o == user {
			continue
		}
		pr := d.proposalFor(o)
		if pr == nil {
			pr = d.proposeAddLocked(o, nil)
		}
		if pr != nil {
			_ = d.peers[user].p.SendBinary(27, davetest.ProposalsAppend(pr.msg))
			pr.to = append(pr.to, user)
		}
	}
	d.proposeAddLocked(user, d.others(d.pendingPeers(), user))
	return nil
}

// proposeAddLocked creates an add proposal for user's key package at the
// current epoch and sends it to recipients.
func (d *DAVEServer) proposeAddLocked(user string, to []string) *proposal {
	dp := d.peers[user]
	if dp == nil || dp.kp == nil {
		return nil
	}
	msg, ref, err := d.es.ProposeAdd(d.groupID, d.epoch, dp.kp)
	if err != nil {
		return nil
	}
	pr := &proposal{msg: msg, ref: ref, add: true, user: user}
	d.log("propose add %s at epoch %d to %v", user, d.epoch, to)
	d.props = append(d.props, pr)
	d.sendProposalLocked(pr, to)
	return pr
}

func (d *DAVEServer) sendProposalLocked(pr *proposal, to []string) {
	d.stats.Proposals++
	body := davetest.ProposalsAppend(pr.msg)
	for _, u := range to {
		if dp := d.peers[u]; dp != nil {
			_ = dp.p.SendBinary(27, body)
			pr.to = append(pr.to, u)
		}
	}
}

func (d *DAVEServer) proposalFor(user string) *proposal {
	for _, pr := range d.props {
		if pr.add && pr.user == user {
			return pr
		}
	}
	return nil
}

// revokeAddLocked revokes user's outstanding add proposal, if any.
func (d *DAVEServer) revokeAddLocked(user string) {
	pr := d.proposalFor(user)
	if pr == nil {
		return
	}
	d.props = slices.DeleteFunc(d.props, func(p *proposal) bool { return p == pr })
	d.stats.Revokes++
	d.log("revoke add %s", user)
	body := davetest.ProposalsRevoke(pr.ref)
	for _, u := range pr.to {
		if dp := d.peers[u]; dp != nil && u != user {
			_ = dp.p.SendBinary(27, body)
		}
	}
}

// removeMemberLocked proposes user's removal to the other members, or
// resets the group when one member would remain. except is a member not to
// send the proposal to (one that reset itself).
func (d *DAVEServer) removeMemberLocked(user, except string) {
	if len(d.inGroup) <= 2 {
		d.soleMemberResetLocked(user)
		return
	}
	leaf, ok := d.roster.Leaf(d.idOf(user))
	if !ok {
		return
	}
	msg, ref, err := d.es.ProposeRemove(d.groupID, d.epoch, leaf)
	if err != nil {
		return
	}
	pr := &proposal{msg: msg, ref: ref, user: user}
	d.log("propose remove %s (leaf %d) at epoch %d", user, leaf, d.epoch)
	d.props = append(d.props, pr)
	var to []string
	for _, u := range d.members() {
		if u != user && u != except {
			to = append(to, u)
		}
	}
	d.sendProposalLocked(pr, to)
}

// soleMemberResetLocked abandons the group when leaving takes it to one
// member: that member gets op 24 epoch 1 and op 21 transition 0 and starts
// over with a new key package (protocol.md, "Sole member reset"); a
// member that is merely resetting itself (op 31) sends one anyway.
func (d *DAVEServer) soleMemberResetLocked(leaving string) {
	rest := d.others(d.members(), leaving)
	d.resetGroupLocked()
	d.stats.SoleMemberResets++
	d.log("sole member reset for %v", rest)
	for _, u := range rest {
		if dp := d.peers[u]; dp != nil {
			d.soleMemberLocked(dp)
		}
	}
}

// soleMemberLocked makes dp the sole member of a group of its own, as
// protocol.md's "Sole member reset" describes: op 24 epoch 1 (the client
// resets and sends a new key package), the external sender, and op 21
// transition 0 (the client executes it at once and encrypts under its
// local group). This is the only way a client enters that state.
func (d *DAVEServer) soleMemberLocked(dp *davePeer) {
	dp.kp = nil
	_ = dp.p.SendJSON(24, map[string]int{"epoch": 1, "protocol_version": d.version})
	_ = dp.p.SendBinary(25, d.pkg)
	_ = dp.p.SendJSON(21, map[string]int{"transition_id": 0, "protocol_version": d.version})
}

func (d *DAVEServer) resetGroupLocked() {
	d.established, d.epoch = false, 0
	d.roster.Reset()
	clear(d.inGroup)
	d.props = nil
	// A transition in flight is executed, not dropped: members that sent
	// op 23 would otherwise wait for it forever.
	if d.trans != nil {
		d.executeLocked(false)
	}
}

// commitLocked accepts the first valid commit of the epoch: it announces it
// to the group's members, welcomes the added and starts the transition.
func (d *DAVEServer) commitLocked(from *davePeer, c commitInfo, commit, welcome []byte) {
	user := strconv.FormatUint(from.id, 10)
	eligible := d.inGroup[user] || (!d.established && from.kp != nil)
	if !eligible || c.epoch != d.epoch || !bytes.Equal(c.groupID, d.groupID) || len(c.refs) == 0 {
		d.log("commit from %s for epoch %d ignored (epoch %d, eligible %v)", user, c.epoch, d.epoch, eligible)
		d.stats.CommitsIgnored++
		return
	}
	// It must reference every outstanding proposal (a founder never gets
	// its own add) and nothing else.
	var want []*proposal
	for _, pr := range d.props {
		if !(pr.add && pr.user == user && !d.established) {
			want = append(want, pr)
		}
	}
	ordered := make([]*proposal, 0, len(c.refs))
	for _, ref := range c.refs {
		i := slices.IndexFunc(want, func(p *proposal) bool { return bytes.Equal(p.ref, ref) })
		if i < 0 {
			d.log("commit from %s references an unknown proposal", user)
			d.stats.CommitsIgnored++
			return
		}
		ordered = append(ordered, want[i])
	}
	if len(ordered) != len(want) {
		d.log("commit from %s references %d of %d proposals", user, len(ordered), len(want))
		d.stats.CommitsIgnored++
		return
	}
	adds := slices.ContainsFunc(ordered, func(p *proposal) bool { return p.add })
	if adds && welcome == nil {
		d.stats.CommitsIgnored++
		return
	}
	d.stats.CommitsAccepted++
	old := d.members()
	if !d.established {
		d.roster.Reset()
		d.roster.Add(from.id)
		d.inGroup[user] = true
		from.kp = nil
		old = []string{user}
		d.established = true
	}
	// RFC 9420 §12.3: removes apply before adds, adds in order.
	var removed, added []string
	for _, pr := range ordered {
		if !pr.add {
			d.roster.Remove(d.idOf(pr.user))
			delete(d.inGroup, pr.user)
			removed = append(removed, pr.user)
		}
	}
	for _, pr := range ordered {
		if pr.add {
			d.roster.Add(d.idOf(pr.user))
			d.inGroup[pr.user] = true
			if dp := d.peers[pr.user]; dp != nil {
				dp.kp = nil
			}
			added = append(added, pr.user)
		}
	}
	d.props = nil
	d.epoch++
	tid := d.nextTIDLocked()
	for _, u := range old {
		if dp := d.peers[u]; dp != nil && !slices.Contains(removed, u) {
			_ = dp.p.SendBinary(29, davetest.Binary(0, 29, tid, d.tampered(29, u, commit))[3:])
		}
	}
	if welcome != nil {
		d.lastWelcome = welcome
	}
	for _, u := range added {
		if dp := d.peers[u]; dp != nil {
			_ = dp.p.SendBinary(30, davetest.Binary(0, 30, tid, d.tampered(30, u, welcome))[3:])
			d.stats.Welcomes++
		}
	}
	d.log("commit from %s accepted: epoch %d, transition %d, added %v removed %v", user, d.epoch, tid, added, removed)
	d.startTransitionLocked(tid, d.version, d.members())
	// Members whose key package missed this commit are proposed anew.
	for _, u := range d.pendingPeers() {
		if !d.inGroup[u] {
			d.proposeAddLocked(u, d.members())
		}
	}
}

func (d *DAVEServer) tampered(op int, user string, body []byte) []byte {
	if d.tamper == nil {
		return body
	}
	return d.tamper(op, user, slices.Clone(body))
}

func (d *DAVEServer) nextTIDLocked() uint16 {
	d.lastTID++
	if d.lastTID == 0 {
		d.lastTID = 1
	}
	return d.lastTID
}

// startTransitionLocked waits for members' op 23 (or the timeout) before
// sending op 22; a transition still pending is executed first.
func (d *DAVEServer) startTransitionLocked(tid uint16, version int, members []string) {
	if d.trans != nil {
		d.executeLocked(false)
	}
	t := &transition{id: tid, version: version, members: members, waiting: map[string]bool{}}
	for _, u := range members {
		t.waiting[u] = true
	}
	d.trans = t
	t.timer = time.AfterFunc(d.timeout, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.trans == t && !d.closed {
			d.stats.TimedOut++
			d.executeLocked(true)
		}
	})
}

func (d *DAVEServer) readyLocked(user string, tid uint16) {
	if d.trans == nil || d.trans.id != tid {
		return // not a transition in progress: ignored
	}
	delete(d.trans.waiting, user)
	if len(d.trans.waiting) == 0 {
		d.executeLocked(false)
	}
}

func (d *DAVEServer) executeLocked(timedOut bool) {
	t := d.trans
	d.trans = nil
	if t.timer != nil && !timedOut {
		t.timer.Stop()
	}
	d.stats.Executed++
	d.log("execute transition %d (timed out %v) for %v", t.id, timedOut, t.members)
	for _, u := range t.members {
		if dp := d.peers[u]; dp != nil {
			_ = dp.p.SendJSON(22, map[string]int{"transition_id": int(t.id)})
		}
	}
}

// downgradeLocked moves the call to protocol version 0 for a client
// without DAVE: op 21 to the DAVE members, op 22 once they are ready.
func (d *DAVEServer) downgradeLocked() {
	d.stats.Downgrades++
	var members []string
	for u, dp := range d.peers {
		if dp.max >= 1 {
			members = append(members, u)
		}
	}
	slices.Sort(members)
	d.resetGroupLocked()
	d.version = 0
	for _, dp := range d.peers {
		dp.kp = nil
	}
	tid := d.nextTIDLocked()
	for _, u := range members {
		_ = d.peers[u].p.SendJSON(21, map[string]int{"transition_id": int(tid), "protocol_version": 0})
	}
	d.startTransitionLocked(tid, 0, members)
}

// upgradeLocked returns the call to DAVE once every client supports it:
// op 24 epoch 1 makes each create a new group, as on a first join.
func (d *DAVEServer) upgradeLocked() {
	d.stats.Upgrades++
	if d.trans != nil {
		d.executeLocked(false)
	}
	d.resetGroupLocked()
	d.version = 1
	if len(d.peers) == 1 {
		for _, dp := range d.peers {
			d.soleMemberLocked(dp)
		}
		return
	}
	for _, u := range d.sortedPeers() {
		dp := d.peers[u]
		_ = dp.p.SendJSON(24, map[string]int{"epoch": 1, "protocol_version": 1})
		_ = dp.p.SendBinary(25, d.pkg)
	}
}

func (d *DAVEServer) allSupportDAVELocked() bool {
	for _, dp := range d.peers {
		if dp.max < 1 {
			return false
		}
	}
	return true
}

func (d *DAVEServer) idOf(user string) uint64 {
	id, _ := strconv.ParseUint(user, 10, 64)
	return id
}

func (d *DAVEServer) members() []string {
	var out []string
	for u := range d.inGroup {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// pendingPeers are connected DAVE clients with a key package outstanding.
func (d *DAVEServer) pendingPeers() []string {
	var out []string
	for _, u := range d.sortedPeers() {
		if d.peers[u].kp != nil {
			out = append(out, u)
		}
	}
	return out
}

func (d *DAVEServer) sortedPeers() []string {
	out := make([]string, 0, len(d.peers))
	for u := range d.peers {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func (d *DAVEServer) others(users []string, self string) []string {
	return slices.DeleteFunc(slices.Clone(users), func(u string) bool { return u == self })
}

// commitInfo is what the gateway reads of a commit's PublicMessage.
type commitInfo struct {
	groupID []byte
	epoch   uint64
	refs    [][]byte
}

var errMalformed = errors.New("malformed")

// parseCommit reads an MLSMessage PublicMessage commit from a member (RFC
// 9420 §6) up to its proposal list; every proposal must be a reference.
func parseCommit(b []byte) (commitInfo, error) {
	var c commitInfo
	if len(b) < 4 || binary.BigEndian.Uint16(b) != 1 || binary.BigEndian.Uint16(b[2:]) != 1 {
		return c, fmt.Errorf("%w: not an MLS 1.0 public message", errMalformed)
	}
	b = b[4:]
	var err error
	if c.groupID, b, err = readVec(b); err != nil {
		return c, err
	}
	if len(b) < 8+1+4 {
		return c, errMalformed
	}
	c.epoch = binary.BigEndian.Uint64(b)
	if b[8] != 1 { // sender: member
		return c, fmt.Errorf("%w: commit not from a member", errMalformed)
	}
	b = b[13:]
	if _, b, err = readVec(b); err != nil { // authenticated_data
		return c, err
	}
	if len(b) < 1 || b[0] != 3 {
		return c, fmt.Errorf("%w: not a commit", errMalformed)
	}
	props, _, err := readVec(b[1:])
	if err != nil {
		return c, err
	}
	for len(props) > 0 {
		if props[0] != 2 {
			return c, fmt.Errorf("%w: an inline proposal", errMalformed)
		}
		var ref []byte
		if ref, props, err = readVec(props[1:]); err != nil {
			return c, err
		}
		c.refs = append(c.refs, ref)
	}
	return c, nil
}

// keyPackageUser returns the user id a key package's basic credential
// names (a bare KeyPackage, or one in an MLSMessage).
func keyPackageUser(kp []byte) (uint64, error) {
	if len(kp) >= 4 && binary.BigEndian.Uint16(kp) == 1 && binary.BigEndian.Uint16(kp[2:]) == 5 {
		kp = kp[4:]
	}
	if len(kp) < 4 || binary.BigEndian.Uint16(kp) != 1 || binary.BigEndian.Uint16(kp[2:]) != 2 {
		return 0, fmt.Errorf("%w: not an MLS 1.0 ciphersuite 2 key package", errMalformed)
	}
	b := kp[4:]
	var err error
	for range 3 { // init_key, encryption_key, signature_key
		if _, b, err = readVec(b); err != nil {
			return 0, err
		}
	}
	if len(b) < 2 || binary.BigEndian.Uint16(b) != 1 {
		return 0, fmt.Errorf("%w: not a basic credential", errMalformed)
	}
	id, _, err := readVec(b[2:])
	if err != nil || len(id) != 8 {
		return 0, fmt.Errorf("%w: credential identity", errMalformed)
	}
	return binary.BigEndian.Uint64(id), nil
}

// readVec reads an MLS variable-size vector (RFC 9420 §2.1.2).
func readVec(b []byte) (v, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, errMalformed
	}
	var n, hdr int
	switch b[0] >> 6 {
	case 0:
		n, hdr = int(b[0]), 1
	case 1:
		if len(b) < 2 {
			return nil, nil, errMalformed
		}
		n, hdr = int(binary.BigEndian.Uint16(b)&0x3FFF), 2
	case 2:
		if len(b) < 4 {
			return nil, nil, errMalformed
		}
		n, hdr = int(binary.BigEndian.Uint32(b)&0x3FFFFFFF), 4
	default:
		return nil, nil, errMalformed
	}
	if n > len(b)-hdr {
		return nil, nil, errMalformed
	}
	return b[hdr : hdr+n], b[hdr+n:], nil
}
