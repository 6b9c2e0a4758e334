//go:build e2e

package fleete2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// TestFleetStepPodDeletedMidDrain deletes the drain step's pod, with no
// grace, while its command runs (the training gang was asked to
// checkpoint and has not finished): the exec node, as a kubelet would,
// kills the pod's processes, and the workflow-controller finds the pod
// gone, marks its node Error ("pod deleted": workflow/controller/
// operator.go, podReconciliation, argo-workflows v3.7.15) and retries it
// (RetryExpression's lastRetry.status == "Error"). TestFleetResumesAfterKills
// kills the step's process and the controller; this one takes the pod
// away. The retried attempt resumes the same gang-drain run from the
// store: the gang is asked to checkpoint once, the drain's command runs
// to completion once, no other step runs again, and the evidence records
// one end of the drain (attempt 1's record says it was abandoned).
func TestFleetStepPodDeletedMidDrain(t *testing.T) {
	// Not parallel: TestFleetResumesAfterKills and TestFleetClosedWindowWaits
	// run beside each other on the training cluster and canary, and a reset
	// of the same pools from here raced them.
	e := env(t)
	e.resetPools(t, training)
	ctx := context.Background()
	g := e.trainingGang(t, "podgone-gang", nil)
	sc, stop := e.slowCheckpoint(t, ctx, g, "200")
	defer stop()
	checkpointing, release, asked := sc.checkpointing, sc.release, &sc.asked

	rings := `  - {name: training, selector: {matchLabels: {gpufleet.dev/ring: training}}}`
	s := e.newScenario(t, "podgone", "file://"+t.TempDir()+"/store", rings, "")
	defer s.deleteRun(t)
	s.start(t)
	drain := "pool-" + pools[training] + "-1-37-drain"
	select {
	case <-checkpointing:
	case <-time.After(8 * time.Minute):
		t.Fatalf("the drain never asked the gang to checkpoint\n%s", e.argo.Log(3000))
	}
	_, states := s.states(t)
	first := states[training].Step(drain)
	if first.Phase != fleetrun.PhaseInProgress || first.Attempt != 1 || first.RunID == "" {
		t.Fatalf("drain mid-way: %+v", first)
	}
	pod := s.runningStepPod(t, training, drain)
	// A pod missing within RECENTLY_STARTED_POD_DURATION (10s by default)
	// of its node's start is waited for, and one whose node the
	// controller still holds Pending is created again under the same node
	// (podReconciliation and recentlyStarted, operator.go, v3.7.15): the
	// pod is deleted once its node has run longer than that, as a pod
	// lost mid-drain has.
	s.waitFor(t, "the drain's node running for 10s", time.Minute, func() bool {
		since, ok := s.runningSince(t, drain)
		return ok && time.Since(since) > 12*time.Second
	})
	t.Logf("before the delete: %s", s.stepNodes(t, drain))
	if err := e.mgmt.Client.CoreV1().Pods(argoNS).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s (grace 0) mid-drain", pod.Name)
	s.waitFor(t, "a second drain attempt", 3*time.Minute, func() bool {
		_, st := s.states(t)
		d := st[training].Step(drain)
		return d.Attempt >= 2 && d.Phase == fleetrun.PhaseInProgress
	})
	// The controller saw the pod go and retried its node.
	var deleted bool
	for _, n := range s.nodes(t) {
		if n["type"] == "Pod" && n["phase"] == "Error" && n["message"] == "pod deleted" {
			deleted = true
		}
	}
	t.Logf("after the retry started: %s", s.stepNodes(t, drain))
	if !deleted {
		t.Errorf("no Pod node of %s is Error %q: the controller did not see the pod deleted", s.workflowName(), "pod deleted")
	}
	close(release)
	s.waitPhase(t, "Succeeded", 8*time.Minute)

	p, states := s.states(t)
	st := states[training]
	if st.FinishedAt == nil {
		t.Fatal("training did not finish")
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the gang was asked to checkpoint %d times, want once: the retried drain did not resume the gang-drain run", n)
	}
	d := st.Step(drain)
	if d.Phase != fleetrun.PhaseCompleted || d.Attempt != 2 || d.RunID != first.RunID {
		t.Errorf("drain: %s, attempt %d, run %s; want completed at attempt 2 of run %s", d.Phase, d.Attempt, d.RunID, first.RunID)
	}
	var ends []fleetrun.Attempt
	for _, a := range d.History {
		if a.Phase == fleetrun.PhaseCompleted {
			ends = append(ends, a)
		}
	}
	if len(ends) != 1 || len(d.History) != 2 || !strings.Contains(d.History[0].Message, "abandoned") {
		t.Errorf("drain history %+v: want attempt 1 abandoned and one completed end", d.History)
	}
	// The evidence: one meta.json with the command's own end, exit 0.
	store := s.openStore(t)
	ran := 0
	for _, k := range d.Evidence {
		if !strings.HasSuffix(k, "/meta.json") {
			continue
		}
		b, err := store.Read(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Command  []string `json:"command"`
			ExitCode int      `json:"exitCode"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Command) > 0 && m.ExitCode == 0 {
			ran++
		}
	}
	if ran != 1 {
		t.Errorf("the drain's evidence records %d completed commands, want 1: %v", ran, d.Evidence)
	}
	// The exec node ran the drain's pods: the deleted one (killed), the
	// one that ended it (exit 0), and no other but "not yet" answers.
	var killed, done int
	for _, x := range e.node.Ran() {
		if !strings.HasPrefix(x.Pod, s.workflowName()+"-") || !argvHas(x.Argv, "--step", drain) {
			continue
		}
		t.Logf("drain pod %s: exit %d, %s to %s", x.Pod, x.ExitCode, x.Started.Format(time.RFC3339), x.Finished.Format(time.RFC3339))
		switch {
		case x.Pod == pod.Name && x.ExitCode == 128+9:
			killed++
		case x.Pod != pod.Name && x.ExitCode == 0:
			done++
		case x.ExitCode != 4:
			t.Errorf("drain pod %s exited %d", x.Pod, x.ExitCode)
		}
	}
	if killed != 1 || done != 1 {
		t.Errorf("drain pods: %d killed (the deleted pod, SIGKILL), %d done by a retry's pod; want one of each", killed, done)
	}
	// Nothing before or after the drain ran twice.
	cp, _ := p.Cluster(training)
	for _, step := range cp.Steps {
		if step.Name == drain {
			continue
		}
		if ss := st.Step(step.Name); ss.Phase != fleetrun.PhaseCompleted || ss.Attempt != 1 || len(ss.History) != 1 {
			t.Errorf("%s: %s, attempt %d, history %+v; want one completed attempt", step.Name, ss.Phase, ss.Attempt, ss.History)
		}
	}
	e.nodesUpgraded(t, training)
	g.readmitted(t)
}

// runningStepPod is the running pod of a cluster's step in the scenario's
// Workflow.
func (s *scenario) runningStepPod(t *testing.T, cluster, step string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	s.waitFor(t, "the running pod of "+cluster+"/"+step, time.Minute, func() bool {
		l, err := s.e.mgmt.Client.CoreV1().Pods(argoNS).List(context.Background(), metav1.ListOptions{
			LabelSelector: "workflows.argoproj.io/workflow=" + s.workflowName() + ",gpufleet.dev/cluster=" + cluster})
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range l.Items {
			for _, c := range p.Spec.Containers {
				if c.Name == "main" && argvHas(append(c.Command, c.Args...), "--step", step) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					found = &l.Items[i]
				}
			}
		}
		return found != nil
	})
	return found
}

// runningSince is when the Workflow's running Pod node of a step started.
func (s *scenario) runningSince(t *testing.T, step string) (time.Time, bool) {
	t.Helper()
	for _, n := range s.nodes(t) {
		if n["type"] != "Pod" || n["phase"] != "Running" {
			continue
		}
		params, _, _ := unstructured.NestedSlice(n, "inputs", "parameters")
		for _, p := range params {
			if pm, _ := p.(map[string]any); pm["name"] == "step" && pm["value"] == step {
				at, err := time.Parse(time.RFC3339, fmt.Sprint(n["startedAt"]))
				return at, err == nil
			}
		}
	}
	return time.Time{}, false
}

// stepNodes describes the Workflow's Pod nodes of a step, for the log.
func (s *scenario) stepNodes(t *testing.T, step string) string {
	t.Helper()
	var out []string
	for _, n := range s.nodes(t) {
		if n["type"] != "Pod" {
			continue
		}
		params, _, _ := unstructured.NestedSlice(n, "inputs", "parameters")
		for _, p := range params {
			if pm, _ := p.(map[string]any); pm["name"] == "step" && pm["value"] == step {
				out = append(out, fmt.Sprintf("%v %v %v %q", n["id"], n["name"], n["phase"], n["message"]))
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// argvHas reports whether argv holds flag followed by value.
func argvHas(argv []string, flag, value string) bool {
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == flag && argv[i+1] == value {
			return true
		}
	}
	return false
}

// TestFleetResubmittedMidRun stops the run's Workflow after the canary
// finished, while prod waits for its approval (`argo stop`: spec.shutdown
// Stop, which runs the exit handler), and resubmits it as `argo resubmit`
// does: a new Workflow named from generateName "<name>-", the same spec
// without shutdown, the labels but creator, phase, completed and
// archiving, and workflows.argoproj.io/resubmitted-from-workflow
// (workflow/util.FormulateResubmitWorkflow, argo-workflows v3.7.15; the
// render uses no memoization, so --memoized has nothing to reuse). The
// copy runs canary's steps again and each finds its step done in the
// store and exits 0 without an attempt; approve releases prod's approval
// in the copy; the run completes with every step of both clusters done
// once.
func TestFleetResubmittedMidRun(t *testing.T) {
	// Not parallel: TestFleetResumesAfterKills and TestFleetClosedWindowWaits
	// run beside each other on the training cluster and canary, and a reset
	// of the same pools from here raced them.
	e := env(t)
	e.resetPools(t, canary, prod)
	ctx := context.Background()
	rings := `  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}, soak: 3s}
  - {name: prod, selector: {matchLabels: {gpufleet.dev/ring: prod}}, approval: {approvers: 1}}`
	s := e.newScenario(t, "resubmit", e.s3Store("resubmit"), rings, "")
	defer s.deleteRun(t)
	s.start(t)
	s.waitFor(t, "prod's approval suspend", 8*time.Minute, func() bool { return s.waiting(t, fleetrun.SuspendApproval, "prod", "") })
	p, before := s.states(t)
	if before[canary].FinishedAt == nil || before[prod].AdmittedAt != nil {
		t.Fatalf("at prod's approval: canary finished %v, prod admitted %v", before[canary].FinishedAt, before[prod].AdmittedAt)
	}

	// Stop it.
	wfs := e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS)
	if _, err := wfs.Patch(ctx, s.workflowName(), types.MergePatchType, []byte(`{"spec":{"shutdown":"Stop"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "the stopped workflow to end", 3*time.Minute, func() bool {
		ph, _ := s.workflow(t)
		return ph == "Failed" || ph == "Error"
	})
	// Resubmit it.
	old, err := wfs.Get(ctx, s.workflowName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp := &unstructured.Unstructured{Object: map[string]any{"apiVersion": old.GetAPIVersion(), "kind": old.GetKind()}}
	cp.SetGenerateName(old.GetName() + "-")
	cp.SetNamespace(argoNS)
	labels := map[string]string{}
	for k, v := range old.GetLabels() {
		switch k {
		case "workflows.argoproj.io/creator", "workflows.argoproj.io/creator-email", "workflows.argoproj.io/creator-preferred-username",
			"workflows.argoproj.io/phase", "workflows.argoproj.io/completed", "workflows.argoproj.io/workflow-archiving-status":
		default:
			labels[k] = v
		}
	}
	labels["workflows.argoproj.io/resubmitted-from-workflow"] = old.GetName()
	cp.SetLabels(labels)
	cp.SetAnnotations(old.GetAnnotations())
	spec, _, _ := unstructured.NestedMap(old.Object, "spec")
	delete(spec, "shutdown")
	cp.Object["spec"] = spec
	created, err := wfs.Create(ctx, cp, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copyName := created.GetName()
	defer func() { _ = wfs.Delete(context.Background(), copyName, metav1.DeleteOptions{}) }()
	t.Logf("stopped %s and resubmitted it as %s", s.workflowName(), copyName)

	copyPhase := func() (string, []fleetrun.Resumed) {
		ph, w, err := fleetrun.WorkflowPhase(ctx, e.dyn, argoNS, copyName)
		if err != nil {
			t.Fatal(err)
		}
		if ph == "Failed" || ph == "Error" {
			t.Fatalf("%s ended %s\n%s", copyName, ph, e.argo.Log(4000))
		}
		return ph, w
	}
	s.waitFor(t, copyName+" at prod's approval", 8*time.Minute, func() bool {
		_, w := copyPhase()
		return slices.ContainsFunc(w, func(r fleetrun.Resumed) bool { return r.Kind == fleetrun.SuspendApproval && r.Ring == prod })
	})
	// The copy ran each of canary's steps once: it found the step done
	// and exited 0 without an attempt.
	cpl, _ := p.Cluster(canary)
	ran := map[string]int{}
	for _, x := range e.node.Ran() {
		if !strings.HasPrefix(x.Pod, copyName+"-") || !argvHas(x.Argv, "--cluster", canary) {
			continue
		}
		i := slices.Index(x.Argv, "--step")
		if i < 0 || i+1 >= len(x.Argv) {
			continue
		}
		ran[x.Argv[i+1]]++
		log, _ := os.ReadFile(filepath.Join(e.nodeLogs, x.Pod+".log"))
		if x.ExitCode != 0 || !strings.Contains(string(log), "nothing to do: completed at") {
			t.Errorf("the resubmitted run's %s of canary: exit %d\n%s", x.Argv[i+1], x.ExitCode, log)
		}
	}
	for _, step := range cpl.Steps {
		if ran[step.Name] != 1 {
			t.Errorf("the resubmitted run ran canary's %s %d times, want once (all: %v)", step.Name, ran[step.Name], ran)
		}
	}
	_, mid := s.states(t)
	for _, step := range cpl.Steps {
		a, b := before[canary].Step(step.Name), mid[canary].Step(step.Name)
		if b.Attempt != a.Attempt || len(b.History) != len(a.History) || len(b.Evidence) != len(a.Evidence) {
			t.Errorf("canary's %s after the resubmission: attempt %d, %d ends, %d evidence; before it %d, %d, %d",
				step.Name, b.Attempt, len(b.History), len(b.Evidence), a.Attempt, len(a.History), len(a.Evidence))
		}
	}

	// approve finds prod's approval in the resubmitted copy.
	out := s.approve(t, "alice", prod, "canary soaked clean before the restart")
	if !strings.Contains(out, copyName) {
		t.Errorf("approve did not resume the resubmitted %s:\n%s", copyName, out)
	}
	s.waitFor(t, copyName+" Succeeded", 10*time.Minute, func() bool { ph, _ := copyPhase(); return ph == "Succeeded" })

	_, after := s.states(t)
	for _, c := range p.Clusters {
		st := after[c.Name]
		if st.FinishedAt == nil {
			t.Errorf("%s did not finish", c.Name)
		}
		for _, step := range c.Steps {
			ss := st.Step(step.Name)
			if ss.Phase != fleetrun.PhaseCompleted || ss.Attempt != 1 || len(ss.History) != 1 {
				t.Errorf("%s/%s: %s, attempt %d, history %+v; want done once", c.Name, step.Name, ss.Phase, ss.Attempt, ss.History)
			}
		}
		e.nodesUpgraded(t, c.Name)
	}
	// Each Workflow's exit handler recorded its own end.
	ended := map[string]string{}
	s.waitFor(t, "both Workflows' ends in the store", time.Minute, func() bool {
		ends, err := fleetrun.ReadEnds(ctx, s.openStore(t), s.run)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ends {
			ended[x.Workflow] = x.Phase
		}
		return len(ended) >= 2
	})
	if ended[s.workflowName()] != "Failed" || ended[copyName] != "Succeeded" {
		t.Errorf("the store's ends: %v; want %s Failed (stopped) and %s Succeeded", ended, s.workflowName(), copyName)
	}
}
