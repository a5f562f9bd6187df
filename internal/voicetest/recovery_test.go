package voicetest

import (
	"bytes"
	"errors"
	"testing"
)

// TestCorruptDAVEFrames: the relay flips a ciphertext byte in exactly the
// next n DAVE frames of the user asked for, after the extension body, and
// leaves everyone else's frames, and later ones, untouched; n <= 0 cancels.
func TestCorruptDAVEFrames(t *testing.T) {
	hdr := []byte{0x90, 0x78, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0xBE, 0xDE, 0, 1} // one extension word
	frame := func() []byte { return []byte{1, 2, 3, 4, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF, 1, 2, 3, 4, 5, 6, 0xFA, 0xFA} }
	for _, tc := range []struct {
		name       string
		n, cancel  int
		user       string
		corruptedN int
	}{
		{"the next n frames of the user", 3, 1, "100", 3},
		{"another user's frames pass", 3, 1, "200", 0},
		{"cancelled", 3, 0, "100", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{corrupt: map[string]int{}}
			s.CorruptDAVEFrames("100", tc.n)
			if tc.cancel == 0 {
				s.CorruptDAVEFrames("100", 0)
			}
			got := 0
			for range tc.n + 2 {
				plain := append([]byte{0xEE, 0xEE, 0xEE, 0xEE}, frame()...)
				s.maybeCorrupt(tc.user, hdr, plain)
				if !bytes.Equal(plain[:4], []byte{0xEE, 0xEE, 0xEE, 0xEE}) {
					t.Fatal("the extension body was touched")
				}
				if !bytes.Equal(plain[4:], frame()) {
					got++
					if plain[4] != 1^0xFF || !bytes.Equal(plain[5:], frame()[1:]) {
						t.Fatalf("corrupted %x, want only the first ciphertext byte flipped", plain[4:])
					}
				}
			}
			if got != tc.corruptedN || s.Corrupted() != uint64(tc.corruptedN) {
				t.Fatalf("corrupted %d frames (counted %d), want %d", got, s.Corrupted(), tc.corruptedN)
			}
		})
	}
}

// TestSendWelcomeAfterGroupNeedsAMember: the control refuses a user who is
// not in an established group rather than sending anything.
func TestSendWelcomeAfterGroupNeedsAMember(t *testing.T) {
	srv, role := daveRole(t)
	daveJoin(t, srv, "1001")
	for _, user := range []string{"1001", "9999"} {
		if _, err := role.SendWelcomeAfterGroup(user); !errors.Is(err, ErrNotInGroup) {
			t.Fatalf("%s: err = %v, want ErrNotInGroup", user, err)
		}
	}
	if st := role.Stats(); st.Welcomes != 0 {
		t.Fatalf("role sent %d welcomes", st.Welcomes)
	}
}
