package journal

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clankie/clankie/memory/durable"
)

const testName = "j"

func openTest(t *testing.T, root *os.Root, opts Options) *Log {
	t.Helper()
	if opts.Size == 0 {
		opts.Size = 1 << 20
	}
	l, err := Open(root, testName, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newLog(t *testing.T) (*Log, *os.Root) {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	l := openTest(t, root, Options{})
	if err := l.Reset(1, false); err != nil {
		t.Fatal(err)
	}
	return l, root
}

// replayAll reopens the file, as a restart does, and returns the records
// of gen.
func replayAll(t *testing.T, root *os.Root, gen uint64) ([]string, Replayed) {
	t.Helper()
	l := openTest(t, root, Options{})
	var recs []string
	got, err := l.Replay(gen, func(rec []byte) error {
		recs = append(recs, string(rec))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs, got
}

func fileBytes(t *testing.T, root *os.Root) []byte {
	t.Helper()
	b, err := root.ReadFile(testName)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func crc32Castagnoli(s string) uint32 {
	return crc32.Checksum([]byte(s), crc32.MakeTable(crc32.Castagnoli))
}

func rec(i int) []byte { return fmt.Appendf(nil, `{"n":%d,"body":"record number %d"}`, i, i) }

func TestAppendReplayRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		appends [][]string
	}{
		{"one record", [][]string{{`{"a":1}`}}},
		{"the empty object", [][]string{{`{}`}, {`{"a":1}`}, {`{}`}}},
		{"several per append", [][]string{{`{"a":1}`, `{"b":"two"}`}, {`{"c":[3,{"d":4}]}`}}},
		{"an escaped newline and a brace in a string", [][]string{{`{"s":"x\ny}"}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, root := newLog(t)
			var want []string
			for _, recs := range tc.appends {
				var bs [][]byte
				for _, r := range recs {
					bs = append(bs, []byte(r))
					want = append(want, r)
				}
				if err := l.Append(bs...); err != nil {
					t.Fatal(err)
				}
			}
			got, st := replayAll(t, root, 1)
			if strings.Join(got, "\n") != strings.Join(want, "\n") || st.Records != len(want) || st.Skipped != 0 {
				t.Fatalf("replayed %q %+v, want %q", got, st, want)
			}
			if st.Used != l.Used() {
				t.Fatalf("replay found %d bytes used, the log wrote %d", st.Used, l.Used())
			}
		})
	}
}

// TestFormat holds a line to the package doc, byte by byte, and checks the
// checksum catches a change of any byte.
func TestFormat(t *testing.T) {
	line := frame(nil, 3, []byte(`{"person":"p-1_2.jsonl","facts":5}`))
	const covered = `{"g":3,"person":"p-1_2.jsonl","facts":5`
	want := fmt.Sprintf(`%s,"crc32c":"%08x"}`+"\n", covered, crc32Castagnoli(covered))
	if string(line) != want {
		t.Fatalf("framed as %q, want %q", line, want)
	}
	if got := string(frame(nil, 12, []byte(`{}`))); got != fmt.Sprintf(`{"g":12,"crc32c":"%08x"}`+"\n", crc32Castagnoli(`{"g":12`)) {
		t.Fatalf("the empty object framed as %q", got)
	}
	line = line[:len(line)-1]
	if _, ok := unseal(line); !ok {
		t.Fatalf("a line fails its own check: %q", line)
	}
	for i := range line {
		for _, flip := range []byte{0x01, 0x20, 0xff} {
			bad := bytes.Clone(line)
			bad[i] ^= flip
			if _, ok := unseal(bad); ok {
				t.Fatalf("byte %d xor %#x passes the check: %q", i, flip, bad)
			}
		}
	}
	for _, bad := range []string{"", "{}", `{"g":7}`, string(line[:len(line)-1])} {
		if _, ok := unseal([]byte(bad)); ok {
			t.Fatalf("%q passes the check", bad)
		}
	}
}

func TestAppendRefusesWhatCannotBeFramed(t *testing.T) {
	l, _ := newLog(t)
	for _, bad := range []string{"", "{", "}", "[]", "null", `{ "a":1}`, "{\"a\":\n1}", `"{}"`} {
		if err := l.Append([]byte(`{"ok":1}`), []byte(bad)); !errors.Is(err, ErrRecord) {
			t.Errorf("%q: %v, want ErrRecord", bad, err)
		}
	}
	if l.Used() != 0 {
		t.Fatalf("a refused append wrote %d bytes", l.Used())
	}
}

// TestGroupCommit appends from many goroutines at once: every record is
// durable when its append returns, and they share fdatasyncs.
func TestGroupCommit(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	var observed atomic.Int64
	l := openTest(t, root, Options{Disk: durable.NewDisk(func(time.Duration) { observed.Add(1) })})
	if err := l.Reset(1, false); err != nil {
		t.Fatal(err)
	}
	created := observed.Load() // the new file's fsync and its directory's
	const writers, each = 64, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				errs <- l.Append(rec(w*each + i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats()
	if st.Records != writers*each || st.Syncs >= st.Records || st.Syncs == 0 || st.SyncTime <= 0 {
		t.Fatalf("stats %+v: want %d records sharing fewer syncs", st, writers*each)
	}
	if observed.Load()-created != st.Syncs {
		t.Fatalf("the observer saw %d syncs, the log made %d", observed.Load()-created, st.Syncs)
	}
	t.Logf("%d records, %d fdatasyncs", st.Records, st.Syncs)
	got, _ := replayAll(t, root, 1)
	seen := map[string]bool{}
	for _, r := range got {
		seen[r] = true
	}
	for i := range writers * each {
		if !seen[string(rec(i))] {
			t.Fatalf("record %d was acknowledged and is not replayed", i)
		}
	}
}

// TestDamage damages the file as a crash or a disk does and checks what
// replay hands back.
func TestDamage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		damage      func(b []byte, lines [][2]int) // lines: start and end (newline) of each record
		want        []int
		wantSkipped int
	}{
		{"a torn tail", func(b []byte, lines [][2]int) {
			end := lines[3][1] + 1
			copy(b[end:], frame(nil, 1, rec(4))[:20])
		}, []int{0, 1, 2, 3}, 0},
		{"a flipped byte", func(b []byte, lines [][2]int) { b[lines[1][0]+15] ^= 0x04 }, []int{0, 2, 3}, 1},
		{"a zeroed stretch", func(b []byte, lines [][2]int) { clear(b[lines[1][0]+3 : lines[2][0]+5]) }, []int{0, 3}, 1},
		{"a lost newline", func(b []byte, lines [][2]int) { b[lines[1][1]] = ' ' }, []int{0, 3}, 1},
		{"a flipped byte in the generation", func(b []byte, lines [][2]int) { b[lines[2][0]+5] ^= 0x01 }, []int{0, 1, 3}, 1},
		{"the last record damaged", func(b []byte, lines [][2]int) { b[lines[3][0]+30] ^= 0x10 }, []int{0, 1, 2}, 0},
		{"the first record blank", func(b []byte, lines [][2]int) {
			for i := lines[0][0]; i < lines[0][1]; i++ {
				b[i] = ' '
			}
		}, []int{1, 2, 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, root := newLog(t)
			var lines [][2]int
			for i := range 4 {
				start := l.Used()
				if err := l.Append(rec(i)); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, [2]int{int(start), int(l.Used()) - 1})
			}
			b := fileBytes(t, root)
			tc.damage(b, lines)
			if err := root.WriteFile(testName, b, 0o600); err != nil {
				t.Fatal(err)
			}
			got, st := replayAll(t, root, 1)
			var want []string
			for _, i := range tc.want {
				want = append(want, string(rec(i)))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") || st.Skipped != tc.wantSkipped {
				t.Fatalf("replayed %q, %d skipped; want %q, %d skipped", got, st.Skipped, want, tc.wantSkipped)
			}
		})
	}
}

func TestGenerations(t *testing.T) {
	l, root := newLog(t)
	long := []byte(`{"body":"` + strings.Repeat("a long record of the first generation ", 20) + `"}`)
	for range 3 {
		if err := l.Append(long); err != nil {
			t.Fatal(err)
		}
	}
	// A checkpoint: generation 2 is written over generation 1, whose
	// records stay after it.
	if err := l.Reset(2, false); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := l.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := replayAll(t, root, 2); len(got) != 5 || got[4] != string(rec(4)) {
		t.Fatalf("generation 2 replays %q", got)
	}
	if got, st := replayAll(t, root, 1); len(got) != 0 || st.Used <= l.Used() {
		t.Fatalf("generation 1 replays %q (%+v): its records after generation 2's are dead", got, st)
	}
	if got, _ := replayAll(t, root, 3); len(got) != 0 {
		t.Fatalf("generation 3 replays %q", got)
	}
	// A clean stop's checkpoint zeroes everything.
	if err := l.Reset(3, true); err != nil {
		t.Fatal(err)
	}
	if b := fileBytes(t, root); len(bytes.TrimRight(b, "\x00")) != 0 {
		t.Fatalf("Reset with zero left %d bytes", len(bytes.TrimRight(b, "\x00")))
	}
	if err := l.Append(rec(9)); err != nil {
		t.Fatal(err)
	}
	if got, _ := replayAll(t, root, 3); len(got) != 1 || got[0] != string(rec(9)) {
		t.Fatalf("generation 3 replays %q", got)
	}
}

// TestBlank blanks records holding a secret: nothing of them stays in the
// file, the newest of the current generation stays when asked, and the
// others replay.
func TestBlank(t *testing.T) {
	secret := func(i int) []byte { return fmt.Appendf(nil, `{"who":"u","body":"topsecret %d"}`, i) }
	isU := func(r []byte) bool { return bytes.HasPrefix(r, []byte(`{"who":"u"`)) }
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepNewest=%v", keep), func(t *testing.T) {
			l, root := newLog(t)
			// An older generation's record, half overwritten by the
			// current one, so that what is left no longer begins with
			// its frame; and one whole after it.
			long := fmt.Appendf(nil, `{"who":"u","body":"%s"}`, strings.Repeat("topsecret ", 50))
			if err := l.Append(long, secret(0)); err != nil {
				t.Fatal(err)
			}
			if err := l.Reset(2, false); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(rec(0), secret(1)); err != nil {
				t.Fatal(err)
			}
			damaged := l.Used()
			if err := l.Append(secret(3)); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(rec(1), secret(2)); err != nil {
				t.Fatal(err)
			}
			if err := l.Append(rec(2)); err != nil {
				t.Fatal(err)
			}
			// A damaged record of u (a digit of its checksum): it no
			// longer passes its checksum, but it still holds the secret.
			b := fileBytes(t, root)
			b[damaged+int64(len(frame(nil, 2, secret(3))))-5] ^= 0x01
			if err := root.WriteFile(testName, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b[l.Used():], []byte("topsecret")) {
				t.Fatal("the test left no remnant of the older generation")
			}
			spans := lineSpans(b)
			n, err := l.Blank(isU, keep)
			if err != nil {
				t.Fatal(err)
			}
			b = fileBytes(t, root)
			kept := 0
			for _, sp := range spans {
				line := b[sp[0]:sp[1]]
				switch {
				case len(bytes.Trim(line, " ")) == 0:
				case bytes.Contains(line, secret(2)[1:len(secret(2))-1]):
					kept++
				case bytes.Contains(line, []byte("topsecret")):
					t.Errorf("a line still holds a secret: %q", line)
				}
			}
			want := 0
			if keep {
				want = 1
			}
			if kept != want {
				t.Errorf("%d newest records kept, want %d", kept, want)
			}
			if n != 5-want {
				t.Errorf("blanked %d lines, want %d", n, 5-want)
			}
			got, _ := replayAll(t, root, 2)
			wantRecs := []string{string(rec(0)), string(rec(1))}
			if keep {
				wantRecs = append(wantRecs, string(secret(2)))
			}
			wantRecs = append(wantRecs, string(rec(2)))
			if strings.Join(got, "\n") != strings.Join(wantRecs, "\n") {
				t.Errorf("after Blank, replay gives %q, want %q", got, wantRecs)
			}
		})
	}
}

// lineSpans returns the start and end of every line of b's used part.
func lineSpans(b []byte) [][2]int {
	var out [][2]int
	b = bytes.TrimRight(b, "\x00")
	for start := 0; start < len(b); {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			out = append(out, [2]int{start, len(b)})
			break
		}
		out = append(out, [2]int{start, start + end})
		start += end + 1
	}
	return out
}

// TestCorruptionError: a whole record the reader refuses stops replay with
// its offset, and the error quotes nothing of it.
func TestCorruptionError(t *testing.T) {
	l, root := newLog(t)
	var offsets []int64
	for i := range 3 {
		offsets = append(offsets, l.Used())
		if err := l.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	refused := errors.New("not a change")
	r := openTest(t, root, Options{})
	var seen int
	_, err := r.Replay(1, func(b []byte) error {
		if bytes.Equal(b, rec(1)) {
			return refused
		}
		seen++
		return nil
	})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != offsets[1] || !errors.Is(err, refused) || ce.Path != testName {
		t.Fatalf("replay: %v (%+v), want a CorruptionError at %d", err, ce, offsets[1])
	}
	if seen != 1 {
		t.Fatalf("replay went on after the refused record: %d records seen", seen)
	}
	if strings.Contains(err.Error(), "record number") {
		t.Fatalf("the error quotes the record: %v", err)
	}
}

// TestReplayUnsealed reads a journal written before records carried a
// checksum: it ends at the first line that is not a JSON object of the
// generation.
func TestReplayUnsealed(t *testing.T) {
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	old := `{"g":4,"a":1}` + "\n" + `        ` + "\n" + `{"g":4,"b":[2]}` + "\n" + `{"g":3,"c":3}` + "\n" + `{"g":4,"d":4}` + "\n"
	b := make([]byte, 4096)
	copy(b, old)
	if err := root.WriteFile(testName, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, root, Options{})
	var got []string
	st, err := l.ReplayUnsealed(4, func(r []byte) error {
		got = append(got, string(r))
		return nil
	})
	if err != nil || strings.Join(got, " ") != `{"a":1} {"b":[2]}` || st.Used != int64(len(old)) {
		t.Fatalf("replayed %q %+v %v", got, st, err)
	}
}

// TestResetAndBlankWaitForAppends runs them among appends (under -race):
// neither interleaves with an append's write.
func TestResetAndBlankWaitForAppends(t *testing.T) {
	l, root := newLog(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.Append(rec(w*1_000_000 + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for g := uint64(2); g < 20; g++ {
		if _, err := l.Blank(func(r []byte) bool { return bytes.Contains(r, []byte(`"n":1`)) }, true); err != nil {
			t.Fatal(err)
		}
		if err := l.Reset(g, g%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if _, st := replayAll(t, root, 19); st.Skipped != 0 {
		t.Fatalf("a damaged record after concurrent resets: %+v", st)
	}
}
