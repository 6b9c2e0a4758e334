package gang

// Deleting a stopped gang's pods. Once a gang's Jobs are suspended (by
// Kueue through the JobSet controller, by Kueue directly, or by gang-drain
// itself), the Job controller deletes their pods: two requests per pod
// through kube-controller-manager's client, whose --kube-api-qps (20 by
// default) every Job it syncs shares. A 512-rank gang took 51 s to go that
// way, and a 4-rank gang stopped beside it waited behind its requests. So
// gang-drain deletes the pods the suspended Jobs still run itself, the way
// the Job controller does, each gang through a client with a rate limiter
// of its own, and records what it deleted on the gang's stop object.
//
// What the controllers do meanwhile:
//
//   - A suspended Job gets no new pods: manageJob deletes the active pods of
//     a suspended Job and returns before it counts how many to create
//     (k8s.io/kubernetes@v1.37.2 pkg/controller/job/job_controller.go). So
//     the pods of a Job are deleted only once the Job is seen suspended,
//     never before: an unsuspended Job would replace them, on whatever
//     nodes still take them.
//   - A pod deleted with the Job's tracking finalizer
//     (batch.kubernetes.io/job-tracking) still on counts as a failure of
//     its Job (isPodFailed: "Count deleted Pods as failures"), and a JobSet
//     acts on a failed Job with its failure policy (Reconcile:
//     executeFailurePolicy, sigs.k8s.io/jobset@v0.11.1
//     pkg/controllers/jobset_controller.go). The Job controller removes
//     the finalizer before it deletes a pod (deleteJobPods,
//     removeTrackingFinalizerPatch); gang-drain sends the same
//     strategic-merge patch first and removes no other finalizer.
//   - The JobSet controller keeps a suspended JobSet's Jobs suspended
//     (suspendJobs) and recreates only Jobs that are missing or failed;
//     gang-drain deletes pods, never Jobs, and no Job fails.
//   - Kueue keeps a deactivated Workload evicted and its job suspended (the
//     eviction branch of Reconcile calls stopJob, sigs.k8s.io/kueue@v0.17.0
//     pkg/controller/jobframework/reconciler.go) and releases its quota
//     once the job has no active pods; nothing readmits the gang until
//     restore sets spec.active=true again.
//
// Each delete is a background deletion with the pod's own grace period:
// given none, the API server uses the pod's terminationGracePeriodSeconds
// (podStrategy.CheckGracefulDelete, k8s.io/kubernetes@v1.37.2
// pkg/registry/core/pod/strategy.go). A foreground deletion would put the
// foregroundDeletion finalizer on every pod
// (deletionFinalizersForGarbageCollection, k8s.io/apiserver@v0.37.2
// pkg/registry/generic/registry/store.go) for the garbage collector in
// kube-controller-manager to remove, at the same 20 QPS. A pod that
// another finalizer holds stays until that finalizer's owner releases it;
// the stop counts it gone once it has stopped running.
//
// The finalizer patch is the Job controller's own, unconditional (it only
// removes a list entry, so sent twice it changes nothing), and answers
// with the pod as it is; the delete then carries that resourceVersion and
// the pod's UID as preconditions, so a pod that its Job controller deleted
// first answers 409 and is left to it: the record lists exactly the pods
// whose deletion the API server took from the run. Like the Job
// controller, the run removes the finalizer of a pod it last saw running;
// a rank that finished in between goes uncounted by its Job, as it would
// under the Job controller's own pass.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

// podDeleteWorkers bounds one gang's deletes under way; the rate
// limiter of the gang's client sets their pace, and the run's fair gate
// (fairgate.go) their share of the requests in flight.
const podDeleteWorkers = podWritesInFlight

// maxDeletedRecord bounds the encoded DeletedPods record: an object's
// annotations may hold 256 KiB in all (TotalAnnotationSizeLimitB,
// k8s.io/apimachinery@v0.37.2 pkg/api/validation/objectmeta.go), shared
// with its other annotations. A gang whose record would not fit is left
// to its Job controller.
const maxDeletedRecord = 128 << 10

// conflictRetries bounds the re-reads of one pod that changed between the
// run's read and its write.
const conflictRetries = 3

