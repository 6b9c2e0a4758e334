package gang

// Evicting the pods a node has left once its gangs are stopped, PDB-aware
// through pkg/eviction, and waiting for them to go.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// drainNode evicts the pods left on a node (PDB-aware through
// pkg/eviction) and waits for them to go.
func (d *Drainer) drainNode(ctx context.Context, node string, found *Discovery) error {
	if err := d.advance(ctx, node, NodeDraining); err != nil {
		return err
	}
	var pods []corev1.Pod
	err := d.retry(ctx, func() (err error) {
		pods, err = ListNodePods(ctx, d.Kube, node)
		return err
	})
	if err != nil {
		return err
	}
	var evict []*corev1.Pod
	var blockers []string
	for i := range pods {
		p := &pods[i]
		if podDone(p) || isDaemonOrMirror(p) || p.DeletionTimestamp != nil {
			continue
		}
		if key, ok := found.GangOf[p.UID]; ok {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s of gang %s is still running", p.Namespace, p.Name, key))
			continue
		}
		if hasEmptyDir(p) && !d.Options.DeleteEmptyDirData {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s has emptyDir data (pass --delete-emptydir-data)", p.Namespace, p.Name))
			continue
		}
		if metav1.GetControllerOf(p) == nil && !d.Options.Force {
			blockers = append(blockers, fmt.Sprintf("pod %s/%s has no controller (pass --force)", p.Namespace, p.Name))
			continue
		}
		evict = append(evict, p)
	}
	if len(blockers) > 0 {
		return errors.New(strings.Join(blockers, "; "))
	}
	if d.Options.DisableEviction && len(evict) > 0 {
		who := d.Options.Requester
		if who == "" {
			who = "unknown"
		}
		by := fmt.Sprintf("%s at %s", who, timeString(d.clock().Now()))
		if err := d.setNode(ctx, node, NodeDraining, "", map[string]any{AnnDisableEviction: by}); err != nil {
			return err
		}
		d.mu.Lock()
		d.records[node].DisableEvictionBy = by
		d.mu.Unlock()
		d.emit(Event{Type: EventWarning, Node: node, Message: fmt.Sprintf("node %s: --disable-eviction: deleting %d pod(s) directly, bypassing PodDisruptionBudgets (recorded as %s)", node, len(evict), by)})
	}
	h := eviction.NewHelper(d.Kube)
	h.Clock = d.clock()
	h.Timeout = d.Options.EvictionTimeout
	h.OnRefused = func(p *corev1.Pod, r eviction.Result, in time.Duration) {
		d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("eviction of pod %s/%s refused (%s), retrying in %s", p.Namespace, p.Name, r.Reason, in.Round(time.Second))})
	}
	for i, p := range evict {
		if d.Options.DisableEviction {
			uid := p.UID
			err := d.retry(ctx, func() error {
				return d.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("deleted pod %s/%s (node %s, %d/%d)", p.Namespace, p.Name, node, i+1, len(evict))})
			continue
		}
		if err := d.evict(ctx, h, p); err != nil {
			return err
		}
		d.emit(Event{Type: EventPod, Node: node, Message: fmt.Sprintf("evicted pod %s/%s (node %s, %d/%d)", p.Namespace, p.Name, node, i+1, len(evict))})
	}
	if err := d.waitEvicted(ctx, node, evict); err != nil {
		return err
	}
	return d.advance(ctx, node, NodeDrained)
}

// waitEvicted waits until the evicted pods are gone from node (deleted, or
// replaced by a pod of another UID), with one list of the node's pods per
// poll rather than a GET per pod: on a node of a hundred pods that is one
// request a poll instead of a hundred. --eviction-timeout bounds the wait.
func (d *Drainer) waitEvicted(ctx context.Context, node string, evicted []*corev1.Pod) error {
	if len(evicted) == 0 {
		return nil
	}
	var deadline time.Time
	if d.Options.EvictionTimeout > 0 {
		deadline = d.clock().Now().Add(d.Options.EvictionTimeout)
	}
	for {
		var pods []corev1.Pod
		err := d.retry(ctx, func() (err error) {
			pods, err = ListNodePods(ctx, d.Kube, node)
			return err
		})
		if err != nil {
			return err
		}
		present := make(map[types.UID]bool, len(pods))
		for i := range pods {
			present[pods[i].UID] = true
		}
		var left []string
		for _, p := range evicted {
			if present[p.UID] {
				left = append(left, p.Namespace+"/"+p.Name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if !deadline.IsZero() && !d.clock().Now().Before(deadline) {
			return fmt.Errorf("%w: %d evicted pod(s) still on node %s after %s: %s", eviction.ErrDeadline, len(left), node, d.Options.EvictionTimeout, strings.Join(left, ", "))
		}
		if err := d.sleep(ctx, d.Options.poll()); err != nil {
			return err
		}
	}
}

func hasEmptyDir(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}
