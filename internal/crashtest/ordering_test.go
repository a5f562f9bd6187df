package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/episodes"
	"github.com/clankie/clankie/memory/personfiles"
)

// orderedWrite is one acknowledged write and where its bytes must end up.
type orderedWrite struct {
	what   string
	marker string // appears in the file's new contents and in the answer
	final  string // the file the write replaces (or, journaled, appends to), as strace -y prints it
	// journal, when set, is the write-ahead log the change goes through
	// first: a person's change is durable once its journal line is synced.
	journal string
}

// TestAcknowledgementFollowsDurableWrite runs the service under strace and
// proves, for each acknowledged write, the order the spec promises. An
// episode: the new contents are written to a ".tmp-" file, that file is
// fsynced, renamed over the real name, the directory is fsynced, and only
// then are the answer's bytes ("HTTP/1.1 201") written to the client's
// socket. A person's change: its line is written to the people journal, the
// journal is fdatasynced, the line is appended to the person's log, and
// only then is the answer written.
func TestAcknowledgementFollowsDurableWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the clankie binary and runs it under strace; skipped with -short")
	}
	strace := straceUsable(t)
	bin := clankieBinary(t)
	tmp, err := filepath.EvalSymlinks(t.TempDir()) // strace prints resolved paths
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "memory")
	tracePath := filepath.Join(tmp, "strace.txt")
	srv := startServer(t, bin, dir, []string{strace, "-f", "-tt", "-y", "-s", "8192",
		"-e", "trace=openat,write,pwrite64,writev,fsync,fdatasync,rename,renameat,renameat2,sendto,sendmsg",
		"-o", tracePath}, 60*time.Second)

	subject := api.Subject{GuildID: "guild-order", UserID: "user-order"}
	personFile := filepath.Join(dir, personfiles.Dir, personfiles.FileName(subject))
	journalFile := filepath.Join(dir, personfiles.Dir, personfiles.JournalName)
	var writes []orderedWrite
	propose := func(token, marker, supersedes string) string {
		req := api.ProposalRequest{SchemaVersion: api.SchemaVersion, ProposalID: marker, Fact: api.FactInput{
			Subject: subject, Kind: api.KindPersonFact, Body: "fact " + marker,
			Visibility: api.Visibility{Scope: api.ScopeGuild}, Confidence: 0.5, SupersedesFactID: supersedes,
			Provenance: api.Provenance{SourceEventID: "evt-" + marker, ProposerUserID: subject.UserID, ChannelID: "chan-1"},
		}}
		status, body, err := srv.do(context.Background(), token, http.MethodPost, proposalsPath, req)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("proposal %s: %d %v %s", marker, status, err, body)
		}
		var resp api.ProposalResponse
		if err := json.Unmarshal(body, &resp); err != nil || resp.Fact == nil {
			t.Fatalf("proposal %s: %s", marker, body)
		}
		writes = append(writes, orderedWrite{"proposal " + marker, marker, personFile, journalFile})
		return resp.Fact.FactID
	}
	record := func(token string, lane api.Lane, marker string, retain bool) {
		req := api.EpisodeRequest{SchemaVersion: api.SchemaVersion, EpisodeID: marker, Lane: lane, Room: "room-order",
			Summary: "note " + marker, Retain: retain, OccurredAt: time.Now().UTC().Truncate(time.Second),
			Provenance: api.EpisodeProvenance{SelfAuthored: true}}
		status, body, err := srv.do(context.Background(), token, http.MethodPost, episodesPath, req)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("episode %s: %d %v %s", marker, status, err, body)
		}
		writes = append(writes, orderedWrite{"episode " + marker, marker, filepath.Join(dir, episodes.FileName(lane)), ""})
	}

	first := propose(opToken, "ordermark-p1", "")
	record(gameToken, api.LaneGameplay, "ordermark-e1", false)
	propose(textToken, "ordermark-p2", first) // a supersede rewrites the same file
	record(voiceToken, api.LaneDiscordVoice, "ordermark-e2", true)
	srv.stop()

	raw, err := os.ReadFile(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	events := parseStrace(string(raw))
	if len(events) == 0 {
		t.Fatalf("the trace holds no system calls:\n%.2000s", raw)
	}
	for _, w := range writes {
		seq, problem := checkOrder(events, w)
		if problem != "" {
			t.Errorf("%s: %s\nrelevant trace lines ($ROOT is %s):\n%s", w.what, problem, dir, describe(seq, dir))
			continue
		}
		steps := "temp write → fsync → rename → directory fsync → answer"
		if w.journal != "" {
			steps = "journal write → journal fdatasync → person log append → answer"
		}
		t.Logf("%s: %s ($ROOT is %s):\n%s", w.what, steps, dir, describe(seq, dir))
	}
}

