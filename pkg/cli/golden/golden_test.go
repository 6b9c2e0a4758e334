package golden

import (
	"strings"
	"testing"
)

func TestOverwide(t *testing.T) {
	out := "Fleet f to v1.37: a title line that is prose and may be as long as it likes, " + strings.Repeat("x", 80) + "\n\n" +
		"NODE     STATUS   REASONS\n" +
		"node-1   \x1b[31mFAIL\x1b[0m     " + strings.Repeat("r", 102) + "\n" +
		"node-2   PASS     " + strings.Repeat("r", 112) + "\n" +
		"\n3 node(s): a summary line is prose too " + strings.Repeat("y", 120) + "\n"
	if got := len(TableLines(out)); got != 3 {
		t.Errorf("%d table lines, want 3 (header and two rows)", got)
	}
	over := Overwide(out, 120)
	if len(over) != 1 || !strings.HasPrefix(over[0], "node-2") || Width(over[0]) != 130 {
		t.Errorf("want only the 130-column node-2 line over 120 (colour does not count), got %q", over)
	}
	if Width("\x1b[31mFAIL\x1b[0m…") != 5 {
		t.Errorf("Width counts runes less colour")
	}
}
