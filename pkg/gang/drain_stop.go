package gang

// Stopping gangs as units: a few at a time, each checkpointed first, then
// deactivated (Kueue) or suspended, recorded on its nodes, and waited for.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// stopGangs runs every gang through checkpoint and stop, at most
// MaxGangsInFlight at a time.
func (d *Drainer) stopGangs(ctx context.Context, gangs []*Gang) []GangOutcome {
	out := make([]GangOutcome, len(gangs))
	limit := d.Options.MaxGangsInFlight
	if limit <= 0 {
		limit = len(gangs)
	}
	if limit == 0 {
		return nil
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, g := range gangs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = d.outcome(g, ActionFailed, ctx.Err().Error())
				return
			}
			defer func() { <-sem }()
			out[i] = d.handleGang(ctx, g)
		}()
	}
	wg.Wait()
	return out
}

func (d *Drainer) outcome(g *Gang, action, msg string) GangOutcome {
	return GangOutcome{Key: g.Key, Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, Method: g.Method,
		Support: d.keys().SupportOf(g.Labels, g.Annotations), Action: action, Message: msg, GPUs: g.GPUs, Ranks: g.Ranks}
}

// stopTarget is where the stop record lives (nil for a bare pod group
// without a Workload: its pods are deleted and nothing remains).
func stopTarget(g *Gang) *checkpoint.Target {
	switch {
	case g.Root != nil:
		t := g.Root.Target()
		return &t
	case g.Workload != nil:
		t := g.Workload.Target()
		return &t
	}
	return nil
}

func (d *Drainer) gangEvent(g *Gang, format string, args ...any) {
	d.emit(Event{Type: EventGang, Gang: g.Key, Message: fmt.Sprintf(format, args...)})
}

// handleGang asks one gang to checkpoint, applies --on-timeout, and stops it.
func (d *Drainer) handleGang(ctx context.Context, g *Gang) GangOutcome {
	o := d.outcome(g, ActionFailed, "")
	keys := d.keys()
	// A gang this run already began to stop goes straight to the stop.
	if g.Annotations[AnnStoppedByRun] == d.runID && g.Root != nil || g.Annotations[AnnStoppedByRun] == d.runID && g.Workload != nil {
		o.Verdict = checkpoint.Verdict{Phase: checkpoint.PhaseReady, Reason: "stop already under way in this run"}
		return d.stop(ctx, g, o)
	}
	if g.Method == StopUnsupported {
		o.Action, o.Message = ActionAborted, g.Problem
		d.gangEvent(g, "cannot be stopped as a unit: %s", g.Problem)
		return o
	}
	verdict, reqID, err := d.checkpoint(ctx, g)
	o.Verdict, o.RequestID = verdict, reqID
	if err != nil {
		o.Message, o.cause = err.Error(), err
		return o
	}
	if verdict.Phase == checkpoint.PhaseReady {
		return d.stop(ctx, g, o)
	}
	switch d.Options.OnTimeout {
	case OnTimeoutStop:
		d.emit(Event{Type: EventWarning, Gang: g.Key, Message: fmt.Sprintf("gang %s: %s; stopping it anyway (--on-timeout=stop): work since its last checkpoint is lost", g.Key, verdict.Reason)})
		return d.stop(ctx, g, o)
	default:
		if reqID != "" {
			if t, ok := protocolTarget(g); ok {
				st, _ := d.readCheckpoint(ctx, keys, t)
				rq := &checkpoint.Requester{Client: d.Dynamic, Pods: d.Kube, Keys: keys}
				if err := d.retry(ctx, func() error { return rq.Cancel(ctx, t, st.Request, mirrorPods(keys, g)) }); err != nil {
					o.Message, o.cause = err.Error(), err
					return o
				}
			}
		}
		o.Action, o.Message = ActionAborted, verdict.Reason+" (--on-timeout=abort; request withdrawn, gang left running)"
		d.gangEvent(g, "%s", o.Message)
		return o
	}
}

