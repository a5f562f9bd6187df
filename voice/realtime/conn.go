package realtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/gorilla/websocket"
	"go.uber.org/zap"
)

// run is the session's background loop: connect, serve the connection until
// it ends, pause, connect again, until the session's context ends or the
// endpoint refuses the session for good. It is the only goroutine that
// dials or writes data frames, which gives gorilla its single writer and
// keeps session.update ahead of any briefing or audio on every connection
// without a write lock.
func (s *Session) run() {
	defer close(s.done)
	defer s.cancel()
	defer s.setPhase(Closed, 0)
	failures := 0
	for {
		conn, resp, err := s.dial()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if r := handshakeRefusal(resp, err); r != nil {
				s.refuse(*r)
				return
			}
			failures++
			s.noteDialFailure(failures, resp, err)
			s.setPhase(Reconnecting, failures+1)
			if !s.sleep(s.backoff()) {
				return
			}
			continue
		}
		started := time.Now()
		out := s.serve(conn, failures)
		if s.ctx.Err() != nil {
			return
		}
		if out.refusal != nil {
			s.refuse(*out.refusal)
			return
		}
		if out.replaced {
			failures = 0 // a fresh conversation, at once: nothing failed
			s.pauses.Reset()
			continue
		}
		// A connection that was ready for a while resets the backoff. One
		// the server drops at once does not, so a server that accepts and
		// then hangs up is not hammered at the minimum pause.
		if out.ready && time.Since(started) >= s.cfg.MaxBackoff {
			failures = 0
			s.pauses.Reset()
		}
		failures++
		s.setPhase(Reconnecting, failures+1)
		if !s.sleep(s.backoff()) {
			return
		}
	}
}

// refusal is a permanent failure: why, and the code to log and show.
type refusal struct {
	reason Reason
	code   string
}

// refuse ends the session for good and logs one line with the code.
func (s *Session) refuse(r refusal) {
	s.mu.Lock()
	s.state = State{Phase: Refused, Reason: r.reason, Code: r.code}
	s.ready.Store(false)
	s.mu.Unlock()
	s.log.Error("realtime endpoint refused the session; not reconnecting",
		zap.String("host", s.host), zap.String("code", r.code), zap.String("reason", r.reason.String()))
}

// String names a reason for logs.
func (r Reason) String() string {
	switch r {
	case ReasonKey:
		return "key"
	case ReasonModel:
		return "model"
	case ReasonNotFound:
		return "not_found"
	case ReasonShape:
		return "request_shape"
	case ReasonNotRealtime:
		return "not_realtime"
	case ReasonQuota:
		return "quota"
	}
	return "unknown"
}

// handshakeRefusal classifies a failed handshake: nil when retrying can
// help (network errors, 5xx, 429 rate limits), else why not. Only the
// error code of a JSON body is read, never its message.
func handshakeRefusal(resp *http.Response, err error) *refusal {
	if resp == nil {
		return nil // no HTTP answer: the network, retry
	}
	code := bodyCode(resp)
	switch st := resp.StatusCode; {
	case st == http.StatusUnauthorized || st == http.StatusForbidden:
		return &refusal{ReasonKey, orStatus(code, st)}
	case st == http.StatusNotFound:
		return &refusal{ReasonNotFound, orStatus(code, st)}
	case st == http.StatusTooManyRequests:
		if code == "insufficient_quota" {
			return &refusal{ReasonQuota, code}
		}
		return nil
	case st >= 500:
		return nil
	case st >= 400:
		if r := codeRefusal(code); r != nil {
			return r
		}
		return &refusal{ReasonShape, orStatus(code, st)}
	default:
		// 1xx other than 101, 2xx, 3xx: something answered, but not as a
		// WebSocket.
		return &refusal{ReasonNotRealtime, fmt.Sprintf("http_%d", st)}
	}
}

func orStatus(code string, status int) string {
	if code != "" && code != "none" && code != "unrecognized" {
		return code
	}
	return fmt.Sprintf("http_%d", status)
}

// bodyCode reads error.code from a JSON error body (as OpenAI and Azure
// send), or "" when there is none.
func bodyCode(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var body struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) != nil {
		return ""
	}
	if c, ok := body.Error.Code.(string); ok {
		return safeToken(strings.ToLower(c))
	}
	return ""
}

