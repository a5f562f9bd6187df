package journal

import (
	"bytes"
	"os"
	"testing"
)

// FuzzReplay appends a record and writes arbitrary bytes after it: Append
// refuses only what cannot be framed, the record replays as it was given
// whatever follows it, and nothing in the file makes Replay, Blank or
// ReplayUnsealed panic or fail.
func FuzzReplay(f *testing.F) {
	f.Add([]byte(`{"g":1,"a":1,"crc32c":"00000000"}`+"\n"), []byte(`{"b":2}`))
	f.Add([]byte("\x00\x00{\n   \n"), []byte(`{}`))
	f.Add(frame(nil, 1, []byte(`{"x":"y"}`)), []byte(`{"s":"a\nb"}`))
	f.Fuzz(func(t *testing.T, tail, rec []byte) {
		root, err := os.OpenRoot(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		l, err := Open(root, "j", Options{Size: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := l.Reset(1, false); err != nil {
			t.Fatal(err)
		}
		appended := false
		if err := l.Append(rec); err == nil {
			appended = true
		} else if validRecord(rec) {
			t.Fatalf("a valid record refused: %v", err)
		}
		if _, err := l.f.WriteAt(tail, l.Used()); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		if _, err := l.Replay(1, func(r []byte) error {
			got = append(got, bytes.Clone(r))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if appended && (len(got) == 0 || !bytes.Equal(got[0], rec)) {
			t.Fatalf("appended %q, replayed %q", rec, got)
		}
		if _, err := l.Blank(func([]byte) bool { return true }, false); err != nil {
			t.Fatal(err)
		}
		if _, err := l.ReplayUnsealed(1, func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
}
