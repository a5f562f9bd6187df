package personfiles

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unsafe"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// A person log is JSON lines, one object a line, in the file FileName names:
//
//	{"schemaVersion":2,"subject":{"guildId":"…","userId":"…"},"seq":7}   the header
//	{"fact":{…}}                                                         the state at seq 7, one fact a line,
//	{"proposal":{"proposalId":"…","digest":"…","factId":"…"}}            then one idempotency record a line
//	{"seq":8,"remove":["f…"],"clearDigest":["f…"],"put":[{…}],"proposal":{…}}   one change a line
//
// Reading replays the lines in order. A change removes the facts named in
// remove, clears the digest of the records naming clearDigest, puts each
// fact of put (replacing the fact with its id in place, else appending),
// appends its proposal record and then keeps the records as a proposal does
// (every live fact's, and the newest 64 of facts that are gone). A change
// whose seq is not above the state's was applied already and is skipped.
//
// A line that does not end in a newline is a torn tail, a write cut short:
// it is ignored and costs only itself (the store cuts it off before it
// appends). A whole line that does not parse is skipped. A header that does
// not parse, or names another subject than the file name encodes, makes the
// file unreadable: it is moved aside, never overwritten.
const logVersion = people.LogVersion

// errFactsOnly refuses to write a state read without its records
// (decodeLogFacts): the log would lose them.
var errFactsOnly = errors.New("personfiles: a state read for its facts alone cannot be written")

// errUnreadable says a person log's header cannot be trusted.
var errUnreadable = errors.New("the person log has no readable header")

// decodeLog replays a person log. It returns the state, and good: the length
// of the prefix that ends with the last whole line (what an append must
// follow). A torn tail (good < len(b)) is not an error.
//
// Lines are decoded by decodeLine (linedecode.go), which reads the store's
// own lines by hand and leaves any other to go-json-experiment's json (v2
// semantics: names matched exactly, invalid UTF-8 refused): every line is
// one this store wrote with encoding/json, so the stricter reading refuses
// nothing it wrote, and a line it does refuse costs only itself, as
// before. Each line is read into the same buffers and replayed as it is
// read (people.Replay, which keeps copies): the lines are never held all
// at once. The state keeps nothing of b: the caller may write b again.
func decodeLog(b []byte) (pf *personFile, good int, err error) { return replayLog(b, false) }

// decodeLogFacts is decodeLog for a read of the facts alone (load viewed):
// the state it returns has no idempotency records (factsOnly). Facts never
// depend on records, so they are decodeLog's. A record line in the
// store's shape (recordLine) is skipped unread, and a change's record is
// read (a line that does not parse changes nothing) but not replayed.
func decodeLogFacts(b []byte) (pf *personFile, good int, err error) { return replayLog(b, true) }

func replayLog(b []byte, factsOnly bool) (pf *personFile, good int, err error) {
	first, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, 0, errUnreadable
	}
	// b seen as a string, not copied: while the lines are read, a fact's
	// own strings are parts of it, and at the end ownStrings gives the
	// state one allocation of its own, so nothing read keeps b (a pooled
	// read buffer, written again by the next load).
	text := unsafe.String(unsafe.SliceData(b), len(b))
	var in interner
	var bufs lineBufs
	var h people.Change
	if err := decodeLine(first, text[:len(first)], &h, &in, &bufs); err != nil || h.SchemaVersion != logVersion || h.Subject == nil {
		return nil, 0, errUnreadable
	}
	pf = &personFile{Person: people.Person{Subject: *h.Subject, Facts: []api.Fact{}, Seq: h.Seq}}
	good = len(first) + 1
	// Room for what the lines may put: a fact line puts a fact, a record
	// line a record, a change (a seq) usually one of each.
	facts, records, changes := lineKinds(rest)
	factRoom, recordRoom := facts+changes, records+changes
	if factsOnly {
		recordRoom = 0
	}
	replay := pf.Replay(factRoom, recordRoom)
	var l people.Change
	for len(rest) > 0 {
		line, after, whole := bytes.Cut(rest, []byte("\n"))
		if !whole {
			break // a torn tail
		}
		good += len(line) + 1
		rest = after
		if len(bytes.TrimSpace(line)) == 0 || factsOnly && recordLine(line) {
			continue
		}
		l = people.Change{}
		if decodeLine(line, text[good-len(line)-1:good-1], &l, &in, &bufs) == nil {
			if factsOnly {
				l.Proposal = nil
			}
			replay.Add(&l) // a whole line that does not parse costs only itself
		}
	}
	replay.Done()
	if factsOnly {
		pf.Proposals, pf.factsOnly = nil, true // a reset's records included
	}
	ownStrings(pf)
	pf.size = int64(good)
	return pf, good, nil
}