// permanentCodes are the error codes retrying cannot fix.
var permanentCodes = map[string]Reason{
	"invalid_api_key":            ReasonKey,
	"model_not_found":            ReasonModel,
	"invalid_model":              ReasonModel,
	"beta_api_shape_disabled":    ReasonShape,
	"unknown_parameter":          ReasonShape,
	"missing_required_parameter": ReasonShape,
	"invalid_type":               ReasonShape,
	"insufficient_quota":         ReasonQuota,
}

// transientCodes are error codes that say "not now" rather than "never",
// whatever the error's type: they never refuse a session.
var transientCodes = map[string]bool{
	"rate_limit_exceeded":  true,
	"server_error":         true,
	"server_is_overloaded": true,
	"session_expired":      true,
}

func codeRefusal(code string) *refusal {
	if r, ok := permanentCodes[code]; ok {
		return &refusal{r, code}
	}
	return nil
}

// dial makes one connection attempt, bounded by the session's context so
// Close interrupts it. gorilla's DialContext honours the context only while
// connecting TCP; during the TLS and HTTP handshake it waits for the
// handshake timeout. So the attempt's dial functions are wrapped to remember
// the raw connection, and the session's end closes it, which makes Close
// prompt against a server that accepts and then stalls.
func (s *Session) dial() (*websocket.Conn, *http.Response, error) {
	h := http.Header{}
	if s.cfg.APIKey != "" {
		switch s.cfg.auth() {
		case AuthAPIKey:
			h.Set("api-key", s.cfg.APIKey)
		default:
			h.Set("Authorization", "Bearer "+s.cfg.APIKey)
		}
	}

	var (
		mu  sync.Mutex
		raw []net.Conn
	)
	remember := func(c net.Conn, err error) (net.Conn, error) {
		if c != nil {
			mu.Lock()
			raw = append(raw, c)
			mu.Unlock()
		}
		return c, err
	}
	d := *s.dialer // a copy: the caller's dialer is never modified
	base := d.NetDialContext
	if base == nil {
		if nd := d.NetDial; nd != nil {
			base = func(_ context.Context, network, addr string) (net.Conn, error) { return nd(network, addr) }
		} else {
			base = (&net.Dialer{}).DialContext
		}
	}
	d.NetDial = nil
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return remember(base(ctx, network, addr))
	}
	if tlsDial := d.NetDialTLSContext; tlsDial != nil {
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return remember(tlsDial(ctx, network, addr))
		}
	}

	aborted := make(chan struct{})
	stop := context.AfterFunc(s.ctx, func() {
		defer close(aborted)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range raw {
			_ = c.Close()
		}
	})
	conn, resp, err := d.DialContext(s.ctx, s.dialURL, h)
	if !stop() {
		// The session ended during the attempt; whatever it produced is
		// closed or about to be.
		<-aborted
		if conn != nil {
			_ = conn.Close()
		}
		return nil, nil, s.ctx.Err()
	}
	return conn, resp, err
}

// newBackoff is the pause policy between connection attempts, bounded by
// [lo, hi]: the pause after n consecutive failures is drawn from
// [ceiling/2, ceiling], where the ceiling doubles from 2×lo up to hi, so it
// is jittered at every step, the first and the capped ones included:
// bridges that lost the endpoint together do not all retry in step.
//
// It is cenkalti/backoff's exponential policy (the one the memory client
// and the voice reconnects use): a factor of 1/3 draws from [2c/3, 4c/3]
// around the interval c, which is the upper half of [0, 4c/3]; so c starts
// at 1.5×lo and stops at 0.75×hi. When hi < 2×lo the ceiling is hi at
// once and every pause is drawn from [lo, hi] itself.
func newBackoff(lo, hi time.Duration) *backoff.ExponentialBackOff {
	if hi < 2*lo {
		mid := (lo + hi) / 2
		return &backoff.ExponentialBackOff{InitialInterval: mid, MaxInterval: mid, Multiplier: 2,
			RandomizationFactor: float64(hi-lo) / float64(hi+lo)}
	}
	return &backoff.ExponentialBackOff{InitialInterval: lo * 3 / 2, MaxInterval: hi * 3 / 4, Multiplier: 2,
		RandomizationFactor: 1.0 / 3}
}

// backoff is the next pause (run's alone: the policy is not safe for
// concurrent use), held within [MinBackoff, MaxBackoff] against the
// library's float arithmetic straying by a nanosecond.
func (s *Session) backoff() time.Duration {
	return min(max(s.pauses.NextBackOff(), s.cfg.MinBackoff), s.cfg.MaxBackoff)
}

