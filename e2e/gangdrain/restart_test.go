//go:build e2e

package gangdraine2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// background is a plugin process started with start: its stderr is read
// line by line as it comes, so that a test can act at a step of the run.
type background struct {
	cmd    *exec.Cmd
	args   []string
	stdout bytes.Buffer
	done   chan struct{}
	exit   int

	mu     sync.Mutex
	stderr strings.Builder
	seen   chan struct{} // closed and replaced on every new line
}

// start runs the plugin in the background; the test's cleanup kills it if
// it is still running.
func (e *env) start(args ...string) *background {
	e.t.Helper()
	b := &background{args: args, done: make(chan struct{}), seen: make(chan struct{})}
	b.cmd = exec.Command(plugintest.Binary(e.t, bin), e.kubeconfigArgs(args...)...)
	b.cmd.Env = []string{"TERM=dumb", "HOME=/tmp"}
	b.cmd.Stdout = &b.stdout
	stderr, err := b.cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			b.mu.Lock()
			b.stderr.WriteString(sc.Text() + "\n")
			close(b.seen)
			b.seen = make(chan struct{})
			b.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = b.cmd.Wait()
		b.exit = b.cmd.ProcessState.ExitCode()
		close(b.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// waitFor waits until a stderr line contains marker; it fails the test if
// the process ends first or timeout passes.
func (b *background) waitFor(t *testing.T, marker string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		b.mu.Lock()
		found, seen := strings.Contains(b.stderr.String(), marker), b.seen
		b.mu.Unlock()
		if found {
			return
		}
		select {
		case <-seen:
		case <-b.done:
			// The scanner has read everything before done closes.
			if strings.Contains(b.errText(), marker) {
				return
			}
			t.Fatalf("the run ended (exit %d) before %q appeared:\n%s", b.exit, marker, b.errText())
		case <-deadline:
			t.Fatalf("%q did not appear within %s:\n%s", marker, timeout, b.errText())
		}
	}
}

func (b *background) errText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

// wait waits for the process to end and returns its result.
func (b *background) wait(t *testing.T, timeout time.Duration) plugintest.Result {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(timeout):
		_ = b.cmd.Process.Kill()
		<-b.done
		t.Fatalf("the run did not finish within %s:\n%s", timeout, b.errText())
	}
	r := plugintest.Result{Stdout: b.stdout.String(), Stderr: b.errText(), ExitCode: b.exit}
	t.Logf("$ kubectl gang-drain %s -> exit %d\n%s", strings.Join(b.args, " "), r.ExitCode, r.Stderr)
	return r
}

