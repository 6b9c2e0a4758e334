//go:build e2e

package gangdraine2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// TestInferenceRunStopsWhenHeadroomGoes takes away, during a paced run,
// the free GPUs outside the pool that the plan counted on: a one-node pool
// serves one model (three replicas, its own PodDisruptionBudget), and one
// spare node of the same product with four GPUs is the headroom: three
// for the displaced replicas, one for the surge. While the surge loads its
// weights (the hydrator holds it), the spare node is cordoned; the wave
// then drains, and its replacements find no GPU. The run must stop with
// exit 4 and say so, leaving the pool cordoned and the surge in place
// (without the stop it would scale the surge back and call the drain
// done with one replica serving). Once the spare node is uncordoned and
// the replacements are scheduled, the same command resumes to the end.
func TestInferenceRunStopsWhenHeadroomGoes(t *testing.T) {
	cp := harness.Shared(t)
	plugintest.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	ns := cp.Namespace(t)
	sfx := ns[len(ns)-5:]
	product := "NVIDIA-E2E-HEADROOM-" + sfx
	taint := corev1.Taint{Key: "gpufleet.dev/e2e-inference", Value: sfx, Effect: corev1.TaintEffectNoSchedule}
	mkNode := func(name string, gpus int) string {
		nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: name, Nodes: 1, GPUsPerNode: gpus, Product: product, Taints: []corev1.Taint{taint}})
		for _, nd := range nodes {
			n := nd.Name
			t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
		}
		if err != nil {
			t.Fatal(err)
		}
		return nodes[0].Name
	}
	pool := "hr-" + sfx
	node := mkNode(pool, 8)

	h := &hydrator{t: t, cp: cp, ns: ns, tick: 50 * time.Millisecond, bw: 1e9, left: map[types.UID]float64{}}
	hctx, stopHydrator := context.WithCancel(ctx)
	var hw sync.WaitGroup
	hw.Add(1)
	go func() { defer hw.Done(); h.run(hctx) }()
	t.Cleanup(func() { stopHydrator(); hw.Wait() })

	d := harness.Deployment(ns, "llm", 3, 1)
	// The template's own labels: the selector shares the fixture's map.
	d.Spec.Template.Labels = map[string]string{"app": "llm", localcluster.KwokUnreadyLabel: "true"}
	d.Spec.Template.Annotations = map[string]string{inference.AnnWeightsBytes: "1M", inference.AnnWeightsSource: string(inference.SourceObjectStore)}
	spec := &d.Spec.Template.Spec
	spec.NodeSelector = map[string]string{localcluster.GPUProductLabel: product}
	spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "llm", "llm", 1), 3); err != nil {
		t.Fatal(err)
	}
	spare := mkNode("hr-spare-"+sfx, 4)
	if err := cp.WaitSchedulable(ctx, spare); err != nil {
		t.Fatal(err)
	}
	setCordon := func(n string, on bool) {
		t.Helper()
		body := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
		if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("setup: %s", time.Since(start).Round(time.Millisecond))

	args := []string{"run", "--inference", "-l", harness.PoolLabel + "=" + pool, "--hydrate-bandwidth", "object-store=1G/s",
		"--poll-interval", "100ms", "--timeout", "60s", "--kubeconfig", cp.Kubeconfig, "--color", "never"}
	// The surge's replicas land on the spare node and load (held): the
	// run waits for them before wave 1. Then the headroom goes.
	h.setBandwidth(0)
	t0 := time.Now()
	marker := &markerWriter{marker: "loading weights", seen: make(chan struct{})}
	proc := plugintest.Start(t, bin, marker, args...)
	select {
	case <-marker.seen:
	case <-proc.Done():
	case <-ctx.Done():
	}
	setCordon(spare, true)
	h.setBandwidth(1e9)
	first := proc.Wait(t, 90*time.Second)
	t.Logf("$ kubectl gang-drain run --inference (spare cordoned after the surge) -> exit %d (%s)\n%s", first.ExitCode, first.Duration.Round(time.Millisecond), first.Stderr)
	t.Logf("METRIC stop on lost headroom: %s", time.Since(t0).Round(100*time.Millisecond))
	if first.ExitCode != cli.ExitIncomplete {
		t.Errorf("run with the headroom gone: exit %d, want %d", first.ExitCode, cli.ExitIncomplete)
	}
	// The scheduler marks the three replacements one after another: the
	// run stops at the first read that finds any.
	for _, want := range []string{"replica unschedulable: model " + ns + "/llm: ", " Unschedulable (llm-", "0 planned without a GPU",
		"the free GPUs of " + product + " outside the pool the plan counted on are gone"} {
		if !strings.Contains(first.Stderr, want) {
			t.Errorf("run with the headroom gone: want %q in its message", want)
		}
	}
	// Stopped, not undone: the node cordoned, the surge in place.
	if n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("node %s after the stop: cordoned %v (%v), want cordoned", node, n.Spec.Unschedulable, err)
	}
	dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 4 || dep.Labels[inference.LabelSurgedByRun] == "" {
		t.Errorf("llm after the stop: %v, want the surge (3+1 replicas) and its record in place", err)
	}

	// Resumed with the capacity still gone: the replacements the run
	// displaced are not Pending from before it, so it stops again and
	// scales nothing back.
	t2 := time.Now()
	again := plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Timeout: 90 * time.Second, Args: args})
	t.Logf("$ kubectl gang-drain run --inference (resumed, spare still cordoned) -> exit %d (%s)\n%s", again.ExitCode, again.Duration.Round(time.Millisecond), again.Stderr)
	t.Logf("METRIC stop again on a resume without the headroom: %s", time.Since(t2).Round(100*time.Millisecond))
	if again.ExitCode != cli.ExitIncomplete || !strings.Contains(again.Stderr, "resumed, the nodes left") || !strings.Contains(again.Stderr, "replica unschedulable: model "+ns+"/llm: ") {
		t.Errorf("resume with the headroom still gone: exit %d, want %d, a resume and the Unschedulable stop", again.ExitCode, cli.ExitIncomplete)
	}
	dep, err = cp.Client.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 4 || dep.Labels[inference.LabelSurgedByRun] == "" {
		t.Errorf("llm after the second stop: %v, want the surge (3+1 replicas) and its record still in place", err)
	}

	// The capacity back: once the scheduler has placed the replacements,
	// the same command resumes to the end.
	setCordon(spare, false)
	if err := harness.Eventually(ctx, "the replacements scheduled on "+spare, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=llm"})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	r := plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Timeout: 2 * time.Minute, Args: args})
	t.Logf("$ kubectl gang-drain run --inference (again) -> exit %d (%s)\n%s", r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	t.Logf("METRIC resume after the headroom came back: %s", time.Since(t1).Round(100*time.Millisecond))
	if r.ExitCode != 0 || !strings.Contains(r.Stderr, "resumed, the nodes left") {
		t.Fatalf("resumed run: exit %d, want 0 and a resume", r.ExitCode)
	}
	if err := cp.WaitPodsReady(ctx, ns, "app=llm", 3, 30*time.Second); err != nil {
		t.Error(err)
	}
	dep, err = cp.Client.AppsV1().Deployments(ns).Get(ctx, "llm", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 3 || dep.Labels[inference.LabelSurgedByRun] != "" {
		t.Errorf("llm after the resumed run: %v, want 3 replicas and no surge record", err)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=llm"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != spare {
			t.Errorf("pod %s on %q after the resumed run, want on %s", p.Name, p.Spec.NodeName, spare)
		}
	}
	r = plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: []string{"restore", node, "--poll-interval", "100ms", "--kubeconfig", cp.Kubeconfig}})
	if r.ExitCode != 0 {
		t.Fatalf("restore: exit %d\n%s", r.ExitCode, r)
	}
	t.Logf("test wall time %s", time.Since(start).Round(100*time.Millisecond))
}