// recordLine reports whether line is a record line in the store's shape
// ({"proposal":{"proposalId":"…","digest":"…","factId":"…"}}, the digest
// left out when empty) with no quote or backslash in its strings: a line
// that changes no fact whether it is read or refused (a control or
// non-UTF-8 byte in a string makes it refused), so a read of the facts
// alone skips it after finding the ends of its strings (bytes.IndexByte),
// not reading them. Any other line is read.
func recordLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(`{"proposal":{"proposalId":"`))
	if !ok {
		return false
	}
	if rest, ok = afterPlainString(rest); !ok {
		return false
	}
	if digest, ok := bytes.CutPrefix(rest, []byte(`,"digest":"`)); ok {
		if rest, ok = afterPlainString(digest); !ok {
			return false
		}
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"factId":"`)); !ok {
		return false
	}
	rest, ok = afterPlainString(rest)
	return ok && string(rest) == "}}"
}

// afterPlainString returns what follows the string b begins inside (its
// opening quote read), when the string holds no backslash: only then is
// the first quote its end.
func afterPlainString(b []byte) ([]byte, bool) {
	j := bytes.IndexByte(b, '"')
	if j < 0 || bytes.IndexByte(b[:j], '\\') >= 0 {
		return nil, false
	}
	return b[j+1:], true
}

// lineKinds counts b's fact lines, record lines and changes (lines with a
// seq) by how they start, in one pass.
func lineKinds(b []byte) (facts, records, changes int) {
	for len(b) > 0 {
		switch {
		case bytes.HasPrefix(b, []byte(`{"fact":`)):
			facts++
		case bytes.HasPrefix(b, []byte(`{"proposal":`)):
			records++
		case bytes.HasPrefix(b, []byte(`{"seq":`)):
			changes++
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		b = b[i+1:]
	}
	return facts, records, changes
}

// apply replays one line onto the state (Person.Apply).
func (pf *personFile) apply(l *people.Change) { pf.Person.Apply(l) }

// encodeLine renders one line with its newline.
func encodeLine(l *people.Change) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// encodeChange renders a change line ({"seq","remove","clearDigest","put",
// "proposal"}) with its newline, byte for byte as encodeLine would, each
// put fact by the hand encoder (factjson.go). It is encoded once for the
// journal record and the log line.
func encodeChange(ch *people.Change) ([]byte, error) {
	if ch.SchemaVersion != 0 || ch.Subject != nil || ch.Fact != nil || len(ch.Reset) > 0 {
		return encodeLine(ch)
	}
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	field := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
	}
	if ch.Seq != 0 {
		field("seq")
		b = strconv.AppendUint(b, ch.Seq, 10)
	}
	for _, ids := range []struct {
		name string
		ids  []string
	}{{"remove", ch.Remove}, {"clearDigest", ch.ClearDigest}} {
		if len(ids.ids) == 0 {
			continue
		}
		field(ids.name)
		b = append(b, '[')
		for i, id := range ids.ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, id)
		}
		b = append(b, ']')
	}
	if len(ch.Put) > 0 {
		field("put")
		b = append(b, '[')
		for i := range ch.Put {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendFactJSON(b, &ch.Put[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if ch.Proposal != nil {
		field("proposal")
		b = appendProposal(b, ch.Proposal)
	}
	return append(b, "}\n"...), nil
}

// encodeSnapshot renders a compacted person log of the state: the header,
// one line per fact, one line per idempotency
// record; byte for byte what json.Encoder writes of each line.
func encodeSnapshot(pf *personFile) ([]byte, error) {
	if pf.factsOnly {
		return nil, errFactsOnly
	}
	subject := pf.Subject
	head, err := encodeLine(&people.Change{SchemaVersion: logVersion, Subject: &subject, Seq: pf.Seq})
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(head)+512*len(pf.Facts)+96*len(pf.Proposals))
	b = append(b, head...)
	for i := range pf.Facts {
		b = append(b, `{"fact":`...)
		if b, err = appendFactJSON(b, &pf.Facts[i]); err != nil {
			return nil, err
		}
		b = append(b, "}\n"...)
	}
	for i := range pf.Proposals {
		b = append(b, `{"proposal":`...)
		b = appendProposal(b, &pf.Proposals[i])
		b = append(b, "}\n"...)
	}
	return b, nil
}

// appendProposal appends a record as json.Marshal does.
func appendProposal(b []byte, p *people.ProposalRecord) []byte {
	b = append(b, `{"proposalId":`...)
	b = appendJSONString(b, p.ProposalID)
	if p.Digest != "" {
		b = append(b, `,"digest":`...)
		b = appendJSONString(b, p.Digest)
	}
	b = append(b, `,"factId":`...)
	b = appendJSONString(b, p.FactID)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string exactly as json.Marshal
// quotes it: plain ASCII as it is, anything else (a quote, a backslash,
// HTML's <, > and &, a control character, non-ASCII) by json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