// TestGangDrainAPIServerRestart restarts kube-apiserver while a run waits
// for a Kueue-admitted JobSet gang to checkpoint. The run notices, retries
// its reads until the apiserver is back, and ends as an uninterrupted run
// does: both nodes drained and recorded, the gang stopped as a unit by
// Kueue (no rank evicted, no JobSet restart), the PDB-guarded pods moved,
// and the responder asked to checkpoint only once. A restore across a
// second restart then readmits the gang.
func TestGangDrainAPIServerRestart(t *testing.T) {
	e := newEnv(t, 1, 12*time.Minute)
	e.webWithPDB()
	e.addNodes(2)
	e.queues(24)
	js := e.jobSet("train", e.pool, 6, 4, "v1")
	sel := selJobSet("train")
	e.waitReady(sel, 6)
	drained := e.nodes[:2]

	// The responder holds its checkpoint until the apiserver is back, so
	// that the run is polling the gang's state while it is down.
	release := make(chan struct{})
	var calls atomic.Int32
	e.responder("train", func(ctx context.Context, req checkpoint.Request) (checkpoint.Result, error) {
		calls.Add(1)
		select {
		case <-ctx.Done():
			return checkpoint.Result{}, ctx.Err()
		case <-release:
		}
		return checkpoint.Result{Step: "4242", URI: "s3://ckpt/train/step-4242"}, nil
	})

	// --pod-delete-qps=0: the Job controller deletes the stopped gang's
	// pods, as it alone did before gang-drain could. With gang-drain
	// deleting them right after an API server restart, the Job controller,
	// whose watches are still catching up, can replace them before it sees
	// the suspension; the run waits for those too (TestGangPodsAdoptRecreatedPods),
	// and this test's end-state checks hold the restart path, which the
	// deletes do not change. The deletes are held by the flow and audit tests.
	b := e.start(append([]string{"run", "-o", "json", "--poll-interval=250ms", "--ack-timeout=2m",
		"--heartbeat-timeout=3m", "--checkpoint-deadline=6m", "--timeout=8m", "--pod-delete-qps=0"}, drained...)...)
	marker := "checkpoint " + string(checkpoint.StatusInProgress)
	b.waitFor(t, marker, 3*time.Minute)

	// Down for a few seconds (several polls), then up again on the same etcd.
	began := time.Now()
	e.cp.StopAPIServer()
	stopped := time.Now()
	time.Sleep(3 * time.Second)
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	if err := e.cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("METRIC apiserver restart: stop took %s, down %s, back and ready after %s in all",
		stopped.Sub(began).Round(time.Millisecond), 3*time.Second, time.Since(began).Round(time.Millisecond))
	// The run is still waiting: the restart happened mid-run.
	select {
	case <-b.done:
		t.Fatalf("the run ended (exit %d) while the apiserver restarted:\n%s\n%s", b.exit, b.errText(), b.stdout.String())
	default:
	}
	close(release)

	r := b.wait(t, 9*time.Minute)
	if r.ExitCode != 0 {
		t.Fatalf("run across an apiserver restart: want exit 0\n%s", r)
	}
	// The plugin saw the apiserver go and retried; the retries came while
	// it waited for the checkpoint, before the gang was ready.
	retry := strings.Index(r.Stderr, "retrying")
	if retry < 0 || retry < strings.Index(r.Stderr, marker) || retry > strings.Index(r.Stderr, "checkpoint ready-to-stop") {
		t.Errorf("stderr shows no retry while waiting for the checkpoint; did the restart happen mid-run?\n%s", r.Stderr)
	}
	wantIn(t, r.Stderr, "cordoned", "checkpoint requested", "checkpoint ready-to-stop (step 4242)",
		"stopping as a unit (kueue-deactivate, 6 ranks, 24 GPUs)", "stopped: 6 pods gone", "evicted pod "+e.ns+"/web-", "drained")
	if strings.Contains(r.Stderr, "evicted pod "+e.ns+"/train-") {
		t.Errorf("a rank of the gang was evicted on its own:\n%s", r.Stderr)
	}

	rep := decode[gangdrain.RunReport](t, r)
	runID := rep.RunID
	if !rep.Complete || rep.Resumed || len(rep.Gangs) != 1 || rep.Gangs[0].Action != gang.ActionStopped ||
		rep.Gangs[0].Method != gang.StopKueue || rep.Gangs[0].Verdict.Phase != checkpoint.PhaseReady {
		t.Fatalf("run report: %+v", rep.RunResult)
	}

	// The same end state as an uninterrupted run.
	for _, n := range drained {
		node := e.node(n)
		if !node.Spec.Unschedulable || nodeState(node) != gang.NodeDrained || node.Annotations[gang.AnnWasCordoned] != "false" || node.Annotations[gang.AnnRunID] != runID {
			t.Errorf("node %s: unschedulable %v annotations %v", n, node.Spec.Unschedulable, node.Annotations)
		}
	}
	if node := e.node(e.nodes[2]); node.Spec.Unschedulable || node.Annotations[gang.AnnRunID] != "" {
		t.Errorf("node %s, not drained: unschedulable %v annotations %v", e.nodes[2], node.Spec.Unschedulable, node.Annotations)
	}
	if got := e.pods(sel); len(got) != 0 {
		t.Errorf("%d gang pods remain", len(got))
	}
	wl := e.workload(js.UID)
	if wl.Spec.Active == nil || *wl.Spec.Active || harness.WorkloadAdmitted(wl) {
		t.Errorf("workload after run: active %v admitted %v", wl.Spec.Active, harness.WorkloadAdmitted(wl))
	}
	evicted, why := condTrue(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted)
	t.Logf("workload %s: Evicted=%v (%s)", wl.Name, evicted, why)
	train := e.jobSetObj("train")
	if !ptrTrue(train.Spec.Suspend) {
		t.Error("Kueue did not suspend the JobSet")
	}
	// Stopped as a unit: the JobSet never saw a rank fail.
	if train.Status.Restarts != 0 {
		t.Errorf("JobSet restarted %d times; a rank was lost on its own", train.Status.Restarts)
	}
	if failed, why := condTrue(train.Status.Conditions, "Failed"); failed {
		t.Errorf("JobSet failed: %s", why)
	}
	keys := checkpoint.DefaultKeys()
	if ann := train.Annotations; ann[gang.AnnStoppedByRun] != runID || ann[gang.AnnStopMethod] != string(gang.StopKueue) ||
		ann[gang.AnnStopState] != gang.GangStopped || ann[keys.Request] != checkpoint.Stopped ||
		ann[keys.Status()] != string(checkpoint.StatusReadyToStop) || ann[keys.ObservedRequestID()] != runID {
		t.Errorf("jobset annotations: %v", ann)
	}
	e.waitReady("app=web", 2)
	for _, p := range e.pods("app=web") {
		if p.Spec.NodeName == drained[0] || p.Spec.NodeName == drained[1] {
			t.Errorf("web pod %s still on %s", p.Name, p.Spec.NodeName)
		}
	}
	if calls.Load() != 1 {
		t.Errorf("the responder checkpointed %d times, want 1", calls.Load())
	}

	// restore, with the apiserver restarted again once the gang is
	// reactivated: the restore retries and watches the gang readmitted, as
	// an uninterrupted restore does. The restart waits until the node
	// lifecycle controller has removed the unschedulable taints of the
	// uncordoned nodes; a restart in the middle of that can leave a stale
	// taint on a node for minutes, which no restore can help.
	b = e.start("restore", runID, "-o", "json", "--poll-interval=250ms", "--restore-timeout=3m", "--timeout=8m")
	b.waitFor(t, "reactivated (", 3*time.Minute)
	if err := harness.Eventually(e.ctx, "uncordoned nodes without the unschedulable taint", time.Minute, func(ctx context.Context) (bool, error) {
		for _, n := range drained {
			for _, taint := range e.node(n).Spec.Taints {
				if taint.Key == corev1.TaintNodeUnschedulable {
					return false, nil
				}
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.cp.StopAPIServer()
	time.Sleep(3 * time.Second)
	ctx2, cancel2 := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel2()
	if err := e.cp.StartAPIServer(ctx2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
		t.Fatalf("the restore ended (exit %d) while the apiserver restarted:\n%s\n%s", b.exit, b.errText(), b.stdout.String())
	default:
	}
	r = b.wait(t, 7*time.Minute)
	if r.ExitCode != 0 {
		for _, p := range e.pods(sel) {
			t.Logf("pod %s: node %q phase %s conditions %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
		}
		t.Fatalf("restore across an apiserver restart: want exit 0\n%s", r)
	}
	if !strings.Contains(r.Stderr, "retrying") {
		t.Errorf("stderr shows no retry; did the restart happen mid-restore?\n%s", r.Stderr)
	}
	rr := decode[gangdrain.RestoreReport](t, r)
	if len(rr.Gangs) != 1 || rr.Gangs[0].Action != gang.RestoreReactivated || !rr.Gangs[0].Admitted || !rr.Gangs[0].Ready || !rr.Complete {
		t.Errorf("restore: %+v", rr.RestoreResult)
	}
	for _, n := range drained {
		if node := e.node(n); node.Spec.Unschedulable || nodeState(node) != gang.NodeDone {
			t.Errorf("node %s after restore: unschedulable %v state %s", n, node.Spec.Unschedulable, nodeState(node))
		}
	}
	wl = e.workload(js.UID)
	if !ptrTrue(wl.Spec.Active) || !harness.WorkloadAdmitted(wl) {
		t.Errorf("workload after restore: active %v admitted %v", wl.Spec.Active, harness.WorkloadAdmitted(wl))
	}
}
