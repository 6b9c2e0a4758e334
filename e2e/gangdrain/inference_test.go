//go:build e2e

package gangdraine2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// markerWriter closes seen once a write holds marker.
type markerWriter struct {
	mu     sync.Mutex
	buf    strings.Builder
	marker string
	seen   chan struct{}
	done   bool
}

func (m *markerWriter) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf.Write(p)
	if !m.done && strings.Contains(m.buf.String(), m.marker) {
		m.done = true
		close(m.seen)
	}
	return len(p), nil
}

// servingModel is one model Deployment of the inference test.
type servingModel struct {
	name     string
	replicas int32
	gpus     int64
	weights  int64 // bytes one replica loads
	pdb      policyv1.PodDisruptionBudgetSpec
}

// hydrator plays the model servers: a pod KWOK started unready (label
// localcluster.KwokUnreadyLabel) loads its weights (the bytes its
// inference.AnnWeightsBytes annotation names) from one store shared by
// every pod loading at the same time, bw bytes per second split evenly,
// and turns Ready when it has them all. It also records, per model, the
// fewest Ready replicas seen while a window is open.
type hydrator struct {
	t    *testing.T
	cp   *harness.ControlPlane
	ns   string
	tick time.Duration

	mu      sync.Mutex
	bw      float64
	left    map[types.UID]float64
	window  bool
	min     map[string]int
	readyOf map[string]int
}

func (h *hydrator) setBandwidth(bw float64) {
	h.mu.Lock()
	h.bw = bw
	h.mu.Unlock()
}

// open starts a measuring window; close returns its minimum Ready counts.
func (h *hydrator) open() {
	h.mu.Lock()
	h.window, h.min = true, map[string]int{}
	for k, v := range h.readyOf {
		h.min[k] = v
	}
	h.mu.Unlock()
}

func (h *hydrator) close() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.window = false
	return h.min
}

func (h *hydrator) run(ctx context.Context) {
	last := time.Now()
	for ctx.Err() == nil {
		time.Sleep(h.tick)
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		pods, err := h.cp.Client.CoreV1().Pods(h.ns).List(ctx, metav1.ListOptions{LabelSelector: localcluster.KwokUnreadyLabel + "=true"})
		if err != nil {
			continue
		}
		ready := map[string]int{}
		var loading []*corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			if harness.PodReady(p) {
				ready[p.Labels["app"]]++
			} else if p.Status.Phase == corev1.PodRunning {
				loading = append(loading, p)
			}
		}
		h.mu.Lock()
		h.readyOf = ready
		if h.window {
			for k, v := range ready {
				if m, ok := h.min[k]; !ok || v < m {
					h.min[k] = v
				}
			}
			for k := range h.min {
				if _, ok := ready[k]; !ok {
					h.min[k] = 0
				}
			}
		}
		var done []*corev1.Pod
		share := h.bw * dt / float64(max(len(loading), 1))
		for _, p := range loading {
			left, ok := h.left[p.UID]
			if !ok {
				q := resource.MustParse(p.Annotations[inference.AnnWeightsBytes])
				left = float64(q.Value())
			}
			left -= share
			h.left[p.UID] = left
			if left <= 0 {
				done = append(done, p)
			}
		}
		h.mu.Unlock()
		for _, p := range done {
			ts := metav1.Now().UTC().Format(time.RFC3339)
			body := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":%q},{"type":"ContainersReady","status":"True","lastTransitionTime":%q}]}}`, ts, ts)
			if _, err := h.cp.Client.CoreV1().Pods(h.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil && ctx.Err() == nil {
				h.t.Logf("marking pod %s Ready: %v", p.Name, err)
			}
		}
	}
}

