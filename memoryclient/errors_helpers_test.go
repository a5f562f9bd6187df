package memoryclient

// Test helpers over KindOf (no production caller needs them).

// IsKind reports whether err is an *Error of kind k, looking through wrapping.
func IsKind(err error, k Kind) bool { return err != nil && KindOf(err) == k }

// downOrSlow reports whether err means the service is down or slow
// (KindUnavailable or KindTimeout). Unlike (*Error).Unreachable, which
// callers use, it leaves out a cancellation: the tests tell the two apart.
func downOrSlow(err error) bool {
	k := KindOf(err)
	return k == KindUnavailable || k == KindTimeout
}