// sleep pauses for d unless the session ends first; it reports whether the
// session is still running.
func (s *Session) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// reader delivers a connection's server events in order on events, which
// it closes when the connection fails, after setting err.
type reader struct {
	events chan serverEvent
	err    error
	// muted: the connection's conversation was forgotten; its audio is
	// no longer handed to the Listener.
	muted atomic.Bool
}

// outcome is how a connection ended.
type outcome struct {
	ready    bool     // it became ready at some point
	refusal  *refusal // non-nil: permanently refused
	replaced bool     // closed by Forget; dial a fresh one at once
}

// serve runs one connection from just after the handshake until it is gone,
// and returns only when every goroutine it started has ended.
func (s *Session) serve(conn *websocket.Conn, failures int) outcome {
	conn.SetReadLimit(maxEventBytes)
	serial := s.conn.Add(1)
	s.mu.Lock()
	s.connGen, s.ackedGen = 0, 0
	s.mu.Unlock()
	for len(s.audio) > 0 { // audio from before the outage is stale
		<-s.audio
	}
	for len(s.ctrl) > 0 { // and so are cancels and truncates of its items
		<-s.ctrl
	}
	for len(s.utter) > 0 { // and utterances: audio is paused, not buffered
		<-s.utter
		s.mu.Lock()
		s.stats.UtterancesDropped++
		s.mu.Unlock()
	}

	rd := &reader{events: make(chan serverEvent, 64)}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		s.readLoop(conn, rd)
	}()

	// Backstop for Close: if a write is stuck on a server that stopped
	// reading, drop the socket rather than wait out the write timeout.
	connDone, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-connDone:
		case <-s.ctx.Done():
			t := time.NewTimer(2 * closeGrace)
			defer t.Stop()
			select {
			case <-connDone:
			case <-t.C:
				_ = conn.Close()
			}
		}
	}()

	c := &converse{s: s, conn: conn, rd: rd, items: map[string]uint64{}, epoch: s.epoch.Load(), serial: serial}
	err := c.run()
	replaced := errors.Is(err, errReplaced)
	_ = conn.Close()
	// A write can fail because the server already refused and closed (it
	// sends the error event first): the events read meanwhile still say why.
	for ev := range rd.events {
		if c.refused == nil && ev.Type == "error" {
			c.handle(ev)
		}
	}
	<-readDone
	close(connDone)
	<-watchDone

	switch {
	case replaced:
		s.setPhase(Connecting, 0)
	case c.refused == nil:
		s.setPhase(Reconnecting, failures+2) // the run loop's next attempt
	}
	s.ready.Store(false)
	s.mu.Lock()
	s.connGen, s.ackedGen = 0, 0
	s.mu.Unlock()
	if l, ok := s.cfg.Listener.(ConnectionListener); ok && c.ready {
		l.ModelLost() // the read loop has ended: no delta of this connection follows
	}
	out := outcome{ready: c.ready, refusal: c.refused, replaced: replaced && c.refused == nil}
	if out.replaced && s.ctx.Err() == nil {
		s.mu.Lock()
		s.stats.ConversationsReplaced++
		s.replaced = true
		s.mu.Unlock()
		s.log.Info("realtime conversation forgotten; connecting a fresh one", zap.String("host", s.host))
		return out
	}
	if s.ctx.Err() != nil {
		s.log.Info("realtime session closed", zap.String("host", s.host), zap.Int("connects", s.Stats().Connects))
		return out
	}
	if out.refusal != nil {
		return out
	}
	if err == nil {
		err = rd.err
	}
	fields := append([]zap.Field{zap.String("host", s.host), zap.Bool("was_ready", c.ready)}, s.describe(err)...)
	// One warning per outage: losing a ready connection, or the first
	// failure ever; the retries that follow are debug lines.
	if failures == 0 || c.ready {
		s.log.Warn("realtime connection lost; reconnecting", fields...)
	} else {
		s.log.Debug("realtime connection lost; reconnecting", fields...)
	}
	return out
}

