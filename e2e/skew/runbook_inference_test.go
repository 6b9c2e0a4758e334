//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// nextStep is where the runbook's next step begins ("5. **node-pool ...").
var nextStep = regexp.MustCompile(`\n\d+\. \*\*`)

// TestRunbookInferencePoolDrain: on a pool of KWOK GPU nodes serving a
// model Deployment behind a PodDisruptionBudget (free GPUs of its product
// in another pool to surge into), kubectl skew plan --runbook
// --hydrate-bandwidth drains the pool with the gang-drain plan, run and
// restore --inference triple at that bandwidth, and says the waves and
// ETA that gang-drain plan --inference plans for the same pool.
func TestRunbookInferencePoolDrain(t *testing.T) {
	cp := scenario(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ns := cp.Namespace(t)
	sfx := ns[len(ns)-5:]
	product := "NVIDIA-E2E-RUNBOOK-" + sfx
	taint := corev1.Taint{Key: "gpufleet.dev/e2e-runbook-inference", Value: sfx, Effect: corev1.TaintEffectNoSchedule}
	pool := "rbinf-" + sfx
	mkNodes := func(name string) {
		nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: name, Nodes: 2, Product: product, Taints: []corev1.Taint{taint}})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			name := n.Name
			t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
	mkNodes(pool)
	lbl := map[string]string{"app": "llm"}
	spec := harness.PodSpec(8)
	// A model server Ready on its health endpoint (KWOK runs no probe: the
	// pod is Ready as KWOK or the test sets it), as --inference requires.
	spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}
	spec.NodeSelector = map[string]string{localcluster.GPUProductLabel: product}
	spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm", Labels: lbl,
		Annotations: map[string]string{inference.AnnWeightsBytes: "140Gi", inference.AnnWeightsSource: string(inference.SourceObjectStore)}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}}}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llm"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: lbl}}}
	if _, err := cp.CreatePDB(ctx, pdb, 2); err != nil {
		t.Fatal(err)
	}
	if err := cp.WaitPodsReady(ctx, ns, "app=llm", 2, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Free GPUs of the product outside the pool, made once the replicas
	// are on it: the surge's headroom.
	mkNodes("rbspare-" + sfx)

	sel := harness.PoolLabel + "=" + pool
	const bw = "object-store=1250M/s"
	gp := plugintest.Run(t, "kubectl-gang_drain", "--kubeconfig", cp.Kubeconfig, "plan", "--inference", "-l", sel, "--hydrate-bandwidth", bw, "-o", "json")
	var planned struct {
		Summary struct {
			Waves      int     `json:"waves"`
			ETASeconds float64 `json:"etaSeconds"`
			Refused    bool    `json:"refused"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(gp.Stdout), &planned); err != nil || gp.ExitCode != 0 || planned.Summary.Refused || planned.Summary.ETASeconds <= 0 {
		t.Fatalf("gang-drain plan --inference: exit %d, %v, %+v\n%s", gp.ExitCode, err, planned.Summary, gp)
	}
	eta := time.Duration(planned.Summary.ETASeconds * float64(time.Second)).Round(time.Second)
	t.Logf("gang-drain plan --inference: %d wave(s), ETA %s at %s", planned.Summary.Waves, eta, bw)

	r := skew(t, cp, "plan", "--target", "v1.38", "--calendar", calendarFile(t), "--runbook", "--hydrate-bandwidth", bw)
	if r.ExitCode > 1 {
		t.Fatalf("skew plan --runbook: %s", r)
	}
	// The pool's step, from its heading to the next step's.
	text := r.Stdout
	i := strings.Index(text, fmt.Sprintf("# %s holds inference workloads", pool))
	if i < 0 {
		t.Fatalf("no inference drain of pool %s in the runbook:\n%s", pool, text)
	}
	text = text[i:]
	if j := nextStep.FindStringIndex(text); j != nil {
		text = text[:j[0]]
	}
	want := []string{
		fmt.Sprintf("# planned when the inventory was read: %d wave(s), ETA %s of cold starts", planned.Summary.Waves, eta),
		"BW=object-store=1250000000/s",
		fmt.Sprintf(`kubectl gang-drain plan --inference -l %s --hydrate-bandwidth "$BW"`, sel),
		fmt.Sprintf(`kubectl gang-drain run --inference -l %s --run-id "%s-to-1.38"`, sel, pool),
		fmt.Sprintf(`kubectl gang-drain restore "%s-to-1.38" --inference`, pool),
	}
	at := 0
	for _, w := range want {
		k := strings.Index(text[at:], w)
		if k < 0 {
			t.Fatalf("the pool's drain lacks, or out of order, %q:\n%s", w, text)
		}
		at += k + len(w)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "kubectl gang-drain") && !strings.HasPrefix(strings.TrimSpace(line), "#") && !strings.Contains(line, "--inference") {
			t.Errorf("a gang-drain command without --inference in the pool's step: %q", line)
		}
	}
}
