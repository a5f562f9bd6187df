package personfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/people"
)

// Loading a person not in memory reads their whole log, and a log at its
// steady size is a few hundred lines: decoding them is most of that load.
// decodeLine reads the lines this store writes (appendFact's and
// encodeChange's bytes: no whitespace, the members in their order or not)
// without reflection: the lines of a steady 136 KB log of 128 facts in
// 0.80 ms against go-json-experiment's 1.16 ms, measured side by side on 2
// shared cores (BenchmarkDecodeSteadyLog decodes a whole log; scripts/bench
// reports the cold proposal and recall it serves). Anything it does not
// expect, it refuses and the line goes to jsonv2.Unmarshal, so what it
// accepts is exactly what the codec would have made
// (FuzzDecodeLineAgreesWithTheCodec), and a line it refuses costs only the
// time of both.
//
// Three things keep it from doing more per line than it must. A string of
// a fact's or a record's own (an id, a body, a digest) is a part of the
// whole log's bytes seen as one string (decodeLog), not an allocation of its own; the
// ones every fact repeats come from an interner that compares the bytes
// with the last value of the member first. A fact or a record exactly as
// the store writes it, and the lines that hold one, are read by comparing
// the bytes ahead with what the store writes there, names, commas and
// braces together (factInOrder); anything else is read member by member,
// each name matched against the members the store writes next, then
// looked up (obj.next). Against reading each string into its own
// allocation and looking every name up, BenchmarkColdPeople/people=64/
// cache=none, 4 alternating runs: recall p50 527-585 µs against 697-758
// µs, proposal p50 1172-1439 µs against 1343-1596 µs; the in-order
// reading then took a further 7.6% of the instructions of a decode
// (cachegrind: 2.37 M to 2.19 M per BenchmarkDecodeSteadyLog log).
// decodeLog copies what is left of those parts out when the replay ends
// (ownStrings), so nothing it returns keeps the log's bytes.

// errShape is decodeLine's refusal: the line is not in the shape it reads.
var errShape = errors.New("not a line in the store's own shape")

// decodeLine decodes one log line into l. text is the line as a string
// (a part of the whole log's, see decodeLog): the strings of a fact's or
// a record's own (ids, bodies, digests) are parts of it, not copies; the
// ones facts repeat come from in.
//
// A line read by hand is read into bufs, which the next line reuses (a
// nil bufs: new ones): l holds them until then, and people.Replay keeps
// only copies of what it is given.
func decodeLine(line []byte, text string, l *people.Change, in *interner, bufs *lineBufs) error {
	if bufs == nil {
		bufs = new(lineBufs)
	}
	if err := (&lineReader{b: line, s: text, in: in, bufs: bufs}).change(l); err == nil {
		return nil
	}
	// Into a Change of its own, copied after: given to the codec, l (and
	// the buffers a line read by hand points it at) would be heap
	// allocated for every line, and each write to them pay the collector's
	// write barrier while it marks.
	c := new(people.Change)
	err := jsonv2.Unmarshal(line, c)
	*l = *c
	return err
}

// interner holds one copy of each string facts repeat (the Discord ids
// of the subject, the visibility's channel and the proposer, kinds,
// scopes, surfaces: the ones decodedBytes counts with shared), so a
// decoded person holds each once,
// as decodedBytes counts them. Each member has its slot: a log repeats
// the same value in it fact after fact, so the last value of the slot is
// compared first, and only a new value is looked up.
type interner struct {
	last [internSlots]string
	m    map[string]string
}

// The members whose strings the interner shares.
const (
	internGuild = iota
	internUser
	internKind
	internScope
	internVisibleIn
	internSurface
	internProposer
	internChannel
	internSlots
)

func (in *interner) get(slot int, b []byte) string {
	if last := in.last[slot]; string(b) == last {
		return last
	}
	if len(b) > shareMax {
		return string(b)
	}
	s, ok := in.m[string(b)]
	if !ok {
		if in.m == nil {
			in.m = make(map[string]string, 16)
		}
		s = string(b)
		in.m[s] = s
	}
	in.last[slot] = s
	return s
}

