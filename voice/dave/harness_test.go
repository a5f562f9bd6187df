package dave_test

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/nodetest"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// peer is one call member as the fake gateway below drives it: our Session
// or a @snazzah/davey session in Node.
type peer interface {
	ID() uint64
	// Join starts DAVE (protocol version 1) with the external sender and
	// returns the key package the member sends (op 26).
	Join(t *testing.T, externalSender []byte, others []uint64) []byte
	// Proposals delivers op 27 and returns the op 28 body, nil if none.
	Proposals(t *testing.T, body []byte, users []uint64) []byte
	// Commit and Welcome deliver ops 29 and 30; an error means the member
	// refused (and would send op 31).
	Commit(t *testing.T, transitionID uint16, commit []byte) error
	Welcome(t *testing.T, transitionID uint16, welcome []byte) error
	// Execute delivers op 22 for the transition.
	Execute(t *testing.T, transitionID uint16)
	// SoleMember delivers op 24 epoch 1 and op 21 transition 0.
	SoleMember(t *testing.T) []byte
	Encrypt(t *testing.T, frame []byte) []byte
	Decrypt(t *testing.T, from uint64, frame []byte) ([]byte, error)
	Epoch(t *testing.T) uint64
	Authenticator(t *testing.T) []byte
}

// goPeer is our implementation, fed through its public gateway entry points.
type goPeer struct {
	id  uint64
	s   *dave.Session
	seq uint16
	now time.Time
	mu  sync.Mutex
}

func newGoPeer(t *testing.T, id, channel uint64) *goPeer {
	t.Helper()
	return newGoPeerAllowing(t, id, channel, nil)
}

// newGoPeerAllowing is newGoPeer with Options.Allow: who we consent to hear.
func newGoPeerAllowing(t *testing.T, id, channel uint64, allow func(dave.UserID) bool) *goPeer {
	t.Helper()
	p := &goPeer{id: id, now: time.Unix(1_700_000_000, 0)}
	s, err := dave.New(dave.Options{UserID: dave.UserID(id), ChannelID: channel, Now: p.clock, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	p.s = s
	return p
}

func (p *goPeer) clock() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.now
}

func (p *goPeer) advance(d time.Duration) {
	p.mu.Lock()
	p.now = p.now.Add(d)
	p.mu.Unlock()
}

func (p *goPeer) ID() uint64 { return p.id }

func (p *goPeer) json(t *testing.T, op dave.Opcode, d string) []dave.Message {
	t.Helper()
	out, err := p.s.HandleJSON(op, json.RawMessage(d))
	if err != nil {
		t.Fatalf("go peer op %d: %v", op, err)
	}
	return out
}

func (p *goPeer) binary(op uint8, tid uint16, body []byte) ([]dave.Message, error) {
	p.seq++
	_, out, err := p.s.HandleBinary(davetest.Binary(p.seq, op, tid, body))
	return out, err
}

func userList(ids []uint64) string {
	b, _ := json.Marshal(struct {
		UserIDs []string `json:"user_ids"`
	}{strs(ids)})
	return string(b)
}

func strs(ids []uint64) []string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return s
}

func only(t *testing.T, out []dave.Message, op dave.Opcode) []byte {
	t.Helper()
	for _, m := range out {
		if m.Op == op {
			return m.Payload
		}
	}
	return nil
}

func (p *goPeer) Join(t *testing.T, es []byte, others []uint64) []byte {
	t.Helper()
	if len(others) > 0 {
		p.json(t, dave.OpClientsConnect, userList(others))
	}
	out := p.json(t, dave.OpSelectProtocolAck, `{"dave_protocol_version":1}`)
	kp := only(t, out, dave.OpMLSKeyPackage)
	if kp == nil {
		t.Fatalf("go peer sent no key package: %+v", out)
	}
	if _, err := p.binary(25, 0, es); err != nil {
		t.Fatalf("go peer external sender: %v", err)
	}
	return kp
}

func (p *goPeer) Proposals(t *testing.T, body []byte, users []uint64) []byte {
	t.Helper()
	p.json(t, dave.OpClientsConnect, userList(users))
	out, err := p.binary(27, 0, body)
	if err != nil {
		t.Fatalf("go peer proposals: %v", err)
	}
	return only(t, out, dave.OpMLSCommitWelcome)
}

