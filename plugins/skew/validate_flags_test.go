package skew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/gpuvalidate"
)

// Every gpu-validate command of the runbooks parses with the real
// gpu-validate command's flags, and every one gates on Xid events and
// DCGM's diagnostics, not on the GPU count alone.
func TestRunbookValidateFlags(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "runbook", "*.md.golden"))
	more, _ := filepath.Glob(filepath.Join("testdata", "runbook.*.md.golden"))
	files = append(files, more...)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			i := strings.Index(line, "kubectl gpu-validate ")
			if i < 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			c := line[i:]
			if j := strings.Index(c, " &&"); j >= 0 {
				c = c[:j]
			}
			n++
			args := shellWords(t, c)[2:]
			root := gpuvalidate.NewCmd(cli.NewTestClientGetter(), genericiooptions.NewTestIOStreamsDiscard())
			sub, rest, err := root.Find(args)
			if err != nil || sub.Name() != "nodes" {
				t.Errorf("%s: %q: not gpu-validate nodes: %v", f, c, err)
				continue
			}
			if err := sub.ParseFlags(rest); err != nil {
				t.Errorf("%s: %q: %v", f, c, err)
				continue
			}
			for _, flag := range []string{"xid", "dcgm"} {
				if on, err := sub.Flags().GetBool(flag); err != nil || !on {
					t.Errorf("%s: %q lacks --%s", f, c, flag)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no gpu-validate command in the runbook goldens")
	}
}

// shellWords splits a command line as the shell would, variables left
// empty.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) != 1 {
		t.Fatalf("%q: %v", line, err)
	}
	ce, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok {
		t.Fatalf("%q: not a simple command", line)
	}
	words, err := expand.Fields(&expand.Config{}, ce.Args...)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return words
}
