package golden

import (
	"fmt"
	"strings"
	"testing"
)

type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// A 130-column line fails the check; 120 columns of text with a
// shortening mark and colour pass.
func TestCheckWidth(t *testing.T) {
	ok := "\x1b[31m" + strings.Repeat("x", 119) + "\x1b[0m…\n" + "short\n"
	r := &recorder{TB: t}
	CheckWidth(r, ok, 120)
	if len(r.errors) != 0 {
		t.Errorf("120 visible columns failed: %v", r.errors)
	}
	r = &recorder{TB: t}
	CheckWidth(r, "short\n"+strings.Repeat("y", 130)+"\n", 120)
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "line 2 is 130 columns wide") {
		t.Errorf("a 130-column line: %v", r.errors)
	}
}
