package runbooke2e

import (
	"context"
	"fmt"
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

// TestShellLoopAndPipeline reports a failing command of a loop's body
// with its own status, and a failing command of a pipeline other than
// its last, in a statement, a loop's body or a command substitution,
// which bash's ERR trap does not see; a pipeline whose status is tested,
// or whose earlier command only answers (grep finding nothing, a writer
// the next command stopped reading), reports nothing, and a pasted
// pipeline reads and writes as it did.
func TestShellLoopAndPipeline(t *testing.T) {
	sh := &Shell{Dir: t.TempDir(), Timeout: time.Minute}
	const piped = "in a pipeline, before its last command (bash drops its status): "
	for _, tc := range []struct {
		lines []string
		want  []string
		out   string
	}{
		{[]string{"for n in a b; do", "  false", "  echo \"$n\"", "done"}, []string{"1 false", "1 false"}, "a\nb\n"},
		{[]string{"sh -c 'exit 3' | sed s/a/b/", "echo after"}, []string{"3 " + piped + "sh -c 'exit 3'"}, "after\n"},
		{[]string{"for n in a b; do", "  sh -c 'echo $0; exit 4' \"$n\" | tr a-z A-Z", "done"}, []string{"4 " + piped + "sh -c 'echo $0; exit 4' \"$n\"", "4 " + piped + "sh -c 'echo $0; exit 4' \"$n\""}, "A\nB\n"},
		{[]string{"V=$(sh -c 'exit 5' | tr a b) && echo \"[$V]\""}, []string{"5 " + piped + "sh -c 'exit 5'"}, "[]\n"},
		{[]string{"cat <<EOF | tr a b", "abc", "EOF"}, nil, "bbc\n"},
		{[]string{"sh -c 'exit 6' | grep -q x || true", "if sh -c 'exit 6' | grep -q x; then :; fi", "! sh -c 'exit 6' | grep x"}, nil, ""},
		{[]string{"SNAP=$(printf 'a\\n' | grep '^z-' | grep -v -m1 partial; true)", "yes | head -1", "printf 'a\\n' | grep z | wc -l"}, nil, "y\n0\n"},
	} {
		b := &Block{Step: &Step{}, Lines: tc.lines}
		out, fails, err := sh.Run(context.Background(), b, tc.lines, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range fails {
			got = append(got, fmt.Sprintf("%d %s", f.Code, f.Command))
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q: failures %q, want %q", tc.lines, got, tc.want)
		}
		if out != tc.out {
			t.Errorf("%q: output %q, want %q", tc.lines, out, tc.out)
		}
	}
}
