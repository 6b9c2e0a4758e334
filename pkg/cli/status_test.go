package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestStatusWords(t *testing.T) {
	seen := map[Status]bool{}
	for _, s := range Statuses() {
		if seen[s] {
			t.Errorf("%s listed twice", s)
		}
		seen[s] = true
		if !s.Valid() || s.Meaning() == "" {
			t.Errorf("%s has no meaning", s)
		}
		// One upper-case word: awk's fields and the colours rely on it.
		if string(s) != strings.ToUpper(string(s)) || strings.ContainsAny(string(s), " \t-") {
			t.Errorf("%q is not one upper-case word", s)
		}
	}
	for _, bad := range []Status{"PASS", "EDGE", "VIOLATION", "LATER", "ok", ""} {
		if bad.Valid() {
			t.Errorf("%q is in the closed set", bad)
		}
	}
}

func TestStatusLegend(t *testing.T) {
	got := StatusLegend(StatusFail, StatusOK)
	want := "Status words (the STATUS column):\n" +
		"  OK       " + StatusOK.Meaning() + "\n" +
		"  FAIL     " + StatusFail.Meaning() + "\n"
	if got != want {
		t.Errorf("legend:\n%s\nwant:\n%s", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("a word outside the set made a legend")
		}
	}()
	StatusLegend("PASS")
}

func TestSetStatusWords(t *testing.T) {
	cmd := &cobra.Command{Use: "x", Short: "Do x.", Long: "Does x.\n"}
	SetStatusWords(cmd, StatusOK, StatusWarn)
	if got := StatusWords(cmd); len(got) != 2 || got[0] != StatusOK || got[1] != StatusWarn {
		t.Errorf("StatusWords = %v", got)
	}
	if want := "Does x.\n\n" + strings.TrimRight(StatusLegend(StatusOK, StatusWarn), "\n"); cmd.Long != want {
		t.Errorf("Long = %q, want %q", cmd.Long, want)
	}
	if StatusWords(&cobra.Command{}) != nil {
		t.Error("a command without words has some")
	}
}

func TestNodeWords(t *testing.T) {
	if got := NoNodes().Error(); got != "no nodes given: name them (NODE...) or select them with -l SELECTOR" {
		t.Errorf("NoNodes = %q", got)
	}
	if got := NoNodes("pass --all-nodes").Error(); got != "no nodes given: name them (NODE...), select them with -l SELECTOR or pass --all-nodes" {
		t.Errorf("NoNodes(--all-nodes) = %q", got)
	}
	if ExitCode(NoNodes()) != ExitUsage {
		t.Error("NoNodes is not a usage error")
	}
	if err := ParseSelector("a=b,c in (d)"); err != nil {
		t.Errorf("valid selector refused: %v", err)
	}
	err := ParseSelector("a=(b")
	if err == nil || ExitCode(err) != ExitUsage || !strings.HasPrefix(err.Error(), `invalid label selector -l "a=(b": `) {
		t.Errorf("bad selector: %v", err)
	}
	if got := NoNodesMatch("x=y"); got != `no nodes match -l "x=y"` {
		t.Errorf("NoNodesMatch = %q", got)
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 violations", 1: "1 violation", 2: "2 violations"} {
		if got := Plural(n, "violation"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}