// gangPods follows which pods of a gang still exist: one list of the
// namespace, then a watch of it (see watch.go).
type gangPods struct {
	d    *Drainer
	g    *Gang
	uids map[types.UID]bool
	left map[types.UID]bool
	wt   *waiter
	// sel narrows the reads to labels every pod followed carries (empty:
	// the whole namespace).
	sel string
	// jobs are the gang's Jobs whose pods gang-drain deletes itself: a pod
	// one of them creates after the stop is followed too (adopt).
	jobs map[types.UID]bool
}

// adopt follows a pod that one of jobs created after the stop. gang-drain
// deletes a Job's pods once the API says the Job is suspended, which can be
// before the Job controller's cache does (just after an API server
// restart, its watches are still catching up): until it sees the
// suspension it replaces the deleted pods, and deletes them again once it
// does. The gang's pods are gone only when those are gone too.
func (gp *gangPods) adopt(p *corev1.Pod) {
	if len(gp.jobs) == 0 || gp.uids[p.UID] || podDone(p) {
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil && gp.jobs[ref.UID] {
		gp.uids[p.UID] = true
		gp.left[p.UID] = true
	}
}

func (d *Drainer) followGangPods(g *Gang) *gangPods {
	gp := &gangPods{d: d, g: g, uids: map[types.UID]bool{}}
	for _, p := range g.Pods {
		gp.uids[p.UID] = true
	}
	gp.wt = d.newWaiter(g.Key, "pods in namespace "+g.Namespace, func(ctx context.Context, rv string) (watch.Interface, error) {
		return d.Kube.CoreV1().Pods(g.Namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, LabelSelector: gp.sel})
	})
	return gp
}

// narrow watches, from the read of list, only the pods that carry every
// label the followed pods share, when they share any: a large gang's
// events then no longer pass through the watch of a small gang beside it
// in the namespace, nor through this process.
func (gp *gangPods) narrow(ctx context.Context, list *corev1.PodList) {
	var common map[string]string
	for i := range list.Items {
		p := &list.Items[i]
		if !gp.uids[p.UID] {
			continue
		}
		if common == nil {
			common = maps.Clone(p.Labels)
			continue
		}
		for k, v := range common {
			if p.Labels[k] != v {
				delete(common, k)
			}
		}
	}
	if len(common) == 0 || gp.wt.polling {
		return
	}
	gp.sel = labels.SelectorFromSet(common).String()
	gp.wt.stop()
	gp.wt.read(ctx, list.ResourceVersion)
}

// list reads the gang's pods that still exist (by UID, not done); it
// returns the namespace's pods.
func (gp *gangPods) list(ctx context.Context) (*corev1.PodList, error) {
	var list *corev1.PodList
	err := gp.d.retry(ctx, func() (err error) {
		list, err = gp.d.Kube.CoreV1().Pods(gp.g.Namespace).List(ctx, metav1.ListOptions{LabelSelector: gp.sel})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods in namespace %s: %w", gp.g.Namespace, err)
	}
	gp.left = map[types.UID]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		gp.adopt(p)
		if gp.uids[p.UID] && !podDone(p) {
			gp.left[p.UID] = true
		}
	}
	gp.wt.read(ctx, list.ResourceVersion)
	return list, nil
}

// follow adds pods to wait for (present and not done).
func (gp *gangPods) follow(uids []types.UID) {
	for _, uid := range uids {
		if !gp.uids[uid] {
			gp.uids[uid] = true
			gp.left[uid] = true
		}
	}
}

// wait returns after a change or a poll interval, with the count left.
func (gp *gangPods) wait(ctx context.Context) (int, error) {
	ev, reread, err := gp.wt.next(ctx)
	if err != nil {
		return 0, err
	}
	if reread {
		if _, err := gp.list(ctx); err != nil {
			return 0, err
		}
	} else if ev != nil {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			if ev.Type != watch.Deleted {
				gp.adopt(p)
			}
			if gp.uids[p.UID] && (ev.Type == watch.Deleted || podDone(p)) {
				delete(gp.left, p.UID)
			}
		}
	}
	return len(gp.left), nil
}

