package gang

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

var (
	jobsetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	jobGVR    = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

func node(name string, gpus int64) *corev1.Node {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": q},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func pod(ns, name, nodeName string, gpus int64, owner *metav1.OwnerReference, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

func ctrl(apiVersion, kind, name, uid string) *metav1.OwnerReference {
	t := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: &t}
}

func obj(apiVersion, kind, ns, name, uid string, owner *metav1.OwnerReference, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	return u
}

type cluster struct {
	kube  *fake.Clientset
	dyn   *dynamicfake.FakeDynamicClient
	kueue *kueuefake.Clientset
}

// newCluster: 3 nodes of 8 GPUs; a JobSet "train" (Indexed Job) with a rank
// on each node; a Kueue-managed pod group "pg" on n1 and n3; a Deployment
// pod and a DaemonSet pod on n1.
func newCluster(t *testing.T, kueueWL bool) *cluster {
	t.Helper()
	js := obj("jobset.x-k8s.io/v1alpha2", "JobSet", "ml", "train", "js-uid", nil, map[string]any{"suspend": false})
	job := obj("batch/v1", "Job", "ml", "train-workers-0", "job-uid", ctrl("jobset.x-k8s.io/v1alpha2", "JobSet", "train", "js-uid"), map[string]any{"completionMode": "Indexed"})
	jobRef := ctrl("batch/v1", "Job", "train-workers-0", "job-uid")
	objs := []runtime.Object{
		node("n1", 8), node("n2", 8), node("n3", 8),
		pod("ml", "train-0", "n1", 4, jobRef, map[string]string{LabelJobSetName: "train"}),
		pod("ml", "train-1", "n2", 4, jobRef, map[string]string{LabelJobSetName: "train"}),
		pod("ml", "train-2", "n3", 4, jobRef, map[string]string{LabelJobSetName: "train"}),
		pod("ml", "pg-0", "n1", 2, nil, map[string]string{LabelKueuePodGroup: "pg"}),
		pod("ml", "pg-1", "n3", 2, nil, map[string]string{LabelKueuePodGroup: "pg"}),
		pod("web", "api-abc", "n1", 0, ctrl("apps/v1", "ReplicaSet", "api", "rs-uid"), nil),
		pod("kube-system", "dcgm-x", "n1", 0, ctrl("apps/v1", "DaemonSet", "dcgm", "ds-uid"), nil),
	}
	c := &cluster{kube: fake.NewClientset(objs...)}
	c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		jobsetGVR: "JobSetList", jobGVR: "JobList",
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}: "WorkloadList",
		{Group: "", Version: "v1", Resource: "pods"}:                         "PodList",
	}, js, job)
	var wls []runtime.Object
	if kueueWL {
		wls = append(wls, &kueuev1beta2.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "jobset-train-abc12",
			Labels: map[string]string{LabelKueueJobUID: "js-uid"}}, Spec: kueuev1beta2.WorkloadSpec{QueueName: "gpu"}})
	}
	c.kueue = kueuefake.NewClientset(wls...)
	// Evictions delete the pod, as the API server does.
	c.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ca := a.(clienttesting.CreateAction)
		name := ca.GetObject().(metav1.Object).GetName()
		return true, nil, c.kube.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, a.GetNamespace(), name)
	})
	return c
}

func TestDiscover(t *testing.T) {
	c := newCluster(t, true)
	d := &Discoverer{Kube: c.kube, Dynamic: c.dyn, Kueue: c.kueue}
	got, err := d.Discover(context.Background(), []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Key                 string
		Method              StopMethod
		Ranks, RanksOnNodes int
		GPUs, GPUsOnNodes   int64
		Nodes               []string
		Workload            string
	}
	var rows []row
	for _, g := range got.Gangs {
		wl := ""
		if g.Workload != nil {
			wl = g.Workload.Name
		}
		rows = append(rows, row{g.Key, g.Method, g.Ranks, g.RanksOnNodes, g.GPUs, g.GPUsOnNodes, g.Nodes, wl})
	}
	want := []row{
		{"ml/JobSet/train", StopKueue, 3, 1, 12, 4, []string{"n1", "n2", "n3"}, "jobset-train-abc12"},
		{"ml/PodGroup/pg", StopDeletePods, 2, 1, 4, 2, []string{"n1", "n3"}, ""},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("gangs -want +got\n%s", diff)
	}
	var other []string
	for _, p := range got.Other("n1") {
		other = append(other, p.Namespace+"/"+p.Name)
	}
	if diff := cmp.Diff([]string{"kube-system/dcgm-x", "web/api-abc"}, other); diff != "" {
		t.Errorf("other pods -want +got\n%s", diff)
	}
}

