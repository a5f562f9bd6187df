package bot

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxContent is Discord's limit for a message's content.
const MaxContent = 2000

// Fit cuts content to Discord's limit at a line boundary and says how many
// lines were left out ("…and N more"), so a long list never fails to send
// and never ends mid-word. A single line longer than the limit is cut at a
// rune boundary with an ellipsis.
func Fit(content string, limit int) string {
	if utf8.RuneCountInString(content) <= limit {
		return content
	}
	lines := strings.Split(content, "\n")
	for keep := len(lines) - 1; keep >= 1; keep-- {
		more := fmt.Sprintf("…and %d more", len(lines)-keep)
		head := strings.Join(lines[:keep], "\n")
		if utf8.RuneCountInString(head)+1+utf8.RuneCountInString(more) <= limit {
			return head + "\n" + more
		}
	}
	r := []rune(content)
	return string(r[:limit-1]) + "…"
}
