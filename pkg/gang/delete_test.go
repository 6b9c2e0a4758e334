package gang

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"
)

// jobCluster is newCluster with Kueue, the JobSet's Job in the typed
// client, its pods carrying the Job's tracking finalizer, and stand-ins
// for the controllers: deactivating the Workload suspends the Job after
// suspendAfter (Kueue, then the JobSet controller), and the Job controller
// deletes the suspended Job's pods after jobCtrlAfter (never when 0).
type jobCluster struct {
	*cluster
}

func newJobCluster(t *testing.T, suspendAfter, jobCtrlAfter time.Duration) *jobCluster {
	t.Helper()
	c := &jobCluster{cluster: newCluster(t, true)}
	// The tracker of NewClientset cannot merge-patch Kueue's types; the
	// simple one can.
	wls, err := c.kueue.KueueV1beta2().Workloads("ml").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(wls.Items) != 1 {
		t.Fatalf("workloads %v %v", wls, err)
	}
	c.kueue = kueuefake.NewSimpleClientset(&wls.Items[0])
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-workers-0", UID: "job-uid"},
		Spec: batchv1.JobSpec{Suspend: ptr.To(false)}}
	if _, err := c.kube.BatchV1().Jobs("ml").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train-0", "train-1", "train-2"} {
		p, err := c.kube.CoreV1().Pods("ml").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Finalizers = []string{batchv1.JobTrackingFinalizer, "example.com/keep"}
		if _, err := c.kube.CoreV1().Pods("ml").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.kueue.PrependReactor("patch", "workloads", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !strings.Contains(string(a.(clienttesting.PatchAction).GetPatch()), `"active":false`) {
			return false, nil, nil
		}
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(suspendAfter):
			}
			j, err := c.kube.BatchV1().Jobs("ml").Get(ctx, "train-workers-0", metav1.GetOptions{})
			if err != nil {
				return
			}
			j.Spec.Suspend = ptr.To(true)
			_, _ = c.kube.BatchV1().Jobs("ml").Update(ctx, j, metav1.UpdateOptions{})
			if jobCtrlAfter == 0 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(jobCtrlAfter):
			}
			for _, n := range []string{"train-0", "train-1", "train-2"} {
				_ = c.kube.Tracker().Delete(podsGVR, "ml", n)
			}
		}()
		return false, nil, nil
	})
	return c
}

func jobsetGang(t *testing.T, c *jobCluster) *Gang {
	t.Helper()
	d := &Discoverer{Kube: c.kube, Dynamic: c.dyn, Kueue: c.kueue}
	found, err := d.Discover(context.Background(), []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	g := found.Gang("ml/JobSet/train")
	if g == nil || g.Method != StopKueue {
		t.Fatalf("gangs %+v", found.Gangs)
	}
	return g
}

func stopDrainer(c *jobCluster, o Options, ev *events) *Drainer {
	o.DeleteStoppedPods, o.StopTimeout = true, 5*time.Second
	d := newDrainer(c.cluster, o, ev)
	d.Kueue, d.runID, d.records = c.kueue, "gd-20260101-000000-abcd", map[string]*NodeRecord{}
	return d
}

// Once the Job is suspended, and not before, the drain removes each pod's
// tracking finalizer (and no other) and deletes it in the background with
// its own grace period, through the gang's own client, preconditioned on
// the pod the patch answered with; the record on the JobSet and in the outcome lists them.
func TestStopDeletesPodsOfSuspendedJobs(t *testing.T) {
	c := newJobCluster(t, 100*time.Millisecond, 0)
	g := jobsetGang(t, c)
	ev := &events{}
	d := stopDrainer(c, Options{}, ev)
	own := fake.NewClientset()
	own.PrependReactor("*", "*", clienttesting.ObjectReaction(c.kube.Tracker()))
	// No pod write before its Job is suspended.
	var early []string
	own.PrependReactor("*", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "patch" || a.GetVerb() == "delete" {
			j, err := c.kube.Tracker().Get(schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, "ml", "train-workers-0")
			if err != nil || !ptr.Deref(j.(*batchv1.Job).Spec.Suspend, false) {
				early = append(early, a.GetVerb())
			}
		}
		return false, nil, nil
	})
	clients := 0
	d.PodClient = func() (kubernetes.Interface, error) { clients++; return own, nil }
	o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
	if o.Action != ActionStopped {
		t.Fatalf("outcome %+v\n%v", o, ev.lines)
	}
	if clients != 1 {
		t.Errorf("%d clients made for one gang", clients)
	}
	want := PodsByJob{"train-workers-0": {"train-0", "train-1", "train-2"}}
	if o.DeletedPods == nil || o.DeletedPods.Count != 3 || o.DeletedPods.Unfinalized != 3 || o.DeletedPods.Deleting != nil || !cmp.Equal(want, o.DeletedPods.Deleted) {
		t.Fatalf("deleted pods %+v", o.DeletedPods)
	}
	js, _ := c.dyn.Resource(jobsetGVR).Namespace("ml").Get(context.Background(), "train", metav1.GetOptions{})
	rec, err := ParseDeletedPods(js.GetAnnotations()[AnnDeletedPods])
	if err != nil || rec == nil || !cmp.Equal(o.DeletedPods, rec) {
		t.Fatalf("record on the JobSet %+v (%v), outcome %+v", rec, err, o.DeletedPods)
	}
	if !ev.has("stopped: 3 pods gone") || !ev.has("3 deleted by gang-drain") {
		t.Errorf("events %v", ev.lines)
	}
	for _, a := range c.kube.Actions() {
		if a.GetResource().Resource == "pods" && (a.GetVerb() == "patch" || a.GetVerb() == "delete") {
			t.Errorf("pod write through the drain's shared client: %s %v", a.GetVerb(), a)
		}
	}
	var patched, deleted []string
	for _, a := range own.Actions() {
		switch a := a.(type) {
		case clienttesting.PatchAction:
			var body map[string]map[string]any
			_ = json.Unmarshal(a.GetPatch(), &body)
			if a.GetPatchType() != "application/strategic-merge-patch+json" || !cmp.Equal(body["metadata"]["$deleteFromPrimitiveList/finalizers"], []any{batchv1.JobTrackingFinalizer}) {
				t.Errorf("finalizer patch %s %s", a.GetPatchType(), a.GetPatch())
			}
			patched = append(patched, a.GetName())
		case clienttesting.DeleteAction:
			opts := a.GetDeleteOptions()
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || string(*opts.Preconditions.UID) != "uid-"+a.GetName() || opts.Preconditions.ResourceVersion == nil ||
				opts.GracePeriodSeconds != nil || opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
				t.Errorf("delete of %s with %+v", a.GetName(), opts)
			}
			deleted = append(deleted, a.GetName())
		}
	}
	if len(patched) != 3 || len(deleted) != 3 {
		t.Errorf("patched %v, deleted %v", patched, deleted)
	}
	if len(early) > 0 {
		t.Errorf("pod writes before the Job was suspended: %v", early)
	}
	if count(c.kube.Actions(), "list", "jobs") == 0 {
		t.Error("the drain did not read the Jobs")
	}
	// The stop watches only the pods that carry the labels the gang's
	// pods share, not the whole namespace.
	var sels []string
	for _, a := range c.kube.Actions() {
		if w, ok := a.(clienttesting.WatchAction); ok && a.GetResource().Resource == "pods" {
			sels = append(sels, w.GetWatchRestrictions().Labels.String())
		}
	}
	if len(sels) == 0 || sels[len(sels)-1] != LabelJobSetName+"=train" {
		t.Errorf("pod watches with selectors %q, want the last on %s=train", sels, LabelJobSetName)
	}
}

