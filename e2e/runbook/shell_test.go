package runbooke2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestShellListStopped reports an && list that stops before its last
// command, which bash's ERR trap does not, once; a failing last command
// once; and no failure for a condition that is false.
func TestShellListStopped(t *testing.T) {
	sh := &Shell{Dir: t.TempDir(), Timeout: time.Minute}
	for _, tc := range []struct {
		lines []string
		want  []string
	}{
		{[]string{"X=$(echo a) && test -n \"\" && \\", "echo never", "echo after"}, []string{listStopped + ": X=$(echo a) && test -n \"\" && \\"}},
		{[]string{"true && false", "echo after"}, []string{"false"}},
		{[]string{"if false; then echo no; fi", "test -d / && echo yes; echo done"}, nil},
		{[]string{"case x in y) echo;; esac   # a comment", "sleep 0 &", "wait"}, nil},
	} {
		b := &Block{Step: &Step{}, Lines: tc.lines}
		_, fails, err := sh.Run(context.Background(), b, tc.lines, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range fails {
			got = append(got, f.Command)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: failures %q, want %q", tc.lines, got, tc.want)
		}
	}
}
