package gang

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// RestoreOutcome is what restore did with one gang.
type RestoreOutcome struct {
	GangRecord
	// Action: reactivated, unsuspended, scaled-up, not-restorable, skipped,
	// waiting-for-capacity, or (dry run) would-restore.
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
	// Requeued, Admitted and Ready trace Kueue readmission.
	Requeued  bool      `json:"requeued"`
	Admitted  bool      `json:"admitted"`
	ReadyPods int       `json:"readyPods"`
	Ready     bool      `json:"ready"`
	ReadyAt   time.Time `json:"readyAt,omitzero"`
	FreeGPUs  int64     `json:"freeGPUsBefore"`
	// DeletedPods are the pods of the gang that the run deleted itself
	// once its Jobs were suspended (the record on its stop object); the
	// Jobs create their pods anew when the gang is readmitted.
	DeletedPods *DeletedPods `json:"deletedPods,omitempty"`
	restorable  bool
}

// Restore outcome actions.
const (
	RestoreReactivated  = "reactivated"
	RestoreUnsuspended  = "unsuspended"
	RestoreScaledUp     = "scaled-up"
	RestoreNotPossible  = "not-restorable"
	RestoreSkipped      = "skipped"
	RestoreNoCapacity   = "waiting-for-capacity"
	RestoreWouldRestore = "would-restore"
)

// RestoreResult is the outcome of Drainer.Restore.
type RestoreResult struct {
	RunIDs   []string         `json:"runIDs"`
	DryRun   bool             `json:"dryRun"`
	Nodes    []NodeRecord     `json:"nodes"`
	Gangs    []RestoreOutcome `json:"gangs"`
	Complete bool             `json:"complete"`
}