// converse is one connection's conversation.
type converse struct {
	s     *Session
	conn  *websocket.Conn
	rd    *reader
	ready bool
	// created: the server's first event was session.created, so it speaks
	// the protocol.
	created bool
	refused *refusal
	// items maps the ids of briefing items written here to their gen.
	items map[string]uint64
	// itemEvents maps the event ids of those writes to their gen, to tell
	// an error about a briefing from others.
	itemEvents map[string]uint64
	// epoch is the Forget epoch this connection's content belongs to, and
	// wrote whether it carried any (a briefing, audio, an utterance or a
	// function output).
	epoch uint64
	wrote bool
	// serial is this connection's number (Session.conn).
	serial uint64
	// commits are the utterances whose commit was written here and whose
	// input_audio_buffer.committed has not come yet, oldest first: the
	// server commits in order, so the next committed event is the first's.
	commits []pendingCommit
	// transcripts are the committed utterances whose transcript is
	// awaited, by item id, oldest first (at most maxPendingTranscripts).
	transcripts []awaited
	// calls are the function call ids handed on (at most maxSeenCalls).
	calls []string
}

// pendingCommit is an utterance whose commit is on its way.
type pendingCommit struct {
	seq     uint64
	eventID string // the commit's, to match an error about it
}

// awaited is a committed utterance waiting for its transcript.
type awaited struct {
	itemID string
	seq    uint64
}

// run seeds a fresh connection (session.update; once the server answers
// session.updated, the latest briefing) and then writes briefings, audio,
// control events and pings as they come due. It returns when the
// connection fails (with why), is refused (c.refused set), or the session
// closes (nil, after a normal-closure handshake).
func (c *converse) run() error {
	s := c.s
	msg, err := sessionUpdate(s.cfg)
	if err != nil {
		return err
	}
	if err := c.write(msg); err != nil {
		return err
	}
	c.itemEvents = map[string]uint64{}
	readyBy := time.NewTimer(s.cfg.ReadyTimeout)
	defer readyBy.Stop()

	var ping <-chan time.Time
	if s.cfg.PingInterval > 0 {
		t := time.NewTicker(s.cfg.PingInterval)
		defer t.Stop()
		ping = t.C
	}
	for {
		// Forget first: nothing more goes into a conversation that holds
		// what must be forgotten.
		if e := s.epoch.Load(); e != c.epoch {
			if c.wrote {
				return c.replace()
			}
			c.epoch = e // nothing of the old epoch was sent here
			if c.ready {
				s.setPhase(Ready, 0)
			}
		}
		if c.ready {
			if err := c.flush(); err != nil {
				return err
			}
		}
		var audio <-chan chunk
		var ctrl <-chan control
		var utter <-chan utterance
		if c.ready {
			audio, ctrl, utter = s.audio, s.ctrl, s.utter
		}
		select {
		case ev, ok := <-c.rd.events:
			if !ok {
				return c.rd.err
			}
			stop, err := c.handleSafely(ev)
			if err != nil {
				return err
			}
			if stop {
				return nil
			}
		case <-s.kick:
		case ch := <-audio:
			if ch.epoch != c.epoch || s.epoch.Load() != c.epoch {
				// Appended before a Forget: it may hold a voice that must
				// not reach the model any more.
				s.mu.Lock()
				s.stats.AudioChunksDropped++
				s.mu.Unlock()
				continue
			}
			msg, err := audioAppend(ch.pcm)
			if err != nil {
				return err
			}
			c.wrote = true
			if err := c.write(msg); err != nil {
				return err
			}
			s.mu.Lock()
			s.stats.AudioBytesSent += int64(len(ch.pcm))
			s.mu.Unlock()
		case u := <-utter:
			if err := c.utter(u); err != nil {
				return err
			}
		case m := <-ctrl:
			if err := c.control(m); err != nil {
				return err
			}
		case <-readyBy.C:
			if !c.ready {
				return errReadyTimeout
			}
		case <-ping:
			if err := c.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeTimeout)); err != nil {
				return err
			}
		case <-s.ctx.Done():
			c.closeHandshake()
			return nil
		}
	}
}

