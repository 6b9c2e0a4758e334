package golden

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// CheckWidth fails t for every line of out wider than width visible
// columns (ANSI colour does not count), naming the line.
func CheckWidth(t testing.TB, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := utf8.RuneCountInString(ansi.ReplaceAllString(l, "")); w > width {
			t.Errorf("line %d is %d columns wide, budget %d:\n%s", i+1, w, width, l)
		}
	}
}
