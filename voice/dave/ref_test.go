package dave

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// expandReference is HKDF-Expand (RFC 5869) written out with HMAC, with the
// MLS KDFLabel built by hand: an independent check of expandWithLabel.
func expandReference(t *testing.T, prk []byte, fullLabel string, context []byte, length int) []byte {
	t.Helper()
	info := []byte{byte(length >> 8), byte(length), byte(len(fullLabel))}
	info = append(info, fullLabel...)
	info = append(info, byte(len(context)))
	info = append(info, context...)
	var out, prev []byte
	for i := byte(1); len(out) < length; i++ {
		m := hmac.New(sha256.New, prk)
		m.Write(prev)
		m.Write(info)
		m.Write([]byte{i})
		prev = m.Sum(nil)
		out = append(out, prev...)
	}
	return out[:length]
}
