package gang

// Checkpoint-and-yield during a drain: asking a gang to checkpoint, and
// waiting for its answer or for the gang to finish on its own.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// protocolTarget is where a gang's requests live: the root object, else
// the Kueue Workload, else (bare pod group) its first pod.
func protocolTarget(g *Gang) (checkpoint.Target, bool) {
	switch {
	case g.Root != nil:
		return g.Root.Target(), true
	case g.Workload != nil:
		return g.Workload.Target(), true
	case len(g.Pods) > 0:
		return checkpoint.Target{Resource: corev1.SchemeGroupVersion.WithResource("pods"), Namespace: g.Namespace, Name: g.Pods[0].Name}, true
	}
	return checkpoint.Target{}, false
}

// mirrorPods lists the pods a request is mirrored onto: every pod of a
// gang that asked for it with the MirrorToPods key, or of a bare pod group
// (whose request lives on its first pod); none otherwise. Mirroring is one
// PATCH per pod, before the drain can watch for the answer: for a gang of
// 512 ranks at client-go's request rate that alone took longer than the
// checkpoint, and a responder reads the root object anyway.
func mirrorPods(keys checkpoint.Keys, g *Gang) []string {
	if g.Root == nil && g.Workload == nil || keys.WantsPodMirror(g.Labels, g.Annotations) {
		return g.PodNames()
	}
	return nil
}

// checkpoint runs the protocol for one gang until a verdict (or ctx ends).
func (d *Drainer) checkpoint(ctx context.Context, g *Gang) (checkpoint.Verdict, string, error) {
	keys := d.keys()
	if keys.SupportOf(g.Labels, g.Annotations) == checkpoint.SupportNo {
		v := checkpoint.Verdict{Phase: checkpoint.PhaseTimedOut, Reason: "does not speak the checkpoint-and-yield protocol"}
		if d.Options.OnTimeout == OnTimeoutWait {
			d.gangEvent(g, "does not speak the checkpoint-and-yield protocol; waiting for it to finish (--on-timeout=wait)")
			return d.waitFinished(ctx, g, v)
		}
		return v, "", nil
	}
	t, ok := protocolTarget(g)
	if !ok {
		return checkpoint.Verdict{Phase: checkpoint.PhaseTimedOut, Reason: "no object to send a request to"}, "", nil
	}
	st, err := d.readCheckpoint(ctx, keys, t)
	if err != nil {
		return checkpoint.Verdict{}, "", err
	}
	req := st.Request
	rq := &checkpoint.Requester{Client: d.Dynamic, Pods: d.Kube, Keys: keys}
	if !(st.HasRequest && req.Active() && belongsToRun(req.ID, d.runID)) {
		now := d.clock().Now()
		req = checkpoint.Request{State: checkpoint.Requested, ID: nextRequestID(st, d.runID), RequestedAt: now,
			Reason: d.Options.Reason, Requester: d.Options.Requester}
		if d.Options.CheckpointDeadline > 0 {
			req.Deadline = now.Add(d.Options.CheckpointDeadline)
		}
		if err := d.retry(ctx, func() error { return rq.Request(ctx, t, req, mirrorPods(keys, g)) }); err != nil {
			return checkpoint.Verdict{}, "", err
		}
		d.gangEvent(g, "checkpoint requested on %s (request %s)", t, req.ID)
	} else {
		d.gangEvent(g, "waiting for the checkpoint requested earlier in this run (request %s)", req.ID)
	}
	last := checkpoint.Status("?")
	warned := false
	// The answer arrives on a watch of the target; the loop wakes each poll
	// interval to judge the timeouts, and reads only when told to.
	wt := d.newWaiter(g.Key, t.String(), func(ctx context.Context, rv string) (watch.Interface, error) {
		return checkpoint.Watch(ctx, d.Dynamic, t, rv)
	})
	defer wt.stop()
	reread := true
	for {
		if reread {
			var rv string
			st, rv, err = d.readCheckpointVersion(ctx, keys, t)
			if err != nil {
				if ctx.Err() != nil {
					return checkpoint.Verdict{}, req.ID, ctx.Err()
				}
				return checkpoint.Verdict{}, req.ID, err
			}
			wt.read(ctx, rv)
		}
		if st.Response.ObservedRequestID == req.ID && st.Response.Status != last {
			last = st.Response.Status
			msg := string(last)
			if st.Response.Step != "" {
				msg += " (step " + st.Response.Step + ")"
			}
			if st.Response.Message != "" {
				msg += ": " + st.Response.Message
			}
			d.gangEvent(g, "checkpoint %s", msg)
		}
		v := checkpoint.Evaluate(d.clock().Now(), req, st.Response, d.Options.Timeouts)
		if v.Done() {
			if v.Phase == checkpoint.PhaseReady || d.Options.OnTimeout != OnTimeoutWait {
				return v, req.ID, nil
			}
			if !warned {
				d.emit(Event{Type: EventWarning, Gang: g.Key, Message: fmt.Sprintf("gang %s: %s; still waiting (--on-timeout=wait)", g.Key, v.Reason)})
				warned = true
			}
		}
		ev, again, err := wt.next(ctx)
		if err != nil {
			return checkpoint.Verdict{}, req.ID, err
		}
		reread = again
		if ev != nil {
			if m, ok := ev.Object.(metav1.Object); !ok || m.GetName() != t.Name {
				continue
			} else if ev.Type == watch.Deleted {
				// Read it to report the object's absence as before.
				reread = true
			} else {
				st = keys.StateOf(m.GetLabels(), m.GetAnnotations())
			}
		}
	}
}

func belongsToRun(id, run string) bool { return id == run || strings.HasPrefix(id, run+"-r") }

// nextRequestID returns the run id, or run-rN after N withdrawn requests of
// the same run, so that a responder (which acts once per id) answers again.
func nextRequestID(st checkpoint.State, run string) string {
	if !st.HasRequest || !belongsToRun(st.Request.ID, run) {
		return run
	}
	n := 1
	if rest, ok := strings.CutPrefix(st.Request.ID, run+"-r"); ok {
		fmt.Sscanf(rest, "%d", &n)
		n++
	}
	return fmt.Sprintf("%s-r%d", run, n)
}

// waitFinished waits for a gang that cannot checkpoint to end by itself.
func (d *Drainer) waitFinished(ctx context.Context, g *Gang, v checkpoint.Verdict) (checkpoint.Verdict, string, error) {
	gp := d.followGangPods(g)
	defer gp.stop()
	if _, err := gp.list(ctx); err != nil {
		return v, "", err
	}
	left := len(gp.left)
	for left > 0 {
		var err error
		if left, err = gp.wait(ctx); err != nil {
			return v, "", err
		}
	}
	return checkpoint.Verdict{Phase: checkpoint.PhaseReady, Reason: "finished by itself"}, "", nil
}
