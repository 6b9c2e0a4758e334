package skew

import (
	"os/exec"
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
kubectl() { calls="$calls|$*"; case "$1 $2" in "get nodes") printf '%s' "$AFTER";; esac; }
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
