//go:build e2e

package gangdraine2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetclient "sigs.k8s.io/jobset/client-go/clientset/versioned"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// cell is the training cell of TestGangDrainCellScale: KWOK nodes of 8
// GPUs in four rack sets, gang A filling every GPU with one rank per GPU,
// gang B (CPU-only ranks: A leaves no GPU free) on two nodes of the rack
// set drained, and Deployments of four replicas, each with a PDB allowing
// two disruptions.
type cell struct {
	t       *testing.T
	cp      *harness.ControlPlane
	ctx     context.Context
	kc      kubernetes.Interface
	dyn     dynamic.Interface
	js      jobsetclient.Interface
	kq      kueueclient.Interface
	ns      string
	pool    string
	nodes   []string
	drained []string
	sel     string // the drained rack set's label selector
	ranksA  int32
	web     int // Deployments of 4 replicas

	mu      sync.Mutex
	readyAt map[string]time.Time // "<jobset>/<request id>" -> when the responder answered ready-to-stop
	lastCk  map[string]time.Time // jobset -> its last checkpoint
}

const (
	gangA, gangB = "train-a", "train-b"
	ranksB       = 4
	webReplicas  = 4
	webLabel     = "gpufleet.dev/cell-web"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestGangDrainCellScale drains one rack set (a quarter of the nodes) of a
// training cell with `kubectl gang-drain run`: 64 KWOK nodes x 8 GPUs, a
// JobSet of 512 one-GPU ranks admitted by the real Kueue, a second JobSet
// gang sharing two of the drained nodes, 200 Deployment pods under PDBs.
// Both gangs answer checkpoint-and-yield through an in-process Responder.
// It checks that every gang's pods are gone within 10 s of its
// ready-to-stop, that the plugin's only requests per pod are the
// evictions and the finalizer patches and deletes it recorded (audit
// log), that restore readmits both gangs within 60 s, and that no work is
// lost.
//
// The floor is a plain `kubectl drain` of the same nodes on the same
// state: it does the cordons and evictions without the gang protocol.
// A server-side dry run would not be a fair floor: it neither waits for
// pods to go nor meets the Job and Kueue controllers reacting. So each
// side runs on a re-created state: before every run the nodes are
// uncordoned, both gangs run with every rank Ready (re-created after a
// plain drain, which fails them: their Jobs have backoffLimit 0), and the
// Deployment pods are re-spread over all nodes. The plain drain's
// GPU-seconds lost are the GPUs of the gangs it kills times the time since
// their last checkpoint, as `kubectl gang-drain plan` estimates
// plainDrainLossGPUHours (whose figure is printed beside it).
//
// Only with E2E_SCALE=1. E2E_SCALE_NODES (default 64, a multiple of 4),
// E2E_SCALE_PODS (default 200) and E2E_SCALE_PAIRS (default 5 alternating
// pairs) scale it down.
//
// The controller manager runs at its default --kube-api-qps (20): once
// Kueue has suspended the gangs' Jobs, gang-drain deletes their pods itself
// (pkg/gang drain_delete.go), each gang through a rate limiter of its own,
// instead of waiting for the Job controller, which at 20 QPS took 51 s for
// gang A's 512 ranks and made gang B's 4 wait behind them. The audit log
// must show exactly the deletes and finalizer patches the run recorded on
// each gang, and no Job of either gang may count a failed pod. Each pair's
// line gives both gangs' times after ready-to-stop (the stop issued, the
// last pod gone) and the machine's load average when the pair began.
func TestGangDrainCellScale(t *testing.T) {
	if os.Getenv("E2E_SCALE") == "" {
		t.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	nodes := envInt("E2E_SCALE_NODES", 64) / 4 * 4
	pods := envInt("E2E_SCALE_PODS", 200)
	pairs := envInt("E2E_SCALE_PAIRS", bench.Pairs)
	cp := harness.Shared(t)
	plugintest.BinDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 38*time.Minute)
	defer cancel()
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	ns := cp.Namespace(t)
	c := &cell{t: t, cp: cp, ctx: ctx, kc: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg),
		js: jobsetclient.NewForConfigOrDie(cfg), kq: kueueclient.NewForConfigOrDie(cfg),
		ns: ns, pool: "cell-" + ns[len(ns)-5:], ranksA: int32(nodes * 8), web: max(pods/webReplicas, 1),
		readyAt: map[string]time.Time{}, lastCk: map[string]time.Time{}}
	c.sel = harness.RackSetLabel + "=" + c.pool + "-rs0"
	began := time.Now()
	c.setup(nodes)
	t.Logf("cell: %d nodes (%d drained: %s), gang A %d ranks, gang B %d ranks, %d web pods; set up in %s",
		len(c.nodes), len(c.drained), c.sel, c.ranksA, ranksB, c.web*webReplicas, time.Since(began).Round(time.Second))

	kubeconfig := "--kubeconfig=" + cp.Kubeconfig
	gd := plugintest.Binary(t, bin)
	plugin := bench.Side{Name: "gang-drain run", KeepStdout: true,
		Procs: []bench.Proc{{Args: []string{gd, kubeconfig, "run", "-l", c.sel, "-o", "json", "--ack-timeout=60s", "--checkpoint-deadline=5m"}}}}
	floor := bench.Side{Name: "kubectl drain", KeepStdout: true,
		Procs: []bench.Proc{{Args: append([]string{cp.Binaries.Kubectl, kubeconfig, "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m"}, c.drained...)}}}

	var cmp bench.Comparison
	var lat [][2]stopLatency
	var restores, lost, planLost []float64
	var loads []string
	var reqs []map[string]int
	runPlugin := func() bench.Sample {
		c.prepare()
		onNodes := c.webOnDrained()
		mark := auditLines(t, cp.AuditLogPath)
		s := bench.Run(t, ctx, plugin)
		if r := s.Results[0]; r.ExitCode != 0 {
			t.Fatalf("gang-drain run: exit %d\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 40))
		}
		var rep gangdrain.RunReport
		if err := json.Unmarshal([]byte(s.Results[0].Stdout), &rep); err != nil {
			t.Fatalf("run report: %v", err)
		}
		lat = append(lat, c.checkRun(rep))
		time.Sleep(2 * time.Second) // the audit log is written asynchronously
		calls := auditCalls(t, cp.AuditLogPath, mark, "kubectl-gang_drain/")
		reqs = append(reqs, calls)
		if evictions := calls["create pods/eviction"]; calls["update pods"] != 0 || evictions < onNodes {
			t.Errorf("requests per pod: %d updates of single pods, %d evictions for %d pods to evict\n%s", calls["update pods"], evictions, onNodes, formatCalls(calls))
		}
		checkDeletedPods(t, c.ctx, cp, c.dyn, c.ns, rep, mark)
		c.checkNoFailedPods()
		restores = append(restores, c.restore(rep.RunID).Seconds())
		return s
	}
	runFloor := func() bench.Sample {
		c.prepare()
		planLost = append(planLost, c.planLoss()*3600)
		start := time.Now()
		s := bench.Run(t, ctx, floor)
		if r := s.Results[0]; r.ExitCode != 0 {
			t.Fatalf("kubectl drain: exit %d\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 40))
		}
		c.mu.Lock()
		gs := float64(c.ranksA) * start.Sub(c.lastCk[gangA]).Seconds() // gang B's ranks ask no GPU
		c.mu.Unlock()
		lost = append(lost, gs)
		c.uncordon()
		c.deleteGangs() // failed by the lost ranks
		return s
	}
	for i := range pairs {
		var p, f bench.Sample
		loads = append(loads, loadAverage())
		if i%2 == 0 {
			p, f = runPlugin(), runFloor()
		} else {
			f, p = runFloor(), runPlugin()
		}
		cmp.PluginRuns, cmp.FloorRuns = append(cmp.PluginRuns, p), append(cmp.FloorRuns, f)
		cmp.Ratios = append(cmp.Ratios, float64(p.Wall)/float64(max(f.Wall, time.Millisecond)))
		t.Logf("pair %d: %s %s | %s %s | ratio %.2f", i+1, plugin.Name, p, floor.Name, f, cmp.Ratios[i])
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "\ngang-drain of one rack set: %d of %d nodes x 8 GPUs, gang A %d ranks (1 GPU each, Kueue), gang B %d ranks on 2 drained nodes, %d web pods under %d PDBs; controller manager at its default 20 QPS; %d alternating pair(s)\n",
		len(c.drained), len(c.nodes), c.ranksA, ranksB, c.web*webReplicas, c.web, pairs)
	if pairs == 1 {
		fmt.Fprintf(&sb, "ONE pair only (E2E_SCALE_PAIRS=1): the ratio below is that pair's, not a median of five\n")
	}
	for i := range pairs {
		fmt.Fprintf(&sb, "pair %d (load average %s): gang-drain run %s | kubectl drain %s | ratio %.2f | after ready-to-stop: A %s, B %s | restore %.1fs | plain drain loses %.0f GPU-s (plan estimate %.0f)\n",
			i+1, loads[i], cmp.PluginRuns[i], cmp.FloorRuns[i], cmp.Ratios[i], lat[i][0], lat[i][1], restores[i], lost[i], planLost[i])
	}
	fmt.Fprintf(&sb, "gang-drain run: median %s\n", bench.MedianSample(cmp.PluginRuns))
	fmt.Fprintf(&sb, "kubectl drain:  median %s\n", bench.MedianSample(cmp.FloorRuns))
	fmt.Fprintf(&sb, "gang-drain's requests in the first run (audit log):\n%s", formatCalls(reqs[0]))
	fmt.Fprintf(&sb, "median ratio to the floor: %.2f\n", cmp.Median())
	t.Log(sb.String())
	fmt.Fprint(os.Stderr, sb.String())
}

// setup creates the nodes, queues, web Deployments and both gangs, and
// starts a Responder per gang.
func (c *cell) setup(n int) {
	t := c.t
	created, err := c.cp.CreateGPUNodes(c.ctx, harness.GPUPool{Name: c.pool, Nodes: n, RackSets: 4})
	for _, node := range created {
		name := node.Name
		c.nodes = append(c.nodes, name)
		t.Cleanup(func() { _ = c.kc.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range c.nodes {
		if i%4 == 0 {
			c.drained = append(c.drained, name)
		}
	}
	cleanup, err := c.cp.CreateQueues(c.ctx, c.ns, c.pool, map[string]string{harness.PoolLabel: c.pool}, n*8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	for i := range c.web {
		name := fmt.Sprintf("web-%03d", i)
		d := harness.Deployment(c.ns, name, webReplicas, 0)
		d.Spec.Template.Labels[webLabel] = "true"
		d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: c.pool}
		if _, err := c.kc.AppsV1().Deployments(c.ns).Create(c.ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(webReplicas / 2)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		if _, err := c.kc.PolicyV1().PodDisruptionBudgets(c.ns).Create(c.ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{gangA, gangB} {
		c.respond(name)
	}
	c.prepare()
}

// respond answers checkpoint-and-yield for one gang, recording when it
// answered ready-to-stop.
func (c *cell) respond(name string) {
	ctx, cancel := context.WithCancel(c.ctx)
	step := 0
	r := &checkpoint.Responder{
		Client: c.dyn, Keys: checkpoint.DefaultKeys(),
		Target: checkpoint.Target{Resource: jobsetGVR, Namespace: c.ns, Name: name},
		Checkpoint: func(ctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
			step += 100
			now := time.Now()
			c.mu.Lock()
			c.readyAt[name+"/"+req.ID] = now
			c.lastCk[name] = now
			c.mu.Unlock()
			return checkpoint.Result{Step: strconv.Itoa(step), URI: fmt.Sprintf("s3://ckpt/%s/%d", name, step)}, nil
		},
		PollInterval:      200 * time.Millisecond,
		HeartbeatInterval: time.Second,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	c.t.Cleanup(func() { cancel(); <-done })
}

// prepare brings the cell to the state each measured run starts from.
func (c *cell) prepare() {
	c.uncordon()
	if !c.gangsHealthy() {
		c.deleteGangs()
		c.createGangs()
	}
	c.respreadWeb()
}

func (c *cell) uncordon() {
	for _, n := range c.drained {
		if _, err := c.kc.CoreV1().Nodes().Patch(c.ctx, n, types.MergePatchType, []byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cell) gangPods(name string) []corev1.Pod {
	list, err := c.kc.CoreV1().Pods(c.ns).List(c.ctx, metav1.ListOptions{LabelSelector: selJobSet(name)})
	if err != nil {
		c.t.Fatal(err)
	}
	return list.Items
}

// gangsHealthy: both JobSets exist, have not failed, and run every rank.
func (c *cell) gangsHealthy() bool {
	for name, ranks := range map[string]int{gangA: int(c.ranksA), gangB: ranksB} {
		js, err := c.js.JobsetV1alpha2().JobSets(c.ns).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil || js.DeletionTimestamp != nil {
			return false
		}
		for _, cond := range js.Status.Conditions {
			if cond.Type == "Failed" && cond.Status == metav1.ConditionTrue {
				return false
			}
		}
		ready := 0
		pods := c.gangPods(name)
		for i := range pods {
			if harness.PodReady(&pods[i]) {
				ready++
			}
		}
		if ready != ranks || len(pods) != ranks {
			return false
		}
	}
	return true
}

func (c *cell) deleteGangs() {
	for _, name := range []string{gangA, gangB} {
		err := c.js.JobsetV1alpha2().JobSets(c.ns).Delete(c.ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			c.t.Fatal(err)
		}
	}
	if err := harness.Eventually(c.ctx, "gangs gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.kc.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "jobset.sigs.k8s.io/jobset-name"})
		if err != nil || len(list.Items) > 0 {
			return false, err
		}
		wls, err := c.kq.KueueV1beta2().Workloads(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(wls.Items) > 0 {
			return false, err
		}
		jss, err := c.js.JobsetV1alpha2().JobSets(c.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jss.Items) == 0, err
	}); err != nil {
		c.t.Fatal(err)
	}
}

// createGangs creates gang A over every GPU of the pool and gang B spread
// over the first two drained nodes, waits until every rank is Ready and
// records that moment as their last checkpoint.
func (c *cell) createGangs() {
	t := c.t
	a := harness.TrainingJobSet(c.ns, gangA, c.pool, c.ranksA, 1)
	b := harness.TrainingJobSet(c.ns, gangB, c.pool, ranksB, 0)
	bSpec := &b.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	term := &bSpec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
	term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
		Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: c.drained[:2]})
	bSpec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"jobset.sigs.k8s.io/jobset-name": gangB}}}}
	began := time.Now()
	for _, obj := range []*jobsetv1alpha2.JobSet{a, b} {
		obj.Labels[checkpoint.DefaultKeys().Protocol()] = "v1"
		obj.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: c.pool}
		if _, err := c.js.JobsetV1alpha2().JobSets(c.ns).Create(c.ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, ranks := range map[string]int{gangA: int(c.ranksA), gangB: ranksB} {
		if err := c.cp.WaitPodsReady(c.ctx, c.ns, selJobSet(name), ranks, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, name := range []string{gangA, gangB} {
		if err := checkpoint.Patch(c.ctx, c.dyn, checkpoint.Target{Resource: jobsetGVR, Namespace: c.ns, Name: name},
			map[string]any{checkpoint.DefaultKeys().LastCheckpointAt(): checkpoint.FormatTime(now)}); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		c.lastCk[name] = now
		c.mu.Unlock()
	}
	for _, p := range c.gangPods(gangB) {
		if p.Spec.NodeName != c.drained[0] && p.Spec.NodeName != c.drained[1] {
			t.Fatalf("gang B's pod %s on %s", p.Name, p.Spec.NodeName)
		}
	}
	t.Logf("gangs created and running in %s", time.Since(began).Round(time.Millisecond))
}

// respreadWeb deletes the web pods so that their Deployments place them
// anew over every node, and waits until all are Ready and every PDB allows
// its two disruptions again.
func (c *cell) respreadWeb() {
	zero := int64(0)
	if err := c.kc.CoreV1().Pods(c.ns).DeleteCollection(c.ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
		metav1.ListOptions{LabelSelector: webLabel + "=true"}); err != nil {
		c.t.Fatal(err)
	}
	want := c.web * webReplicas
	if err := harness.Eventually(c.ctx, "web pods Ready and PDBs settled", 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := c.kc.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: webLabel + "=true"})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if harness.PodReady(&list.Items[i]) {
				ready++
			}
		}
		if ready != want || len(list.Items) != want {
			return false, nil
		}
		pdbs, err := c.kc.PolicyV1().PodDisruptionBudgets(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, b := range pdbs.Items {
			if b.Status.ObservedGeneration < b.Generation || b.Status.CurrentHealthy != webReplicas || b.Status.DisruptionsAllowed != webReplicas/2 {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		c.t.Fatal(err)
	}
}

// webOnDrained counts the web pods on the drained nodes.
func (c *cell) webOnDrained() int {
	list, err := c.kc.CoreV1().Pods(c.ns).List(c.ctx, metav1.ListOptions{LabelSelector: webLabel + "=true"})
	if err != nil {
		c.t.Fatal(err)
	}
	on := map[string]bool{}
	for _, n := range c.drained {
		on[n] = true
	}
	k := 0
	for _, p := range list.Items {
		if on[p.Spec.NodeName] {
			k++
		}
	}
	return k
}

// stopLatency is how long after a gang's ready-to-stop the drain issued
// its stop (the drain's own part) and its last pod was gone, and how many
// of its pods gang-drain deleted itself.
type stopLatency struct {
	issued, gone time.Duration
	deleted      int
}

func (l stopLatency) String() string {
	return fmt.Sprintf("stop issued +%s, pods gone +%s (%d deleted by gang-drain)", l.issued.Round(time.Millisecond), l.gone.Round(time.Millisecond), l.deleted)
}

// loadAverage is the machine's load average over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// checkNoFailedPods: no Job of either gang counts a failed pod (a rank
// deleted with its Job's tracking finalizer on would).
func (c *cell) checkNoFailedPods() {
	jobs, err := c.kc.BatchV1().Jobs(c.ns).List(c.ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Status.Failed != 0 {
			c.t.Errorf("job %s counts %d failed pods after the stop", j.Name, j.Status.Failed)
		}
	}
}

// checkRun checks a run report: both gangs stopped after ready-to-stop,
// their pods gone within 10 s of the answer; it returns each gang's
// latencies.
func (c *cell) checkRun(rep gangdrain.RunReport) [2]stopLatency {
	t := c.t
	var out [2]stopLatency
	if !rep.Complete || len(rep.Gangs) != 2 {
		t.Fatalf("run report: complete %v, %d gangs: %+v", rep.Complete, len(rep.Gangs), rep.Gangs)
	}
	for _, g := range rep.Gangs {
		i := 0
		if g.Name == gangB {
			i = 1
		}
		c.mu.Lock()
		ready, ok := c.readyAt[g.Name+"/"+g.RequestID]
		c.mu.Unlock()
		if g.Action != gang.ActionStopped || g.Verdict.Phase != checkpoint.PhaseReady || !ok {
			t.Errorf("gang %s: action %s, checkpoint %+v, answered ready-to-stop %v", g.Key, g.Action, g.Verdict, ok)
			continue
		}
		// 0 work lost: the stop came after the checkpoint was durable.
		if g.StopStartedAt.Before(ready.Truncate(time.Second)) {
			t.Errorf("gang %s: stop issued at %s before its ready-to-stop at %s", g.Key, g.StopStartedAt, ready)
		}
		out[i] = stopLatency{issued: g.StopStartedAt.Sub(ready), gone: g.PodsGoneAt.Sub(ready)}
		if g.DeletedPods != nil {
			out[i].deleted = g.DeletedPods.Count
		}
		t.Logf("gang %s (%d ranks): ready-to-stop %s, %s", g.Key, g.Ranks, ready.Format("15:04:05.000"), out[i])
		if out[i].gone > 10*time.Second {
			t.Errorf("gang %s: pods gone %s after ready-to-stop, want within 10s (controller manager at its default 20 QPS)", g.Key, out[i].gone.Round(time.Millisecond))
		}
	}
	return out
}

// restore runs `restore RUN` and checks that both gangs are readmitted and
// Ready within 60 s; it returns how long that took.
func (c *cell) restore(runID string) time.Duration {
	t := c.t
	start := time.Now()
	r := plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: []string{"--kubeconfig", c.cp.Kubeconfig, "restore", runID, "-o", "json", "--restore-timeout=3m"}, Timeout: 4 * time.Minute})
	if r.ExitCode != 0 {
		t.Fatalf("restore: exit %d\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 40))
	}
	var rr gangdrain.RestoreReport
	if err := json.Unmarshal([]byte(r.Stdout), &rr); err != nil {
		t.Fatalf("restore report: %v", err)
	}
	var last time.Time
	if !rr.Complete || len(rr.Gangs) != 2 {
		t.Fatalf("restore: complete %v, %d gangs", rr.Complete, len(rr.Gangs))
	}
	for _, g := range rr.Gangs {
		if !g.Admitted || !g.Ready {
			t.Errorf("restore: gang %s admitted %v ready %v (%d pods Ready)", g.Key, g.Admitted, g.Ready, g.ReadyPods)
		}
		if g.ReadyAt.After(last) {
			last = g.ReadyAt
		}
	}
	took := last.Sub(start)
	if took > 60*time.Second {
		t.Errorf("restore readmitted both gangs in %s, want within 60s", took.Round(time.Millisecond))
	}
	for name, ranks := range map[string]int{gangA: int(c.ranksA), gangB: ranksB} {
		if err := c.cp.WaitPodsReady(c.ctx, c.ns, selJobSet(name), ranks, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return took
}

// planLoss asks `kubectl gang-drain plan` what a plain drain of the rack
// set would lose, in GPU-hours.
func (c *cell) planLoss() float64 {
	r := plugintest.RunCmd(c.t, plugintest.Binary(c.t, bin), plugintest.Cmd{Args: []string{"--kubeconfig", c.cp.Kubeconfig, "plan", "-l", c.sel, "-o", "json"}, Timeout: 2 * time.Minute})
	if r.ExitCode != 0 {
		c.t.Fatalf("plan: exit %d\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 20))
	}
	var plan gangdrain.PlanReport
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil {
		c.t.Fatalf("plan report: %v", err)
	}
	return plan.Summary.PlainDrainLossGPUHours
}

func auditLines(t *testing.T, path string) int { return harness.AuditLines(t, path) }

// auditCalls counts the audited requests of one user agent prefix after
// line skip by verb and resource (a request for one named pod is "get
// pods", a list "list pods", an eviction "create pods/eviction").
func auditCalls(t *testing.T, path string, skip int, agent string) map[string]int {
	return harness.CountAudit(t, path, skip, agent, harness.AuditEvent.Request)
}

func formatCalls(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %5d %s\n", m[k], k)
	}
	return b.String()
}
