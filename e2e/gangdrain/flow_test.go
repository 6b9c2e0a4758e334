//go:build e2e

package gangdraine2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// webWithPDB creates, while only the first nodes exist, a Deployment of
// two replicas in the pool guarded by a PDB with minAvailable 1, so that
// both replicas sit on the nodes to be drained.
func (e *env) webWithPDB() {
	e.t.Helper()
	d := harness.Deployment(e.ns, "web", 2, 0)
	d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: e.pool}
	if _, err := e.cp.CreateDeployment(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.cp.CreatePDB(e.ctx, harness.PDB(e.ns, "web", "web", 1), 2); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) queues(gpus int) {
	e.t.Helper()
	cleanup, err := e.cp.CreateQueues(e.ctx, e.ns, e.pool, map[string]string{harness.PoolLabel: e.pool}, gpus)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cleanup)
}

func (e *env) workload(uid types.UID) *kueuev1beta2.Workload {
	e.t.Helper()
	wl, err := e.cp.WorkloadFor(e.ctx, e.ns, string(uid))
	if err != nil {
		e.t.Fatal(err)
	}
	return wl
}

func condTrue(conds []metav1.Condition, typ string) (bool, string) {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue, c.Reason
		}
	}
	return false, ""
}

func wantIn(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("missing %q in:\n%s", sub, s)
		}
	}
}