// utter writes one utterance whole (label item, audio, commit), with
// nothing between: this goroutine is the connection's only writer. One
// meant for another connection, or from before a Forget, is dropped.
func (c *converse) utter(u utterance) error {
	s := c.s
	if u.conn != c.serial || u.epoch != c.epoch || s.epoch.Load() != c.epoch {
		s.mu.Lock()
		s.stats.UtterancesDropped++
		s.mu.Unlock()
		return nil
	}
	sent := false
	defer func() {
		if !sent { // a write failed: the connection ends, the turn with it
			s.mu.Lock()
			s.stats.UtterancesDropped++
			s.mu.Unlock()
		}
	}()
	label, err := labelItem(newUtteranceID(), u.label)
	if err != nil {
		return err
	}
	c.wrote = true
	if err := c.write(label); err != nil {
		return err
	}
	for pcm := u.pcm; len(pcm) > 0; {
		n := min(len(pcm), appendBytes)
		msg, err := audioAppend(pcm[:n])
		if err != nil {
			return err
		}
		if err := c.write(msg); err != nil {
			return err
		}
		pcm = pcm[n:]
	}
	commit, eventID, err := audioCommit()
	if err != nil {
		return err
	}
	if err := c.write(commit); err != nil {
		return err
	}
	sent = true
	c.commits = append(c.commits, pendingCommit{seq: u.seq, eventID: eventID})
	s.mu.Lock()
	s.stats.UtterancesSent++
	s.stats.AudioBytesSent += int64(len(u.pcm))
	s.mu.Unlock()
	return nil
}

// control writes one control sequence, unless it was meant for another
// connection or an earlier epoch (its items are not this conversation's).
func (c *converse) control(m control) error {
	if m.conn != c.serial {
		return nil
	}
	if m.output {
		// A function output is content: it belongs to this conversation
		// and goes with it when it is forgotten.
		c.wrote = true
	}
	for _, f := range m.frames {
		if err := c.write(f); err != nil {
			return err
		}
	}
	if m.output {
		c.s.mu.Lock()
		c.s.stats.FunctionOutputs++
		c.s.mu.Unlock()
	}
	return nil
}

// turnListener is the Listener as a TurnListener, or nil when it is not
// one or this connection's conversation was forgotten.
func (c *converse) turnListener() TurnListener {
	tl, ok := c.s.cfg.Listener.(TurnListener)
	if !ok || c.rd.muted.Load() || c.s.epoch.Load() != c.epoch {
		return nil
	}
	return tl
}

// committed maps the server's item for the oldest pending commit to its
// utterance, when a transcript will come for it.
func (c *converse) committed(itemID string) {
	if len(c.commits) == 0 || itemID == "" {
		return // not an utterance's commit
	}
	seq := c.commits[0].seq
	c.commits = c.commits[1:]
	if c.s.cfg.TranscribeModel == "" {
		return
	}
	if len(c.transcripts) >= maxPendingTranscripts {
		c.transcripts = c.transcripts[1:] // given up: the oldest
	}
	c.transcripts = append(c.transcripts, awaited{itemID: itemID, seq: seq})
}

// transcribed hands an utterance's transcript (or its failure) on.
func (c *converse) transcribed(ev serverEvent, ok bool) {
	i := slices.IndexFunc(c.transcripts, func(a awaited) bool { return a.itemID == ev.ItemID })
	if i < 0 {
		return // not an utterance of this connection, or given up
	}
	seq := c.transcripts[i].seq
	c.transcripts = slices.Delete(c.transcripts, i, i+1)
	s := c.s
	s.mu.Lock()
	if ok {
		s.stats.TranscriptsOK++
	} else {
		s.stats.TranscriptsFailed++
	}
	s.mu.Unlock()
	text := ""
	if ok {
		text = ev.transcript
	}
	if tl := c.turnListener(); tl != nil {
		tl.Transcript(seq, text, ok)
	}
}

// functionCall hands a function call on, once per call id.
func (c *converse) functionCall(callID, name, arguments string) {
	if callID == "" || slices.Contains(c.calls, callID) {
		return
	}
	if len(c.calls) >= maxSeenCalls {
		c.calls = c.calls[1:]
	}
	c.calls = append(c.calls, callID)
	c.s.mu.Lock()
	c.s.stats.FunctionCalls++
	c.s.mu.Unlock()
	if tl := c.turnListener(); tl != nil {
		tl.FunctionCall(callID, name, arguments)
	}
}

// commitFailed drops the pending commit an error event names, so the
// next committed event is not taken for it. It reports whether there
// was one.
func (c *converse) commitFailed(eventID string) bool {
	if eventID == "" {
		return false
	}
	i := slices.IndexFunc(c.commits, func(p pendingCommit) bool { return p.eventID == eventID })
	if i < 0 {
		return false
	}
	c.commits = slices.Delete(c.commits, i, i+1)
	return true
}

