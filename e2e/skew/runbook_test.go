//go:build e2e

package skewe2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
)

// calendar holds only minors before the plans' target, so the golden
// runbooks do not change with the date or with updates of the embedded
// calendar.
const calendar = `dataDate: "2026-09-15"
releases:
- {minor: "1.36", released: "2026-04-22", endOfLife: "2027-06-28"}
- {minor: "1.37", released: "2026-08-26", endOfLife: "2027-10-28"}
`

func calendarFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "calendar.yaml")
	if err := os.WriteFile(f, []byte(calendar), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

type planSteps struct {
	Provider struct {
		Provider string   `json:"provider"`
		Source   string   `json:"source"`
		Evidence []string `json:"evidence"`
	} `json:"provider"`
	Steps []struct {
		Phase    string   `json:"phase"`
		Pool     string   `json:"pool"`
		Commands []string `json:"commands"`
	} `json:"steps"`
}

// TestSkewRunbookKubeadm plans the shared scenario, which looks like a
// kubeadm cluster (labelled control-plane static pods in kube-system), to
// 1.38 and pins its runbook.
func TestSkewRunbookKubeadm(t *testing.T) {
	cp := scenario(t)
	cal := calendarFile(t)
	r := skew(t, cp, "plan", "--target", "v1.38", "--calendar", cal, "--runbook")
	if r.ExitCode != 1 || r.Stderr != "" {
		t.Fatalf("exit %d, want 1 (pool skew-133 is out of policy)\n%s", r.ExitCode, r)
	}
	golden(t, "runbook-kubeadm.md.golden", r.Stdout)

	var p planSteps
	decode(t, skew(t, cp, "plan", "--target", "v1.38", "--calendar", cal, "-o", "json"), &p)
	if p.Provider.Provider != "kubeadm" || p.Provider.Source != "detected" {
		t.Errorf("provider %+v", p.Provider)
	}
	phases := map[string]int{}
	for _, s := range p.Steps {
		phases[s.Phase]++
		if len(s.Commands) == 0 {
			t.Errorf("step %s %s has no commands", s.Phase, s.Pool)
		}
	}
	if phases["etcd-snapshot"] != 1 || phases["apiservers"] != 1 || phases["control-plane"] != 0 {
		t.Errorf("phases %v", phases)
	}
}

// eksNode is a node as an EKS managed node group shows it: an aws://
// provider ID, the node-group and eksctl labels and an -eks- kubelet.
func eksNode(name, pool, zone, instance, kubelet string, gpus int64) *corev1.Node {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourcePods: resource.MustParse("110")}
	if gpus > 0 {
		res[harness.GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"eks.amazonaws.com/nodegroup":  pool,
			"alpha.eksctl.io/cluster-name": "train-prod",
			"topology.kubernetes.io/zone":  zone,
			"kubernetes.io/hostname":       name,
		}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + instance},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet, OperatingSystem: "linux", Architecture: "amd64"}},
	}
}

// TestSkewRunbookEKS starts a control plane of its own, since provider
// detection reads the whole cluster, and fills it with nodes that look
// like EKS managed node groups and no kube-apiserver pod: the plan has
// one provider step per hop and no etcd or per-apiserver step.
func TestSkewRunbookEKS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eks, err := harness.Start(ctx, harness.Options{})
	if err != nil {
		t.Fatalf("second control plane: %v", err)
	}
	t.Cleanup(eks.Stop)
	for _, n := range []*corev1.Node{
		eksNode("ip-10-0-1-11.us-west-2.compute.internal", "gpu-a", "us-west-2a", "i-0a1b2c3d4e5f60711", "v1.35.9-eks-113cf36", 8),
		eksNode("ip-10-0-2-12.us-west-2.compute.internal", "gpu-a", "us-west-2b", "i-0a1b2c3d4e5f60712", "v1.35.9-eks-113cf36", 8),
		eksNode("ip-10-0-1-21.us-west-2.compute.internal", "system", "us-west-2a", "i-0a1b2c3d4e5f60721", "v1.37.2-eks-113cf36", 0),
	} {
		if _, err := eks.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cal := calendarFile(t)
	run := func(args ...string) plugintest.Result {
		return plugintest.Run(t, "kubectl-skew", append([]string{"--kubeconfig", eks.Kubeconfig, "plan", "--target", "v1.38", "--calendar", cal}, args...)...)
	}
	r := run("--runbook")
	if r.ExitCode != 0 || r.Stderr != "" {
		t.Fatalf("exit %d\n%s", r.ExitCode, r)
	}
	golden(t, "runbook-eks.md.golden", r.Stdout)

	var p planSteps
	decode(t, run("-o", "json"), &p)
	if p.Provider.Provider != "eks" || p.Provider.Source != "detected" {
		t.Errorf("provider %+v", p.Provider)
	}
	for _, s := range p.Steps {
		switch s.Phase {
		case "etcd-snapshot", "apiservers", "controllers":
			t.Errorf("managed control plane with a %s step", s.Phase)
		}
		for _, c := range s.Commands {
			if strings.Contains(c, "etcd") || strings.Contains(c, "kubeadm") {
				t.Errorf("step %s runs %q on a managed control plane", s.Phase, c)
			}
		}
	}
	if !strings.Contains(r.Stdout, "aws eks update-cluster-version --region us-west-2 --name train-prod --kubernetes-version 1.38") ||
		!strings.Contains(r.Stdout, "--nodegroup-name gpu-a --kubernetes-version 1.38") {
		t.Errorf("runbook lacks the EKS commands:\n%s", r.Stdout)
	}
}
