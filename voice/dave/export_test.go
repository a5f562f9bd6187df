package dave

// SetNonceForTest moves our sender's nonce counter, so a test can cross a
// key generation boundary without sending 2^24 frames.
func SetNonceForTest(s *Session, n uint32) {
	s.enc.mu.Lock()
	defer s.enc.mu.Unlock()
	s.enc.nonce = n
}