// removeTrackingFinalizer is the Job controller's strategic-merge patch
// (removeTrackingFinalizerPatch).
var removeTrackingFinalizer, _ = json.Marshal(map[string]any{"metadata": map[string]any{
	"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer},
}})

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

// jobOf returns the batch/v1 Job that controls a pod, or nil.
func jobOf(p *corev1.Pod) *metav1.OwnerReference {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
		return ref
	}
	return nil
}

// jobPods reports whether the pods of a gang kind belong to batch/v1 Jobs
// (a TrainJob runs a JobSet).
func jobPods(k Kind) bool {
	return k == KindJobSet || k == KindJob || k == KindTrainJob
}

// podRunning: neither terminating nor finished.
func podRunning(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && !podDone(p)
}

// podDeleter deletes the pods of one stopped gang's Jobs as each Job is
// seen suspended.
type podDeleter struct {
	d      *Drainer
	g      *Gang
	kube   kubernetes.Interface
	target checkpoint.Target
	// pods are the gang's running pods by the UID of their Job; jobs names
	// the Jobs.
	pods map[types.UID][]*corev1.Pod
	jobs map[types.UID]string

	mu        sync.Mutex
	rec       DeletedPods
	announced bool
	refused   bool
	prev      bool
}

// newPodDeleter returns the deleter of a stopping gang from a list of its
// namespace's pods, or nil when it has nothing to do: deletion is off, the
// gang is not stopped by suspending Jobs, or none of its pods belongs to a
// Job and no earlier attempt of this run left a record.
func (d *Drainer) newPodDeleter(g *Gang, list *corev1.PodList) (*podDeleter, error) {
	if !d.Options.DeleteStoppedPods || g.Method != StopKueue && g.Method != StopSuspend {
		return nil, nil
	}
	t := stopTarget(g)
	if t == nil {
		return nil, nil
	}
	var prev *DeletedPods
	if g.Annotations[AnnStoppedByRun] == d.runID {
		r, err := ParseDeletedPods(g.Annotations[AnnDeletedPods])
		if err == nil && r != nil && r.Run == d.runID {
			prev = r
		}
	}
	known := map[types.UID]bool{}
	for _, p := range g.Pods {
		known[p.UID] = true
	}
	x := &podDeleter{d: d, g: g, target: *t, pods: map[types.UID][]*corev1.Pod{}, jobs: map[types.UID]string{}, rec: DeletedPods{Run: d.runID}}
	for i := range list.Items {
		if ref := jobOf(&list.Items[i]); ref != nil && known[list.Items[i].UID] {
			x.jobs[ref.UID] = ref.Name
		}
	}
	// Every running pod of those Jobs, including ranks recreated since
	// the gang was found.
	running := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		if ref := jobOf(p); ref != nil && x.jobs[ref.UID] != "" && podRunning(p) {
			x.pods[ref.UID] = append(x.pods[ref.UID], p)
			running[p.Name] = true
		}
	}
	if len(x.pods) == 0 && prev == nil {
		return nil, nil
	}
	if prev != nil {
		// An earlier attempt of this run: keep what it recorded, and what
		// it set out to delete and is gone now is unconfirmed.
		x.prev = true
		x.rec.Deleted, x.rec.Unconfirmed, x.rec.Unfinalized = prev.Deleted, prev.Unconfirmed, prev.Unfinalized
		for job, ps := range prev.Deleting {
			for _, p := range ps {
				if !running[p] && !x.rec.Deleted.Has(job, p) {
					x.rec.Unconfirmed = x.rec.Unconfirmed.add(job, p)
				}
			}
		}
	}
	x.kube = d.Kube
	if d.PodClient != nil {
		c, err := d.PodClient()
		if err != nil {
			return nil, fmt.Errorf("a client for deleting the pods of gang %s: %w", g.Key, err)
		}
		x.kube = c
	}
	return x, nil
}

// candidates returns the UIDs of the pods the deleter may delete.
func (x *podDeleter) candidates() []types.UID {
	var out []types.UID
	for _, ps := range x.pods {
		for _, p := range ps {
			out = append(out, p.UID)
		}
	}
	return out
}