// A pod that its Job controller deleted first (the drain's delete meets a
// changed resourceVersion) is not in the record; a refused delete ends the
// drain's deletes with one warning, the Job controller deletes the rest,
// and the stop completes.
func TestStopDeleteConflictsAndRefusals(t *testing.T) {
	t.Run("conflict", func(t *testing.T) {
		c := newJobCluster(t, 20*time.Millisecond, 0)
		c.kube.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.(clienttesting.DeleteAction).GetName() != "train-1" {
				return false, nil, nil
			}
			_ = c.kube.Tracker().Delete(podsGVR, "ml", "train-1")
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "train-1", errors.New("the object has been modified"))
		})
		g := jobsetGang(t, c)
		ev := &events{}
		d := stopDrainer(c, Options{}, ev)
		o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
		if o.Action != ActionStopped || o.DeletedPods == nil {
			t.Fatalf("outcome %+v\n%v", o, ev.lines)
		}
		if diff := cmp.Diff(PodsByJob{"train-workers-0": {"train-0", "train-2"}}, o.DeletedPods.Deleted); diff != "" || o.DeletedPods.Unconfirmed != nil {
			t.Errorf("deleted -want +got\n%s\nunconfirmed %v", diff, o.DeletedPods.Unconfirmed)
		}
	})
	t.Run("forbidden", func(t *testing.T) {
		c := newJobCluster(t, 20*time.Millisecond, 200*time.Millisecond)
		c.kube.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, a.(clienttesting.DeleteAction).GetName(), errors.New(`User "u" cannot delete resource "pods"`))
		})
		g := jobsetGang(t, c)
		ev := &events{}
		d := stopDrainer(c, Options{}, ev)
		o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
		if o.Action != ActionStopped || o.DeletedPods == nil || o.DeletedPods.Count != 0 {
			t.Fatalf("outcome %+v %+v\n%v", o, o.DeletedPods, ev.lines)
		}
		n := 0
		for _, l := range ev.lines {
			if strings.Contains(l, "not deleting its pods itself") && strings.Contains(l, `cannot delete resource "pods"`) && strings.Contains(l, "their Job controller deletes them") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d warnings about the refusal, want 1: %v", n, ev.lines)
		}
	})
}