type lineReader struct {
	b    []byte
	s    string // b as a string: the strings of a fact's own are parts of it
	i    int
	in   *interner
	bufs *lineBufs
	// The line's last instant read, as written and as read: a fact's
	// updatedAt is most often its createdAt again.
	lastTime string
	lastAt   time.Time
}

// lineBufs is what a line is read into, line after line: a log's fact
// lines, records and puts allocate nothing of their own.
type lineBufs struct {
	subject       api.Subject
	fact          api.Fact
	record        people.ProposalRecord
	put           []api.Fact
	remove, clear []string
}

func (r *lineReader) eat(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// obj is one object being read: whether its '{' was read and whether it
// has ended, the members seen (a member twice is the codec's to refuse),
// and the member the store writes after the last one read.
type obj struct {
	begun, done bool
	seen        uint32
	at          int
}

// next reads the next member's name and its ':' (the object's '{' first)
// and returns the member's index in names, leaving the reader at its
// value; -1 once the object has ended. names are the object's members in
// the order the store writes them, each quoted with its colon: the store's
// own lines hold them in that order (some left out), so the name is found
// by comparing the bytes ahead with the members that may come next, not
// read and then looked up. A name in another order is read and looked up;
// one that is not a member, or a member twice, is errShape.
func (r *lineReader) next(o *obj, names []member) (int, error) {
	if o.seen == 0 {
		if !o.begun {
			if !r.eat('{') {
				return 0, errShape
			}
			o.begun, o.done = true, r.eat('}')
		}
		if o.done {
			return -1, nil
		}
	} else {
		if r.eat('}') {
			o.done = true
			return -1, nil
		}
		if !r.eat(',') {
			return 0, errShape
		}
	}
	k := -1
	if r.i < len(r.b) {
		rest := r.b[r.i:]
		for j := o.at; j < len(names); j++ {
			if m := &names[j]; m.ahead(rest) {
				k = j
				r.i += len(m.name)
				break
			}
		}
	}
	if k < 0 {
		name, err := r.rawString()
		if err != nil || !r.eat(':') {
			return 0, errShape
		}
		for j := range names {
			if n := names[j].name; string(name) == n[1:len(n)-2] {
				k = j
				break
			}
		}
		if k < 0 {
			return 0, errShape // not a member: the codec's
		}
	}
	bit := uint32(1) << (uint(k) & 31) // an object has fewer than 32 members
	if o.seen&bit != 0 {
		return 0, errShape
	}
	o.seen |= bit
	o.at = k + 1
	return k, nil
}

// member is one member name as the store writes it, quoted with its
// colon, and its first bytes as words: next compares a word of the line
// with each member that may come next, and its bytes only when that
// matches.
type member struct {
	name       string
	head, mask [3]uint64 // the first 24 bytes (or fewer), little-endian
	longer     bool      // the name runs past 24 bytes
}

func members(names ...string) []member {
	out := make([]member, len(names))
	for i, n := range names {
		m := member{name: `"` + n + `":`}
		for b := range min(len(m.name), 24) {
			m.head[b/8] |= uint64(m.name[b]) << (8 * (b % 8))
			m.mask[b/8] |= 0xff << (8 * (b % 8))
		}
		m.longer = len(m.name) > 24
		out[i] = m
	}
	return out
}

// ahead reports whether b starts with the member's name.
func (m *member) ahead(b []byte) bool {
	if len(b) < 24 || len(b) < len(m.name) {
		return len(b) >= len(m.name) && string(b[:len(m.name)]) == m.name
	}
	le := binary.LittleEndian
	return le.Uint64(b)&m.mask[0] == m.head[0] && le.Uint64(b[8:])&m.mask[1] == m.head[1] &&
		le.Uint64(b[16:])&m.mask[2] == m.head[2] && (!m.longer || string(b[24:len(m.name)]) == m.name[24:])
}

// The members of each object the store writes, in the order it writes
// them (factjson.go, encodeChange), and their indices.
var (
	subjectNames    = members("guildId", "userId")
	visibilityNames = members("scope", "channelId")
	factNames       = members("factId", "subject", "kind", "body", "visibility", "confidence", "createdAt", "updatedAt",
		"expiresAt", "supersedesFactId", "provenance")
	provenanceNames = members("sourceSurface", "sourceEventId", "correlationId", "proposerUserId", "channelId",
		"sourceMessageId")
	proposalNames = members("proposalId", "digest", "factId")
	lineNames     = members("seq", "fact", "remove", "clearDigest", "put", "proposal")
)

const (
	factID = iota
	factSubject
	factKind
	factBody
	factVisibility
	factConfidence
	factCreatedAt
	factUpdatedAt
	factExpiresAt
	factSupersedes
	factProvenance
)

const (
	lineSeq = iota
	lineFact
	lineRemove
	lineClearDigest
	linePut
	lineProposal
)

// rawString reads a string without escapes and returns its bytes (valid
// UTF-8 without control characters), else errShape (str then handles
// escapes). Most strings are plain ASCII: one pass (firstSpecial) finds
// their closing quote and proves them so.
func (r *lineReader) rawString() ([]byte, error) {
	start, end, err := r.rawSpan()
	if err != nil {
		return nil, err
	}
	return r.b[start:end], nil
}

// rawSpan is rawString as the string's bounds in b.
func (r *lineReader) rawSpan() (int, int, error) {
	if !r.eat('"') {
		return 0, 0, errShape
	}
	start, rest := r.i, r.b[r.i:]
	if j := firstSpecial(rest); j < len(rest) && rest[j] == '"' {
		r.i += j + 1
		return start, start + j, nil
	}
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, 0, errShape
	}
	s := rest[:j]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return 0, 0, errShape
		}
	}
	if !utf8.Valid(s) {
		return 0, 0, errShape
	}
	r.i += j + 1
	return start, start + j, nil
}

