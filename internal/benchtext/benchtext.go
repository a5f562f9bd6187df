// Package benchtext is the fact text every person-store benchmark and the
// RSS check store: facts of the length people write, the same bodies
// internal/originalbench's harness gives the original store, so figures
// from either side are about the same data.
package benchtext

import "strings"

var words = strings.Fields("plays bass in a jazz trio on thursdays prefers tea over coffee learning portuguese " +
	"for a trip to lisbon has two cats named pixel and byte runs the server's minecraft nights likes quiet " +
	"voice channels after midnight studies marine biology and collects old maps of the harbour")

// Body returns a fact of 90 to 160 characters of ordinary words, different
// for every i.
func Body(i int) string {
	want := 90 + (i*37)%71
	var sb strings.Builder
	for j := 0; sb.Len() < want; j++ {
		if j > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[(i*11+j*7)%len(words)])
	}
	return sb.String()
}
