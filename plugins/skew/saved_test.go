package skew

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// A saved report whose pool carries a kubelet version that does not parse
// says so in that pool (UNKNOWN) and does not count the node as matching,
// both in the check and in the plan.
func TestSavedUnparsableKubeletIsUnknown(t *testing.T) {
	saved := `apiVersion: gpufleet.dev/v1alpha1
kind: SkewReport
inventory:
  collectedAt: "2026-12-01T00:00:00Z"
  server: {gitVersion: v1.37.2}
  components: []
  pools:
  - name: gpu-a
    nodes: 3
    versions:
    - {version: v1.37.2, nodes: 2}
    - {version: "not-a-version", nodes: 1}
`
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, offline, saved, "--from-file", "-", "-o", "yaml", "--fail-on", "warning")
	if r.Code != cli.ExitFindings {
		t.Fatalf("exit %d, want 1 (UNKNOWN counts at --fail-on warning)\n%s%s", r.Code, r.Out, r.Err)
	}
	if !strings.Contains(r.Out, "kubelet-version-unknown") || !strings.Contains(r.Out, `1 of 3 nodes report no parsable kubelet version (1 node reporting "not-a-version")`) {
		t.Errorf("no UNKNOWN row for the unparsable kubelet:\n%s", r.Out)
	}
	if strings.Contains(r.Out, "(3 nodes)") {
		t.Errorf("the pool still counts the unparsable node as matching:\n%s", r.Out)
	}
	p := run(t, offline, saved, "plan", "--from-file", "-", "--target", "v1.37", "-o", "yaml")
	if !strings.Contains(p.Out, "1 node reports no parsable kubelet version and is not planned") {
		t.Errorf("the plan does not warn about the unparsable kubelet:\n%s%s", p.Out, p.Err)
	}
}

// A saved report without an apiserver version is judged as far as it can
// be (pools UNKNOWN, kube-proxy against the kubelets), never refused as a
// usage error; the plan, which needs the apiserver, says it cannot
// evaluate (exit 3).
func TestSavedWithoutAPIServerVersion(t *testing.T) {
	saved := `apiVersion: gpufleet.dev/v1alpha1
kind: SkewReport
inventory:
  collectedAt: "2026-12-01T00:00:00Z"
  server: {gitVersion: ""}
  components:
  - {name: kube-proxy, instance: daemonset/kube-proxy, version: v1.37.2, state: visible}
  pools:
  - name: gpu-a
    nodes: 2
    versions:
    - {version: v1.33.1, nodes: 2}
`
	path := filepath.Join(t.TempDir(), "no-server.yaml")
	if err := os.WriteFile(path, []byte(saved), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, offline, "", "--from-file", path, "-o", "yaml")
	if r.Code == cli.ExitUsage {
		t.Fatalf("refused as a usage error:\n%s%s", r.Out, r.Err)
	}
	// kube-proxy 1.37 against kubelets 1.33: four minors, beyond the
	// limit of three, so that rule still fires.
	if r.Code != cli.ExitFindings || !strings.Contains(r.Out, "kube-proxy-kubelet") && !strings.Contains(r.Out, "rule: kube-proxy") {
		t.Errorf("exit %d, want 1 for kube-proxy four minors ahead of the kubelets\n%s%s", r.Code, r.Out, r.Err)
	}
	if !strings.Contains(r.Out, "the apiserver version is unknown") {
		t.Errorf("no UNKNOWN row for the missing apiserver:\n%s", r.Out)
	}
	// A local file that cannot be planned is the input's fault: exit 2,
	// with the file named.
	p := run(t, offline, "", "plan", "-f", path, "--target", "v1.37")
	if p.Code != cli.ExitUsage || !strings.Contains(p.Err, path) {
		t.Errorf("plan exit %d, want 2 naming the file\n%s%s", p.Code, p.Out, p.Err)
	}
}
