package personfiles

import (
	"encoding/binary"
	"slices"
	"sort"
	"strings"
)

// peopleIndex is the catalog in memory: every person with at least one
// fact, by log name, with their fact count. It is built to stay small with
// 100,000 people: most names are in base, sorted and front-coded (a name
// keeps only what differs from the one before it, and people of one guild
// share most of their name), with a two-byte count each (a person holds up
// to 256 facts: 128 Discord-visible and 128 operator-only); people who appear
// after base was built wait in extra until the next checkpoint merges them
// in. A map of 100,000 strings took about 8 MiB; base takes under 1.
// It is not safe for concurrent use (the store's mu guards it).
type peopleIndex struct {
	base  frontCoded
	extra map[string]int32 // people not in base
	n     int              // people with a count above zero
}

// indexKey is a log name without the "jsonl" of its suffix: every name has
// it, and dropping it keeps the order (no name holds a '.' before it).
func indexKey(name string) string { return strings.TrimSuffix(name, "jsonl") }

func nameOf(key []byte) string { return string(key) + "jsonl" }

// set records a person's fact count (0 removes them), one that fits in
// countBytes, and returns the count it replaces.
func (x *peopleIndex) set(name string, n int) (before int) {
	at := -1
	if e, ok := x.extra[name]; ok {
		before = int(e)
	} else if at = x.base.find(indexKey(name)); at >= 0 {
		before = x.base.count(at)
	}
	switch {
	case before == 0 && n > 0:
		x.n++
	case before > 0 && n == 0:
		x.n--
	}
	switch {
	case at >= 0:
		// 0 keeps the name as a tombstone until the next rebuild.
		if n == 0 && before > 0 {
			x.base.tombstones++
		} else if n > 0 && before == 0 {
			x.base.tombstones--
		}
		binary.LittleEndian.PutUint16(x.base.data[at:], uint16(n))
	case n == 0:
		delete(x.extra, name)
	default:
		if x.extra == nil {
			x.extra = map[string]int32{}
		}
		x.extra[name] = int32(n)
	}
	return before
}

func (x *peopleIndex) len() int { return x.n }

// each calls fn for every person whose name comes after cursor (all with
// ""), in name order, with their key (valid only during the call; the name
// is nameOf(key)), until fn returns false.
func (x *peopleIndex) each(cursor string, fn func(key []byte, count int) bool) {
	extra := make([]string, 0, len(x.extra))
	for n := range x.extra {
		if n > cursor {
			extra = append(extra, indexKey(n))
		}
	}
	sort.Strings(extra)
	more := true
	x.base.each(indexKey(cursor), func(key []byte, count int) bool {
		if count == 0 {
			return true
		}
		for len(extra) > 0 && extra[0] < string(key) {
			if more = fn([]byte(extra[0]), int(x.extra[extra[0]+"jsonl"])); !more {
				return false
			}
			extra = extra[1:]
		}
		more = fn(key, count)
		return more
	})
	for _, k := range extra {
		if !more {
			return
		}
		more = fn([]byte(k), int(x.extra[k+"jsonl"]))
	}
}

// rebuild folds extra into base and drops the tombstones.
func (x *peopleIndex) rebuild() {
	var b frontCodedBuilder
	x.each("", func(key []byte, count int) bool {
		b.add(key, count)
		return true
	})
	x.base, x.extra = b.finish(), nil
}

// frontCoded is a sorted list of keys, each with a count, in blocks of
// blockLen entries. An entry is
//
//	uvarint(bytes shared with the previous key) uvarint(len(rest)) rest count
//
// where count is countBytes bytes, little-endian, and a block's first
// entry shares nothing, so a lookup binary-searches the blocks by their
// first key and then reads one block.
type frontCoded struct {
	data       []byte
	blocks     []uint32 // where each block starts in data
	tombstones int      // entries whose count became 0
}

const blockLen = 16

// countBytes is the width of an entry's count: a person's facts, at most
// 256, do not fit in one byte.
const countBytes = 2

// count returns the count stored at at (where scan found it).
func (f *frontCoded) count(at int) int {
	return int(binary.LittleEndian.Uint16(f.data[at:]))
}

// firstKey returns block i's first key.
func (f *frontCoded) firstKey(i int) []byte {
	p := int(f.blocks[i])
	_, k := binary.Uvarint(f.data[p:])
	p += k
	l, k := binary.Uvarint(f.data[p:])
	p += k
	return f.data[p : p+int(l)]
}

// block returns the block whose first key is the last one not above key
// (-1: key comes before every block).
func (f *frontCoded) block(key string) int {
	return sort.Search(len(f.blocks), func(i int) bool { return string(f.firstKey(i)) > key }) - 1
}

// scan reads block i's entries in order, calling fn with each key (valid
// only during the call) and where its count is, until fn returns false.
func (f *frontCoded) scan(i int, buf []byte, fn func(key []byte, at int) bool) bool {
	p := int(f.blocks[i])
	end := len(f.data)
	if i+1 < len(f.blocks) {
		end = int(f.blocks[i+1])
	}
	key := buf[:0]
	for p < end {
		shared, k := binary.Uvarint(f.data[p:])
		p += k
		l, k := binary.Uvarint(f.data[p:])
		p += k
		key = append(key[:shared], f.data[p:p+int(l)]...)
		p += int(l)
		if !fn(key, p) {
			return false
		}
		p += countBytes
	}
	return true
}

// find returns where key's count is in data, or -1.
func (f *frontCoded) find(key string) int {
	i := f.block(key)
	if i < 0 {
		return -1
	}
	var buf [256]byte
	found := -1
	f.scan(i, buf[:], func(k []byte, at int) bool {
		if string(k) < key {
			return true
		}
		if string(k) == key {
			found = at
		}
		return false
	})
	return found
}

// each calls fn for every entry whose key is above after, in order, until
// fn returns false.
func (f *frontCoded) each(after string, fn func(key []byte, count int) bool) {
	var buf [256]byte
	for i := max(f.block(after), 0); i < len(f.blocks); i++ {
		more := f.scan(i, buf[:], func(k []byte, at int) bool {
			if string(k) <= after {
				return true
			}
			return fn(k, f.count(at))
		})
		if !more {
			return
		}
	}
}

// frontCodedBuilder builds a frontCoded from keys added in strictly
// increasing order.
type frontCodedBuilder struct {
	f    frontCoded
	prev []byte
	n    int
}

// add appends key; it reports false (adding nothing) when key does not
// come after the previous one.
func (b *frontCodedBuilder) add(key []byte, count int) bool {
	if b.n > 0 && string(key) <= string(b.prev) {
		return false
	}
	shared := 0
	if b.n%blockLen == 0 {
		b.f.blocks = append(b.f.blocks, uint32(len(b.f.data)))
	} else {
		for shared < len(key) && shared < len(b.prev) && key[shared] == b.prev[shared] {
			shared++
		}
	}
	b.f.data = binary.AppendUvarint(b.f.data, uint64(shared))
	b.f.data = binary.AppendUvarint(b.f.data, uint64(len(key)-shared))
	b.f.data = append(b.f.data, key[shared:]...)
	b.f.data = binary.LittleEndian.AppendUint16(b.f.data, uint16(count))
	b.prev = append(b.prev[:0], key...)
	b.n++
	return true
}

// finish returns the list, its arrays trimmed to their length.
func (b *frontCodedBuilder) finish() frontCoded {
	return frontCoded{data: slices.Clip(slices.Clone(b.f.data)), blocks: slices.Clone(b.f.blocks)}
}
