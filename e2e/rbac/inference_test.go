//go:build e2e

package rbace2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// TestGangDrainRoleInferenceRun runs `gang-drain run --inference` to the
// end as a user bound only to deploy/rbac/gang-drain.yaml: a one-node pool
// serving one GPU model behind its own PodDisruptionBudget (no gang, so the
// inference run takes it; TestGangDrainRole's pool holds gangs and is
// refused), and a node of the same GPU product outside the pool as the
// headroom. The run cordons the node, surges the model, drains it, waits
// for the replicas Ready on the spare node and scales the surge back;
// restore --inference uncordons. Each rule the run needs is removed in
// turn by TestGangDrainRole (its flows restore-surge and plan-inference
// cover the apps rules); a rule missing here fails the run with the
// apiserver's refusal naming the verb and resource.
func TestGangDrainRoleInferenceRun(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	ns := cp.Namespace(t)
	sfx := ns[len(ns)-5:]
	// A product and a taint of the test's own: the other tests' GPU nodes
	// are no headroom of this pool, and their pods stay off its nodes.
	product := "NVIDIA-E2E-RBAC-INF-" + sfx
	taint := corev1.Taint{Key: "gpufleet.dev/e2e-rbac-inference", Value: sfx, Effect: corev1.TaintEffectNoSchedule}
	mkNodes := func(name string) string {
		nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: name, Nodes: 1, Product: product, Taints: []corev1.Taint{taint}})
		for _, nd := range nodes {
			n := nd.Name
			t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
		}
		if err != nil {
			t.Fatal(err)
		}
		return nodes[0].Name
	}
	poolName := "rbac-inf-" + sfx
	node := mkNodes(poolName)
	d := harness.Deployment(ns, "llm", 2, 1)
	spec := &d.Spec.Template.Spec
	spec.NodeSelector = map[string]string{localcluster.GPUProductLabel: product}
	spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}
	d.Spec.Template.Annotations = map[string]string{inference.AnnWeightsBytes: "1M", inference.AnnWeightsSource: string(inference.SourceObjectStore)}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "llm", "llm", 1), 2); err != nil {
		t.Fatal(err)
	}
	// The headroom, created once both replicas are on the pool's node.
	spare := mkNodes("rbac-inf-spare-" + sfx)
	if err := cp.WaitSchedulable(ctx, spare); err != nil {
		t.Fatal(err)
	}
	t.Logf("setup: %s", time.Since(start).Round(time.Millisecond))

	rs := loadRoles(t, "gang-drain")
	user := grant(t, cp, "gang-drain", "inference", rs, ns, nil)
	const bin = "kubectl-gang_drain"
	sel := harness.PoolLabel + "=" + poolName
	t0 := time.Now()
	r := run(t, cp, bin, user, "run", "--inference", "-l", sel, "--hydrate-bandwidth", "object-store=1G/s",
		"--poll-interval=250ms", "--timeout=90s", "-o", "json")
	if r.ExitCode != 0 || strings.Contains(r.Stdout+r.Stderr, "forbidden") {
		t.Fatalf("run --inference under the role: exit %d, want 0 and nothing forbidden\n%s", r.ExitCode, r)
	}
	var rep gangdrain.InferenceRunReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || rep.RunResult == nil {
		t.Fatalf("run --inference report: %v\n%s", err, r.Stdout)
	}
	if !rep.Complete || len(rep.Surges) != 1 || rep.Surges[0].Surge < 1 || len(rep.ScaledBack) != 1 {
		t.Errorf("run --inference: complete %v, surges %+v, scaled back %+v; want complete, llm surged and scaled back", rep.Complete, rep.Surges, rep.ScaledBack)
	}
	// Drained: the node cordoned, both replicas Ready on the spare node,
	// the surge scaled back and its record gone.
	if n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("node %s after the run: cordoned %v (%v), want cordoned", node, n.Spec.Unschedulable, err)
	}
	if err := cp.WaitPodsReady(ctx, ns, "app=llm", 2, 30*time.Second); err != nil {
		t.Error(err)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=llm"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != spare {
			t.Errorf("pod %s on %q after the run, want on %s", p.Name, p.Spec.NodeName, spare)
		}
	}
	dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 2 || dep.Labels[inference.LabelSurgedByRun] != "" {
		t.Errorf("llm after the run: %v, want 2 replicas and no surge record", err)
	}
	t.Logf("METRIC run --inference under the role: %s", time.Since(t0).Round(100*time.Millisecond))

	r = run(t, cp, bin, user, "restore", "--inference", rep.RunID, "--poll-interval=250ms", "--restore-timeout=1m")
	if r.ExitCode != 0 || strings.Contains(r.Stdout+r.Stderr, "forbidden") {
		t.Fatalf("restore --inference under the role: exit %d, want 0 and nothing forbidden\n%s", r.ExitCode, r)
	}
	if n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
		t.Errorf("node %s after restore: cordoned %v (%v)", node, n.Spec.Unschedulable, err)
	}
	if dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{}); err != nil || *dep.Spec.Replicas != 2 {
		t.Errorf("llm after restore: %v, want 2 replicas", err)
	}
	t.Logf("test wall time %s", time.Since(start).Round(100*time.Millisecond))
}