// TestInferencePoolPacedVersusPDBOnly drains one inference pool twice in
// one run: first with a plain `kubectl drain` (PodDisruptionBudgets only),
// then, with the pool back, with `kubectl gang-drain run --inference`. Two
// models serve on the pool's four nodes, each replica Ready only once it
// has loaded its weights from a store whose bandwidth the test shares
// among the replicas loading at once; five nodes of the same GPU product
// outside the pool are the headroom. The paced run must keep both models
// at or above their floor (--min-serving 0.75) where the plain drain dips
// to the budgets' floor; both sides' lowest Ready counts and the time until
// every replica is Ready again are logged as METRIC lines.
func TestInferencePoolPacedVersusPDBOnly(t *testing.T) {
	cp := harness.Shared(t)
	plugintest.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	start := time.Now()
	// A short namespace: the plan's model table then fits the default
	// 120 columns without shortening a cell, as README shows it.
	ns := cp.NamespaceFrom(t, "serving")
	sfx := ns[len(ns)-5:]
	// A GPU product and a taint of the test's own keep its pods on its
	// nodes and other tests' pods off them.
	product := "NVIDIA-E2E-SERVE-" + sfx
	taint := corev1.Taint{Key: "gpufleet.dev/e2e-inference", Value: sfx, Effect: corev1.TaintEffectNoSchedule}
	pool := "inf-" + sfx
	mkNodes := func(name string, n int) []string {
		nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: name, Nodes: n, Product: product, Taints: []corev1.Taint{taint}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, node := range nodes {
			names = append(names, node.Name)
			name := node.Name
			t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
		return names
	}
	poolNodes := mkNodes(pool, 4)

	const bandwidth = 8e6 // bytes per second, shared
	h := &hydrator{t: t, cp: cp, ns: ns, tick: 50 * time.Millisecond, bw: 1e9, left: map[types.UID]float64{}}
	hctx, stopHydrator := context.WithCancel(ctx)
	var hw sync.WaitGroup
	hw.Add(1)
	go func() { defer hw.Done(); h.run(hctx) }()
	t.Cleanup(func() { stopHydrator(); hw.Wait() })

	models := []servingModel{
		// 34% of 4 rounds up to 2: the budget keeps 2 (held against the
		// disruption controller below).
		{"llm-a", 4, 4, 8e6, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("34%"))}},
		{"llm-b", 4, 2, 4e6, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2))}},
	}
	for _, m := range models {
		lbl := map[string]string{"app": m.name}
		tmpl := map[string]string{"app": m.name, localcluster.KwokUnreadyLabel: "true"}
		spec := harness.PodSpec(int(m.gpus))
		// A model server Ready on its health endpoint (KWOK runs no probe: the
		// pod is Ready as KWOK or the test sets it), as --inference requires.
		spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}
		spec.NodeSelector = map[string]string{localcluster.GPUProductLabel: product}
		spec.Tolerations = []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect}}
		spec.TerminationGracePeriodSeconds = ptr.To(int64(0))
		// At most one replica of a model per node, as model servers are
		// commonly spread: the scheduler's placement is then the same in
		// every run (one replica of each model on each pool node), and so
		// are the plan's surge, waves and bytes, which README shows from
		// the golden file below.
		spec.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: lbl}, TopologyKey: corev1.LabelHostname}}}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name, Labels: lbl},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(m.replicas), Selector: &metav1.LabelSelector{MatchLabels: lbl},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl,
					Annotations: map[string]string{inference.AnnWeightsBytes: fmt.Sprint(m.weights), inference.AnnWeightsSource: string(inference.SourceObjectStore)}},
					Spec: spec}}}
		if _, err := cp.CreateDeployment(ctx, d); err != nil {
			t.Fatal(err)
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.name}, Spec: m.pdb}
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: lbl}
		if _, err := cp.CreatePDB(ctx, pdb, m.replicas); err != nil {
			t.Fatal(err)
		}
	}
	spare := mkNodes("spare-"+sfx, 5)
	t.Logf("setup: pool %s (%d nodes), %d spare nodes, 2 models Ready in %s", pool, len(poolNodes), len(spare), time.Since(start).Round(time.Millisecond))

	// The plan's budget floors are the disruption controller's
	// desiredHealthy at the same replica count.
	sel := "-l " + harness.PoolLabel + "=" + pool
	flags := []string{"--hydrate-bandwidth", "object-store=8M/s", "--min-serving", "0.75"}
	r := plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: append([]string{"plan", "--inference", "-l", harness.PoolLabel + "=" + pool, "--surge=false", "-o", "json", "--kubeconfig", cp.Kubeconfig}, flags...)})
	// Without surge each node is a wave of its own: one replica of each
	// model per node, and a second node at once would take both models
	// to 2 of 4, below --min-serving's 3.
	var noSurge gangdrain.InferencePlanReport
	if err := json.Unmarshal([]byte(r.Stdout), &noSurge); err != nil {
		t.Fatalf("plan --surge=false: exit %d, %v\n%s", r.ExitCode, err, r)
	}
	if r.ExitCode != 0 || noSurge.Summary.Refused || noSurge.Summary.Waves != len(poolNodes) {
		t.Fatalf("plan --surge=false: exit %d, refused %v, %d waves, want 0, false, %d\n%s", r.ExitCode, noSurge.Summary.Refused, noSurge.Summary.Waves, len(poolNodes), r)
	}
	for _, m := range noSurge.Models {
		pdb, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m.PDBFloor != pdb.Status.DesiredHealthy {
			t.Errorf("model %s: plan's budget floor %d, the disruption controller's desiredHealthy %d", m.Key, m.PDBFloor, pdb.Status.DesiredHealthy)
		}
	}

	allReady := func(what string) time.Time {
		t.Helper()
		for _, m := range models {
			if err := cp.WaitPodsReady(ctx, ns, "app="+m.name, int(m.replicas), 2*time.Minute); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		return time.Now()
	}
	report := func(side string, min map[string]int, took time.Duration) {
		var parts []string
		for _, m := range models {
			parts = append(parts, fmt.Sprintf("%s %d of %d", m.name, min[m.name], m.replicas))
		}
		t.Logf("METRIC %s: lowest Ready during the wave: %s; wave time (drain start to every replica Ready again): %s", side, strings.Join(parts, ", "), took.Round(100*time.Millisecond))
	}

	// 1. PDB-only: a plain kubectl drain of the pool.
	h.setBandwidth(bandwidth)
	h.open()
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, cp.Binaries.Kubectl, "--kubeconfig", cp.Kubeconfig, "drain", "-l", harness.PoolLabel+"="+pool,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl drain: %v\n%s", err, out)
	}
	plainTook := allReady("after kubectl drain").Sub(t0)
	plainMin := h.close()
	report("PDB-only kubectl drain", plainMin, plainTook)

	// Back to the start: the models on the pool again, Ready.
	h.setBandwidth(1e9)
	setCordon := func(nodes []string, on bool) {
		for _, n := range nodes {
			body := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
			if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	setCordon(poolNodes, false)
	setCordon(spare, true)
	for _, m := range models {
		if err := cp.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}, metav1.ListOptions{LabelSelector: "app=" + m.name}); err != nil {
			t.Fatal(err)
		}
	}
	allReady("back on the pool")
	if err := harness.Eventually(ctx, "every model pod on the pool", time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && !strings.HasPrefix(p.Spec.NodeName, pool+"-") {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	setCordon(spare, false)
	h.setBandwidth(bandwidth)

	// 2. Paced: gang-drain run --inference.
	r = plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: append([]string{"plan", "--inference", "-l", harness.PoolLabel + "=" + pool, "--kubeconfig", cp.Kubeconfig, "--color", "never"}, flags...)})
	t.Logf("$ kubectl gang-drain plan --inference %s %s -> exit %d\n%s%s", sel, strings.Join(flags, " "), r.ExitCode, r.Stdout, r.Stderr)
	if r.ExitCode != 0 {
		t.Fatalf("plan --inference: exit %d", r.ExitCode)
	}
	// README's plan is this one. What differs between runs is only the
	// suffix the apiserver generates for the test's namespace, which the
	// pool's name repeats: it is masked as xxxxx in both, of the same
	// width so the columns stay. The placement is fixed (one replica of each model per
	// node, above) and the plan has no times but those computed from bytes
	// over bandwidth, so nothing else is masked.
	transcript := fmt.Sprintf("$ kubectl gang-drain plan --inference %s %s\n%s%s", sel, strings.Join(flags, " "), r.Stdout, r.Stderr)
	transcript = strings.ReplaceAll(strings.ReplaceAll(transcript, ns, "serving-xxxxx"), pool, "inf-xxxxx")
	golden.Check(t, "inference-plan.txt", transcript)
	// Interrupted (Ctrl-C) once wave 1's nodes are drained, then the same
	// command again: it resumes from what the cluster records.
	runArgs := append([]string{"run", "--inference", "-l", harness.PoolLabel + "=" + pool, "--poll-interval", "100ms", "-o", "json", "--kubeconfig", cp.Kubeconfig}, flags...)
	h.open()
	t0 = time.Now()
	marker := &markerWriter{marker: "node " + poolNodes[1] + ": drained", seen: make(chan struct{})}
	proc := plugintest.Start(t, bin, marker, runArgs...)
	select {
	case <-marker.seen:
		_ = proc.Signal(syscall.SIGINT)
	case <-proc.Done():
	case <-ctx.Done():
	}
	first := proc.Wait(t, time.Minute)
	t.Logf("$ kubectl gang-drain run --inference %s %s -> exit %d after SIGINT (%s)\n%s", sel, strings.Join(flags, " "), first.ExitCode, first.Duration.Round(time.Millisecond), first.Stderr)
	if first.ExitCode != cli.ExitInterrupted {
		t.Fatalf("interrupted run: exit %d, want %d", first.ExitCode, cli.ExitInterrupted)
	}
	// The run says the plan's ETA before its first wave starts.
	if eta, wave := strings.Index(first.Stderr, "ETA 8s: surge 2s + 2 waves"), strings.Index(first.Stderr, "wave 1 of 2"); eta < 0 || wave < 0 || eta > wave {
		t.Errorf("the run did not say the plan's ETA (8s) before wave 1:\n%s", first.Stderr)
	}
	// Restore finds the surge the interrupted run recorded on each
	// Deployment and would scale back exactly that (a dry run: the run
	// resumes below).
	var stopped gangdrain.InferenceRunReport
	if err := json.Unmarshal([]byte(first.Stdout), &stopped); err != nil || stopped.RunID == "" {
		t.Fatalf("interrupted run's report: %v\n%s", err, first.Stdout)
	}
	r = plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: []string{"restore", stopped.RunID, "--dry-run", "-o", "json", "--kubeconfig", cp.Kubeconfig}})
	var dry gangdrain.RestoreReport
	if err := json.Unmarshal([]byte(r.Stdout), &dry); err != nil || r.ExitCode != 0 {
		t.Fatalf("restore --dry-run of the interrupted run: exit %d, %v\n%s", r.ExitCode, err, r)
	}
	if len(dry.Surges) != len(models) {
		t.Errorf("restore --dry-run: %d surges, want %d: %+v", len(dry.Surges), len(models), dry.Surges)
	}
	for _, o := range dry.Surges {
		if o.Action != inference.ActionWouldScaleBack || o.Surge != 1 || o.ReplicasNow != 5 || o.ReplicasAfter != 4 {
			t.Errorf("restore --dry-run of %s: %+v, want would-scale-back by 1 from 5 to 4", o.Deployment, o)
		}
	}
	for _, m := range models {
		if d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, m.name, metav1.GetOptions{}); err != nil || *d.Spec.Replicas != m.replicas+1 {
			t.Errorf("deployment %s after restore --dry-run: %v, want %d replicas", m.name, err, m.replicas+1)
		}
	}
	r = plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Timeout: 3 * time.Minute, Args: runArgs})
	t.Logf("$ kubectl gang-drain run --inference %s %s (again) -> exit %d (%s)\n%s", sel, strings.Join(flags, " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	if r.ExitCode != 0 {
		t.Fatalf("resumed run --inference: exit %d\n%s", r.ExitCode, r.Stdout)
	}
	if !strings.Contains(r.Stderr, "resumed, the nodes left: ETA 3s: surge 0s + 1 wave") {
		t.Errorf("the resumed run did not say the ETA of the nodes left (wave 2's 3s):\n%s", r.Stderr)
	}
	pacedTook := allReady("after the paced run").Sub(t0)
	pacedMin := h.close()
	report("paced gang-drain run --inference (interrupted once, resumed)", pacedMin, pacedTook)
	var run gangdrain.InferenceRunReport
	if err := json.Unmarshal([]byte(r.Stdout), &run); err != nil {
		t.Fatal(err)
	}
	if !run.Resumed || !run.Complete || len(run.Waves) != 1 || len(run.Surges) != 2 || len(run.ScaledBack) != 2 {
		t.Errorf("resumed run: resumed %v, complete %v, %d wave(s), %d surged, %d scaled back", run.Resumed, run.Complete, len(run.Waves), len(run.Surges), len(run.ScaledBack))
	}
	for _, o := range run.Surges {
		if o.Message != "surged earlier by this run" {
			t.Errorf("surge of %s applied again on resume: %+v", o.Deployment, o)
		}
	}

	// The paced run keeps every model at or above its floor (3 of 4);
	// the plain drain does not.
	plainBelow := false
	for _, m := range models {
		floor := int(run.Floor[ns+"/"+m.name])
		if floor != 3 {
			t.Errorf("model %s: floor %d, want 3 (--min-serving 0.75 of 4)", m.name, floor)
		}
		if pacedMin[m.name] < floor {
			t.Errorf("paced run: model %s fell to %d Ready, below its floor %d", m.name, pacedMin[m.name], floor)
		}
		if got := run.MinServing[ns+"/"+m.name]; got < int32(floor) {
			t.Errorf("paced run reports model %s at %d Ready, below its floor %d", m.name, got, floor)
		}
		plainBelow = plainBelow || plainMin[m.name] < floor
	}
	if !plainBelow {
		t.Errorf("the PDB-only drain kept every model at its floor (%v): the comparison shows nothing", plainMin)
	}

	// Restore: the pool uncordoned, every Deployment back at its replicas.
	r = plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: []string{"restore", run.RunID, "--poll-interval", "100ms", "--kubeconfig", cp.Kubeconfig}})
	if r.ExitCode != 0 {
		t.Fatalf("restore: exit %d\n%s", r.ExitCode, r)
	}
	for _, n := range poolNodes {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil || node.Spec.Unschedulable {
			t.Errorf("node %s after restore: cordoned %v, %v", n, node.Spec.Unschedulable, err)
		}
	}
	for _, m := range models {
		d, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, m.name, metav1.GetOptions{})
		if err != nil || *d.Spec.Replicas != m.replicas || d.Labels[inference.LabelSurgedByRun] != "" {
			t.Errorf("deployment %s after restore: %v, %v", m.name, d, err)
		}
	}
	t.Logf("test wall time %s", time.Since(start).Round(100*time.Millisecond))
}
