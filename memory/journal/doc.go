// Package journal is a write-ahead log of records the caller encodes: it
// knows nothing of what a record means. A record is made durable by one
// fdatasync shared by every record appended while the previous one ran
// (group commit); each carries a generation, so a checkpoint can start the
// log again from offset 0 without zeroing it; replay hands back the current
// generation's records in the order they were appended, skipping one a
// damaged sector or a flipped bit spoiled; Blank overwrites chosen records
// so what they held does not stay on disk.
//
// # Usage
//
//	l, err := journal.Open(root, "wal/journal", journal.Options{Size: 16 << 20, Disk: durable.NewDisk(observe)})
//
//	// At start, with the generation the caller's last checkpoint named:
//	got, err := l.Replay(gen, func(rec []byte) error {
//		return apply(rec) // rec is valid only during the call
//	})
//	var bad *journal.CorruptionError
//	if errors.As(err, &bad) {
//		// a whole record apply refused, at bad.Offset
//	}
//	// Once what the records describe is durable elsewhere (a checkpoint),
//	// a new generation; zero overwrites what the older ones wrote:
//	err = l.Reset(gen+1, true)
//
//	// On each change, from any number of goroutines:
//	err = l.Append(rec1, rec2) // durable, in order, when it returns nil
//	if l.Used() > 12<<20 {
//		// time for a checkpoint, then l.Reset(next, false)
//	}
//
//	// To leave nothing of some records on disk (the newest kept):
//	n, err := l.Blank(func(rec []byte) bool { return bytes.HasPrefix(rec, key) }, true)
//
// Reset and Blank wait for running appends and hold off new ones, so the
// caller need not exclude them itself.
//
// # On-disk format
//
// The file is preallocated with zeros (Options.Size), so an append writes
// into blocks the file already has and its fdatasync commits no size
// change. Records follow each other from offset 0, one line each, all ASCII
// framing around the caller's bytes. A record must be a JSON object on one
// line, as encoding/json writes it: it begins with '{' and a field (or is
// "{}"), ends with '}', holds no newline. The file stays a file of JSON
// lines that jq reads. For the record
//
//	{"person":"p-1_2.jsonl","facts":5}
//
// appended in generation 3 the line is
//
//	{"g":3,"person":"p-1_2.jsonl","facts":5,"crc32c":"1a2b3c4d"}\n
//
// byte by byte:
//
//	{"g":           5 bytes, the frame's opening
//	3               the generation, decimal, no leading zero
//	,               then the record without its opening brace and its
//	"person":…      closing brace (nothing at all for "{}")
//	,"crc32c":"     11 bytes
//	1a2b3c4d        the CRC-32C (Castagnoli) of every byte of the line
//	                before ,"crc32c":", as eight lower-case hex digits
//	"}              2 bytes
//	\n              the end of the record
//
// A damaged record fails its checksum wherever the damage is (a flipped
// bit, a zeroed sector, a torn write), and the next newline is where the
// next record begins, so a bad record costs only itself.
//
// A blanked record is overwritten with spaces, keeping its newline: replay
// skips a line of spaces.
//
// Replay reads from offset 0 and ends at the first whole record of another
// generation (a line left from before a Reset: the new generation is
// written over the old one, and ends before the old one's records), or
// where the file holds only zeros (a whole 64 KiB block of them, or the
// end). A last line without its newline is a torn tail: an append a crash
// cut short, never acknowledged.
//
// What replay skips and what it refuses:
//
//   - A line failing its checksum is skipped. Replayed.Skipped counts those
//     followed by a good record of the generation; bad lines after the last
//     good one are a torn tail or the remnant of an older generation, and
//     are not counted.
//   - A record that passes its checksum was written whole by Append. If the
//     reader's function refuses it, skipping it could drop an acknowledged
//     change, so replay stops with a *CorruptionError giving its offset.
//
// Journals written before records carried a checksum (the same lines
// without the crc32c field) are read by ReplayUnsealed, which stops at the
// first line that is not JSON or not of the generation.
package journal
