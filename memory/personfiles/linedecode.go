package personfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
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

// errShape is decodeLine's refusal: the line is not in the shape it reads.
var errShape = errors.New("not a line in the store's own shape")

// decodeLine decodes one log line into l.
func decodeLine(line []byte, l *people.Change, in *interner) error {
	if err := (&lineReader{b: line, in: in}).change(l); err == nil {
		return nil
	}
	*l = people.Change{}
	return jsonv2.Unmarshal(line, l)
}

// interner shares the strings of up to 20 bytes a log repeats on every
// fact (kinds, scopes, surfaces, and the Discord ids of the subject, the
// channel and the proposer), so a decoded person holds each once;
// decodedBytes counts them so.
type interner struct{ m map[string]string }

// internMax is the longest string interner shares: a snowflake's 20 digits.
const internMax = 20

func (in *interner) get(b []byte) string {
	if len(b) > internMax {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	if in.m == nil {
		in.m = make(map[string]string, 16)
	}
	s := string(b)
	in.m[s] = s
	return s
}

type lineReader struct {
	b  []byte
	i  int
	in *interner
}

func (r *lineReader) eat(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// obj is one object being read: whether its '{' was read, the names seen
// (a name twice is the codec's to refuse), and whether it has ended.
type obj struct {
	begun bool
	seen  [16][]byte
	n     int
	done  bool
}

// next reads the next member's name and its ':' (the object's '{' first),
// leaving the reader at its value; false once the object has ended.
func (r *lineReader) next(o *obj) ([]byte, bool, error) {
	if !o.begun {
		if !r.eat('{') {
			return nil, false, errShape
		}
		o.begun, o.done = true, r.eat('}')
	}
	if o.done {
		return nil, false, nil
	}
	if o.n > 0 {
		if r.eat('}') {
			o.done = true
			return nil, false, nil
		}
		if !r.eat(',') {
			return nil, false, errShape
		}
	}
	name, err := r.rawString()
	if err != nil || !r.eat(':') || o.n == len(o.seen) {
		return nil, false, errShape
	}
	for _, s := range o.seen[:o.n] {
		if bytes.Equal(s, name) {
			return nil, false, errShape
		}
	}
	o.seen[o.n] = name
	o.n++
	return name, true, nil
}

// rawString reads a string without escapes and returns its bytes (valid
// UTF-8 without control characters), else errShape (str then handles
// escapes). Most strings are plain ASCII: one pass (firstSpecial) finds
// their closing quote and proves them so.
func (r *lineReader) rawString() ([]byte, error) {
	if !r.eat('"') {
		return nil, errShape
	}
	rest := r.b[r.i:]
	if j := firstSpecial(rest); j < len(rest) && rest[j] == '"' {
		r.i += j + 1
		return rest[:j], nil
	}
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil, errShape
	}
	s := rest[:j]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return nil, errShape
		}
	}
	if !utf8.Valid(s) {
		return nil, errShape
	}
	r.i += j + 1
	return s, nil
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

// str reads a string value, escapes included, shared through the
// interner.
func (r *lineReader) str() (string, error) { return r.strShared(true) }

// unique reads a string value that is not shared: an id no other line
// repeats (an event's, a correlation's or a proposal's), or a fact's id,
// which a log names only a few times (its fact, its record, a remove).
// Interning them would only grow the interner's map, which a cold load
// paid for every fact; it stays at the handful of strings every fact
// repeats.
func (r *lineReader) unique() (string, error) { return r.strShared(false) }