func TestDiscoverKueueManagedWithoutWorkloadIsUnsupported(t *testing.T) {
	c := newCluster(t, false)
	u, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(context.Background(), "train", metav1.GetOptions{})
	u.SetLabels(map[string]string{LabelKueueQueue: "gpu"})
	if _, err := c.dyn.Resource(jobsetGVR).Namespace("ml").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &Discoverer{Kube: c.kube, Dynamic: c.dyn, Kueue: c.kueue}
	got, err := d.Discover(context.Background(), []string{"n2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Gangs) != 1 || got.Gangs[0].Method != StopUnsupported || !strings.Contains(got.Gangs[0].Problem, "must not be suspended") {
		t.Fatalf("gangs %+v", got.Gangs)
	}
}

// deletePodsOnSuspend makes the fake behave like the JobSet controller:
// suspending the JobSet deletes its pods.
func deletePodsOnSuspend(c *cluster, prefix string) {
	c.dyn.PrependReactor("patch", "jobsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if strings.Contains(string(pa.GetPatch()), `"suspend":true`) {
			pods, _ := c.kube.CoreV1().Pods("ml").List(context.Background(), metav1.ListOptions{})
			for _, p := range pods.Items {
				if strings.HasPrefix(p.Name, prefix) {
					_ = c.kube.CoreV1().Pods("ml").Delete(context.Background(), p.Name, metav1.DeleteOptions{})
				}
			}
		}
		return false, nil, nil
	})
}

type events struct {
	mu    sync.Mutex
	lines []string
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, string(ev.Type)+" "+ev.Node+ev.Gang+": "+ev.Message)
}

func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func newDrainer(c *cluster, o Options, ev *events) *Drainer {
	if o.PollInterval == 0 {
		o.PollInterval = 5 * time.Millisecond
	}
	o.Keys = checkpoint.DefaultKeys()
	return &Drainer{Kube: c.kube, Dynamic: c.dyn, Options: o, OnEvent: ev.add}
}

func nodeAnn(t *testing.T, c *cluster, name string) (map[string]string, bool) {
	t.Helper()
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations, n.Spec.Unschedulable
}

