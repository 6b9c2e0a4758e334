package skew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestRunbookGolden pins the Markdown runbook of the kubeadm-looking test
// cluster and of the same cluster with EKS commands chosen by --provider.
func TestRunbookGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"runbook.kubeadm", []string{"plan", "--target", "v1.38", "--runbook"}},
		{"runbook.eks", []string{"plan", "--target", "v1.38", "--runbook", "--provider", "eks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, getter(cluster("v1.37.2")), "", tc.args...)
			if r.Code != cli.ExitFindings || r.Err != "" {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
			}
			golden(t, tc.name+".md", r.Out)
			// One fenced sh block per numbered step.
			steps := strings.Count(r.Out, "\n1. ") + strings.Count(r.Out, "\n2. ")
			if steps < 2 || strings.Count(r.Out, "```sh") != strings.Count(r.Out, "**")/2 {
				t.Errorf("want one sh block per step:\n%s", r.Out)
			}
		})
	}
}

func TestRunbookFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		errOut string
	}{
		{[]string{"plan", "--target", "v1.38", "--provider", "openshift"}, "--provider: provider \"openshift\": want one of"},
		{[]string{"plan", "--target", "v1.38", "--runbook", "-o", "json"}, "--runbook prints Markdown"},
	} {
		r := run(t, getter(cluster("v1.37.2")), "", tc.args...)
		if r.Code != cli.ExitUsage || !strings.Contains(r.Err, tc.errOut) {
			t.Errorf("%v: exit %d err %q", tc.args, r.Code, r.Err)
		}
	}
	// -o json carries the provider and each step's commands.
	r := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "v1.38", "-o", "json", "--provider", "gke")
	if !strings.Contains(r.Out, `"provider": "gke"`) || !strings.Contains(r.Out, `"source": "--provider"`) ||
		!strings.Contains(r.Out, `"gcloud container clusters upgrade <cluster-name> --master --cluster-version=1.38 --location=<location>"`) {
		t.Errorf("json:\n%s", r.Out)
	}
}

// The summary line counts one minor and one node in the singular.
func TestSummaryGrammar(t *testing.T) {
	c := fake.NewClientset(gpuNode("a-0", "a", "v1.36.2"))
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	r := run(t, getter(c), "", "--color", "never")
	if !strings.Contains(r.Out, "max skew 1 minor;") || !strings.Contains(r.Out, "on 1 node\n") {
		t.Errorf("summary:\n%s", r.Out)
	}
}

// README's runbook example is the e2e golden runbook, byte for byte, so
// the README shows what the binary prints.
func TestReadmeRunbookIsGolden(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join("..", "..", "e2e", "skew", "testdata", "runbook-eks.md.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "````markdown\n"+string(g)+"````\n") {
		t.Error("README.md's runbook example differs from e2e/skew/testdata/runbook-eks.md.golden: copy the golden file into it")
	}
}
