package personfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/clankie/clankie/api"
)

// File names encode (guildId, userId) so that no id can climb out of the
// directory and no two different pairs share a file.
//
// The readable form is "p-" + esc(guild) + "_" + esc(user) + ".jsonl", where
// esc keeps ASCII letters, digits and '-' and writes every other byte as %XX.
// '_' is always escaped inside an id, so the one bare '_' is the separator and
// the form is injective; '/', '.', NUL and '%' are escaped, so a name is one
// path element that cannot be "..", never starts with a dot (temp files do)
// and never contains a second dot.
//
// Ids of up to 64 characters can be 256 bytes each, which escaped would pass
// the 255-byte file name limit. When the readable form is longer than
// maxReadable the name is "h-" + sha256(len(guild) | guild | user) + ".jsonl".
// Hashed names are injective up to SHA-256 collisions, and every file also
// stores its subject, which the store checks on load.
const (
	fileSuffix = ".jsonl"
	// legacySuffix ends the whole-file JSON person files of schema 1, which
	// the store migrates to logs (at start, or on first access).
	legacySuffix = ".json"
	readableTag  = "p-"
	hashedTag    = "h-"
	maxReadable  = 200
)

// FileName returns the file name of a person. It never fails for ids that
// pass api.CheckID; callers validate first.
func FileName(s api.Subject) string {
	b := make([]byte, 0, len(readableTag)+len(s.GuildID)+1+len(s.UserID)+len(fileSuffix))
	b = append(b, readableTag...)
	b = appendEscaped(b, s.GuildID)
	b = append(b, '_')
	b = appendEscaped(b, s.UserID)
	b = append(b, fileSuffix...)
	if len(b) <= maxReadable {
		return string(b)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d|%s%s", len(s.GuildID), s.GuildID, s.UserID)
	return hashedTag + hex.EncodeToString(h.Sum(nil)) + fileSuffix
}

// LegacyFileName returns the name of a person's schema-1 file (one JSON
// document, rewritten whole on every change), which the store migrates.
func LegacyFileName(s api.Subject) string {
	return strings.TrimSuffix(FileName(s), fileSuffix) + legacySuffix
}

// isLegacyFile reports whether a directory entry is a schema-1 person file.
func isLegacyFile(name string) bool {
	return (strings.HasPrefix(name, readableTag) || strings.HasPrefix(name, hashedTag)) &&
		strings.HasSuffix(name, legacySuffix) && strings.Count(name, ".") == 1
}

// ParseFileName inverts FileName for readable names. Hashed names return
// ok=false: their subject is read from the file.
func ParseFileName(name string) (s api.Subject, ok bool) {
	rest, found := strings.CutPrefix(name, readableTag)
	if !found {
		return s, false
	}
	rest, found = strings.CutSuffix(rest, fileSuffix)
	if !found {
		return s, false
	}
	g, u, found := strings.Cut(rest, "_")
	if !found {
		return s, false
	}
	gid, err1 := unescape(g)
	uid, err2 := unescape(u)
	if err1 != nil || err2 != nil || api.CheckID(gid) != nil || api.CheckID(uid) != nil {
		return s, false
	}
	s = api.Subject{GuildID: gid, UserID: uid}
	if FileName(s) != name {
		return api.Subject{}, false
	}
	return s, true
}

// IsPersonFile reports whether a directory entry is a person file (not a
// temp file, not a file moved aside as corrupt).
func IsPersonFile(name string) bool {
	return (strings.HasPrefix(name, readableTag) || strings.HasPrefix(name, hashedTag)) &&
		strings.HasSuffix(name, fileSuffix) && strings.Count(name, ".") == 1
}

func escape(id string) string { return string(appendEscaped(nil, id)) }

// appendEscaped appends esc(id): ASCII letters, digits and '-' as they are,
// every other byte as %XX.
func appendEscaped(b []byte, id string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xf])
	}
	return b
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) {
				return "", fmt.Errorf("short escape")
			}
			v, err := hex.DecodeString(s[i+1 : i+3])
			if err != nil || strings.ToUpper(s[i+1:i+3]) != s[i+1:i+3] {
				return "", fmt.Errorf("bad escape")
			}
			b.WriteByte(v[0])
			i += 2
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-':
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("unescaped byte")
		}
	}
	return b.String(), nil
}
