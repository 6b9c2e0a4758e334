//go:build e2e

package gangdraine2e

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// smallGang is a non-Kueue JobSet of 2 ranks x 4 GPUs on the env's one node.
func (e *env) smallGang(name string) string {
	e.jobSet(name, "", 2, 4, "v1")
	sel := selJobSet(name)
	e.waitReady(sel, 2)
	return sel
}

// TestGangDrainOnTimeout covers responders that never answer, answer
// failed, or stop their heartbeat, under each --on-timeout policy.
func TestGangDrainOnTimeout(t *testing.T) {
	t.Run("never answers, abort", func(t *testing.T) {
		e := newEnv(t, 1, 3*time.Minute)
		sel := e.smallGang("silent")
		// It reads requests from its pods (downward API): it asks for them there.
		if err := checkpoint.Patch(e.ctx, e.dyn, checkpoint.Target{Resource: jobsetGVR, Namespace: e.ns, Name: "silent"},
			map[string]any{checkpoint.DefaultKeys().MirrorToPods(): "true"}); err != nil {
			t.Fatal(err)
		}
		r := e.run("run", e.nodes[0], "--on-timeout=abort", "--ack-timeout=3s", "--poll-interval=250ms")
		if r.ExitCode != 4 {
			t.Fatalf("exit %d, want 4\n%s", r.ExitCode, r)
		}
		wantIn(t, r.Stderr, "not acknowledged within 3s", "request withdrawn, gang left running", "failed")
		if ptrTrue(e.jobSetObj("silent").Spec.Suspend) {
			t.Error("the JobSet was suspended")
		}
		if n := len(e.pods(sel)); n != 2 {
			t.Errorf("%d gang pods, want 2 still running", n)
		}
		node := e.node(e.nodes[0])
		if nodeState(node) != gang.NodeFailed || !node.Spec.Unschedulable {
			t.Errorf("node: unschedulable %v state %s", node.Spec.Unschedulable, nodeState(node))
		}
		if v := e.jobSetObj("silent").Annotations[checkpoint.DefaultKeys().Request]; v != checkpoint.Cancelled {
			t.Errorf("request annotation %q, want cancelled", v)
		}
		// The request was mirrored onto the pods.
		for _, p := range e.pods(sel) {
			if p.Annotations[checkpoint.DefaultKeys().Request] != checkpoint.Cancelled {
				t.Errorf("pod %s annotations %v", p.Name, p.Annotations)
			}
		}
	})

	t.Run("answers failed, stop", func(t *testing.T) {
		e := newEnv(t, 1, 3*time.Minute)
		sel := e.smallGang("flaky")
		e.responder("flaky", func(context.Context, checkpoint.Request) (checkpoint.Result, error) {
			return checkpoint.Result{}, errors.New("bucket unreachable")
		})
		r := e.run("run", e.nodes[0], "--on-timeout=stop", "--ack-timeout=30s", "--poll-interval=250ms")
		if r.ExitCode != 0 {
			t.Fatalf("exit %d, want 0\n%s", r.ExitCode, r)
		}
		wantIn(t, r.Stderr, "checkpoint failed: bucket unreachable", "stopping it anyway (--on-timeout=stop)", "stopping as a unit (suspend")
		if !ptrTrue(e.jobSetObj("flaky").Spec.Suspend) {
			t.Error("the JobSet was not suspended")
		}
		e.waitGone(sel)
		if s := nodeState(e.node(e.nodes[0])); s != gang.NodeDrained {
			t.Errorf("node state %s", s)
		}
	})

	t.Run("heartbeat stops, wait", func(t *testing.T) {
		e := newEnv(t, 1, 3*time.Minute)
		e.smallGang("stuck")
		stop := e.responder("stuck", func(ctx context.Context, _ checkpoint.Request) (checkpoint.Result, error) {
			<-ctx.Done()
			return checkpoint.Result{}, ctx.Err()
		})
		// Kill the responder once it reports in-progress: its heartbeat stops.
		go func() {
			for e.ctx.Err() == nil {
				js, err := e.cp.JobSetClient().JobsetV1alpha2().JobSets(e.ns).Get(e.ctx, "stuck", metav1.GetOptions{})
				if err == nil && js.Annotations[checkpoint.DefaultKeys().Status()] == string(checkpoint.StatusInProgress) {
					stop()
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
		r := e.run("run", e.nodes[0], "--on-timeout=wait", "--heartbeat-timeout=3s", "--timeout=12s", "--poll-interval=250ms")
		if r.ExitCode != 4 {
			t.Fatalf("exit %d, want 4\n%s", r.ExitCode, r)
		}
		wantIn(t, r.Stderr, "checkpoint in-progress", "no heartbeat for", "still waiting (--on-timeout=wait)", "stopped after --timeout 12s", "hint: kubectl gang-drain status")
		if ptrTrue(e.jobSetObj("stuck").Spec.Suspend) {
			t.Error("the JobSet was suspended")
		}
		if s := nodeState(e.node(e.nodes[0])); s != gang.NodeCheckpointing {
			t.Errorf("node state %s, want checkpointing", s)
		}
	})
}
