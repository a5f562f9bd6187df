package memoryclient

// Test helpers over KindOf (no production caller needs them).

// IsKind reports whether err is an *Error of kind k, looking through wrapping.
func IsKind(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// Unreachable reports whether err means the service is down or slow
// (KindUnavailable or KindTimeout): the case in which a bridge answers
// "memory is unavailable right now; nothing was saved".
func Unreachable(err error) bool {
	k := KindOf(err)
	return k == KindUnavailable || k == KindTimeout
}