// firstSpecial returns the index of the first byte of s that is a quote, a
// backslash, a control byte or not ASCII (len(s) if none), eight bytes at
// a time. Each mask's lowest set bit marks its first match exactly (a
// borrow only runs upwards), so the lowest bit of their union is the
// first byte of any kind.
func firstSpecial(s []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		below := (w - 0x20*ones) & ^w & highs
		x := w ^ '\\'*ones
		slash := (x - ones) & ^x & highs
		q := w ^ '"'*ones
		quote := (q - ones) & ^q & highs
		if m := w&highs | below | slash | quote; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '\\' || c == '"' {
			return i
		}
	}
	return i
}

// str reads a string value, escapes included. A plain one (almost every
// string) is a part of the line's string, not a copy: decodeLog copies
// the ones the replay keeps once, at its end (see ownStrings).
func (r *lineReader) str() (string, error) {
	start := r.i
	if from, to, err := r.rawSpan(); err == nil {
		return r.s[from:to], nil
	}
	r.i = start
	if !r.eat('"') {
		return "", errShape
	}
	end := r.i
	for ; end < len(r.b) && r.b[end] != '"'; end++ {
		switch c := r.b[end]; {
		case c < 0x20:
			return "", errShape // a raw control character
		case c == '\\':
			end++
			if end >= len(r.b) {
				return "", errShape
			}
			switch r.b[end] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't', 'u': // JSON's escapes that strconv.Unquote reads alike
			default:
				return "", errShape
			}
		}
	}
	// strconv.Unquote turns a byte that is not UTF-8 into U+FFFD, where the
	// codec refuses the line: check the raw bytes first.
	if end >= len(r.b) || !utf8.Valid(r.b[start:end+1]) {
		return "", errShape
	}
	s, err := strconv.Unquote(string(r.b[start : end+1]))
	if err != nil || !utf8.ValidString(s) {
		return "", errShape
	}
	r.i = end + 1
	return s, nil
}

