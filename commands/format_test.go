package commands

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeMarkdown(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain words", "plain words"},
		{"**bold** _it_ ~~s~~", `\*\*bold\*\* \_it\_ \~\~s\~\~`},
		{"`code` ||spoiler||", "\\`code\\` \\|\\|spoiler\\|\\|"},
		{"> quote", `\> quote`},
		{"# heading", `\# heading`},
		{"- item", `\- item`},
		{"1. first", `1\. first`},
		{"12. twelfth", `12\. twelfth`},
		{"v1.2 stays", "v1.2 stays"},
		{"[link](http://x)", `\[link\]\(http://x\)`},
		{`back\slash`, `back\\slash`},
		{"@everyone and @here", "@\u200beveryone and @\u200bhere"},
		{"<@123> <#456> <t:1:R>", "\\<@\u200b123\\> \\<\\#456\\> \\<t:1:R\\>"},
	}
	for _, tt := range tests {
		if got := escapeMarkdown(tt.in); got != tt.want {
			t.Errorf("escapeMarkdown(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestFlatten(t *testing.T) {
	tests := []struct{ in, want string }{
		{"one line", "one line"},
		{"two\nlines", "two ⏎ lines"},
		{"crlf\r\nline", "crlf ⏎ line"},
		{"tab\there", "tab here"},
		{"sep\u2028here", "sep ⏎ here"},
	}
	for _, tt := range tests {
		if got := flatten(tt.in); got != tt.want {
			t.Errorf("flatten(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestFactTextCutsWholeEscapes(t *testing.T) {
	tests := []struct {
		name string
		body string
		max  int
	}{
		{"short", "hello", 100},
		{"markdown at the cut", strings.Repeat("*", 50), 11},
		{"mentions", strings.Repeat("@everyone ", 300), 1600},
		{"newlines", strings.Repeat("a\n", 1024), 1600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := factText(tt.body, tt.max)
			if n := utf8.RuneCountInString(got); n > tt.max {
				t.Fatalf("%d characters; want at most %d", n, tt.max)
			}
			if strings.Contains(got, "\n") {
				t.Fatalf("a fact spans lines: %q", got)
			}
			if strings.Contains(got, "@everyone") {
				t.Fatalf("raw @everyone in %q", got)
			}
			if strings.HasSuffix(strings.TrimSuffix(got, ellipsis), `\`) && !strings.HasSuffix(strings.TrimSuffix(got, ellipsis), `\\`) {
				t.Fatalf("cut leaves a dangling backslash: %q", got)
			}
		})
	}
	if got := factText(strings.Repeat("*", 50), 11); got != strings.Repeat(`\*`, 5)+ellipsis {
		t.Fatalf("factText = %q", got)
	}
}

func TestSentence(t *testing.T) {
	if got := sentence("expiresAt must be in the future"); got != "ExpiresAt must be in the future." {
		t.Fatalf("sentence = %q", got)
	}
	if got := sentence("kind must be person_fact."); got != `Kind must be person\_fact.` {
		t.Fatalf("sentence = %q", got)
	}
}

// TestIDsFromMemoryRenderInert: fact, user and channel ids come back from the
// memory service, where an operator can set them; one that is not what it
// should be must still show as one inert piece of a line, never as markdown,
// a second line, a mention of someone else, or reordered text.
func TestIDsFromMemoryRenderInert(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"plain fact id", code("fabc2345"), "`fabc2345`"},
		{"fact id with a backtick, a line break and a bidi override", code("f1`\n# big\u202Eexe.txt"), "`f1' ⏎ # bigexe.txt`"},
		{"numeric user id", mention("123456789012345678"), "<@123456789012345678>"},
		{"user id that is not a snowflake", mention("123> **@everyone**"), "`123> **@everyone**`"},
		{"numeric channel id", channelMention("42"), "<#42>"},
		{"channel id that is not a snowflake", channelMention("42>\n\u2066x"), "`42> ⏎ x`"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q; want %q", tt.name, tt.got, tt.want)
		}
	}
}
