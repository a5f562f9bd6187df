package media_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/clankie/clankie/internal/voicetest"
	"github.com/clankie/clankie/voice/dave"
	"github.com/clankie/clankie/voice/davemedia"
	"github.com/clankie/clankie/voice/media"
)

// testChannel is the voice channel every client in these tests joins: its
// id is the MLS group id.
const testChannel = "700000000000000001"

func daveServer(t *testing.T) (*voicetest.Server, *voicetest.DAVEServer) {
	t.Helper()
	role, err := voicetest.NewDAVEServer(voicetest.DAVEServerOptions{ChannelID: 700000000000000001, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	return voicetest.New(t, voicetest.Options{DAVE: role, RequireDAVE: true}), role
}

// consent is a consent set the test changes while the call runs.
type consent struct {
	mu  sync.RWMutex
	yes map[string]bool
}

func newConsent(users ...string) *consent {
	c := &consent{yes: map[string]bool{}}
	for _, u := range users {
		c.yes[u] = true
	}
	return c
}

func (c *consent) allow(u string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.yes[u]
}

// daveClient is our client: media.Conn with a DAVE session through davemedia.
type daveClient struct {
	*media.Conn
	dave *davemedia.Session
}

func dialDAVE(t *testing.T, srv *voicetest.Server, user string, allow func(string) bool) daveClient {
	t.Helper()
	return dialDAVEFor(t, t, srv, user, allow)
}

// dialDAVEFor dials in t but leaves the connection open until owner (a
// parent test) ends, for a client that outlives the subtest dialing it.
func dialDAVEFor(t *testing.T, owner testing.TB, srv *voicetest.Server, user string, allow func(string) bool) daveClient {
	t.Helper()
	d, err := davemedia.New(davemedia.Config{UserID: user, ChannelID: testChannel, Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(srv, user, allow)
	cfg.DAVE = d
	c, err := media.Dial(ctxT(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatalf("dial %s: %v", user, err)
	}
	owner.Cleanup(func() { _ = c.Close(); d.Close() })
	if !srv.Wait(ctxT(t, 5*time.Second), func() bool { return srv.Connected(user) }) {
		t.Fatalf("%s never connected", user)
	}
	return daveClient{Conn: c, dave: d}
}

func uid(t *testing.T, s string) dave.UserID {
	t.Helper()
	u, err := dave.ParseUserID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// settle waits until the DAVE role has exactly users in an established
// group with nothing in flight, and each of ours has processed the commit
// and executed the transition (so sends under the new epoch's key).
func settle(t *testing.T, role *voicetest.DAVEServer, users []string, ours ...daveClient) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Logf("role: settled %v epoch %d version %d %+v", role.Settled(users...), role.Epoch(), role.Version(), role.Stats())
			for _, c := range ours {
				s := c.dave.DAVE()
				t.Logf("client: epoch %d pending %v ready %v members %v", s.Epoch(), s.TransitionPending(), s.Ready(), s.Members())
			}
		}
	}()
	waitFor(t, "DAVE group of "+joinIDs(users), func() bool {
		if !role.Settled(users...) {
			return false
		}
		for _, c := range ours {
			if s := c.dave.DAVE(); s.Epoch() != role.Epoch() || s.TransitionPending() || !s.Ready() {
				return false
			}
		}
		return true
	})
}

func joinIDs(ids []string) string {
	var b bytes.Buffer
	for i, id := range ids {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(id)
	}
	return b.String()
}

// TestDAVEBetweenOurClients runs two and then three of our clients through
// the fake server's DAVE role: frames cross end-to-end encrypted, every
// relayed payload is a DAVE frame, and a member joining and leaving
// changes the epoch without stopping the frames.
func TestDAVEBetweenOurClients(t *testing.T) {
	srv, role := daveServer(t)
	a := dialDAVE(t, srv, "100", allowAll)
	b := dialDAVE(t, srv, "200", allowAll)
	settle(t, role, []string{"100", "200"}, a, b)
	ctx := ctxT(t, 20*time.Second)
	send := func(c daveClient, from byte, n int) {
		for i := range n {
			if err := c.Send(ctx, frame(from, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(a, 'a', 10)
	for _, f := range collect(t, b.Conn, 8, 5*time.Second) {
		if !bytes.HasPrefix(f.Opus, []byte("opus:a:")) {
			t.Fatalf("B got %q", f.Opus)
		}
	}
	if st := b.dave.DAVE().Stats(uid(t, "100")); st.Successes < 8 {
		t.Fatalf("B's DAVE stats for A: %+v", st)
	}
	e1 := role.Epoch()

	c := dialDAVE(t, srv, "300", allowAll)
	settle(t, role, []string{"100", "200", "300"}, a, b, c)
	if role.Epoch() <= e1 {
		t.Fatalf("epoch %d after a join, was %d", role.Epoch(), e1)
	}
	send(a, 'a', 10)
	collect(t, b.Conn, 8, 5*time.Second)
	collect(t, c.Conn, 8, 5*time.Second)

	_ = b.Close()
	settle(t, role, []string{"100", "300"}, a, c)
	send(c, 'c', 10)
	for _, f := range collect(t, a.Conn, 8, 5*time.Second) {
		if !bytes.HasPrefix(f.Opus, []byte("opus:c:")) {
			t.Fatalf("A got %q", f.Opus)
		}
	}
	p := srv.Payloads()
	if p.Clear != 0 || p.DAVE < 24 {
		t.Fatalf("relay carried %+v", p)
	}
	t.Logf("relay %+v; DAVE role %+v", p, role.Stats())
}

// TestDAVEDowngradeAndUpgrade: a client without DAVE joining an end-to-end
// encrypted call downgrades it to protocol version 0 (op 21/23/22), where
// everyone hears everyone unencrypted; when it leaves, op 24 epoch 1 builds
// a new group and the call is end-to-end encrypted again.
func TestDAVEDowngradeAndUpgrade(t *testing.T) {
	role, err := voicetest.NewDAVEServer(voicetest.DAVEServerOptions{ChannelID: 700000000000000001, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	srv := voicetest.New(t, voicetest.Options{DAVE: role})
	a := dialDAVE(t, srv, "100", allowAll)
	b := dialDAVE(t, srv, "200", allowAll)
	settle(t, role, []string{"100", "200"}, a, b)
	ctx := ctxT(t, 20*time.Second)

	plain := dial(t, srv, "900", allowAll) // media.Passthrough: max_dave_protocol_version 0
	waitFor(t, "downgrade executed", func() bool {
		return role.Version() == 0 && a.dave.DAVE().ProtocolVersion() == 0 && !a.dave.DAVE().TransitionPending() &&
			b.dave.DAVE().ProtocolVersion() == 0 && !b.dave.DAVE().TransitionPending()
	})
	before := srv.Payloads()
	for i := range 10 {
		if err := a.Send(ctx, frame('a', i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range collect(t, plain, 8, 5*time.Second) {
		if !bytes.HasPrefix(f.Opus, []byte("opus:a:")) {
			t.Fatalf("the client without DAVE got %q", f.Opus)
		}
	}
	collect(t, b.Conn, 8, 5*time.Second)
	if p := srv.Payloads(); p.Clear-before.Clear < 8 || p.DAVE != before.DAVE {
		t.Fatalf("downgraded call carried %+v (before %+v)", p, before)
	}

	_ = plain.Close()
	settle(t, role, []string{"100", "200"}, a, b)
	if a.dave.DAVE().ProtocolVersion() != 1 || b.dave.DAVE().ProtocolVersion() != 1 {
		t.Fatal("not upgraded")
	}
	before = srv.Payloads()
	for i := range 10 {
		if err := b.Send(ctx, frame('b', i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range collect(t, a.Conn, 8, 5*time.Second) {
		if !bytes.HasPrefix(f.Opus, []byte("opus:b:")) {
			t.Fatalf("A got %q", f.Opus)
		}
	}
	if p := srv.Payloads(); p.Clear != before.Clear || p.DAVE-before.DAVE < 8 {
		t.Fatalf("upgraded call carried %+v (before %+v)", p, before)
	}
	if st := role.Stats(); st.Downgrades != 1 || st.Upgrades != 1 {
		t.Fatalf("role %+v", st)
	}
}

// TestDAVEConcurrentJoins: two clients joining an established group at once
// (their add proposals may land in one epoch or two) still end in one group
// where everyone hears everyone.
func TestDAVEConcurrentJoins(t *testing.T) {
	srv, role := daveServer(t)
	a := dialDAVE(t, srv, "100", allowAll)
	b := dialDAVE(t, srv, "200", allowAll)
	settle(t, role, []string{"100", "200"}, a, b)
	ctx := ctxT(t, 20*time.Second)
	type result struct {
		c   *media.Conn
		err error
	}
	done := make(chan result, 2)
	for _, u := range []string{"300", "400"} {
		go func() {
			c, err := dialPlain(ctx, srv, u)
			done <- result{c, err}
		}()
	}
	var joined []*media.Conn
	for range 2 {
		r := <-done
		if r.err != nil {
			t.Fatal(r.err)
		}
		joined = append(joined, r.c)
		t.Cleanup(func() { _ = r.c.Close() })
	}
	settle(t, role, []string{"100", "200", "300", "400"}, a, b)
	for i := range 10 {
		if err := a.Send(ctx, frame('a', i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range append(joined, b.Conn) {
		collect(t, c, 8, 5*time.Second)
	}
	t.Logf("role %+v", role.Stats())
}