// shared reads a string value that facts repeat, through the interner.
func (r *lineReader) shared(slot int) (string, error) {
	// Most often the member holds what it held on the line before, whose
	// bytes are known plain: compare them, quotes around, and skip the
	// scan.
	if last := r.in.last[slot]; r.again(last) {
		return last, nil
	}
	start := r.i
	if b, err := r.rawString(); err == nil {
		return r.in.get(slot, b), nil
	}
	r.i = start
	return r.str()
}

// again reads a string value if it is last, a plain string read before
// (not empty), quotes around: its bytes need no scan.
func (r *lineReader) again(last string) bool {
	end := r.i + 1 + len(last)
	if last == "" || end >= len(r.b) || r.b[r.i] != '"' || r.b[end] != '"' || string(r.b[r.i+1:end]) != last {
		return false
	}
	r.i = end + 1
	return true
}

// number returns the bytes of a number value in JSON's grammar
// (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), else nil.
func (r *lineReader) number() []byte {
	start := r.i
	digits := func() int {
		n := 0
		for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			r.i++
			n++
		}
		return n
	}
	r.eat('-')
	if r.eat('0') {
		if r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
			return nil
		}
	} else if digits() == 0 {
		return nil
	}
	if r.eat('.') && digits() == 0 {
		return nil
	}
	if r.eat('e') || r.eat('E') {
		if !r.eat('+') {
			r.eat('-')
		}
		if digits() == 0 {
			return nil
		}
	}
	return r.b[start:r.i]
}

func (r *lineReader) uint() (uint64, error) {
	num := r.number()
	if num == nil {
		return 0, errShape
	}
	n, err := strconv.ParseUint(string(num), 10, 64)
	if err != nil {
		return 0, errShape
	}
	return n, nil
}

// strings reads an array of fact ids into buf (reused: see lineBufs).
func (r *lineReader) strings(buf *[]string) ([]string, error) {
	if !r.eat('[') {
		return nil, errShape
	}
	out := (*buf)[:0]
	if out == nil {
		out = []string{}
	}
	if r.eat(']') {
		return out, nil
	}
	for {
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if r.eat(']') {
			*buf = out
			return out, nil
		}
		if !r.eat(',') {
			return nil, errShape
		}
	}
}

// time reads an instant in the shape appendTime writes (RFC 3339 in UTC:
// 2006-01-02T15:04:05.999999999Z); any other goes to the codec.
func (r *lineReader) time() (time.Time, error) {
	if r.again(r.lastTime) {
		return r.lastAt, nil
	}
	from, to, err := r.rawSpan()
	if err != nil {
		return time.Time{}, err
	}
	s := r.b[from:to]
	const shape = "0000-00-00T00:00:00"
	if len(s) < len(shape)+1 || s[len(s)-1] != 'Z' {
		return time.Time{}, errShape
	}
	// The shape, checked a word at a time: "0000-00-", "00T00:00" and,
	// overlapping, "00:00:00" (each separator in place, every other byte
	// a digit).
	le := binary.LittleEndian
	if !shaped(le.Uint64(s[0:]), 0xff0000ff00000000, 0x2d00002d00000000) ||
		!shaped(le.Uint64(s[8:]), 0x0000ff0000ff0000, 0x00003a0000540000) ||
		!shaped(le.Uint64(s[11:]), 0x0000ff0000ff0000, 0x00003a00003a0000) {
		return time.Time{}, errShape
	}
	ns := 0
	if frac := s[len(shape) : len(s)-1]; len(frac) > 0 {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' {
			return time.Time{}, errShape
		}
		for _, c := range frac[1:] {
			if c < '0' || c > '9' {
				return time.Time{}, errShape
			}
			ns = ns*10 + int(c-'0')
		}
		for range 10 - len(frac) {
			ns *= 10
		}
	}
	// The digits are checked above; time.Parse's own range checks follow,
	// without its allocation and layout walk.
	year, month, day := digits(s[0:4]), time.Month(digits(s[5:7])), digits(s[8:10])
	hour, minute, sec := digits(s[11:13]), digits(s[14:16]), digits(s[17:19])
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, errShape
	}
	r.lastTime, r.lastAt = r.s[from:to], time.Date(year, month, day, hour, minute, sec, ns, time.UTC)
	return r.lastAt, nil
}