func (p *goPeer) Commit(t *testing.T, tid uint16, commit []byte) error {
	out, err := p.binary(29, tid, commit)
	if err == nil && tid != 0 && only(t, out, dave.OpReadyForTransition) == nil && !hasOp(out, dave.OpReadyForTransition) {
		return errors.New("no ready-for-transition after a commit")
	}
	return err
}

func hasOp(out []dave.Message, op dave.Opcode) bool {
	for _, m := range out {
		if m.Op == op {
			return true
		}
	}
	return false
}

func (p *goPeer) Welcome(t *testing.T, tid uint16, welcome []byte) error {
	out, err := p.binary(30, tid, welcome)
	if err == nil && tid != 0 && !hasOp(out, dave.OpReadyForTransition) {
		return errors.New("no ready-for-transition after a welcome")
	}
	return err
}

func (p *goPeer) Execute(t *testing.T, tid uint16) {
	p.json(t, dave.OpExecuteTransition, fmt.Sprintf(`{"transition_id":%d}`, tid))
}

func (p *goPeer) SoleMember(t *testing.T) []byte {
	out := p.json(t, dave.OpPrepareEpoch, `{"epoch":1,"protocol_version":1}`)
	p.json(t, dave.OpPrepareTransition, `{"transition_id":0,"protocol_version":1}`)
	return only(t, out, dave.OpMLSKeyPackage)
}

func (p *goPeer) Encrypt(t *testing.T, frame []byte) []byte {
	t.Helper()
	out, err := p.s.Encrypt(nil, frame)
	if err != nil {
		t.Fatalf("go peer encrypt: %v", err)
	}
	return out
}

func (p *goPeer) Decrypt(t *testing.T, from uint64, frame []byte) ([]byte, error) {
	return p.s.Decrypt(dave.UserID(from), nil, frame)
}

func (p *goPeer) Epoch(t *testing.T) uint64         { return p.s.Epoch() }
func (p *goPeer) Authenticator(t *testing.T) []byte { return p.s.EpochAuthenticator() }

// daveyPeer is @snazzah/davey in Node, driven by internal/nodetest/dave-peer.js.
type daveyPeer struct {
	id      uint64
	channel uint64
	in      io.WriteCloser
	out     *bufio.Scanner
	next    int
}

func newDaveyPeer(t *testing.T, id, channel uint64) *daveyPeer {
	t.Helper()
	return startDaveyPeer(t, id, channel, nil)
}

// libfaketime is Debian's libfaketime (installed by .ci/run), which lets a
// test move davey's clocks, monotonic included.
const libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"

// newDaveyPeerWithClock starts davey under libfaketime and returns a
// function that sets its clocks' offset from now in seconds.
func newDaveyPeerWithClock(t *testing.T, id, channel uint64) (*daveyPeer, func(seconds int)) {
	t.Helper()
	if _, err := os.Stat(libfaketime); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("libfaketime missing (.ci/run installs it): %v", err)
		}
		t.Skip("missing dependency: libfaketime (scripts/test-deps, or apt-get install libfaketime)")
	}
	file := filepath.Join(t.TempDir(), "faketime")
	set := func(seconds int) {
		if err := os.WriteFile(file, []byte(fmt.Sprintf("%+d\n", seconds)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	set(0)
	env := []string{"LD_PRELOAD=" + libfaketime, "FAKETIME_TIMESTAMP_FILE=" + file, "FAKETIME_NO_CACHE=1"}
	return startDaveyPeer(t, id, channel, env), set
}

func startDaveyPeer(t *testing.T, id, channel uint64, env []string) *daveyPeer {
	t.Helper()
	cmd := nodetest.Command(t, "dave-peer.js")
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	p := &daveyPeer{id: id, channel: channel, in: in, out: sc}
	p.call(t, map[string]any{"cmd": "init", "userId": strconv.FormatUint(id, 10), "channelId": strconv.FormatUint(channel, 10)})
	return p
}

type daveyReply struct {
	OK            bool    `json:"ok"`
	Error         string  `json:"error"`
	Data          string  `json:"data"`
	Commit        string  `json:"commit"`
	Welcome       string  `json:"welcome"`
	Epoch         int64   `json:"epoch"`
	Ready         bool    `json:"ready"`
	MS            float64 `json:"ms"`
	Authenticator string  `json:"authenticator"`
}

func (p *daveyPeer) try(t *testing.T, req map[string]any) daveyReply {
	t.Helper()
	p.next++
	req["id"] = p.next
	b, _ := json.Marshal(req)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("davey peer write: %v", err)
	}
	if !p.out.Scan() {
		t.Fatalf("davey peer exited: %v", p.out.Err())
	}
	var r daveyReply
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		t.Fatalf("davey peer reply %q: %v", p.out.Text(), err)
	}
	return r
}