// closeHandshake sends a normal close and waits, at most closeGrace, until
// the server answers it (the reader ends); a server that does not answer
// has its socket dropped by the caller. Events read meanwhile are dropped.
func (c *converse) closeHandshake() {
	_ = c.conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(closeGrace))
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	for {
		select {
		case _, ok := <-c.rd.events: // until the server answers the close frame
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}

var (
	errReadyTimeout = errors.New("no session.updated in time")
	errReplaced     = errors.New("conversation forgotten")
)

// replace ends a connection whose conversation must be forgotten. The
// model's audio from it stops reaching the Listener at once (and a
// ConnectionListener drops what it queued), then the close handshake runs:
// the server ends the session, conversation and all, before it answers.
// If it does not answer within closeGrace the socket is dropped, which
// ends the session too. Nothing else is written to the connection.
func (c *converse) replace() error {
	c.rd.muted.Store(true)
	if l, ok := c.s.cfg.Listener.(ConnectionListener); ok && c.ready {
		l.ModelLost()
	}
	c.closeHandshake()
	return errReplaced
}

// handle acts on one server event; it reports whether the connection must
// end (a refusal).
// handleSafely is handle behind recover (see Session.readEvent).
func (c *converse) handleSafely(ev serverEvent) (stop bool, err error) {
	defer c.s.recoverPeer("handle", &err)
	return c.handle(ev), nil
}

func (c *converse) handle(ev serverEvent) (stop bool) {
	s := c.s
	if !c.created && ev.Type != "session.created" && ev.Type != "error" {
		// Garbage, or something that is not a Realtime endpoint.
		c.refused = &refusal{ReasonNotRealtime, "not_realtime"}
		return true
	}
	switch ev.Type {
	case "session.created":
		c.created = true
	case "session.updated":
		if !c.ready {
			c.ready = true
			s.mu.Lock()
			s.stats.Connects++
			if s.stats.Connects > 1 && !s.replaced {
				s.stats.Reconnects++
			}
			s.replaced = false
			connects := s.stats.Connects
			s.mu.Unlock()
			s.setPhase(Ready, 0)
			s.log.Info("realtime ready", zap.String("host", s.host), zap.Int("connects", connects))
		}
	case "conversation.item.added", "conversation.item.done":
		if ev.Item != nil {
			c.ack(ev.Item.ID)
		}
	case "input_audio_buffer.committed":
		c.committed(ev.ItemID)
	case "conversation.item.input_audio_transcription.completed":
		c.transcribed(ev, true)
	case "conversation.item.input_audio_transcription.failed":
		c.transcribed(ev, false)
	case "response.function_call_arguments.done":
		c.functionCall(ev.CallID, ev.Name, ev.Arguments)
	case "response.output_item.done":
		if it := ev.Item; it != nil && it.Type == "function_call" {
			c.functionCall(it.CallID, it.Name, it.Arguments)
		}
	case "response.done":
		if r := ev.Response; r != nil {
			if tl := c.turnListener(); tl != nil {
				tl.ResponseDone(r.ID, safeToken(r.Status))
			}
		}
	case "error":
		var typ, code, eventID string
		if ev.Error != nil {
			typ, code, eventID = safeToken(ev.Error.Type), safeToken(ev.Error.Code), ev.Error.EventID
		}
		if r := codeRefusal(code); r != nil {
			c.refused = r
			return true
		}
		if !c.ready && typ == "invalid_request_error" && !transientCodes[code] {
			// The session setup was refused: our request's shape.
			c.refused = &refusal{ReasonShape, code}
			return true
		}
		_, aboutBriefing := c.itemEvents[eventID]
		aboutCommit := c.commitFailed(eventID)
		s.log.Warn("realtime server reported an error",
			zap.String("error_type", typ), zap.String("code", code), zap.Bool("about_briefing", aboutBriefing),
			zap.Bool("about_utterance_commit", aboutCommit))
	}
	return false
}

// ack records the server's acknowledgement of a briefing item.
func (c *converse) ack(itemID string) {
	gen, ok := c.items[itemID]
	if !ok {
		return
	}
	delete(c.items, itemID)
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ItemsAcked++
	if gen > s.ackedGen {
		s.ackedGen = gen
	}
	if !s.delivered[gen] {
		s.delivered[gen] = true
		s.stats.BriefingsDelivered++
	}
	if s.latest.gen == gen {
		s.latest.delivered = true
	}
}

// flush writes the latest briefing if this connection has not had it yet,
// after BriefingPrefix.
// A briefing already written on an earlier connection (acknowledged or not:
// the connection may have dropped between the server reading it and its
// acknowledgement reaching us) is a re-seed and gets ReseedPrefix; one the
// caller marked as a refresh gets RefreshPrefix.
func (c *converse) flush() error {
	s := c.s
	s.mu.Lock()
	b := s.latest
	due := b.gen != 0 && b.gen != s.connGen
	s.mu.Unlock()
	if !due {
		return nil
	}
	text, kind := BriefingPrefix+b.text, "briefing"
	switch {
	case b.delivered || b.written:
		text, kind = ReseedPrefix+b.text, "reseed"
	case b.refresh:
		text, kind = RefreshPrefix+b.text, "refresh"
	}
	id := newItemID()
	msg, eventID, err := briefingItem(id, text)
	if err != nil {
		return err
	}
	c.items[id] = b.gen
	c.itemEvents[eventID] = b.gen
	c.wrote = true
	if err := c.write(msg); err != nil {
		return err
	}
	s.mu.Lock()
	s.connGen = b.gen
	s.stats.ItemsSent++
	if s.latest.gen == b.gen {
		s.latest.written = true
	}
	s.mu.Unlock()
	s.log.Debug("realtime briefing sent", zap.String("kind", kind), zap.Int("length", len(text)))
	return nil
}

// write sends one text frame. Only the serve goroutine calls it.
func (c *converse) write(msg []byte) error {
	if err := c.conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	return c.conn.WriteMessage(websocket.TextMessage, msg)
}

// readLoop reads server events until the connection fails, hands output
// audio and speech events to the Listener at once, and queues the rest for
// the conversation in order. With pings on, a connection that yields
// neither an event nor a pong for two ping intervals times out here.
// Server pings are answered by gorilla's default handler.
func (s *Session) readLoop(conn *websocket.Conn, rd *reader) {
	defer close(rd.events)
	extend := func() {}
	if iv := s.cfg.PingInterval; iv > 0 {
		extend = func() { _ = conn.SetReadDeadline(time.Now().Add(2 * iv)) }
		conn.SetPongHandler(func(string) error { extend(); return nil })
	}
	extend()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				// gorilla refused the event from its header, unread, and
				// sent close 1009; the connection is replaced.
				s.mu.Lock()
				s.stats.OversizedEvents++
				s.mu.Unlock()
				s.log.Warn("realtime event over the size limit; connection closed",
					zap.String("host", s.host), zap.Int("limit_bytes", maxEventBytes))
			}
			rd.err = err
			return
		}
		extend()
		ev, heard, err := s.readEvent(data, rd)
		if err != nil {
			rd.err = err // a panic on the server's input: this connection ends
			return
		}
		if heard {
			continue
		}
		select {
		case rd.events <- ev:
		case <-s.ctx.Done():
			// The conversation is closing; keep reading until the close
			// handshake ends the connection.
		}
	}
}

