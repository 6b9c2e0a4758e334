package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Karpenter inference pool's lines after the paced run, run in bash
// against a kubectl that logs its calls: only the nodes listed before the
// run are deleted, and the wait covers the nodes left in the pool (those
// Karpenter launched for displaced replicas), or, where the surge held
// every replica outside the pool and none were launched, nothing is waited
// on and the reader is told why.
func TestKarpenterInferenceNodesFollowTheRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	s := Step{Pool: "gpu-k", To: "1.38"}
	lines := karpenterInferenceNodes(s, "karpenter.sh/nodepool=gpu-k")
	for _, tc := range []struct {
		name, after string // the pool's nodes after the delete
		want        []string
		echo        string
	}{
		{"surge held every replica", "", []string{"delete node/old-0 node/old-1"}, "no node left in gpu-k"},
		{"replicas went Pending", "node/new-0", []string{"delete node/old-0 node/old-1", "wait --for=condition=Ready node/new-0 --timeout=30m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script := `calls=""
kubectl() { calls="$calls|$*"; case "$1 $2" in "get nodes") printf '%s' "$AFTER";; "get node") echo true;; esac; }
OLD='node/old-0
node/old-1'
` + strings.Join(lines, "\n") + `
echo "CALLS$calls"`
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = []string{"AFTER=" + tc.after, "PATH=/usr/bin:/bin"}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			got := string(out)
			i := strings.LastIndex(got, "CALLS")
			var calls []string
			for _, c := range strings.Split(strings.TrimSpace(got[i+len("CALLS"):]), "|") {
				if c != "" && !strings.HasPrefix(c, "get ") {
					calls = append(calls, c)
				}
			}
			if strings.Join(calls, ";") != strings.Join(tc.want, ";") {
				t.Errorf("kubectl calls %q, want %q", calls, tc.want)
			}
			if (tc.echo == "") != !strings.Contains(got[:i], "no node left") || (tc.echo != "" && !strings.Contains(got[:i], tc.echo)) {
				t.Errorf("output %q, want %q", got[:i], tc.echo)
			}
		})
	}
}

// TestKarpenterInferenceDeletesOnlyDrainedNodes runs the Karpenter
// inference step's delete lines in bash against a stub kubectl: where the
// run stopped before draining a node, nothing is deleted and the node is
// named; where it drained them all, exactly the old nodes go.
func TestKarpenterInferenceDeletesOnlyDrainedNodes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	lines := karpenterInferenceNodes(Step{Pool: "gpu-karpenter", To: "1.37"}, "karpenter.sh/nodepool=gpu-karpenter")
	var script []string
	for _, l := range lines {
		if strings.HasPrefix(l, "BAD=") || strings.HasPrefix(l, "if ") {
			script = append(script, l)
		}
	}
	if len(script) != 2 {
		t.Fatalf("no guard and delete lines in %q", lines)
	}
	const stub = `kubectl() { echo "kubectl $*" >> "$D/calls"
  case "$*" in
  "get node "*) [ -f "$D/cordoned-$3" ] && echo true;;
  "get pods -A --field-selector spec.nodeName="*) n=${4#spec.nodeName=}; cat "$D/pods-${n%%,*}" 2>/dev/null;;
  esac; }
OLD='node/old-a node/old-b'
`
	run := func(files ...string) (string, string, error) {
		d := t.TempDir()
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte("true\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "pods-old-a"), []byte("DaemonSet\nNode\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", stub+strings.Join(script, "\n"))
		cmd.Env = append(os.Environ(), "D="+d)
		out, err := cmd.CombinedOutput()
		calls, _ := os.ReadFile(filepath.Join(d, "calls"))
		return string(calls), string(out), err
	}
	calls, out, err := run("cordoned-old-a")
	if err == nil || strings.Contains(calls, "kubectl delete") || !strings.Contains(out, "not drained by the inference run: old-b") {
		t.Errorf("run stopped before old-b: err %v\n%s\n%s", err, calls, out)
	}
	calls, out, err = run("cordoned-old-a", "cordoned-old-b")
	if err != nil || !strings.Contains(calls, "kubectl delete node/old-a node/old-b") {
		t.Errorf("both drained: err %v\n%s\n%s", err, calls, out)
	}
}
