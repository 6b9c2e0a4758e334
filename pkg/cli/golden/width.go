package golden

import (
	"strings"
	"testing"
)

// CheckWidth fails t for every line of out wider than width visible
// columns (ANSI colour does not count), naming the line. Unlike CheckFits
// it holds every line, prose included, to the budget.
func CheckWidth(t testing.TB, out string, width int) {
	t.Helper()
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if w := Width(l); w > width {
			t.Errorf("line %d is %d columns wide, budget %d:\n%s", i+1, w, width, l)
		}
	}
}