// errPeerPanic ends a connection whose server sent an event our handling of
// it panicked on: recovered, counted, and replaced by a fresh connection,
// never a process exit.
var errPeerPanic = errors.New("realtime: handling a server event panicked")

// readEvent decodes one server event and hands an audio-path event to the
// Listener (heard), behind recover: the model's server is a network peer,
// and no input of a peer may end the process.
func (s *Session) readEvent(data []byte, rd *reader) (ev serverEvent, heard bool, err error) {
	defer s.recoverPeer("read", &err)
	if err := json.Unmarshal(data, &ev); err != nil {
		s.log.Debug("realtime event", zap.String("type", "unparseable"), zap.Int("bytes", len(data)))
		return serverEvent{Type: "unparseable"}, false, nil
	}
	if s.hear(ev, rd) {
		return ev, true, nil
	}
	if ev.Type == "conversation.item.input_audio_transcription.completed" {
		// The one piece of content decoded: it goes to the TurnListener.
		if ev.transcript, err = inputTranscript(data); err != nil {
			return serverEvent{Type: "unparseable"}, false, nil
		}
	}
	if ev.Type != "error" {
		s.log.Debug("realtime event", zap.String("type", safeToken(ev.Type)))
	}
	return ev, false, nil
}

// recoverPeer turns a panic into errPeerPanic in *err, counted and logged
// with where it happened only: never the panic's value, which may hold the
// server's content.
func (s *Session) recoverPeer(where string, err *error) {
	if r := recover(); r != nil {
		s.mu.Lock()
		s.stats.Panics++
		s.mu.Unlock()
		s.log.Warn("realtime server event panicked our handling; connection replaced",
			zap.String("host", s.host), zap.String("where", where))
		*err = errPeerPanic
	}
}