func (r *lineReader) strShared(intern bool) (string, error) {
	start := r.i
	if s, err := r.rawString(); err == nil {
		if !intern {
			return string(s), nil
		}
		return r.in.get(s), nil
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

// strings reads an array of fact ids (unique: see factId).
func (r *lineReader) strings() ([]string, error) {
	if !r.eat('[') {
		return nil, errShape
	}
	var out []string
	if r.eat(']') {
		return []string{}, nil
	}
	for {
		s, err := r.unique()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if r.eat(']') {
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
	s, err := r.rawString()
	if err != nil {
		return time.Time{}, err
	}
	const shape = "0000-00-00T00:00:00"
	if len(s) < len(shape)+1 || s[len(s)-1] != 'Z' {
		return time.Time{}, errShape
	}
	for i := range len(shape) {
		if shape[i] == '0' && (s[i] < '0' || s[i] > '9') || shape[i] != '0' && s[i] != shape[i] {
			return time.Time{}, errShape
		}
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
	return time.Date(year, month, day, hour, minute, sec, ns, time.UTC), nil
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
		name, ok, err := r.next(&o)
		if err != nil || !ok {
			return err
		}
		switch string(name) {
		case "guildId":
			s.GuildID, err = r.str()
		case "userId":
			s.UserID, err = r.str()
		default:
			err = errShape
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) fact(f *api.Fact) error {
	var o obj
	for {
		name, ok, err := r.next(&o)
		if err != nil || !ok {
			return err
		}
		var s string
		switch string(name) {
		case "factId":
			f.FactID, err = r.unique()
		case "subject":
			err = r.subject(&f.Subject)
		case "kind":
			s, err = r.str()
			f.Kind = api.Kind(s)
		case "body":
			f.Body, err = r.str()
		case "visibility":
			err = r.visibility(&f.Visibility)
		case "confidence":
			num := r.number()
			if num == nil {
				return errShape
			}
			if f.Confidence, err = strconv.ParseFloat(string(num), 64); err != nil {
				err = errShape
			}
		case "createdAt":
			f.CreatedAt, err = r.time()
		case "updatedAt":
			f.UpdatedAt, err = r.time()
		case "expiresAt":
			var t time.Time
			if t, err = r.time(); err == nil {
				f.ExpiresAt = &t
			}
		case "supersedesFactId":
			f.SupersedesFactID, err = r.unique()
		case "provenance":
			err = r.provenance(&f.Provenance)
		default:
			err = errShape // expired, and anything new: the codec's
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) visibility(v *api.Visibility) error {
	var o obj
	for {
		name, ok, err := r.next(&o)
		if err != nil || !ok {
			return err
		}
		var s string
		switch string(name) {
		case "scope":
			s, err = r.str()
			v.Scope = api.Scope(s)
		case "channelId":
			v.ChannelID, err = r.str()
		default:
			err = errShape
		}
		if err != nil {
			return err
		}
	}
}

func (r *lineReader) provenance(p *api.Provenance) error {
	var o obj
	for {
		name, ok, err := r.next(&o)
		if err != nil || !ok {
			return err
		}
		var s string
		switch string(name) {
		case "sourceEventId", "correlationId", "sourceMessageId":
			s, err = r.unique()
		default:
			s, err = r.str()
		}
		if err != nil {
			return err
		}
		switch string(name) {
		case "sourceSurface":
			p.SourceSurface = api.Surface(s)
		case "sourceEventId":
			p.SourceEventID = s
		case "correlationId":
			p.CorrelationID = s
		case "proposerUserId":
			p.ProposerUserID = s
		case "channelId":
			p.ChannelID = s
		case "sourceMessageId":
			p.SourceMessageID = s
		default:
			return errShape
		}
	}
}

func (r *lineReader) proposal(p *people.ProposalRecord) error {
	var o obj
	for {
		name, ok, err := r.next(&o)
		if err != nil || !ok {
			return err
		}
		switch string(name) {
		case "proposalId":
			p.ProposalID, err = r.unique()
		case "digest":
			p.Digest, err = r.unique()
		case "factId":
			p.FactID, err = r.unique()
		default:
			err = errShape
		}
		if err != nil {
			return err
		}
	}
}

// change reads a whole line: a change, a fact line or a record line (a
// header or a reset goes to the codec).
func (r *lineReader) change(l *people.Change) error {
	var o obj
	for {
		name, ok, err := r.next(&o)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		switch string(name) {
		case "seq":
			l.Seq, err = r.uint()
		case "fact":
			l.Fact = new(api.Fact)
			err = r.fact(l.Fact)
		case "remove":
			l.Remove, err = r.strings()
		case "clearDigest":
			l.ClearDigest, err = r.strings()
		case "put":
			err = r.facts(&l.Put)
		case "proposal":
			l.Proposal = new(people.ProposalRecord)
			err = r.proposal(l.Proposal)
		default:
			err = errShape
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

func (r *lineReader) facts(out *[]api.Fact) error {
	if !r.eat('[') {
		return errShape
	}
	*out = []api.Fact{}
	for !r.eat(']') {
		if len(*out) > 0 && !r.eat(',') {
			return errShape
		}
		*out = append(*out, api.Fact{})
		if err := r.fact(&(*out)[len(*out)-1]); err != nil {
			return err
		}
	}
	return nil
}