func TestRunWithResponderStopsGangsAndRestores(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := checkpoint.DefaultKeys()
	rs := &checkpoint.Responder{Client: c.dyn, Target: checkpoint.Target{Resource: jobsetGVR, Namespace: "ml", Name: "train"}, Keys: keys,
		PollInterval: 5 * time.Millisecond, HeartbeatInterval: 5 * time.Millisecond,
		Checkpoint: func(context.Context, checkpoint.Request) (checkpoint.Result, error) {
			return checkpoint.Result{Step: "100", URI: "s3://ckpt/100"}, nil
		}}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() { _ = rs.Run(rctx) }()

	ev := &events{}
	// The pod group does not speak the protocol: --on-timeout=stop stops it.
	pg, _ := c.kube.CoreV1().Pods("ml").Get(ctx, "pg-0", metav1.GetOptions{})
	pg.Labels[keys.Protocol()] = "none"
	if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Requester: "alice", Timeouts: checkpoint.Timeouts{Ack: 5 * time.Second}}, ev)
	res, err := d.Run(ctx, []string{"n1"})
	if err != nil {
		t.Fatalf("run: %v\nevents: %v", err, ev.lines)
	}
	if !res.Complete || len(res.Gangs) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, g := range res.Gangs {
		if g.Action != ActionStopped {
			t.Errorf("gang %s: %s (%s)", g.Key, g.Action, g.Message)
		}
	}
	ann, cordoned := nodeAnn(t, c, "n1")
	if ann[AnnState] != string(NodeDrained) || ann[AnnWasCordoned] != "false" || !cordoned || ann[AnnRunID] != res.RunID {
		t.Errorf("node n1 annotations %v cordoned %v", ann, cordoned)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	// The request ends as stopped (not withdrawn: the trainer must not
	// resume), and is no longer active for the readmitted gang.
	if js.GetAnnotations()[AnnStoppedByRun] != res.RunID || js.GetAnnotations()[keys.Request] != checkpoint.Stopped || js.GetAnnotations()[keys.RequestID()] != res.RunID {
		t.Errorf("jobset annotations %v", js.GetAnnotations())
	}
	if req, _ := keys.ParseRequest(js.GetAnnotations()); req.Active() {
		t.Errorf("request still active after the stop: %+v", req)
	}
	if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); !s {
		t.Error("jobset not suspended")
	}
	for _, p := range []string{"train-1", "pg-1", "api-abc"} {
		if _, err := c.kube.CoreV1().Pods(map[bool]string{true: "web", false: "ml"}[p == "api-abc"]).Get(ctx, p, metav1.GetOptions{}); err == nil {
			t.Errorf("pod %s still exists", p)
		}
	}
	if !ev.has("checkpoint ready-to-stop (step 100)") || !ev.has("stopping it anyway") {
		t.Errorf("events %v", ev.lines)
	}

	// A re-run of the same command resumes the recorded run and finds nothing to do.
	res2, err := newDrainer(c, Options{OnTimeout: OnTimeoutStop}, &events{}).Run(ctx, []string{"n1"})
	if err != nil || res2.RunID != res.RunID || !res2.Resumed || !res2.Complete {
		t.Fatalf("re-run: %+v %v", res2, err)
	}

	// Restore: uncordon, unsuspend the JobSet (the scheduler is absent, so
	// Ready pods are faked by the readiness count of the remaining ranks).
	rd := newDrainer(c, Options{RestoreTimeout: 50 * time.Millisecond}, ev)
	rres, err := rd.Restore(ctx, []string{"n1"})
	if err == nil || !errors.Is(err, ErrIncomplete) {
		t.Fatalf("restore without Ready pods: want an incomplete error, got %v", err)
	}
	ann, cordoned = nodeAnn(t, c, "n1")
	if cordoned || ann[AnnState] != string(NodeRestoring) {
		t.Errorf("after restore: cordoned %v state %s", cordoned, ann[AnnState])
	}
	js, _ = c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); s || js.GetAnnotations()[AnnRestoredBy] != res.RunID {
		t.Errorf("jobset after restore: suspend %v annotations %v", s, js.GetAnnotations())
	}
	var actions []string
	for _, g := range rres.Gangs {
		actions = append(actions, g.Key+"="+g.Action)
	}
	if diff := cmp.Diff([]string{"ml/JobSet/train=unsuspended", "ml/PodGroup/pg=not-restorable"}, actions); diff != "" {
		t.Errorf("restore actions -want +got\n%s", diff)
	}
}

func TestRunAbortOnAckTimeoutLeavesGangRunning(t *testing.T) {
	c := newCluster(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev := &events{}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutAbort, Timeouts: checkpoint.Timeouts{Ack: 20 * time.Millisecond}}, ev)
	res, err := d.Run(ctx, []string{"n2"})
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("want incomplete, got %v", err)
	}
	if len(res.Gangs) != 1 || res.Gangs[0].Action != ActionAborted {
		t.Fatalf("gangs %+v", res.Gangs)
	}
	ann, cordoned := nodeAnn(t, c, "n2")
	if ann[AnnState] != string(NodeFailed) || !cordoned {
		t.Errorf("node n2: %v cordoned %v", ann, cordoned)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	keys := checkpoint.DefaultKeys()
	if js.GetAnnotations()[keys.Request] != checkpoint.Cancelled {
		t.Errorf("request not withdrawn: %v", js.GetAnnotations())
	}
	if _, err := c.kube.CoreV1().Pods("ml").Get(ctx, "train-1", metav1.GetOptions{}); err != nil {
		t.Errorf("gang pod gone after abort: %v", err)
	}
	// A re-run asks again under a new request id.
	d2 := newDrainer(c, Options{OnTimeout: OnTimeoutAbort, Timeouts: checkpoint.Timeouts{Ack: 20 * time.Millisecond}}, &events{})
	res2, _ := d2.Run(ctx, []string{"n2"})
	if res2.RunID != res.RunID || res2.Gangs[0].RequestID != res.RunID+"-r1" {
		t.Errorf("re-run request id %q, run %q", res2.Gangs[0].RequestID, res2.RunID)
	}
}