// hear hands audio-path events to the Listener and reports whether the
// event was one of them. Transcripts are dropped unread: they are content.
func (s *Session) hear(ev serverEvent, rd *reader) bool {
	l := s.cfg.Listener
	if rd.muted.Load() {
		l = nil // the conversation is being forgotten: nothing of it plays
	}
	switch ev.Type {
	case "response.output_audio.delta":
		delta, cut := ev.Delta, 0
		if limit := base64.StdEncoding.EncodedLen(maxDeltaBytes); len(delta) > limit {
			// maxDeltaBytes is a multiple of 3, so the kept part is whole
			// base64 quanta; the rest is never decoded.
			delta, cut = delta[:limit], base64.StdEncoding.DecodedLen(len(delta)-limit)
		}
		pcm, err := base64.StdEncoding.DecodeString(delta)
		if err != nil {
			s.log.Debug("realtime event", zap.String("type", "undecodable_audio"))
			return true
		}
		s.mu.Lock()
		s.stats.AudioBytesReceived += int64(len(pcm))
		s.stats.AudioBytesCut += int64(cut)
		s.mu.Unlock()
		if l != nil {
			l.OutputAudio(ev.ResponseID, ev.ItemID, pcm)
		}
		return true
	case "input_audio_buffer.speech_started":
		if l != nil {
			l.SpeechStarted(ev.AudioStartMs)
		}
		return true
	case "input_audio_buffer.speech_stopped":
		if l != nil {
			l.SpeechStopped(ev.AudioEndMs)
		}
		return true
	case "response.output_audio_transcript.delta", "response.output_audio_transcript.done",
		"conversation.item.input_audio_transcription.delta":
		return true
	}
	return false
}

// noteDialFailure counts a failed attempt and logs it: at warn for the
// first of an outage, at debug for the retries, so a long outage is one
// line (the status says the attempt).
func (s *Session) noteDialFailure(n int, resp *http.Response, err error) {
	s.mu.Lock()
	s.stats.DialFailures++
	s.mu.Unlock()
	fields := []zap.Field{zap.String("host", s.host), zap.Int("attempt", n)}
	if resp != nil {
		fields = append(fields, zap.Int("status", resp.StatusCode))
	} else {
		fields = append(fields, zap.String("error", s.redact(err.Error())))
	}
	const msg = "realtime connect failed; retrying"
	if n == 1 {
		s.log.Warn(msg, fields...)
	} else {
		s.log.Debug(msg, fields...)
	}
}

// describe turns why a connection ended into content-free log fields: a
// close code (never the close text, which the server chooses), a timeout, or
// a transport error with secrets redacted.
func (s *Session) describe(err error) []zap.Field {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case err == nil:
		return []zap.Field{zap.String("reason", "unknown")}
	case errors.Is(err, errReadyTimeout):
		return []zap.Field{zap.String("reason", "no_session_updated")}
	case errors.As(err, &ce):
		return []zap.Field{zap.String("reason", "closed"), zap.Int("close_code", ce.Code)}
	case errors.As(err, &ne) && ne.Timeout():
		return []zap.Field{zap.String("reason", "timeout")}
	default:
		return []zap.Field{zap.String("reason", "error"), zap.String("error", s.redact(err.Error()))}
	}
}

// redact removes the key and the URL's secret-capable parts from a transport
// error's text before it is logged. The transport errors we log name hosts,
// not URLs, so this is a second line of defence.
func (s *Session) redact(msg string) string {
	if s.cfg.APIKey != "" {
		msg = strings.ReplaceAll(msg, s.cfg.APIKey, "[redacted]")
	}
	for _, u := range []string{s.dialURL, s.cfg.URL} {
		if u != "" {
			msg = strings.ReplaceAll(msg, u, "[url "+s.host+"]")
		}
	}
	if q := queryOf(s.dialURL); q != "" {
		msg = strings.ReplaceAll(msg, q, "[query]")
	}
	return msg
}

// queryOf is the raw query of a URL already validated by Start.
func queryOf(raw string) string {
	if _, q, ok := strings.Cut(raw, "?"); ok {
		return q
	}
	return ""
}