// Without DeleteStoppedPods the drain leaves the pods to the Job controller.
func TestStopWithoutDeletingLeavesPodsToJobController(t *testing.T) {
	c := newJobCluster(t, 20*time.Millisecond, 100*time.Millisecond)
	g := jobsetGang(t, c)
	d := stopDrainer(c, Options{}, &events{})
	d.Options.DeleteStoppedPods = false
	o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
	if o.Action != ActionStopped || o.DeletedPods != nil {
		t.Fatalf("outcome %+v", o)
	}
	if n := count(c.kube.Actions(), "delete", "pods") + count(c.kube.Actions(), "patch", "pods"); n != 0 {
		t.Errorf("%d pod writes", n)
	}
}

// The record's annotation names each pod by what follows its Job's name,
// and reads back whole.
func TestDeletedPodsRecordRoundTrip(t *testing.T) {
	r := &DeletedPods{Run: "gd-1", Deleted: PodsByJob{"train-workers-0": {"train-workers-0-0-abcde", "train-workers-0-1-fghij"}, "other": {"adopted"}},
		Unconfirmed: PodsByJob{"train-workers-0": {"train-workers-0-2-klmno"}}, Unfinalized: 4}
	s := r.encode()
	var raw map[string]any
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"train-workers-0": []any{"0-abcde", "1-fghij"}, "other": []any{"=adopted"}}, raw["deleted"]); diff != "" {
		t.Errorf("encoded deleted -want +got\n%s", diff)
	}
	got, err := ParseDeletedPods(s)
	if err != nil {
		t.Fatal(err)
	}
	r.Count = 3
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("round trip -want +got\n%s", diff)
	}
	if r, err := ParseDeletedPods(""); r != nil || err != nil {
		t.Errorf("empty: %v %v", r, err)
	}
	if _, err := ParseDeletedPods("{"); err == nil || !strings.Contains(err.Error(), AnnDeletedPods) {
		t.Errorf("bad record: %v", err)
	}
}

// A run interrupted after it recorded the pods it set out to delete
// resumes with them: those gone meanwhile are unconfirmed (it or their
// Job controller deleted them), those still running are deleted again.
func TestStopResumesInterruptedDeletes(t *testing.T) {
	c := newJobCluster(t, 20*time.Millisecond, 0)
	g := jobsetGang(t, c)
	d := stopDrainer(c, Options{}, &events{})
	prev := &DeletedPods{Run: d.runID, Deleted: PodsByJob{"train-workers-0": {"train-9"}},
		Deleting: PodsByJob{"train-workers-0": {"train-0", "train-1", "train-8"}}, Unfinalized: 2}
	g.Annotations = map[string]string{AnnStoppedByRun: d.runID, AnnDeletedPods: prev.encode()}
	o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
	if o.Action != ActionStopped || o.DeletedPods == nil {
		t.Fatalf("outcome %+v", o)
	}
	want := &DeletedPods{Run: d.runID, Count: 4, Deleted: PodsByJob{"train-workers-0": {"train-0", "train-1", "train-2", "train-9"}},
		Unconfirmed: PodsByJob{"train-workers-0": {"train-8"}}, Unfinalized: 5}
	if diff := cmp.Diff(want, o.DeletedPods); diff != "" {
		t.Errorf("record -want +got\n%s", diff)
	}
}

// A record too large for the gang's annotations is not written, and the
// drain then deletes nothing.
func TestStopLeavesPodsWhenTheRecordWouldNotFit(t *testing.T) {
	c := newJobCluster(t, 20*time.Millisecond, 100*time.Millisecond)
	g := jobsetGang(t, c)
	ev := &events{}
	d := stopDrainer(c, Options{}, ev)
	long := PodsByJob{}
	for i := 0; i < maxDeletedRecord/8; i++ {
		long["x"] = append(long["x"], "x-"+strconv.Itoa(100000+i))
	}
	d.runID = "gd-big"
	g.Annotations = map[string]string{AnnStoppedByRun: d.runID, AnnDeletedPods: (&DeletedPods{Run: d.runID, Deleted: long}).encode()}
	o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
	if o.Action != ActionStopped || !ev.has("not deleting its pods itself: the record of its pods") {
		t.Fatalf("outcome %+v\n%v", o, ev.lines)
	}
	if n := count(c.kube.Actions(), "delete", "pods"); n != 0 {
		t.Errorf("%d deletes without a record", n)
	}
}

// Once its deletes are answered the stop reads the gang's pods again at
// once: it does not wait for their events, which a busy API server
// delivers late (here never), nor for the next poll interval.
func TestStopRereadsOnceItsDeletesAreDone(t *testing.T) {
	c := newJobCluster(t, 20*time.Millisecond, 0)
	c.kube.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	g := jobsetGang(t, c)
	ev := &events{}
	d := stopDrainer(c, Options{PollInterval: time.Minute}, ev)
	began := time.Now()
	o := d.stop(context.Background(), g, d.outcome(g, ActionFailed, ""))
	if o.Action != ActionStopped || o.DeletedPods == nil || o.DeletedPods.Count != 3 {
		t.Fatalf("outcome %+v %+v\n%v", o, o.DeletedPods, ev.lines)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the stop took %s with a silent watch and a 1m poll interval", took)
	}
}