// TestGangDrainKueueJobSetFlow drains 2 of 4 nodes under a 16-rank JobSet
// gang admitted by the real Kueue, with a responder that checkpoints:
// plan, request and answer, active=false, Kueue evicts, the other pods are
// evicted with their PDB honoured, restore readmits the gang. It then runs
// a plain `kubectl drain` of the same nodes for comparison.
func TestGangDrainKueueJobSetFlow(t *testing.T) {
	e := newEnv(t, 2, 8*time.Minute)
	e.webWithPDB()
	e.addNodes(2)
	e.queues(32)
	js := e.jobSet("train", e.pool, 16, 2, "v1")
	sel := selJobSet("train")
	e.waitReady(sel, 16)
	lastCheckpoint := time.Now()
	if err := checkpoint.Patch(e.ctx, e.dyn, checkpoint.Target{Resource: jobsetGVR, Namespace: e.ns, Name: "train"},
		map[string]any{checkpoint.DefaultKeys().LastCheckpointAt(): checkpoint.FormatTime(lastCheckpoint)}); err != nil {
		t.Fatal(err)
	}
	drained := e.nodes[:2]

	// plan: read-only.
	r := e.run(append([]string{"plan", "-o", "json"}, drained...)...)
	if r.ExitCode != 0 {
		t.Fatalf("plan: %s", r)
	}
	plan := decode[gangdrain.PlanReport](t, r)
	if len(plan.Items) != 1 {
		t.Fatalf("plan gangs: %+v", plan.Items)
	}
	g := plan.Items[0]
	if g.Kind != gang.KindJobSet || g.Method != gang.StopKueue || g.Ranks != 16 || g.RanksOnNodes != 8 || g.GPUs != 32 || g.GPUsOnNodes != 16 ||
		g.Support != checkpoint.SupportYes || g.Workload == nil || !g.LastCheckpointKnown || len(g.Nodes) != 4 {
		t.Errorf("plan gang: %+v", g)
	}
	web := 0
	for _, v := range plan.Pods {
		if strings.HasPrefix(v.Name, "web-") {
			web++
		}
	}
	if web != 2 || plan.Summary.PodsToEvict != 2 {
		t.Errorf("plan pods %+v summary %+v", plan.Pods, plan.Summary)
	}
	wantIn(t, strings.Join(plan.Steps, "\n"), "spec.active=false", "checkpoint-and-yield=requested", "pod(s) from "+e.pool)
	if n := e.node(drained[0]); n.Spec.Unschedulable || n.Annotations[gang.AnnRunID] != "" {
		t.Fatal("plan changed a node")
	}
	r = e.run(append([]string{"plan"}, drained...)...)
	wantIn(t, r.Stdout, e.ns+"/JobSet/train", "kueue-deactivate", "16/32", "Steps of `run`")
	goldenfile.CheckFits(t, r.Stdout, cli.DefaultTableWidth)
	r = e.run(append([]string{"plan", "-o", "wide"}, drained...)...)
	wantIn(t, r.Stdout, "RANKS-ON/ALL", "8/16")

	// run, with a responder that takes a second to checkpoint.
	var mu sync.Mutex
	var readyAt time.Time
	var calls atomic.Int32
	e.responder("train", func(ctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
		calls.Add(1)
		select {
		case <-ctx.Done():
			return checkpoint.Result{}, ctx.Err()
		case <-time.After(time.Second):
		}
		mu.Lock()
		readyAt = time.Now()
		mu.Unlock()
		return checkpoint.Result{Step: "1000", URI: "s3://ckpt/train/step-1000"}, nil
	})
	mark := harness.AuditLines(t, e.cp.AuditLogPath)
	r = e.run(append([]string{"run", "-o", "json", "--ack-timeout=60s", "--checkpoint-deadline=2m", "--poll-interval=250ms"}, drained...)...)
	if r.ExitCode != 0 {
		t.Fatalf("run: %s", r)
	}
	rep := decode[gangdrain.RunReport](t, r)
	// The ranks go without failing their Job, whoever deleted them: the
	// Job controller at its own pace, or gang-drain itself once the Job
	// was suspended, exactly as recorded.
	checkDeletedPods(t, e.ctx, e.cp, e.dyn, e.ns, rep, mark)
	jobs, err := e.cp.Client.BatchV1().Jobs(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: selJobSet("train")})
	if err != nil || len(jobs.Items) == 0 {
		t.Fatalf("jobs of the JobSet: %v %v", jobs, err)
	}
	for _, j := range jobs.Items {
		if j.Status.Failed != 0 || !ptrTrue(j.Spec.Suspend) {
			t.Errorf("job %s after the stop: %d failed pods, suspend %v", j.Name, j.Status.Failed, j.Spec.Suspend)
		}
	}
	if !rep.Complete || len(rep.Gangs) != 1 || rep.Gangs[0].Action != gang.ActionStopped || rep.Gangs[0].Verdict.Phase != checkpoint.PhaseReady {
		t.Fatalf("run report: %+v", rep.RunResult)
	}
	wantIn(t, r.Stderr, "cordoned", "checkpoint requested", "checkpoint ready-to-stop (step 1000)",
		"stopping as a unit (kueue-deactivate, 16 ranks, 32 GPUs)", "stopped: 16 pods gone", "evicted pod "+e.ns+"/web-", "drained")
	runID := rep.RunID

	// The cluster: workload inactive and evicted, gang gone, web moved with its PDB honoured.
	wl := e.workload(js.UID)
	evicted, why := condTrue(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted)
	if ptrTrue(wl.Spec.Active) || wl.Spec.Active == nil || harness.WorkloadAdmitted(wl) {
		t.Errorf("workload after run: active %v admitted %v", wl.Spec.Active, harness.WorkloadAdmitted(wl))
	}
	t.Logf("workload %s: Evicted=%v (%s)", wl.Name, evicted, why)
	if got := e.pods(sel); len(got) != 0 {
		t.Errorf("%d gang pods remain", len(got))
	}
	if !ptrTrue(e.jobSetObj("train").Spec.Suspend) {
		t.Error("Kueue did not suspend the JobSet")
	}
	e.waitReady("app=web", 2)
	for _, p := range e.pods("app=web") {
		if p.Spec.NodeName == drained[0] || p.Spec.NodeName == drained[1] {
			t.Errorf("web pod %s still on %s", p.Name, p.Spec.NodeName)
		}
	}
	for _, n := range drained {
		node := e.node(n)
		if !node.Spec.Unschedulable || nodeState(node) != gang.NodeDrained || node.Annotations[gang.AnnWasCordoned] != "false" || node.Annotations[gang.AnnRunID] != runID {
			t.Errorf("node %s: unschedulable %v annotations %v", n, node.Spec.Unschedulable, node.Annotations)
		}
	}
	ann := e.jobSetObj("train").Annotations
	keys := checkpoint.DefaultKeys()
	if ann[gang.AnnStoppedByRun] != runID || ann[gang.AnnStopMethod] != string(gang.StopKueue) || ann[keys.Request] != checkpoint.Stopped ||
		ann[keys.Status()] != string(checkpoint.StatusReadyToStop) || ann[keys.ObservedRequestID()] != runID {
		t.Errorf("jobset annotations: %v", ann)
	}
	mu.Lock()
	stopLatency := rep.Gangs[0].PodsGoneAt.Sub(readyAt)
	mu.Unlock()
	t.Logf("METRIC ready-to-stop -> all 16 gang pods gone: %s (GPU-seconds idle meanwhile: %.1f; work lost past the checkpoint: 0)", stopLatency.Round(time.Millisecond), 32*stopLatency.Seconds())

	// status from another shell.
	r = e.run("status", runID, "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("status: %s", r)
	}
	st := decode[gangdrain.StatusReport](t, r)
	if len(st.Items) != 1 || len(st.Items[0].Nodes) != 2 || st.Items[0].Phase != gang.NodeDrained || len(st.Items[0].Gangs) != 1 ||
		st.Items[0].Gangs[0].StopState != gang.GangStopped || st.Items[0].Gangs[0].CheckpointStatus != "ready-to-stop" {
		t.Errorf("status: %+v", st.Items)
	} else if got := st.Items[0].Gangs[0].DeletedPods; !reflect.DeepEqual(got, rep.Gangs[0].DeletedPods) {
		t.Errorf("status: deleted pods %+v, the run reported %+v", got, rep.Gangs[0].DeletedPods)
	}

	// restore readmits the gang.
	r = e.run("restore", runID, "-o", "json", "--poll-interval=250ms", "--restore-timeout=2m")
	if r.ExitCode != 0 {
		t.Fatalf("restore: %s", r)
	}
	rr := decode[gangdrain.RestoreReport](t, r)
	if len(rr.Gangs) != 1 || rr.Gangs[0].Action != gang.RestoreReactivated || !rr.Gangs[0].Admitted || !rr.Gangs[0].Requeued || !rr.Gangs[0].Ready || !rr.Complete {
		t.Errorf("restore: %+v", rr.RestoreResult)
	} else if got := rr.Gangs[0].DeletedPods; !reflect.DeepEqual(got, rep.Gangs[0].DeletedPods) {
		t.Errorf("restore: deleted pods %+v, the run reported %+v", got, rep.Gangs[0].DeletedPods)
	}
	wantIn(t, r.Stderr, "uncordoned", "reactivated", "admitted by Kueue", "running again: 16/16 pods Ready")
	for _, n := range drained {
		node := e.node(n)
		if node.Spec.Unschedulable || nodeState(node) != gang.NodeDone {
			t.Errorf("node %s after restore: unschedulable %v state %s", n, node.Spec.Unschedulable, nodeState(node))
		}
	}
	wl = e.workload(js.UID)
	if !ptrTrue(wl.Spec.Active) || !harness.WorkloadAdmitted(wl) {
		t.Errorf("workload after restore: active %v admitted %v", wl.Spec.Active, harness.WorkloadAdmitted(wl))
	}
	if calls.Load() != 1 {
		t.Errorf("the responder checkpointed %d times, want 1", calls.Load())
	}

	// For comparison: a plain kubectl drain of the same nodes. The gang's
	// last checkpoint is when it came back; every GPU of the gang loses
	// the work done since then.
	e.waitReady(sel, 16)
	resumedAt := time.Now()
	time.Sleep(3 * time.Second) // training progress the plain drain throws away
	kubectl := filepath.Join(harness.CacheDir(), "kubernetes-"+harness.KubeVersion, "kubectl")
	start := time.Now()
	out, err := exec.CommandContext(e.ctx, kubectl, append([]string{"--kubeconfig", e.cp.Kubeconfig, "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"}, drained...)...).CombinedOutput()
	plainDur := time.Since(start)
	t.Logf("kubectl drain (%s): err %v\n%s", plainDur.Round(time.Millisecond), err, out)
	lost := 32 * start.Sub(resumedAt).Seconds()
	_ = harness.Eventually(e.ctx, "the JobSet reacts to the lost ranks", 30*time.Second, func(ctx context.Context) (bool, error) {
		js := e.jobSetObj("train")
		return js.Status.Restarts > 0 || len(js.Status.Conditions) > 0, nil
	})
	js2 := e.jobSetObj("train")
	var conds []string
	for _, c := range js2.Status.Conditions {
		conds = append(conds, c.Type+"="+string(c.Status)+"("+c.Reason+")")
	}
	t.Logf("METRIC plain kubectl drain: first rank evicted %s after the last checkpoint; GPU-seconds of work lost: %.1f (32 GPUs); JobSet restarts %d, conditions %v",
		start.Sub(resumedAt).Round(time.Millisecond), lost, js2.Status.Restarts, conds)
	for _, n := range drained {
		_ = exec.Command(kubectl, "--kubeconfig", e.cp.Kubeconfig, "uncordon", n).Run()
	}
}