func (gp *gangPods) stop() { gp.wt.stop() }

func mergePatch(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// stop stops a gang as a unit and waits until its pods are gone.
func (d *Drainer) stop(ctx context.Context, g *Gang, o GangOutcome) GangOutcome {
	fail := func(err error) GangOutcome {
		o.Action, o.Message, o.cause = ActionFailed, err.Error(), err
		d.gangEvent(g, "stop failed: %v", err)
		return o
	}
	// Record on the nodes first (restore finds gangs there), then on the root.
	if err := d.markStopping(ctx, g); err != nil {
		return fail(err)
	}
	now := d.clock().Now()
	o.StopStartedAt = now
	if t := stopTarget(g); t != nil {
		rec, _ := json.Marshal(RecordOf(g))
		ann := map[string]any{AnnStoppedByRun: d.runID, AnnStopMethod: string(g.Method), AnnStopState: GangStopping, AnnGangRecord: string(rec)}
		if g.Annotations[AnnStoppedByRun] != d.runID {
			ann[AnnStoppedAt] = timeString(now)
			ann[AnnRestoredBy], ann[AnnRestoredAt], ann[AnnDeletedPods] = nil, nil, nil
		}
		if g.Method == StopScaleToZero && g.Annotations[AnnReplicas] == "" {
			var u *unstructured.Unstructured
			err := d.retry(ctx, func() (err error) {
				u, err = d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Get(ctx, g.Name, metav1.GetOptions{})
				return err
			})
			if err != nil {
				return fail(err)
			}
			replicas, _, _ := unstructuredInt(u.Object, "spec", "replicas")
			ann[AnnReplicas] = fmt.Sprint(replicas)
		}
		if err := d.retry(ctx, func() error { return checkpoint.Patch(ctx, d.Dynamic, *t, ann) }); err != nil {
			return fail(err)
		}
	}
	d.gangEvent(g, "stopping as a unit (%s, %d ranks, %d GPUs)", g.Method, g.Ranks, g.GPUs)
	if err := d.retry(ctx, func() error { return d.applyStop(ctx, g) }); err != nil {
		return fail(err)
	}
	deleted, goneAt, err := d.waitGone(ctx, g)
	if err != nil {
		return fail(err)
	}
	o.PodsGoneAt, o.DeletedPods = goneAt, deleted
	if t := stopTarget(g); t != nil {
		ann := map[string]any{AnnStopState: GangStopped}
		if deleted != nil {
			ann[AnnDeletedPods] = deleted.encode()
		}
		// End the request as stopped, not withdrawn: a trainer still in
		// its grace period must not resume stepping, and the gang does not
		// yield to it again when it is readmitted. Request and answer stay
		// as history.
		if _, asked := d.keys().ParseRequest(g.Annotations); asked || o.RequestID != "" {
			for k, v := range d.keys().StoppedPatch() {
				ann[k] = v
			}
		}
		if err := d.retry(ctx, func() error { return checkpoint.Patch(ctx, d.Dynamic, *t, ann) }); err != nil {
			return fail(err)
		}
	}
	o.Action = ActionStopped
	by := ""
	if deleted != nil && deleted.Count > 0 {
		by = fmt.Sprintf(" (%d deleted by gang-drain once their Jobs were suspended)", deleted.Count)
	}
	d.gangEvent(g, "stopped: %d pods gone in %s%s", g.Ranks, o.PodsGoneAt.Sub(o.StopStartedAt).Round(10*time.Millisecond), by)
	return o
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	switch v := cur.(type) {
	case int64:
		return v, true, nil
	case float64:
		return int64(v), true, nil
	case int:
		return int64(v), true, nil
	}
	return 0, false, nil
}

// markStopping records the gang on each chosen node it has a rank on and
// moves the node to NodeStopping, one patch per node and the nodes in
// parallel: between the gang's ready-to-stop and its stop nothing else
// waits on these writes, and a cell's gang spans a rack set of nodes.
func (d *Drainer) markStopping(ctx context.Context, g *Gang) error {
	rec := RecordOf(g)
	var nodes []string
	seen := map[string]bool{}
	for _, p := range g.Pods {
		if p.OnChosenNode && !seen[p.Node] {
			seen[p.Node] = true
			nodes = append(nodes, p.Node)
		}
	}
	var eg errgroup.Group
	eg.SetLimit(maxNodeWrites)
	for _, node := range nodes {
		eg.Go(func() error { return d.recordStopping(ctx, node, rec) })
	}
	return eg.Wait()
}

// maxNodeWrites bounds the node patches markStopping has in flight.
const maxNodeWrites = 16

// recordStopping merges rec into the node's gang record and advances the
// node to NodeStopping in a single patch; it writes nothing when both are
// there already. Gangs stop concurrently, so the read-merge-write of one
// node is serialised.
func (d *Drainer) recordStopping(ctx context.Context, node string, rec GangRecord) error {
	mu, _ := d.nodeMu.LoadOrStore(node, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	d.mu.Lock()
	r := d.records[node]
	var gangs []GangRecord
	cur := NodePending
	if r != nil {
		gangs, cur = r.Gangs, r.State
	}
	d.mu.Unlock()
	recorded := false
	for _, g := range gangs {
		if g.Key == rec.Key {
			recorded = true
			break
		}
	}
	advance := cur != NodeFailed && stateOrder[cur] < stateOrder[NodeStopping]
	if recorded && !advance {
		return nil
	}
	var extra map[string]any
	var merged []GangRecord
	if !recorded {
		merged = mergeGangRecords(gangs, rec)
		extra = map[string]any{AnnGangs: gangsJSON(merged)}
	}
	var err error
	if advance {
		err = d.setNode(ctx, node, NodeStopping, "", extra)
	} else {
		err = d.patchNode(ctx, node, extra, nil)
	}
	if err != nil || recorded {
		return err
	}
	d.mu.Lock()
	if r != nil {
		r.Gangs = merged
	}
	d.mu.Unlock()
	return nil
}

func suspendPath(k Kind) []string {
	switch k {
	case KindPyTorchJob, KindMPIJob:
		return []string{"spec", "runPolicy", "suspend"}
	}
	return []string{"spec", "suspend"}
}

func nested(path []string, v any) map[string]any {
	var out any = v
	for i := len(path) - 1; i >= 0; i-- {
		out = map[string]any{path[i]: out}
	}
	return out.(map[string]any)
}

// applyStop issues the stop itself; every method is idempotent.
func (d *Drainer) applyStop(ctx context.Context, g *Gang) error {
	switch g.Method {
	case StopKueue:
		if d.Kueue == nil {
			return errors.New("the gang is managed by Kueue but no Kueue client is available")
		}
		_, err := d.Kueue.KueueV1beta2().Workloads(g.Namespace).Patch(ctx, g.Workload.Name, types.MergePatchType,
			mergePatch(map[string]any{"spec": map[string]any{"active": false}}), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("deactivating Kueue workload %s/%s: %w", g.Namespace, g.Workload.Name, err)
		}
	case StopSuspend:
		_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
			mergePatch(nested(suspendPath(g.Kind), true)), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("suspending %s %s/%s: %w", g.Kind, g.Namespace, g.Name, err)
		}
	case StopScaleToZero:
		_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
			mergePatch(map[string]any{"spec": map[string]any{"replicas": 0}}), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("scaling %s %s/%s to zero: %w", g.Kind, g.Namespace, g.Name, err)
		}
	case StopDeletePods:
		// Delete every pod together, each with its own grace period.
		var wg sync.WaitGroup
		errs := make([]error, len(g.Pods))
		for i, p := range g.Pods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				uid := p.UID
				err := d.Kube.CoreV1().Pods(g.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
				if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs[i] = fmt.Errorf("deleting pod %s/%s: %w", g.Namespace, p.Name, err)
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	default:
		return fmt.Errorf("gang %s cannot be stopped as a unit: %s", g.Key, g.Problem)
	}
	return nil
}

// waitGone waits until every pod of the gang is gone (and, under Kueue,
// the workload is evicted). Meanwhile it deletes the pods of the gang's
// suspended Jobs itself (drain_delete.go). It returns the record of what
// it deleted (nil when it deleted nothing) and when the last pod went.
func (d *Drainer) waitGone(ctx context.Context, g *Gang) (*DeletedPods, time.Time, error) {
	deadline := d.clock().Now().Add(d.Options.stopTimeout())
	gp := d.followGangPods(g)
	defer gp.stop()
	list, err := gp.list(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	x, err := d.newPodDeleter(g, list)
	if err != nil {
		return nil, time.Time{}, err
	}
	if x != nil {
		gp.follow(x.candidates())
		gp.jobs = map[types.UID]bool{}
		for uid := range x.pods {
			gp.jobs[uid] = true
		}
	}
	gp.narrow(ctx, list)
	if x != nil {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			x.run(ctx, quit)
		}()
		// Once its deletes are answered, read the gang's pods again
		// rather than wait for their events: on a busy API server the
		// watch delivers them seconds after the deletes.
		gp.wt.kick = done
		ended := false
		end := func() {
			if !ended {
				ended = true
				close(quit)
				<-done
			}
		}
		defer end()
		goneAt, err := d.waitPodsGone(ctx, g, gp, deadline)
		if err != nil {
			return nil, goneAt, err
		}
		end()
		return x.result(), goneAt, nil
	}
	goneAt, err := d.waitPodsGone(ctx, g, gp, deadline)
	return nil, goneAt, err
}

// waitPodsGone waits until the gang's pods are gone and, under Kueue, the
// workload is evicted, and returns when the last pod was seen gone.
//
// Kueue marks a deactivated workload Evicted at once (the workload
// controller's Reconcile, sigs.k8s.io/kueue@v0.17.0
// pkg/controller/core/workload_controller.go); it takes the quota
// reservation back, and Admitted with it, only once the job reports no
// active pods (the eviction branch of the jobframework's Reconcile). For
// a Job that count is the Job controller's status, which it writes after
// its own pass over the suspended Job's pods: two requests per pod at
// kube-controller-manager's rate, whoever deleted them. So the stop waits
// for Evicted (or no Admitted), never for the quota.
func (d *Drainer) waitPodsGone(ctx context.Context, g *Gang, gp *gangPods, deadline time.Time) (time.Time, error) {
	left := len(gp.left)
	var goneAt time.Time
	for {
		if left == 0 && goneAt.IsZero() {
			goneAt = d.clock().Now()
		}
		stopping := false
		if left == 0 && g.Method == StopKueue && d.Kueue != nil {
			var wl *kueuev1beta2.Workload
			err := d.retry(ctx, func() (err error) {
				wl, err = d.Kueue.KueueV1beta2().Workloads(g.Namespace).Get(ctx, g.Workload.Name, metav1.GetOptions{})
				return err
			})
			if err != nil && !apierrors.IsNotFound(err) {
				return goneAt, fmt.Errorf("reading Kueue workload %s/%s: %w", g.Namespace, g.Workload.Name, err)
			}
			if err == nil {
				stopping = conditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted) && !conditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadEvicted)
			}
		}
		if left == 0 && !stopping {
			return goneAt, nil
		}
		if d.clock().Now().After(deadline) {
			if left == 0 {
				return goneAt, fmt.Errorf("Kueue has not evicted workload %s/%s of gang %s after %s", g.Namespace, g.Workload.Name, g.Key, d.Options.stopTimeout())
			}
			return goneAt, fmt.Errorf("%d pod(s) of gang %s still exist after %s", left, g.Key, d.Options.stopTimeout())
		}
		var err error
		if left, err = gp.wait(ctx); err != nil {
			return goneAt, err
		}
	}
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