// cutAfterStop runs a drain of n2 that dies (here: every write fails, as
// after SIGKILL) right after the stop took effect and the gang's pods are
// gone, before the run marked the gang stopped. It returns the run id.
func cutAfterStop(t *testing.T, c *cluster) string {
	t.Helper()
	deletePodsOnSuspend(c, "train-")
	var killed, cut atomic.Bool
	dead := errors.New("the plugin is gone")
	c.dyn.PrependReactor("patch", "jobsets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if killed.Load() {
			return true, nil, dead
		}
		if strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"suspend":true`) && cut.CompareAndSwap(false, true) {
			killed.Store(true) // this write lands, none after it
		}
		return false, nil, nil
	})
	c.kube.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		if killed.Load() {
			return true, nil, dead
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keys := checkpoint.DefaultKeys()
	rs := &checkpoint.Responder{Client: c.dyn, Target: checkpoint.Target{Resource: jobsetGVR, Namespace: "ml", Name: "train"}, Keys: keys,
		PollInterval: 5 * time.Millisecond, HeartbeatInterval: time.Hour,
		Checkpoint: func(context.Context, checkpoint.Request) (checkpoint.Result, error) {
			return checkpoint.Result{Step: "100"}, nil
		}}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() { _ = rs.Run(rctx) }()

	ev := &events{}
	res, err := newDrainer(c, Options{}, ev).Run(ctx, []string{"n2"})
	if err == nil || !killed.Load() {
		t.Fatalf("first run: want it cut off after the stop, got %v (killed %v)\nevents: %v", err, killed.Load(), ev.lines)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if js.GetAnnotations()[AnnStopState] != GangStopping || js.GetAnnotations()[keys.Request] == "" {
		t.Fatalf("after the cut: jobset annotations %v", js.GetAnnotations())
	}
	if _, err := c.kube.CoreV1().Pods("ml").Get(ctx, "train-1", metav1.GetOptions{}); err == nil {
		t.Fatal("the stop did not take effect before the cut")
	}
	killed.Store(false)
	return res.RunID
}

// The re-run finds no pod of the gang, yet must finish its stop from the
// node's record: mark it stopped and clear the checkpoint request, so that
// the gang does not yield again when it is readmitted.
func TestRunFinishesAStopWhosePodsAreGone(t *testing.T) {
	c := newCluster(t, false)
	runID := cutAfterStop(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A dry run says it would finish the stop, and changes nothing.
	dry, err := newDrainer(c, Options{DryRun: true}, &events{}).Run(ctx, []string{"n2"})
	if err != nil || !dry.Resumed || len(dry.Gangs) != 1 || dry.Gangs[0].Key != "ml/JobSet/train" || dry.Gangs[0].Action != ActionWouldStop {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	if js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{}); js.GetAnnotations()[AnnStopState] != GangStopping {
		t.Fatalf("the dry run changed the jobset: %v", js.GetAnnotations())
	}
	ev := &events{}
	res, err := newDrainer(c, Options{}, ev).Run(ctx, []string{"n2"})
	if err != nil {
		t.Fatalf("re-run: %v\nevents: %v", err, ev.lines)
	}
	if !res.Resumed || res.RunID != runID || !res.Complete {
		t.Fatalf("re-run result %+v", res)
	}
	if len(res.Gangs) != 1 || res.Gangs[0].Key != "ml/JobSet/train" || res.Gangs[0].Action != ActionStopped {
		t.Fatalf("re-run gangs %+v", res.Gangs)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	a := js.GetAnnotations()
	if a[AnnStopState] != GangStopped || a[AnnStoppedByRun] != runID || a[checkpoint.DefaultKeys().Request] != checkpoint.Stopped {
		t.Errorf("after the re-run: jobset annotations %v", a)
	}
	if ann, _ := nodeAnn(t, c, "n2"); ann[AnnState] != string(NodeDrained) {
		t.Errorf("node n2: %v", ann)
	}
}

// Restoring a cut run instead of finishing it clears the run's checkpoint
// request along with the stop record.
func TestRestoreOfACutRunClearsItsRequest(t *testing.T) {
	c := newCluster(t, false)
	runID := cutAfterStop(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := newDrainer(c, Options{RestoreTimeout: 50 * time.Millisecond}, &events{}).Restore(ctx, []string{"n2"})
	if !errors.Is(err, ErrIncomplete) { // no scheduler: the pods never come back Ready
		t.Fatalf("restore: want incomplete, got %v", err)
	}
	if len(res.Gangs) != 1 || res.Gangs[0].Action != RestoreUnsuspended {
		t.Fatalf("restore gangs %+v", res.Gangs)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	a := js.GetAnnotations()
	keys := checkpoint.DefaultKeys()
	if a[keys.Request] != "" || a[AnnStopState] != "" || a[AnnRestoredBy] != runID || a[keys.Status()] == "" {
		t.Errorf("after restore: jobset annotations %v (want the request gone, the answer kept)", a)
	}
}

func TestPlanAndBudget(t *testing.T) {
	c := newCluster(t, true)
	d := newDrainer(c, Options{MaxUnavailableGPUs: Budget{Value: 8}}, &events{})
	d.Kueue = c.kueue
	p, err := d.Plan(context.Background(), []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 2 || !p.Nodes[0].Selected || p.Nodes[1].Selected {
		t.Errorf("budget selection %+v", p.Nodes)
	}
	if len(p.Gangs) != 2 || p.Gangs[0].PlainDrainLossGPUHours <= 0 || p.Gangs[0].YieldLossGPUHours != 0 {
		t.Errorf("gangs %+v", p.Gangs)
	}
	joined := strings.Join(p.Steps, "\n")
	for _, want := range []string{"spec.active=false", "delete its 2 pods together", "evict 1 pod(s) from n1", "restore"} {
		if !strings.Contains(joined, want) {
			t.Errorf("steps lack %q:\n%s", want, joined)
		}
	}
	for _, b := range []string{"8", "50%"} {
		if _, err := ParseBudget(b); err != nil {
			t.Error(err)
		}
	}
	for _, b := range []string{"0", "x", "150%"} {
		if _, err := ParseBudget(b); err == nil {
			t.Errorf("ParseBudget(%q) accepted", b)
		}
	}
}

func TestDiscoverLWSAndKubeflow(t *testing.T) {
	lws := obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "ml", "serve", "lws-uid", nil, map[string]any{"replicas": int64(1)})
	leaderSts := obj("apps/v1", "StatefulSet", "ml", "serve", "sts-uid", ctrl("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "serve", "lws-uid"), nil)
	workerSts := obj("apps/v1", "StatefulSet", "ml", "serve-0", "wsts-uid", ctrl("v1", "Pod", "serve-0", "uid-serve-0"), nil)
	ptj := obj("kubeflow.org/v1", "PyTorchJob", "ml", "pt", "pt-uid", nil, map[string]any{"runPolicy": map[string]any{}})
	lwsLabel := map[string]string{LabelLWSName: "serve"}
	kube := fake.NewClientset(node("n1", 8), node("n2", 8),
		pod("ml", "serve-0", "n1", 2, ctrl("apps/v1", "StatefulSet", "serve", "sts-uid"), lwsLabel),
		pod("ml", "serve-0-1", "n2", 2, ctrl("apps/v1", "StatefulSet", "serve-0", "wsts-uid"), lwsLabel),
		pod("ml", "pt-master-0", "n1", 1, ctrl("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid"), nil),
		pod("ml", "pt-worker-0", "n2", 1, ctrl("kubeflow.org/v1", "PyTorchJob", "pt", "pt-uid"), nil),
	)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}: "LeaderWorkerSetList",
		{Group: "apps", Version: "v1", Resource: "statefulsets"}:                         "StatefulSetList",
		{Group: "kubeflow.org", Version: "v1", Resource: "pytorchjobs"}:                  "PyTorchJobList",
	}, lws, leaderSts, workerSts, ptj)
	got, err := (&Discoverer{Kube: kube, Dynamic: dyn}).Discover(context.Background(), []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, g := range got.Gangs {
		keys = append(keys, fmt.Sprintf("%s %s %d/%d", g.Key, g.Method, g.RanksOnNodes, g.Ranks))
	}
	want := []string{"ml/LeaderWorkerSet/serve scale-to-zero 1/2", "ml/PyTorchJob/pt suspend 1/2"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("-want +got\n%s", diff)
	}
}

func TestRunDisableEvictionRecordsWhoAndRestoreDryRun(t *testing.T) {
	c := newCluster(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A PDB that forbids every eviction: --disable-eviction deletes anyway.
	c.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			t.Error("eviction API used with --disable-eviction")
		}
		return false, nil, nil
	})
	keys := checkpoint.DefaultKeys()
	for _, name := range []string{"pg-0", "pg-1"} {
		p, _ := c.kube.CoreV1().Pods("ml").Get(ctx, name, metav1.GetOptions{})
		p.Labels[keys.Protocol()] = "none"
		if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deletePodsOnSuspend(c, "train-")
	ev := &events{}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutStop, DisableEviction: true, Requester: "bob", MaxGangsInFlight: 1,
		Timeouts: checkpoint.Timeouts{Ack: 10 * time.Millisecond}}, ev)
	res, err := d.Run(ctx, []string{"n1"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %v %+v", err, res)
	}
	ann, _ := nodeAnn(t, c, "n1")
	if !strings.HasPrefix(ann[AnnDisableEviction], "bob at ") {
		t.Errorf("disable-eviction record %q", ann[AnnDisableEviction])
	}
	if !ev.has("--disable-eviction: deleting 1 pod(s) directly") {
		t.Errorf("events %v", ev.lines)
	}
	if _, err := c.kube.CoreV1().Pods("web").Get(ctx, "api-abc", metav1.GetOptions{}); err == nil {
		t.Error("pod api-abc not deleted")
	}
	rd := newDrainer(c, Options{DryRun: true}, &events{})
	rres, err := rd.Restore(ctx, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, cordoned := nodeAnn(t, c, "n1"); !cordoned {
		t.Error("restore --dry-run uncordoned the node")
	}
	var actions []string
	for _, g := range rres.Gangs {
		actions = append(actions, g.Key+"="+g.Action)
	}
	if diff := cmp.Diff([]string{"ml/JobSet/train=would-restore", "ml/PodGroup/pg=not-restorable"}, actions); diff != "" {
		t.Errorf("-want +got\n%s", diff)
	}
}

// TestStopWritesOneNodePatchPerGangAndNode: between a gang's ready-to-stop
// and its stop, the drain writes each node it stops the gang on once,
// recording the gang and the node's stopping state in the same patch, and
// still leaves both there for restore.
func TestStopWritesOneNodePatchPerGangAndNode(t *testing.T) {
	c := newCluster(t, false)
	deletePodsOnSuspend(c, "train-")
	var mu sync.Mutex
	writes := map[string]int{}
	c.kube.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if p := string(pa.GetPatch()); strings.Contains(p, `"`+AnnGangs+`":"`) || strings.Contains(p, `"`+string(NodeStopping)+`"`) {
			mu.Lock()
			writes[pa.GetName()]++
			mu.Unlock()
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Neither gang answers (the pod group does not speak the protocol, whose
	// requests on pods this fake dynamic client cannot hold):
	// --on-timeout=stop stops both.
	pg, _ := c.kube.CoreV1().Pods("ml").Get(ctx, "pg-0", metav1.GetOptions{})
	pg.Labels[checkpoint.DefaultKeys().Protocol()] = "none"
	if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, pg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	d := newDrainer(c, Options{OnTimeout: OnTimeoutStop, Timeouts: checkpoint.Timeouts{Ack: 50 * time.Millisecond}}, ev)
	res, err := d.Run(ctx, []string{"n1", "n2", "n3"})
	if err != nil || !res.Complete {
		t.Fatalf("run: %v\nevents: %v", err, ev.lines)
	}
	// train has a rank on n1, n2 and n3; the pod group on n1 and n3.
	if want := map[string]int{"n1": 2, "n2": 1, "n3": 2}; !cmp.Equal(writes, want) {
		t.Errorf("node writes recording a stop: %v, want %v", writes, want)
	}
	for _, n := range []string{"n1", "n3"} {
		ann, _ := nodeAnn(t, c, n)
		if !strings.Contains(ann[AnnGangs], "train") || !strings.Contains(ann[AnnGangs], "pg") {
			t.Errorf("node %s gang record %s", n, ann[AnnGangs])
		}
	}
	// The JobSet was asked and never answered, then stopped anyway: its
	// request ends as stopped, so its trainer is told not to resume.
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(ctx, "train", metav1.GetOptions{})
	if req, ok := checkpoint.DefaultKeys().ParseRequest(js.GetAnnotations()); !ok || req.State != checkpoint.Stopped || req.ID != res.RunID {
		t.Errorf("the unanswered request after the stop: %+v (found %v)", req, ok)
	}
}
