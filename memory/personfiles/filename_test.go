package personfiles

import (
	"strings"
	"testing"

	"github.com/clankie/clankie/api"
	"github.com/clankie/clankie/memory/durable"
	"github.com/clankie/clankie/memory/people"
)

func TestFileNameIsInjectiveAndSafe(t *testing.T) {
	long := strings.Repeat("9", 64)
	wide := strings.Repeat("𝄞", 64) // 4 bytes each: forces the hashed form
	subjects := []api.Subject{
		{GuildID: "a_b", UserID: "c"},
		{GuildID: "a", UserID: "b_c"},
		{GuildID: "..", UserID: "1"},
		{GuildID: "../x", UserID: "1"},
		{GuildID: ".tmp-1", UserID: "1"},
		{GuildID: "%2F", UserID: "1"},
		{GuildID: "/", UserID: "1"},
		{GuildID: "a\x00b", UserID: "1"},
		{GuildID: "ünïcödé", UserID: "ユーザー"},
		{GuildID: long, UserID: long},
		{GuildID: wide, UserID: wide},
		{GuildID: wide, UserID: wide[:len(wide)-4]},
		{GuildID: "1", UserID: "2"},
		{GuildID: "12", UserID: "1"},
		{GuildID: "1", UserID: "21"},
		{GuildID: "-", UserID: "."},
		{GuildID: "A", UserID: "a"},
	}
	seen := map[string]api.Subject{}
	for _, s := range subjects {
		name := FileName(s)
		if prev, dup := seen[name]; dup {
			t.Fatalf("%q and %q share file %q", prev, s, name)
		}
		seen[name] = s
		if strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, durable.TempPrefix) {
			t.Errorf("unsafe name %q for %q", name, s)
		}
		if len(name) > 255 {
			t.Errorf("name for %q is %d bytes", s, len(name))
		}
		if !IsPersonFile(name) {
			t.Errorf("%q is not recognised as a person file", name)
		}
		if got, ok := ParseFileName(name); ok && got != s {
			t.Errorf("ParseFileName(%q) = %q, want %q", name, got, s)
		} else if !ok && strings.HasPrefix(name, readableTag) && people.ValidSubject(s) == nil {
			t.Errorf("readable name %q did not parse back", name)
		}
	}
	if IsPersonFile(".tmp-abc") || IsPersonFile("p-1_2.json.corrupt-17") || IsPersonFile("LOCK") {
		t.Error("temp, corrupt or lock files taken for person files")
	}
}
