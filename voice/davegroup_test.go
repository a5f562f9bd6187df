package voice

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/dave/davetest"
)

// groupDAVE plays the voice server's DAVE role for a call of two: it is
// the external sender (op 25), proposes adding each member to the other
// once both key packages are in (op 27), announces the first commit to
// its author and welcomes the other (ops 29, 30), and executes the
// transition once both are ready (op 22). That is Discord's sequence for
// a group founded by two members (protocol.md), enough to carry audio
// end-to-end encrypted both ways.
type groupDAVE struct {
	voicetest.NoDAVE
	es      *davetest.ExternalSender
	groupID []byte

	mu        sync.Mutex
	peers     map[string]voicetest.Peer
	kps       map[string][]byte
	proposed  bool
	committed bool
	ready     map[string]bool
	executed  bool
}

const daveTransition = 1

func newGroupDAVE(t *testing.T, channelID string) *groupDAVE {
	t.Helper()
	es, err := davetest.NewExternalSender()
	if err != nil {
		t.Fatal(err)
	}
	channel, err := strconv.ParseUint(channelID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return &groupDAVE{es: es, groupID: binary.BigEndian.AppendUint64(nil, channel),
		peers: map[string]voicetest.Peer{}, kps: map[string][]byte{}, ready: map[string]bool{}}
}

func (g *groupDAVE) ProtocolVersion() int { return 1 }

func (g *groupDAVE) Joined(p voicetest.Peer, _ int) {
	g.mu.Lock()
	g.peers[p.UserID()] = p
	g.mu.Unlock()
	_ = p.SendBinary(int(dave.OpMLSExternalSender), g.es.Package())
}

// send is one message to one peer, made under the lock and sent after it.
type send struct {
	p      voicetest.Peer
	op     int
	binary []byte
	json   any
}

func (g *groupDAVE) flush(out []send) {
	for _, s := range out {
		if s.json != nil {
			_ = s.p.SendJSON(s.op, s.json)
		} else {
			_ = s.p.SendBinary(s.op, s.binary)
		}
	}
}

func (g *groupDAVE) Binary(p voicetest.Peer, op int, payload []byte) {
	g.mu.Lock()
	var out []send
	switch dave.Opcode(op) {
	case dave.OpMLSKeyPackage:
		g.kps[p.UserID()] = append([]byte(nil), payload...)
		if len(g.kps) == 2 && !g.proposed {
			g.proposed = true
			for id, peer := range g.peers {
				for other, kp := range g.kps {
					if other == id {
						continue
					}
					msg, _, err := g.es.ProposeAdd(g.groupID, 0, kp)
					if err != nil {
						panic(err) // test-only role: a broken external sender is a broken test
					}
					out = append(out, send{p: peer, op: int(dave.OpMLSProposals), binary: davetest.ProposalsAppend(msg)})
				}
			}
		}
	case dave.OpMLSCommitWelcome:
		if g.committed {
			break // the first commit won
		}
		g.committed = true
		commit, welcome, err := dave.SplitCommitWelcome(payload)
		if err != nil {
			panic(err)
		}
		for id, peer := range g.peers {
			tid := binary.BigEndian.AppendUint16(nil, daveTransition)
			if id == p.UserID() {
				out = append(out, send{p: peer, op: int(dave.OpMLSAnnounceCommit), binary: append(tid, commit...)})
			} else {
				out = append(out, send{p: peer, op: int(dave.OpMLSWelcome), binary: append(tid, welcome...)})
			}
		}
	}
	g.mu.Unlock()
	g.flush(out)
}

func (g *groupDAVE) JSON(p voicetest.Peer, op int, _ json.RawMessage) {
	if dave.Opcode(op) != dave.OpReadyForTransition {
		return
	}
	g.mu.Lock()
	var out []send
	g.ready[p.UserID()] = true
	if len(g.ready) == 2 && !g.executed {
		g.executed = true
		for _, peer := range g.peers {
			out = append(out, send{p: peer, op: int(dave.OpExecuteTransition), json: map[string]int{"transition_id": daveTransition}})
		}
	}
	g.mu.Unlock()
	g.flush(out)
}

func (g *groupDAVE) established() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.executed
}