// checkOrder finds, for one acknowledged write, the answer on the socket and
// the durable-write steps before it, and says what is out of order. It
// returns the events found so far for the message.
func checkOrder(events []sysEvent, w orderedWrite) ([]sysEvent, string) {
	var seq []sysEvent
	dir := path.Dir(w.final)

	answer := -1
	for i, e := range events {
		if e.isSocketWrite() && strings.Contains(e.args, "HTTP/1.1 201") && strings.Contains(e.args, w.marker) {
			answer = i
			break
		}
	}
	if answer < 0 {
		return nil, "no write of an HTTP/1.1 201 answer naming " + w.marker + " to a socket"
	}
	resp := events[answer]
	if w.journal != "" {
		return checkJournalOrder(events, answer, w)
	}

	// The last write of the new contents to a temp file in the target's
	// directory that started before the answer.
	tw := -1
	for i := answer - 1; i >= 0; i-- {
		e := events[i]
		p := e.fdPath()
		if e.isFileWrite() && path.Dir(p) == dir && strings.HasPrefix(path.Base(p), ".tmp-") && strings.Contains(e.args, w.marker) {
			tw = i
			break
		}
	}
	if tw < 0 {
		for _, e := range events[:answer] {
			if e.isFileWrite() && strings.Contains(e.args, w.marker) {
				return []sysEvent{e, resp}, "the new contents were not written to a .tmp- file in " + dir + " before the answer"
			}
		}
		return []sysEvent{resp}, "the new contents were never written to a file before the answer"
	}
	temp := events[tw].fdPath()
	seq = append(seq, events[tw])
	if events[tw].exit >= resp.entry {
		return append(seq, resp), "the answer was written before the temp file write returned"
	}

	find := func(from int, match func(sysEvent) bool) int {
		for i := from; i < len(events); i++ {
			if match(events[i]) {
				return i
			}
		}
		return -1
	}
	fs := find(tw+1, func(e sysEvent) bool { return e.isSync() && e.fdPath() == temp })
	if fs < 0 || !events[fs].ok() {
		return append(seq, resp), "the temp file " + temp + " was never fsynced"
	}
	seq = append(seq, events[fs])
	rn := find(tw+1, func(e sysEvent) bool {
		from, _, ok := e.renamePaths()
		return e.isRename() && ok && from == temp
	})
	if rn < 0 {
		return append(seq, resp), "the temp file was never renamed"
	}
	seq = append(seq, events[rn])
	if _, to, _ := events[rn].renamePaths(); to != w.final || !events[rn].ok() {
		return append(seq, resp), fmt.Sprintf("the temp file was renamed onto %s (result %s), not %s", to, events[rn].ret, w.final)
	}
	if events[fs].exit >= events[rn].entry {
		return append(seq, resp), "the rename started before the temp file's fsync returned"
	}
	ds := find(rn+1, func(e sysEvent) bool { return e.isSync() && e.fdPath() == dir && events[rn].exit < e.entry })
	if ds < 0 || !events[ds].ok() {
		return append(seq, resp), "the directory " + dir + " was not fsynced after the rename"
	}
	seq = append(seq, events[ds], resp)
	if events[ds].exit >= resp.entry {
		return seq, "the answer was written before the directory fsync returned"
	}
	for _, e := range events[tw:answer] {
		if e.isFileWrite() && e.fdPath() == w.final {
			return append(seq, e), "the target file was written in place"
		}
	}
	return seq, ""
}

// checkJournalOrder checks a journaled write: the last write naming the
// marker to the journal before the answer returned before an fdatasync (or
// fsync) of the journal started, that sync succeeded and returned before
// the answer started, and the marker was written to the person's log after
// the sync and before the answer.
func checkJournalOrder(events []sysEvent, answer int, w orderedWrite) ([]sysEvent, string) {
	resp := events[answer]
	jw := -1
	for i := answer - 1; i >= 0; i-- {
		e := events[i]
		if e.isFileWrite() && e.fdPath() == w.journal && strings.Contains(e.args, w.marker) {
			jw = i
			break
		}
	}
	if jw < 0 {
		return []sysEvent{resp}, "the change naming " + w.marker + " was never written to the journal " + w.journal + " before the answer"
	}
	seq := []sysEvent{events[jw]}
	js := -1
	for i := jw + 1; i < len(events); i++ {
		e := events[i]
		if e.isSync() && e.fdPath() == w.journal && e.entry > events[jw].exit {
			js = i
			break
		}
	}
	if js < 0 || !events[js].ok() {
		return append(seq, resp), "the journal was not synced after the change was written to it"
	}
	seq = append(seq, events[js])
	if events[js].exit >= resp.entry {
		return append(seq, resp), "the answer was written before the journal's sync returned"
	}
	lw := -1
	for i := js + 1; i < answer; i++ {
		e := events[i]
		if e.isFileWrite() && e.fdPath() == w.final && strings.Contains(e.args, w.marker) && e.entry > events[js].exit {
			lw = i
			break
		}
	}
	if lw < 0 {
		return append(seq, resp), "the change was not appended to the person log " + w.final + " between the journal's sync and the answer"
	}
	seq = append(seq, events[lw])
	if events[lw].exit >= resp.entry {
		return append(seq, resp), "the answer was written before the person log write returned"
	}
	return append(seq, resp), ""
}

func describe(seq []sysEvent, root string) string {
	var b strings.Builder
	for _, e := range seq {
		for _, line := range strings.Split(e.text, "\n") {
			line = strings.ReplaceAll(line, root, "$ROOT")
			if len(line) > 240 {
				line = line[:240] + "…"
			}
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return b.String()
}