// ResolveRestoreTargets turns RUN|NODE arguments into node names: a run id
// stands for every node recorded under it.
func ResolveRestoreTargets(ctx context.Context, d *Drainer, args []string) ([]string, error) {
	list, err := d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byRun := map[string][]string{}
	names := map[string]bool{}
	for _, n := range list.Items {
		names[n.Name] = true
		if id := n.Annotations[AnnRunID]; id != "" {
			byRun[id] = append(byRun[id], n.Name)
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, a := range args {
		var add []string
		switch {
		case len(byRun[a]) > 0:
			add = byRun[a]
		case names[a]:
			add = []string{a}
		default:
			return nil, fmt.Errorf("%q is neither a run id nor a node", a)
		}
		for _, n := range add {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// ErrUnknownRun: restore was given a run that no node and no gang carries.
var ErrUnknownRun = errors.New("unknown run")

// Restore undoes a run on nodes after the upgrade: it uncordons only the
// nodes the run cordoned, then reactivates or unsuspends only the gangs the
// run stopped, once schedulable GPU capacity exists for each, and watches
// Kueue readmit them (Requeued, Admitted, pods Ready). With no nodes and
// Options.RunID set, it restores the gangs of that run whose nodes are
// gone (a provider replaced them), found by the records on the gangs.
func (d *Drainer) Restore(ctx context.Context, nodes []string) (*RestoreResult, error) {
	if len(nodes) == 0 && d.Options.RunID == "" {
		return nil, errors.New("nothing to restore: name a run or its nodes")
	}
	recs, err := d.readNodes(ctx, nodes)
	if err != nil {
		return nil, err
	}
	d.records = recs
	res := &RestoreResult{DryRun: d.Options.DryRun}
	defer func() { res.Nodes = d.snapshot(nodes) }()
	runs := map[string]bool{}
	if d.Options.RunID != "" {
		runs[d.Options.RunID] = true
	}
	var gangs []GangRecord
	seenGang := map[string]bool{}
	for _, n := range nodes {
		r := recs[n]
		if r.RunID == "" {
			return res, fmt.Errorf("node %s carries no gang-drain run", n)
		}
		if d.Options.RunID != "" && r.RunID != d.Options.RunID {
			return res, fmt.Errorf("node %s belongs to run %s, not %s", n, r.RunID, d.Options.RunID)
		}
		runs[r.RunID] = true
		for _, g := range r.Gangs {
			if !seenGang[r.RunID+"|"+g.Key] {
				seenGang[r.RunID+"|"+g.Key] = true
				gangs = append(gangs, g)
			}
		}
	}
	res.RunIDs = sortedKeys(runs)
	// The gangs of the runs whose nodes are gone (a provider replaced them)
	// are found by the record on their stop objects.
	more, err := d.stoppedGangs(ctx, runs)
	if err != nil {
		return res, err
	}
	for _, g := range more {
		if !seenGang[g.run+"|"+g.Key] {
			seenGang[g.run+"|"+g.Key] = true
			gangs = append(gangs, g.GangRecord)
		}
	}
	sort.Slice(gangs, func(i, j int) bool { return gangs[i].Key < gangs[j].Key })
	if len(nodes) == 0 && len(gangs) == 0 {
		return nil, fmt.Errorf("%w: no node and no stopped gang carries run %q", ErrUnknownRun, d.Options.RunID)
	}

	// 1. Uncordon what the runs cordoned.
	for _, n := range nodes {
		r := recs[n]
		if d.Options.DryRun {
			continue
		}
		if r.State == NodeDone {
			continue
		}
		if err := d.setNode(ctx, n, NodeRestoring, "", nil); err != nil {
			return res, incomplete(err)
		}
		if !r.WasCordoned && r.Unschedulable {
			no := false
			if err := d.patchNode(ctx, n, map[string]any{AnnUpdatedAt: timeString(d.clock().Now())}, &no); err != nil {
				return res, incomplete(err)
			}
			r.Unschedulable = false
			d.emit(Event{Type: EventNode, Node: n, State: NodeRestoring, Message: "uncordoned"})
		} else if r.WasCordoned {
			d.emit(Event{Type: EventNode, Node: n, State: NodeRestoring, Message: "left cordoned: it was cordoned before the run"})
		}
	}

	// 2. Reactivate the gangs the runs stopped, capacity permitting.
	free, err := d.freeGPUs(ctx)
	if err != nil {
		return res, incomplete(err)
	}
	var watch []*RestoreOutcome
	for _, g := range gangs {
		o := RestoreOutcome{GangRecord: g}
		u, why, err := d.stopObject(ctx, g)
		if err != nil {
			return res, incomplete(err)
		}
		run, restorable, msg := stoppedBy(u, why)
		o.FreeGPUs = free
		if u != nil {
			if rec, err := ParseDeletedPods(u.GetAnnotations()[AnnDeletedPods]); err != nil {
				d.emit(Event{Type: EventWarning, Gang: g.Key, Message: fmt.Sprintf("gang %s: %v", g.Key, err)})
			} else if rec != nil && runs[rec.Run] {
				o.DeletedPods = rec
			}
		}
		switch {
		case g.Method == StopDeletePods:
			o.Action, o.Message = RestoreNotPossible, "its pods were deleted; whatever created them recreates them"
		case !restorable:
			o.Action, o.Message = RestoreSkipped, msg
		case !runs[run]:
			o.Action, o.Message = RestoreSkipped, fmt.Sprintf("stopped by run %s, not by the run being restored", run)
		case msg == "already restored":
			o.Action, o.Message, o.restorable = actionFor(g.Method), "reactivated earlier; watching readmission", true
		case g.GPUs > free:
			o.Action, o.Message = RestoreNoCapacity, fmt.Sprintf("needs %d GPUs, %d schedulable GPUs are free", g.GPUs, free)
		case d.Options.DryRun:
			o.Action = RestoreWouldRestore
			free -= g.GPUs
		default:
			if err := d.reactivate(ctx, g, run, u.GetAnnotations()); err != nil {
				return res, incomplete(err)
			}
			free -= g.GPUs
			o.Action, o.restorable = actionFor(g.Method), true
			if r := o.DeletedPods; r != nil && r.Count > 0 {
				o.Message = fmt.Sprintf("its Jobs create anew the %d pods run %s deleted", r.Count, r.Run)
			}
			d.emit(Event{Type: EventGang, Gang: g.Key, Message: fmt.Sprintf("%s (%s)", o.Action, g.Method)})
		}
		res.Gangs = append(res.Gangs, o)
	}
	for i := range res.Gangs {
		if res.Gangs[i].restorable {
			watch = append(watch, &res.Gangs[i])
		}
	}
	if d.Options.DryRun {
		return res, nil
	}

	// 3. Watch readmission.
	if err := d.watchReadmission(ctx, watch); err != nil {
		return res, incomplete(err)
	}
	res.Complete = true
	for _, o := range res.Gangs {
		if o.Action == RestoreNoCapacity {
			res.Complete = false
		}
	}
	if !res.Complete {
		return res, incomplete(errors.New("some gangs wait for schedulable GPU capacity; run restore again when there is room"))
	}
	for _, n := range nodes {
		if err := d.setNode(ctx, n, NodeDone, "", nil); err != nil {
			return res, incomplete(err)
		}
	}
	return res, nil
}

func actionFor(m StopMethod) string {
	switch m {
	case StopKueue:
		return RestoreReactivated
	case StopScaleToZero:
		return RestoreScaledUp
	}
	return RestoreUnsuspended
}

// stopObject reads the object that holds a gang's stop record: its root,
// else its Kueue Workload. Where there is none, or it was deleted or
// recreated since the drain, it returns nil and why.
func (d *Drainer) stopObject(ctx context.Context, g GangRecord) (*unstructured.Unstructured, string, error) {
	ref := g.Root
	if ref == nil {
		ref = g.Workload
	}
	if ref == nil {
		return nil, "no object to restore", nil
	}
	var u *unstructured.Unstructured
	err := d.retry(ctx, func() (err error) {
		u, err = d.Dynamic.Resource(ref.GVR()).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, "deleted since the drain", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s %s/%s: %w", ref.Kind, ref.Namespace, ref.Name, err)
	}
	if ref.UID != "" && u.GetUID() != ref.UID {
		return nil, "recreated since the drain", nil
	}
	return u, "", nil
}

// stoppedBy reads the stop record of a gang's stop object u (nil: there is
// none, for the reason why).
func stoppedBy(u *unstructured.Unstructured, why string) (run string, restorable bool, msg string) {
	if u == nil {
		return "", false, why
	}
	a := u.GetAnnotations()
	if by := a[AnnRestoredBy]; by != "" && a[AnnStoppedByRun] == "" {
		return by, true, "already restored"
	}
	run = a[AnnStoppedByRun]
	if run == "" {
		return "", false, "not stopped by gang-drain"
	}
	return run, true, ""
}

// reactivate undoes the stop of a gang that run stopped; ann are the
// annotations of its stop object.
func (d *Drainer) reactivate(ctx context.Context, g GangRecord, run string, ann map[string]string) error {
	switch g.Method {
	case StopKueue:
		if d.Kueue == nil {
			return errors.New("no Kueue client to reactivate the workload")
		}
		err := d.retry(ctx, func() error {
			_, err := d.Kueue.KueueV1beta2().Workloads(g.Namespace).Patch(ctx, g.Workload.Name, types.MergePatchType,
				mergePatch(map[string]any{"spec": map[string]any{"active": true}}), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("reactivating Kueue workload %s/%s: %w", g.Namespace, g.Workload.Name, err)
		}
	case StopSuspend:
		err := d.retry(ctx, func() error {
			_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
				mergePatch(nested(suspendPath(g.Kind), false)), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("unsuspending %s %s/%s: %w", g.Kind, g.Namespace, g.Name, err)
		}
	case StopScaleToZero:
		var u *unstructured.Unstructured
		err := d.retry(ctx, func() (err error) {
			u, err = d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Get(ctx, g.Name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", g.Kind, g.Namespace, g.Name, err)
		}
		var replicas int64 = 1
		fmt.Sscanf(u.GetAnnotations()[AnnReplicas], "%d", &replicas)
		err = d.retry(ctx, func() error {
			_, err := d.Dynamic.Resource(g.Root.GVR()).Namespace(g.Namespace).Patch(ctx, g.Name, types.MergePatchType,
				mergePatch(map[string]any{"spec": map[string]any{"replicas": replicas}}), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("scaling %s %s/%s back to %d: %w", g.Kind, g.Namespace, g.Name, replicas, err)
		}
	}
	ref := g.Root
	if ref == nil {
		ref = g.Workload
	}
	restored := map[string]any{
		AnnStoppedByRun: nil, AnnStopState: nil, AnnGangRecord: nil, AnnRestoredBy: run, AnnRestoredAt: timeString(d.clock().Now()),
	}
	// A run cut short before it marked the gang stopped leaves its
	// checkpoint request behind; the readmitted gang must not yield to it.
	keys := d.keys()
	if req, ok := keys.ParseRequest(ann); ok && belongsToRun(req.ID, run) {
		for k, v := range keys.ClearRequestPatch() {
			restored[k] = v
		}
	}
	return d.retry(ctx, func() error { return checkpoint.Patch(ctx, d.Dynamic, ref.Target(), restored) })
}

// freeGPUs sums allocatable GPUs minus requested GPUs over schedulable,
// Ready nodes.
func (d *Drainer) freeGPUs(ctx context.Context) (int64, error) {
	var (
		nodes *corev1.NodeList
		pods  *corev1.PodList
	)
	if err := d.retry(ctx, func() (err error) {
		nodes, err = d.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("listing nodes: %w", err)
	}
	if err := d.retry(ctx, func() (err error) {
		pods, err = d.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		return err
	}); err != nil {
		return 0, fmt.Errorf("listing pods: %w", err)
	}
	res := d.GPUResources
	if len(res) == 0 {
		res = DefaultGPUResources
	}
	used := map[string]int64{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != "" && !podDone(p) {
			used[p.Spec.NodeName] += PodGPUs(p, res)
		}
	}
	var free int64
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		var alloc int64
		for _, r := range res {
			if q, ok := n.Status.Allocatable[r]; ok {
				alloc += q.Value()
			}
		}
		if f := alloc - used[n.Name]; f > 0 {
			free += f
		}
	}
	return free, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// watchReadmission waits until each gang is admitted (Kueue) and has its
// ranks Ready.
func (d *Drainer) watchReadmission(ctx context.Context, gangs []*RestoreOutcome) error {
	if len(gangs) == 0 {
		return nil
	}
	deadline := d.clock().Now().Add(d.Options.restoreTimeout())
	for {
		pending := 0
		for _, o := range gangs {
			if o.Ready {
				continue
			}
			if err := d.observe(ctx, o); err != nil {
				return err
			}
			if !o.Ready {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		if d.clock().Now().After(deadline) {
			var names []string
			for _, o := range gangs {
				if !o.Ready {
					names = append(names, fmt.Sprintf("%s (requeued %v, admitted %v, %d/%d pods Ready)", o.Key, o.Requeued, o.Admitted, o.ReadyPods, o.Ranks))
				}
			}
			return fmt.Errorf("not readmitted within %s: %s", d.Options.restoreTimeout(), strings.Join(names, ", "))
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return err
		}
	}
}

func (d *Drainer) observe(ctx context.Context, o *RestoreOutcome) error {
	if o.Method == StopKueue && d.Kueue != nil {
		var wl *kueuev1beta2.Workload
		err := d.retry(ctx, func() (err error) {
			wl, err = d.Kueue.KueueV1beta2().Workloads(o.Namespace).Get(ctx, o.Workload.Name, metav1.GetOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("reading Kueue workload %s/%s: %w", o.Namespace, o.Workload.Name, err)
		}
		was := [2]bool{o.Requeued, o.Admitted}
		for _, c := range wl.Status.Conditions {
			if c.Type == "Requeued" && c.Status == metav1.ConditionTrue {
				o.Requeued = true
			}
		}
		o.Admitted = conditionTrue(wl.Status.Conditions, "Admitted")
		if o.Admitted {
			o.Requeued = true
		}
		if !was[0] && o.Requeued {
			d.emit(Event{Type: EventGang, Gang: o.Key, Message: "requeued by Kueue"})
		}
		if !was[1] && o.Admitted {
			d.emit(Event{Type: EventGang, Gang: o.Key, Message: "admitted by Kueue"})
		}
		if !o.Admitted {
			return nil
		}
	}
	var ready int
	err := d.retry(ctx, func() (err error) {
		ready, err = d.readyPods(ctx, o.GangRecord)
		return err
	})
	if err != nil {
		return err
	}
	o.ReadyPods = ready
	if ready >= o.Ranks && o.Ranks > 0 {
		o.Ready, o.ReadyAt = true, d.clock().Now()
		d.emit(Event{Type: EventGang, Gang: o.Key, Message: fmt.Sprintf("running again: %d/%d pods Ready", ready, o.Ranks)})
	}
	return nil
}

// readyPods counts Ready pods of a gang, found through the same owner
// chains as discovery.
func (d *Drainer) readyPods(ctx context.Context, g GangRecord) (int, error) {
	list, err := d.Kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing pods in namespace %s: %w", g.Namespace, err)
	}
	disc := &Discoverer{Kube: d.Kube, Dynamic: d.Dynamic, owners: map[string]*unstructured.Unstructured{}}
	n := 0
	for i := range list.Items {
		p := &list.Items[i]
		if !podReady(p) {
			continue
		}
		k, err := disc.classify(ctx, p)
		if err != nil {
			return 0, err
		}
		if k.key() == g.Key {
			n++
		}
	}
	return n, nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