func (x *podDeleter) warn(format string, args ...any) {
	x.d.emit(Event{Type: EventWarning, Gang: x.g.Key, Message: fmt.Sprintf("gang %s: ", x.g.Key) + fmt.Sprintf(format, args...)})
}

func (x *podDeleter) stopped() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.refused
}

// refuse ends the deletes after a refusal, with one warning: the Job
// controller deletes what is left.
func (x *podDeleter) refuse(what string, err error) {
	x.mu.Lock()
	first := !x.refused
	x.refused = true
	x.mu.Unlock()
	if first {
		x.warn("not deleting its pods itself: %s: %v; their Job controller deletes them", what, err)
	}
}

// run follows the gang's Jobs (one list of the namespace's Jobs, then a
// watch) and deletes each Job's pods once the Job is suspended, until
// every Job has been seen suspended or gone, a refusal ends the deletes,
// or quit is closed (the gang's pods are gone). Requests already sent are
// waited for, never cancelled, so that the record holds their answers.
func (x *podDeleter) run(ctx context.Context, quit <-chan struct{}) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-quit:
			cancel()
		case <-wctx.Done():
		}
	}()
	var eg errgroup.Group
	eg.SetLimit(podDeleteWorkers)
	defer func() { _ = eg.Wait() }()
	pending := map[types.UID]bool{}
	for uid := range x.pods {
		pending[uid] = true
	}
	if len(pending) == 0 {
		return
	}
	ns := x.g.Namespace
	jobs := x.d.Kube.BatchV1().Jobs(ns)
	w := x.d.newWaiter(x.g.Key, "jobs in namespace "+ns, func(ctx context.Context, rv string) (watch.Interface, error) {
		return jobs.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	})
	defer w.stop()
	observe := func(j *batchv1.Job) {
		if !pending[j.UID] || !ptr.Deref(j.Spec.Suspend, false) {
			return
		}
		delete(pending, j.UID)
		if !x.announce(ctx) {
			return
		}
		for _, p := range x.pods[j.UID] {
			eg.Go(func() error {
				x.deleteOne(ctx, wctx, j.Name, p)
				return nil
			})
		}
	}
	read := func() bool {
		var list *batchv1.JobList
		err := x.d.retry(wctx, func() (err error) {
			list, err = jobs.List(wctx, metav1.ListOptions{})
			return err
		})
		if err != nil {
			if wctx.Err() == nil {
				x.refuse("listing jobs in namespace "+ns, err)
			}
			return false
		}
		seen := map[types.UID]bool{}
		for i := range list.Items {
			seen[list.Items[i].UID] = true
			observe(&list.Items[i])
		}
		for uid := range pending {
			if !seen[uid] {
				// Deleted: the garbage collector deletes its pods.
				delete(pending, uid)
			}
		}
		w.read(wctx, list.ResourceVersion)
		return true
	}
	if !read() {
		return
	}
	for len(pending) > 0 && !x.stopped() {
		ev, reread, err := w.next(wctx)
		if err != nil {
			return
		}
		if reread {
			if !read() {
				return
			}
			continue
		}
		if ev == nil {
			continue
		}
		j, ok := ev.Object.(*batchv1.Job)
		if !ok {
			continue
		}
		if ev.Type == watch.Deleted {
			delete(pending, j.UID)
			continue
		}
		observe(j)
	}
}

// announce records, before the first delete, every pod the run sets out
// to delete; without that record it deletes nothing.
func (x *podDeleter) announce(ctx context.Context) bool {
	if x.announced {
		return true
	}
	if x.stopped() {
		return false
	}
	rec := x.rec
	for uid, ps := range x.pods {
		for _, p := range ps {
			rec.Deleting = rec.Deleting.add(x.jobs[uid], p.Name)
		}
	}
	s := rec.encode()
	if len(s) > maxDeletedRecord {
		x.refuse("the record of its pods", fmt.Errorf("%d KiB is more than the %d KiB gang-drain keeps on %s %s/%s", len(s)>>10, maxDeletedRecord>>10, x.target.Resource.Resource, x.target.Namespace, x.target.Name))
		return false
	}
	err := x.d.retry(ctx, func() error { return checkpoint.Patch(ctx, x.d.Dynamic, x.target, map[string]any{AnnDeletedPods: s}) })
	if err != nil {
		x.refuse("recording the pods it deletes", err)
		return false
	}
	x.mu.Lock()
	x.rec.Deleting = rec.Deleting
	x.announced = true
	x.mu.Unlock()
	return true
}

