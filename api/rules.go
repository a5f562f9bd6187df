package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The shape rules of the contract, each one function that the service and
// the bot side both call. A Valid* function reports whether; a Check*
// function returns why not (a phrase the caller puts after the field's
// name), or nil. Who may do what stays with the service.

// MaxTokenLength bounds a short opaque token (a proposal, event or
// correlation id), in characters.
const MaxTokenLength = 128

// ValidFactID reports whether id can name a fact: 1–64 characters, not "."
// or "..", with no spaces or control characters. The service assigns fact
// ids ("f" and seven typable characters), so an id that fails this names no
// fact; a client refuses it before sending, the service with 400.
func ValidFactID(id string) bool {
	if id == "" || id == "." || id == ".." || utf8.RuneCountInString(id) > MaxIDLength {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

// CheckID returns why id is not a guild, user or channel id: those are 1–64
// characters of valid UTF-8 with no control characters.
func CheckID(id string) error {
	n := utf8.RuneCountInString(id)
	if n < 1 || n > MaxIDLength {
		return fmt.Errorf("must be 1 to %d characters", MaxIDLength)
	}
	if !utf8.ValidString(id) {
		return errors.New("must be valid UTF-8")
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errors.New("must not contain control characters")
		}
	}
	return nil
}

// CheckToken returns why a non-empty v is not a short opaque token (a
// proposal, event or correlation id): at most 128 characters of UTF-8 with
// no spaces or control characters. Whether a token may be empty is the
// field's rule, not this one's.
func CheckToken(v string) error {
	if utf8.RuneCountInString(v) > MaxTokenLength || !utf8.ValidString(v) {
		return fmt.Errorf("must be at most %d characters of UTF-8", MaxTokenLength)
	}
	for _, r := range v {
		if r <= 0x20 || r == 0x7f {
			return errors.New("must not contain spaces or control characters")
		}
	}
	return nil
}

// BodyProblem is what CleanFactBody found wrong with a fact body.
type BodyProblem int

// The problems, in the order CleanFactBody looks for them.
const (
	BodyOK BodyProblem = iota
	BodyNotUTF8
	BodyEmpty
	BodyTooLong
	BodyControl
)

// CleanFactBody trims a fact body and checks it: 1–2048 characters of valid
// UTF-8, no control characters other than newline. It returns the trimmed
// body, its length in characters, and the first problem found (BodyOK when
// there is none); each side words the problem in its own sentence.
func CleanFactBody(body string) (trimmed string, n int, problem BodyProblem) {
	body = strings.TrimSpace(body)
	n = utf8.RuneCountInString(body)
	switch {
	case !utf8.ValidString(body):
		return body, n, BodyNotUTF8
	case n == 0:
		return body, n, BodyEmpty
	case n > MaxFactBody:
		return body, n, BodyTooLong
	}
	for _, r := range body {
		if (r < 0x20 && r != '\n') || r == 0x7f {
			return body, n, BodyControl
		}
	}
	return body, n, BodyOK
}

// AboutOrProposedBy reports whether userID is the person f is about or the
// member who proposed it: the member's part of the service's supersede and
// forget rules (people.MaySupersede, people.MayForget), and what a
// suggestion list keeps so it offers only ids that will work. The service
// still decides.
func AboutOrProposedBy(f Fact, userID string) bool {
	return userID != "" && (f.Subject.UserID == userID || f.Provenance.ProposerUserID == userID)
}

// MatchesQuery is the recall query: every whitespace-separated term must
// appear, case-insensitively, in the body or the kind. An empty query
// matches every fact, at once. It takes a pointer: a recall asks about each
// of up to 128 facts of about 400 bytes.
func MatchesQuery(f *Fact, query string) bool {
	if query == "" {
		return true
	}
	terms := strings.Fields(strings.ToLower(query))
	if len(terms) == 0 {
		return true
	}
	body, kind := strings.ToLower(f.Body), strings.ToLower(string(f.Kind))
	for _, t := range terms {
		if !strings.Contains(body, t) && !strings.Contains(kind, t) {
			return false
		}
	}
	return true
}

// MaxSnowflakeLength bounds a Discord id: a snowflake is an unsigned 64-bit
// integer, at most 20 decimal digits.
const MaxSnowflakeLength = 20

// CheckSnowflake returns why id is not a Discord snowflake: 1–20 ASCII
// digits whose value fits in an unsigned 64-bit integer (what Discord's ids
// are), as ValidSnowflake, saying which part failed. The phrase never
// holds id.
func CheckSnowflake(id string) error {
	if !snowflakeDigits(id) {
		return fmt.Errorf("must be a Discord snowflake: 1 to %d digits 0-9, less than 2^64", MaxSnowflakeLength)
	}
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return errors.New("must be a Discord snowflake: a number less than 2^64")
	}
	return nil
}

// ValidSnowflake reports whether id can be a Discord id (a snowflake: an
// interaction's, a server's, a user's): 1–20 ASCII digits whose value fits
// in an unsigned 64-bit integer, and nothing else.
func ValidSnowflake(id string) bool {
	if !snowflakeDigits(id) {
		return false
	}
	_, err := strconv.ParseUint(id, 10, 64)
	return err == nil
}

// snowflakeDigits reports whether id is 1–20 ASCII digits.
func snowflakeDigits(id string) bool {
	if id == "" || len(id) > MaxSnowflakeLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return false
		}
	}
	return true
}