func (p *daveyPeer) call(t *testing.T, req map[string]any) daveyReply {
	t.Helper()
	r := p.try(t, req)
	if !r.OK {
		t.Fatalf("davey %v: %s", req["cmd"], r.Error)
	}
	return r
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (p *daveyPeer) ID() uint64 { return p.id }

func (p *daveyPeer) Join(t *testing.T, es []byte, _ []uint64) []byte {
	t.Helper()
	p.call(t, map[string]any{"cmd": "externalSender", "data": hex.EncodeToString(es)})
	return unhex(t, p.call(t, map[string]any{"cmd": "keyPackage"}).Data)
}

func (p *daveyPeer) Proposals(t *testing.T, body []byte, users []uint64) []byte {
	t.Helper()
	r := p.call(t, map[string]any{"cmd": "proposals", "op": int(body[0]), "data": hex.EncodeToString(body[1:]), "users": strs(users)})
	if r.Commit == "" {
		return nil
	}
	return append(unhex(t, r.Commit), unhex(t, r.Welcome)...)
}

func (p *daveyPeer) Commit(t *testing.T, _ uint16, commit []byte) error {
	if r := p.try(t, map[string]any{"cmd": "commit", "data": hex.EncodeToString(commit)}); !r.OK {
		return errors.New(r.Error)
	}
	return nil
}

func (p *daveyPeer) Welcome(t *testing.T, _ uint16, welcome []byte) error {
	if r := p.try(t, map[string]any{"cmd": "welcome", "data": hex.EncodeToString(welcome)}); !r.OK {
		return errors.New(r.Error)
	}
	return nil
}

func (p *daveyPeer) Execute(t *testing.T, _ uint16) {}

func (p *daveyPeer) SoleMember(t *testing.T) []byte {
	p.call(t, map[string]any{"cmd": "init", "userId": strconv.FormatUint(p.id, 10), "channelId": strconv.FormatUint(p.channel, 10)})
	return unhex(t, p.call(t, map[string]any{"cmd": "keyPackage"}).Data)
}

func (p *daveyPeer) Encrypt(t *testing.T, frame []byte) []byte {
	t.Helper()
	return unhex(t, p.call(t, map[string]any{"cmd": "encrypt", "data": hex.EncodeToString(frame)}).Data)
}

func (p *daveyPeer) Decrypt(t *testing.T, from uint64, frame []byte) ([]byte, error) {
	r := p.try(t, map[string]any{"cmd": "decrypt", "user": strconv.FormatUint(from, 10), "data": hex.EncodeToString(frame)})
	if !r.OK {
		return nil, errors.New(r.Error)
	}
	return unhex(t, r.Data), nil
}

func (p *daveyPeer) Epoch(t *testing.T) uint64 {
	e := p.call(t, map[string]any{"cmd": "state"}).Epoch
	if e < 0 {
		return 0
	}
	return uint64(e)
}

func (p *daveyPeer) Authenticator(t *testing.T) []byte {
	return unhex(t, p.call(t, map[string]any{"cmd": "state"}).Authenticator)
}

// gateway is a fake voice gateway's DAVE role: it relays key packages as
// external proposals, picks the winning commit, and sends commits, welcomes
// and transitions.
type gateway struct {
	es      *davetest.ExternalSender
	groupID []byte
	epoch   uint64
	members []peer // in the established group
	roster  davetest.Roster
	tid     uint16
}

func newGateway(t *testing.T, channel uint64) *gateway {
	t.Helper()
	es, err := davetest.NewExternalSender()
	if err != nil {
		t.Fatal(err)
	}
	gid := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		gid[i] = byte(channel >> (8 * (7 - i)))
	}
	return &gateway{es: es, groupID: gid}
}

func (g *gateway) ids(extra ...peer) []uint64 {
	var ids []uint64
	for _, m := range g.members {
		ids = append(ids, m.ID())
	}
	for _, m := range extra {
		ids = append(ids, m.ID())
	}
	return ids
}