// deleteOne removes the Job's tracking finalizer from a running pod and
// deletes it, preconditioned on the pod the patch answered with; a pod
// that another client changed in between is read again, and left alone
// once it is going. quit set, it sends nothing more.
func (x *podDeleter) deleteOne(ctx, quit context.Context, job string, p *corev1.Pod) {
	pods := x.kube.CoreV1().Pods(p.Namespace)
	cur := p
	for try := 0; ; try++ {
		if quit.Err() != nil || x.stopped() || !podRunning(cur) {
			return
		}
		if hasTrackingFinalizer(cur) {
			var got *corev1.Pod
			err := x.send(ctx, func() (err error) {
				got, err = pods.Patch(ctx, cur.Name, types.StrategicMergePatchType, removeTrackingFinalizer, metav1.PatchOptions{})
				return err
			})
			if err != nil {
				if cur = x.after(ctx, cur, job, try, "removing the Job tracking finalizer of pod", err, false); cur == nil {
					return
				}
				continue
			}
			x.mu.Lock()
			x.rec.Unfinalized++
			x.mu.Unlock()
			cur = got
			if !podRunning(cur) {
				return
			}
		}
		uid, rv := cur.UID, cur.ResourceVersion
		err := x.send(ctx, func() error {
			return pods.Delete(ctx, cur.Name, metav1.DeleteOptions{
				Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
			})
		})
		if err == nil {
			x.mu.Lock()
			x.rec.Deleted = x.rec.Deleted.add(job, cur.Name)
			x.mu.Unlock()
			return
		}
		if cur = x.after(ctx, cur, job, try, "deleting pod", err, true); cur == nil {
			return
		}
	}
}

// after handles a failed write to pod p: it returns the pod read again
// when the write is to be tried again, else nil. A conflict is tried again
// a few times; a throttled or failed request after the poll interval. A
// delete whose answer was lost (no answer, or a server error) may have
// been done: a pod then found going is unconfirmed.
func (x *podDeleter) after(ctx context.Context, p *corev1.Pod, job string, try int, what string, err error, deleting bool) *corev1.Pod {
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		if try >= conflictRetries {
			return nil
		}
	case transient.Is(err):
		if x.d.sleep(ctx, x.d.Options.poll()) != nil {
			return nil
		}
	default:
		x.refuse(fmt.Sprintf("%s %s/%s", what, p.Namespace, p.Name), err)
		return nil
	}
	lost := deleting && transient.Is(err) && !apierrors.IsTooManyRequests(err)
	var cur *corev1.Pod
	rerr := x.d.retry(ctx, func() (err error) {
		return x.send(ctx, func() (err error) {
			cur, err = x.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			return err
		})
	})
	switch {
	case rerr != nil && !apierrors.IsNotFound(rerr):
		if ctx.Err() == nil {
			x.refuse(fmt.Sprintf("reading pod %s/%s", p.Namespace, p.Name), rerr)
		}
		return nil
	case rerr == nil && cur.UID == p.UID && podRunning(cur):
		return cur
	}
	if lost && (rerr != nil || cur.UID == p.UID) {
		x.mu.Lock()
		x.rec.Unconfirmed = x.rec.Unconfirmed.add(job, p.Name)
		x.mu.Unlock()
	}
	return nil
}

// send makes one request through the run's fair gate.
func (x *podDeleter) send(ctx context.Context, req func() error) error {
	gate := x.d.podGate()
	if err := gate.acquire(ctx, x.g.Key); err != nil {
		return err
	}
	defer gate.release(x.g.Key)
	return req()
}

// result is the record once the deletes have ended: nil when the run
// neither deleted nor set out to delete any pod of the gang.
func (x *podDeleter) result() *DeletedPods {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.announced && !x.prev {
		return nil
	}
	r := x.rec
	r.Deleting = nil
	r.Count = r.Deleted.Len()
	if r.Deleted == nil {
		r.Deleted = PodsByJob{}
	}
	return &r
}
