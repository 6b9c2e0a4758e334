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

// TestShellSubshellAndFunction reports a failing command of a ( … )
// subshell or a function body other than its last, in a loop there too,
// where bash runs no ERR trap; the body's last command once, as the
// subshell's or the call's status; and nothing for a command whose
// status is tested there, with what the block reads and writes unchanged.
func TestShellSubshellAndFunction(t *testing.T) {
	sh := &Shell{Dir: t.TempDir(), Timeout: time.Minute}
	sub, fn := subshellWhy+": ", funcWhy+": "
	for _, tc := range []struct {
		lines []string
		want  []string
		out   string
	}{
		{[]string{"( sh -c 'exit 2'; echo in )", "echo after"}, []string{"2 " + sub + "sh -c 'exit 2'"}, "in\nafter\n"},
		{[]string{"f() {", "  sh -c 'exit 3' >/dev/null", "  echo f", "}", "f"}, []string{"3 " + fn + "sh -c 'exit 3' >/dev/null"}, "f\n"},
		{[]string{"( echo a; false )"}, []string{"1 ( echo a; false )"}, "a\n"},
		{[]string{"(", "  for n in a b; do sh -c 'exit 4'; echo \"$n\"; done", "  echo end", ")"}, []string{"4 " + sub + "sh -c 'exit 4'", "4 " + sub + "sh -c 'exit 4'"}, "a\nb\nend\n"},
		{[]string{"g() { local v; v=$(sh -c 'echo x; exit 5'); echo \"v=$v\"; return 0; }", "g"}, []string{"5 " + fn + "v=$(sh -c 'echo x; exit 5')"}, "v=x\n"},
		{[]string{"if ( false; true ); then echo yes; fi", "( if false; then :; fi; grep -q x /dev/null || true; X=1; echo \"$X\" )"}, nil, "yes\n1\n"},
		{[]string{"( cat <<EOF", "x", "EOF", "true )"}, nil, "x\n"},
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