// found creates the group: every founder joins, each receives add
// proposals for the others, all commit, and committer's commit wins.
func (g *gateway) found(t *testing.T, committer peer, founders ...peer) {
	t.Helper()
	kps := map[uint64][]byte{}
	all := make([]uint64, 0, len(founders))
	for _, f := range founders {
		all = append(all, f.ID())
	}
	for _, f := range founders {
		kps[f.ID()] = f.Join(t, g.es.Package(), others(all, f.ID()))
	}
	var winner []byte
	for _, f := range founders {
		var msgs [][]byte
		for _, o := range founders {
			if o.ID() == f.ID() {
				continue
			}
			msg, _, err := g.es.ProposeAdd(g.groupID, 0, kps[o.ID()])
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, msg)
		}
		out := f.Proposals(t, davetest.ProposalsAppend(msgs...), all)
		if out == nil {
			t.Fatalf("founder %d sent no commit", f.ID())
		}
		if f.ID() == committer.ID() {
			winner = out
		}
	}
	g.roster.Reset()
	g.roster.Add(committer.ID())
	for _, f := range founders {
		if f.ID() != committer.ID() {
			g.roster.Add(f.ID())
		}
	}
	commit, welcome, err := dave.SplitCommitWelcome(winner)
	if err != nil {
		t.Fatalf("split winning commit: %v", err)
	}
	g.tid++
	if err := committer.Commit(t, g.tid, commit); err != nil {
		t.Fatalf("committer %d refused its own commit: %v", committer.ID(), err)
	}
	for _, f := range founders {
		if f.ID() != committer.ID() {
			if err := f.Welcome(t, g.tid, welcome); err != nil {
				t.Fatalf("founder %d refused the welcome: %v", f.ID(), err)
			}
		}
	}
	g.members = founders
	g.epoch = 1
	for _, f := range founders {
		f.Execute(t, g.tid)
	}
}

func others(all []uint64, self uint64) []uint64 {
	var o []uint64
	for _, id := range all {
		if id != self {
			o = append(o, id)
		}
	}
	return o
}

// add brings joiner into the established group with committer's commit.
func (g *gateway) add(t *testing.T, committer, joiner peer) {
	t.Helper()
	kp := joiner.Join(t, g.es.Package(), g.ids())
	msg, _, err := g.es.ProposeAdd(g.groupID, g.epoch, kp)
	if err != nil {
		t.Fatal(err)
	}
	g.roster.Add(joiner.ID())
	g.commitRound(t, committer, davetest.ProposalsAppend(msg), g.ids(joiner), []peer{joiner})
}

// remove takes leaver out of the group with committer's commit.
func (g *gateway) remove(t *testing.T, committer, leaver peer) {
	t.Helper()
	leaf, ok := g.roster.Leaf(leaver.ID())
	if !ok {
		t.Fatalf("%d not in roster", leaver.ID())
	}
	msg, _, err := g.es.ProposeRemove(g.groupID, g.epoch, leaf)
	if err != nil {
		t.Fatal(err)
	}
	g.roster.Remove(leaver.ID())
	var rest []peer
	for _, m := range g.members {
		if m.ID() != leaver.ID() {
			rest = append(rest, m)
		}
	}
	g.members = rest
	g.commitRound(t, committer, davetest.ProposalsAppend(msg), g.ids(), nil)
}

// commitRound sends proposals to every member, uses committer's commit,
// announces it to the members and welcomes the joiners, then executes.
func (g *gateway) commitRound(t *testing.T, committer peer, proposals []byte, users []uint64, joiners []peer) {
	t.Helper()
	var winner []byte
	for _, m := range g.members {
		out := m.Proposals(t, proposals, users)
		if out == nil {
			t.Fatalf("member %d sent no commit", m.ID())
		}
		if m.ID() == committer.ID() {
			winner = out
		}
	}
	commit, welcome, err := dave.SplitCommitWelcome(winner)
	if err != nil {
		t.Fatalf("split winning commit: %v", err)
	}
	if len(joiners) > 0 && welcome == nil {
		t.Fatal("commit adding members came without a welcome")
	}
	g.tid++
	for _, m := range g.members {
		if err := m.Commit(t, g.tid, commit); err != nil {
			t.Fatalf("member %d refused commit: %v", m.ID(), err)
		}
	}
	for _, j := range joiners {
		if err := j.Welcome(t, g.tid, welcome); err != nil {
			t.Fatalf("joiner %d refused welcome: %v", j.ID(), err)
		}
	}
	g.members = append(g.members, joiners...)
	g.epoch++
	for _, m := range g.members {
		m.Execute(t, g.tid)
	}
}
