package api

import (
	"strings"
	"testing"
)

func TestValidFactID(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"fabc2345", true}, {"f", true}, {strings.Repeat("a", 64), true}, {strings.Repeat("ü", 64), true},
		{"", false}, {".", false}, {"..", false}, {strings.Repeat("a", 65), false},
		{"fabc 2345", false}, {"fabc\t", false}, {"fabc\x7f", false}, {"f\x00", false},
	} {
		if got := ValidFactID(tt.in); got != tt.want {
			t.Errorf("ValidFactID(%q) = %v", tt.in, got)
		}
	}
}

func TestCheckID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"123456789012345678", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("ü", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"a\x00b", false},
		{"a\nb", false},
		{"a\u0085b", false},
		{"\xff", false},
		{"../x", true}, // allowed as an id: the service's file names make it harmless
		{"a b", true},
	} {
		if err := CheckID(tc.id); (err == nil) != tc.ok {
			t.Errorf("CheckID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}

func TestCheckToken(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want string // "" when it is a token
	}{
		{"discord-interaction-123", ""},
		{strings.Repeat("é", 128), ""},
		{strings.Repeat("x", 129), "must be at most 128 characters of UTF-8"},
		{"\xff", "must be at most 128 characters of UTF-8"},
		{"a b", "must not contain spaces or control characters"},
		{"a\x7f", "must not contain spaces or control characters"},
	} {
		got := ""
		if err := CheckToken(tc.v); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckToken(%q) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCleanFactBody(t *testing.T) {
	for _, tc := range []struct {
		in      string
		body    string
		n       int
		problem BodyProblem
	}{
		{"  likes tea\n", "likes tea", 9, BodyOK},
		{"two\nlines", "two\nlines", 9, BodyOK},
		{strings.Repeat("é", 2048), strings.Repeat("é", 2048), 2048, BodyOK},
		{" \n\t ", "", 0, BodyEmpty},
		{strings.Repeat("é", 2049), strings.Repeat("é", 2049), 2049, BodyTooLong},
		{"tab\there", "tab\there", 8, BodyControl},
		{"del\x7f", "del\x7f", 4, BodyControl},
		{"bad \xff", "bad \xff", 5, BodyNotUTF8},
	} {
		body, n, problem := CleanFactBody(tc.in)
		if body != tc.body || n != tc.n || problem != tc.problem {
			t.Errorf("CleanFactBody(%q) = %q, %d, %v; want %q, %d, %v", tc.in, body, n, problem, tc.body, tc.n, tc.problem)
		}
	}
}

func TestAboutOrProposedBy(t *testing.T) {
	f := Fact{Subject: Subject{GuildID: "1", UserID: "about"}, Provenance: Provenance{ProposerUserID: "proposer"}}
	operatorFact := Fact{Subject: Subject{GuildID: "1", UserID: "about"}} // no proposer
	for _, tt := range []struct {
		name string
		f    Fact
		user string
		want bool
	}{
		{"the subject", f, "about", true},
		{"the proposer", f, "proposer", true},
		{"someone else", f, "other", false},
		{"nobody", f, "", false},
		{"nobody, on a fact without a proposer", operatorFact, "", false},
	} {
		if got := AboutOrProposedBy(tt.f, tt.user); got != tt.want {
			t.Errorf("%s: AboutOrProposedBy(%q) = %v, want %v", tt.name, tt.user, got, tt.want)
		}
	}
}

func TestMatchesQuery(t *testing.T) {
	f := Fact{Kind: KindPreference, Body: "Likes Green tea\nand cello"}
	for _, tt := range []struct {
		query string
		want  bool
	}{
		{"", true}, {"   ", true},
		{"green", true}, {"GREEN TEA", true}, {"tea green", true},
		{"preference", true}, {"cello pref", true},
		{"coffee", false}, {"green coffee", false},
		{"tea\ncello", true},
	} {
		if got := MatchesQuery(&f, tt.query); got != tt.want {
			t.Errorf("MatchesQuery(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestValidSnowflake(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"1", true},
		{"1234567890123456789", true},
		{"18446744073709551615", true},
		{"", false},
		{strings.Repeat("1", 21), false},
		{"12a4", false},
		{"-1", false},
		{"+1", false},
		{" 1", false},
		{"１２", false}, // full-width digits are not ASCII
		{"..", false},
	} {
		if got := ValidSnowflake(tt.in); got != tt.want {
			t.Errorf("ValidSnowflake(%q) = %v", tt.in, got)
		}
	}
}

// TestCheckSnowflake: a Discord id (a fact's source message, a claimed
// interaction, the CLI's GUILD) must be digits only and fit in 64 bits;
// ValidSnowflake and CheckSnowflake agree, and the phrase never echoes the id.
func TestCheckSnowflake(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		ok       bool
	}{
		{"one digit", "1", true},
		{"a message id", "1300000000000000001", true},
		{"2^64-1", "18446744073709551615", true},
		{"leading zeros", "00000000000000000001", true},
		{"empty", "", false},
		{"letters", "abc", false},
		{"21 digits", "123456789012345678901", false},
		{"2^64", "18446744073709551616", false},
		{"20 nines", "99999999999999999999", false},
		{"a sign", "-1", false},
		{"a plus", "+1", false},
		{"a space", " 1", false},
		{"full-width digits", "１２３", false},
		{"an underscore", "1_000", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSnowflake(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckSnowflake(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if got := ValidSnowflake(tt.in); got != tt.ok {
				t.Fatalf("ValidSnowflake(%q) = %v, want %v: the two must agree", tt.in, got, tt.ok)
			}
			// Shorter ids ("1") are found in any sentence with a digit.
			if err != nil && len(tt.in) >= 3 && strings.Contains(err.Error(), tt.in) {
				t.Fatalf("CheckSnowflake(%q) echoes the id: %v", tt.in, err)
			}
		})
	}
}
