package personfiles

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

// FuzzFileName checks the person file name codec on pairs of subjects:
// every subject whose ids pass api.CheckID maps to one safe path element that
// the store recognises as a person file, a readable name parses back to its
// subject, and two different subjects never share a name. The corpus is in
// testdata/fuzz/FuzzFileName; `go test` replays it, `scripts/fuzz` explores.
func FuzzFileName(f *testing.F) {
	long := strings.Repeat("9", 64)
	wide := strings.Repeat("𝄞", 64)
	for _, s := range [][4]string{
		{"a_b", "c", "a", "b_c"},
		{"1", "2", "12", ""},
		{"..", "1", "../x", "1"},
		{".tmp-1", "1", "%2F", "1"},
		{"A", "a", "a", "A"},
		{long, long, wide, wide},
		{wide, wide[:len(wide)-4], "ünïcödé", "ユーザー"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, g1, u1, g2, u2 string) {
		// ParseFileName takes any directory entry: it must never panic, and
		// whatever it accepts must be exactly the name of what it answers.
		for _, raw := range []string{g1, u1, g2, u2} {
			if s, ok := ParseFileName(raw); ok {
				if people.ValidSubject(s) != nil || FileName(s) != raw {
					t.Fatalf("ParseFileName(%q) accepted %q, whose name is %q", raw, s, FileName(s))
				}
			}
		}
		a := api.Subject{GuildID: g1, UserID: u1}
		b := api.Subject{GuildID: g2, UserID: u2}
		aOK := api.CheckID(g1) == nil && api.CheckID(u1) == nil
		bOK := api.CheckID(g2) == nil && api.CheckID(u2) == nil
		if aOK {
			checkPersonFileName(t, a)
		}
		if bOK {
			checkPersonFileName(t, b)
		}
		if aOK && bOK && a != b && FileName(a) == FileName(b) {
			t.Fatalf("%q and %q share the file %q", a, b, FileName(a))
		}
	})
}

func checkPersonFileName(t *testing.T, s api.Subject) {
	t.Helper()
	name := FileName(s)
	switch {
	case name == "" || name == "." || name == "..":
		t.Fatalf("subject %q: name %q is not a file name", s, name)
	case strings.ContainsAny(name, "/\\\x00"):
		t.Fatalf("subject %q: name %q holds a separator or NUL", s, name)
	case strings.HasPrefix(name, ".") || strings.HasPrefix(name, durable.TempPrefix):
		t.Fatalf("subject %q: name %q starts with a dot (temp files do)", s, name)
	case len(name) > 255:
		t.Fatalf("subject %q: name is %d bytes, over the 255-byte limit", s, len(name))
	case !filepath.IsLocal(name) || filepath.Base(name) != name:
		t.Fatalf("subject %q: name %q is not one local path element", s, name)
	case !IsPersonFile(name):
		t.Fatalf("subject %q: name %q is not recognised as a person file", s, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x21 || c > 0x7e {
			t.Fatalf("subject %q: name %q holds byte %#x", s, name, c)
		}
	}
	got, ok := ParseFileName(name)
	switch {
	case strings.HasPrefix(name, readableTag):
		if !ok || got != s {
			t.Fatalf("readable name %q parsed to %q, %v; want %q", name, got, ok, s)
		}
	case strings.HasPrefix(name, hashedTag):
		if ok {
			t.Fatalf("hashed name %q parsed to %q; hashed names carry no subject", name, got)
		}
	default:
		t.Fatalf("subject %q: name %q has neither tag", s, name)
	}
	if again := FileName(s); again != name {
		t.Fatalf("subject %q: FileName is not deterministic: %q then %q", s, name, again)
	}
}