// TestGangDrainInterruptedRunConverges kills the binary at each step of a
// run and of a restore; each re-run of the same command resumes the
// recorded run and they converge to the end state of an uninterrupted run.
func TestGangDrainInterruptedRunConverges(t *testing.T) {
	e := newEnv(t, 1, 8*time.Minute)
	e.webWithPDB()
	e.addNodes(2)
	e.queues(24)
	js := e.jobSet("train", e.pool, 6, 4, "v1")
	sel := selJobSet("train")
	e.waitReady(sel, 6)
	var calls atomic.Int32
	e.responder("train", func(ctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
		calls.Add(1)
		select {
		case <-ctx.Done():
			return checkpoint.Result{}, ctx.Err()
		case <-time.After(5 * time.Second):
		}
		return checkpoint.Result{Step: "77", URI: "s3://ckpt/77"}, nil
	})
	drained := e.nodes[:2]
	args := append([]string{"run", "--poll-interval=250ms", "--ack-timeout=60s"}, drained...)

	code, _ := e.runUntil("cordoned", syscall.SIGKILL, args...)
	if code != 137 {
		t.Errorf("killed run: exit %d", code)
	}
	runID := e.node(drained[0]).Annotations[gang.AnnRunID]
	if runID == "" || !e.node(drained[0]).Spec.Unschedulable {
		t.Fatalf("after a kill at cordon: run id %q", runID)
	}
	code, _ = e.runUntil("checkpoint requested", syscall.SIGKILL, args...)
	code, out := e.runUntil("waiting for the checkpoint requested earlier", syscall.SIGINT, args...)
	if code != 130 {
		t.Errorf("interrupted run: exit %d, want 130", code)
	}
	wantIn(t, out, "waiting for the checkpoint requested earlier in this run (request "+runID+")")
	code, _ = e.runUntil("stopping as a unit", syscall.SIGKILL, args...)
	code, _ = e.runUntil("evicted pod", syscall.SIGKILL, args...)

	r := e.run(append(append([]string{}, args...), "-o", "json")...)
	if r.ExitCode != 0 {
		t.Fatalf("final re-run: %s", r)
	}
	rep := decode[gangdrain.RunReport](t, r)
	if rep.RunID != runID || !rep.Resumed || !rep.Complete {
		t.Errorf("final re-run report: %+v", rep.RunResult)
	}
	for _, n := range drained {
		node := e.node(n)
		if !node.Spec.Unschedulable || nodeState(node) != gang.NodeDrained || node.Annotations[gang.AnnWasCordoned] != "false" || node.Annotations[gang.AnnRunID] != runID {
			t.Errorf("node %s: %v", n, node.Annotations)
		}
	}
	if got := e.pods(sel); len(got) != 0 {
		t.Errorf("%d gang pods remain", len(got))
	}
	if wl := e.workload(js.UID); ptrTrue(wl.Spec.Active) {
		t.Error("workload still active")
	}
	// Whichever of the kills cut the stop short, the run finished it: the
	// gang is marked stopped and its request ended as stopped (not
	// withdrawn: a trainer in its grace period must not resume).
	if ann := e.jobSetObj("train").Annotations; ann[gang.AnnStoppedByRun] != runID || ann[gang.AnnStopState] != gang.GangStopped ||
		ann[checkpoint.DefaultKeys().Request] != checkpoint.Stopped {
		t.Errorf("jobset annotations %v", ann)
	}
	if calls.Load() != 1 {
		t.Errorf("the responder checkpointed %d times across the re-runs, want 1", calls.Load())
	}

	// restore, interrupted after uncordoning, then completed.
	code, _ = e.runUntil("uncordoned", syscall.SIGKILL, "restore", runID, "--poll-interval=250ms")
	r = e.run("restore", runID, "-o", "json", "--poll-interval=250ms", "--restore-timeout=2m")
	if r.ExitCode != 0 {
		t.Fatalf("restore re-run: %s", r)
	}
	rr := decode[gangdrain.RestoreReport](t, r)
	if len(rr.Gangs) != 1 || !rr.Gangs[0].Ready || !rr.Complete {
		t.Errorf("restore: %+v", rr.RestoreResult)
	}
	e.waitReady(sel, 6)
	for _, n := range drained {
		if node := e.node(n); node.Spec.Unschedulable || nodeState(node) != gang.NodeDone {
			t.Errorf("node %s after restore: %v %s", n, node.Spec.Unschedulable, nodeState(node))
		}
	}
}
