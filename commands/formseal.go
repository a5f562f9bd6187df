package commands

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// formTagBytes is how much of the HMAC a form's custom_id carries: 128
// bits, 22 characters, which with a route prefix and two snowflakes stays
// within Discord's 100-character custom_id.
const formTagBytes = 16

// formSeal signs the ids a form's custom_id carries, with the context they
// were issued in (server, channel, the member who opened it), so a submit
// can only name what Clankie itself put in a form for that member there.
// Discord does not resend a right-clicked message with the form's submit:
// without the seal a client could name any message as a fact's source, or
// a bot as its subject, and the authority check alone could not tell.
type formSeal struct{ key []byte }

// newFormSeal signs with key; with none it draws a random one, which
// serves one process (a replica behind HTTP interactions needs the shared
// key, or forms opened on one replica are refused on another).
func newFormSeal(key []byte) formSeal {
	if len(key) == 0 {
		key = make([]byte, sha256.Size)
		_, _ = rand.Read(key) // never fails (crypto/rand panics instead)
	}
	return formSeal{key: key}
}

// FormKey derives the key that signs the context menus' forms from the bot
// token, so every replica of a bridge agrees on it without another secret,
// and a new token retires the forms the old one signed. The token cannot
// be recovered from the key.
func FormKey(botToken string) []byte {
	mac := hmac.New(sha256.New, []byte(botToken))
	mac.Write([]byte("clankie/forms/v1"))
	return mac.Sum(nil)
}

// tag returns the seal over fields (joined unambiguously: no field holds
// a NUL).
func (s formSeal) tag(fields ...string) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(strings.Join(fields, "\x00")))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:formTagBytes])
}

// valid reports whether tag seals fields, in constant time.
func (s formSeal) valid(tag string, fields ...string) bool {
	return hmac.Equal([]byte(tag), []byte(s.tag(fields...)))
}