// shaped reports whether w holds the bytes seps names where sepMask is set
// and an ASCII digit in every other byte.
func shaped(w, sepMask, seps uint64) bool {
	const zeros, highs, six = 0x3030303030303030, 0xf0f0f0f0f0f0f0f0, 0x0606060606060606
	if w&sepMask != seps {
		return false
	}
	d := w&^sepMask | zeros&sepMask // a '0' in each separator's place
	// Each byte is 0x30 to 0x39: its high half is 3, and adding 6 does not
	// carry into it (no byte carries into the next: 0x3f + 6 < 0x100).
	return d&highs == zeros && (d+six)&highs == zeros
}

// digits returns the value of b's decimal digits (checked by the caller).
func digits(b []byte) int {
	n := 0
	for _, c := range b {
		n = n*10 + int(c-'0')
	}
	return n
}

// daysIn returns the number of days of month in year (proleptic
// Gregorian, as time.Parse counts them).
func daysIn(month time.Month, year int) int {
	switch month {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

func (r *lineReader) subject(s *api.Subject) error {
	var o obj
	for {
		k, err := r.next(&o, subjectNames)
		if err != nil || k < 0 {
			return err
		}
		if k == 0 {
			s.GuildID, err = r.shared(internGuild)
		} else {
			s.UserID, err = r.shared(internUser)
		}
		if err != nil {
			return err
		}
	}
}

// lit reads s if the bytes ahead are s.
func (r *lineReader) lit(s string) bool {
	if len(r.b)-r.i >= len(s) && string(r.b[r.i:r.i+len(s)]) == s {
		r.i += len(s)
		return true
	}
	return false
}

// optional reads an optional member's name (quoted, with its colon) if
// it is ahead, after a comma unless it is its object's first.
func (r *lineReader) optional(m *member, first bool) bool {
	at := r.i
	if !first {
		if at >= len(r.b) || r.b[at] != ',' {
			return false
		}
		at++
	}
	if !m.ahead(r.b[at:]) {
		return false
	}
	r.i = at + len(m.name)
	return true
}

// factInOrder reads a fact exactly as appendFact writes it: every member in
// its order, the optional ones where they go, the names (and the commas
// and braces between them) compared with the bytes ahead, no name read or
// looked up. It is how nearly every fact of a log is read; false means
// the fact is in another shape, and fact reads it again member by member
// from where it began.
func (r *lineReader) factInOrder(f *api.Fact) bool {
	if !r.lit(`{"factId":`) || !r.strTo(&f.FactID) ||
		!r.lit(`,"subject":{"guildId":`) || !r.sharedTo(&f.Subject.GuildID, internGuild) ||
		!r.lit(`,"userId":`) || !r.sharedTo(&f.Subject.UserID, internUser) ||
		!r.lit(`},"kind":`) || !r.sharedTo((*string)(&f.Kind), internKind) ||
		!r.lit(`,"body":`) || !r.strTo(&f.Body) ||
		!r.lit(`,"visibility":{"scope":`) || !r.sharedTo((*string)(&f.Visibility.Scope), internScope) ||
		r.lit(`,"channelId":`) && !r.sharedTo(&f.Visibility.ChannelID, internVisibleIn) ||
		!r.lit(`},"confidence":`) {
		return false
	}
	num := r.number()
	if num == nil {
		return false
	}
	var err error
	if f.Confidence, err = strconv.ParseFloat(string(num), 64); err != nil ||
		!r.lit(`,"createdAt":`) || !r.timeTo(&f.CreatedAt) || !r.lit(`,"updatedAt":`) || !r.timeTo(&f.UpdatedAt) {
		return false
	}
	if r.lit(`,"expiresAt":`) {
		t := new(time.Time)
		if !r.timeTo(t) {
			return false
		}
		f.ExpiresAt = t
	}
	if r.lit(`,"supersedesFactId":`) && !r.strTo(&f.SupersedesFactID) || !r.lit(`,"provenance":{`) {
		return false
	}
	first := true
	for k, m := range provenanceFields(&f.Provenance) {
		if !r.optional(&provenanceNames[k], first) {
			continue
		}
		first = false
		if m.slot < 0 && !r.strTo(m.s) || m.slot >= 0 && !r.sharedTo(m.s, m.slot) {
			return false
		}
	}
	return r.lit(`}}`)
}

// strTo, sharedTo and timeTo read a value as str, shared and time do into
// *dst, and report whether they could.
func (r *lineReader) strTo(dst *string) bool {
	var err error
	*dst, err = r.str()
	return err == nil
}

func (r *lineReader) sharedTo(dst *string, slot int) bool {
	var err error
	*dst, err = r.shared(slot)
	return err == nil
}

func (r *lineReader) timeTo(dst *time.Time) bool {
	var err error
	*dst, err = r.time()
	return err == nil
}

func (r *lineReader) fact(f *api.Fact) error {
	start := r.i
	if r.factInOrder(f) {
		return nil
	}
	r.i, *f = start, api.Fact{} // read again, member by member
	var o obj
	for {
		k, err := r.next(&o, factNames)
		if err != nil || k < 0 {
			return err
		}
		var s string
		switch k {
		case factID:
			f.FactID, err = r.str()
		case factSubject:
			err = r.subject(&f.Subject)
		case factKind:
			s, err = r.shared(internKind)
			f.Kind = api.Kind(s)
		case factBody:
			f.Body, err = r.str()
		case factVisibility:
			err = r.visibility(&f.Visibility)
		case factConfidence:
			num := r.number()
			if num == nil {
				return errShape
			}
			if f.Confidence, err = strconv.ParseFloat(string(num), 64); err != nil {
				err = errShape
			}
		case factCreatedAt:
			f.CreatedAt, err = r.time()
		case factUpdatedAt:
			f.UpdatedAt, err = r.time()
		case factExpiresAt:
			var t time.Time
			if t, err = r.time(); err == nil {
				f.ExpiresAt = &t
			}
		case factSupersedes:
			f.SupersedesFactID, err = r.str()
		case factProvenance:
			err = r.provenance(&f.Provenance)
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) visibility(v *api.Visibility) error {
	var o obj
	for {
		k, err := r.next(&o, visibilityNames)
		if err != nil || k < 0 {
			return err
		}
		var s string
		if k == 0 {
			s, err = r.shared(internScope)
			v.Scope = api.Scope(s)
		} else {
			v.ChannelID, err = r.shared(internVisibleIn)
		}
		if err != nil {
			return err
		}
	}
}

// provenanceField is where a provenance member's value goes, and its
// interner slot (-1: a string of the fact's own).
type provenanceField struct {
	s    *string
	slot int
}

// provenanceFields returns p's members in provenanceNames' order, for
// factInOrder and provenance alike.
func provenanceFields(p *api.Provenance) [6]provenanceField {
	return [6]provenanceField{{(*string)(&p.SourceSurface), internSurface}, {&p.SourceEventID, -1},
		{&p.CorrelationID, -1}, {&p.ProposerUserID, internProposer}, {&p.ChannelID, internChannel},
		{&p.SourceMessageID, -1}}
}

func (r *lineReader) provenance(p *api.Provenance) error {
	fields := provenanceFields(p)
	var o obj
	for {
		k, err := r.next(&o, provenanceNames)
		if err != nil || k < 0 {
			return err
		}
		if f := fields[k]; f.slot < 0 {
			*f.s, err = r.str()
		} else {
			*f.s, err = r.shared(f.slot)
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) proposal(p *people.ProposalRecord) error {
	// As encodeChange and encodeSnapshot write it; else member by member.
	start := r.i
	if r.lit(`{"proposalId":`) && r.strTo(&p.ProposalID) && (!r.lit(`,"digest":`) || r.strTo(&p.Digest)) &&
		r.lit(`,"factId":`) && r.strTo(&p.FactID) && r.lit(`}`) {
		return nil
	}
	r.i, *p = start, people.ProposalRecord{}
	fields := [...]*string{&p.ProposalID, &p.Digest, &p.FactID}
	var o obj
	for {
		k, err := r.next(&o, proposalNames)
		if err != nil || k < 0 {
			return err
		}
		if *fields[k], err = r.str(); err != nil {
			return err
		}
	}
}

// change reads a whole line: a change, a fact line, a record line or a
// header as the store writes it (a reset goes to the codec).
func (r *lineReader) change(l *people.Change) error {
	// A compacted log's fact and record lines, most of its lines, are read
	// without a name lookup: {"fact":…} and {"proposal":…}.
	// Any other line, or one of these with more, is read member by member.
	switch start := r.i; {
	case r.lit(`{"schemaVersion":`):
		// The header, each member where encodeLine writes it (the codec
		// reads one in another shape, or with more).
		r.bufs.subject = api.Subject{}
		if v, err := r.uint(); err == nil && v <= math.MaxInt32 && r.lit(`,"subject":`) && r.subject(&r.bufs.subject) == nil {
			var seq uint64
			if r.lit(`,"seq":`) {
				seq, err = r.uint()
			}
			if err == nil && r.end() {
				l.SchemaVersion, l.Subject, l.Seq = int(v), &r.bufs.subject, seq
				return nil
			}
		}
		r.i = start
		return errShape
	case r.lit(`{"fact":`):
		if r.factInto(l) == nil && r.end() {
			return nil
		}
		r.i, l.Fact = start, nil
	case r.lit(`{"proposal":`):
		if r.recordInto(l) == nil && r.end() {
			return nil
		}
		r.i, l.Proposal = start, nil
	}
	var o obj
	for {
		k, err := r.next(&o, lineNames)
		if err != nil {
			return err
		}
		if k < 0 {
			break
		}
		switch k {
		case lineSeq:
			l.Seq, err = r.uint()
		case lineFact:
			err = r.factInto(l)
		case lineRemove:
			l.Remove, err = r.strings(&r.bufs.remove)
		case lineClearDigest:
			l.ClearDigest, err = r.strings(&r.bufs.clear)
		case linePut:
			err = r.facts(&l.Put)
		case lineProposal:
			err = r.recordInto(l)
		}
		if err != nil {
			return err
		}
	}
	if r.i != len(r.b) {
		return errShape
	}
	return nil
}

// end reads the closing brace of the line's object, its last byte.
func (r *lineReader) end() bool { return r.lit(`}`) && r.i == len(r.b) }

// factInto and recordInto read a line's fact or record into the line
// buffers, and point l at it.
func (r *lineReader) factInto(l *people.Change) error {
	r.bufs.fact = api.Fact{}
	l.Fact = &r.bufs.fact
	return r.fact(l.Fact)
}

func (r *lineReader) recordInto(l *people.Change) error {
	r.bufs.record = people.ProposalRecord{}
	l.Proposal = &r.bufs.record
	return r.proposal(l.Proposal)
}

func (r *lineReader) facts(out *[]api.Fact) error {
	if !r.eat('[') {
		return errShape
	}
	*out = r.bufs.put[:0]
	if *out == nil {
		*out = []api.Fact{}
	}
	for !r.eat(']') {
		if len(*out) > 0 && !r.eat(',') {
			return errShape
		}
		*out = append(*out, api.Fact{})
		if err := r.fact(&(*out)[len(*out)-1]); err != nil {
			return err
		}
	}
	r.bufs.put = *out
	return nil
}
