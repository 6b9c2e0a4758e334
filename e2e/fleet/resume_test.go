//go:build e2e

package fleete2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

var jobsetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// TestFleetResumesAfterKills kills the workflow-controller and the drain
// step mid-drain (the training gang is checkpointing: acknowledged, not yet
// ready to stop). The controller comes back, Argo retries the killed step,
// the new attempt resumes the same gang-drain run, and the run ends where a
// run without kills ends: every step completed, the pool on the target,
// the gang readmitted. It runs beside TestFleetClosedWindowWaits (the
// training cell here, the canary there), so the controller is killed under
// two runs, and each test's wait (a stale heartbeat here, a window there)
// overlaps the other's.
func TestFleetResumesAfterKills(t *testing.T) {
	t.Parallel()
	e := env(t)
	e.resetPools(t, training)
	ctx := context.Background()
	g := e.trainingGang(t, "resume-gang", nil)
	// The gang speaks checkpoint-and-yield and takes its time: its
	// checkpoint finishes when the test says so.
	sc, stop := e.slowCheckpoint(t, ctx, g, "100")
	defer stop()
	checkpointing, release := sc.checkpointing, sc.release

	rings := `  - {name: training, selector: {matchLabels: {gpufleet.dev/ring: training}}}`
	s := e.newScenario(t, "resume", "file://"+t.TempDir()+"/store", rings, "")
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
	if first.Phase != fleetrun.PhaseInProgress || first.Attempt != 1 {
		t.Fatalf("drain mid-way: %+v", first)
	}
	// Kill both: the controller, and the step (its pod's processes).
	e.argo.Kill()
	if n := e.node.Kill("--step", drain); n != 1 {
		t.Fatalf("killed %d drain steps, want 1", n)
	}
	time.Sleep(3 * time.Second)
	if err := e.argo.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Argo retries the killed step (exit 137); the new attempt starts once
	// the killed one's heartbeat is stale, and resumes the same gang-drain
	// run, which is still waiting for the gang.
	s.waitFor(t, "a second drain attempt", 3*time.Minute, func() bool {
		_, st := s.states(t)
		d := st[training].Step(drain)
		return d.Attempt >= 2 && d.Phase == fleetrun.PhaseInProgress
	})
	close(release)
	s.waitPhase(t, "Succeeded", 8*time.Minute)
	_, states = s.states(t)
	st := states[training]
	if st.FinishedAt == nil {
		t.Fatal("training did not finish")
	}
	for _, ss := range st.Steps {
		if ss.Phase != fleetrun.PhaseCompleted {
			t.Errorf("%s: %s", ss.Name, ss.Phase)
		}
	}
	d := st.Step(drain)
	if d.Attempt < 2 || d.RunID != first.RunID {
		t.Errorf("drain: attempt %d, run %s; want a second attempt of run %s", d.Attempt, d.RunID, first.RunID)
	}
	e.nodesUpgraded(t, training)
	g.readmitted(t)
}

// slowCheckpoint answers g's checkpoint requests (checkpoint-and-yield, as
// a trainer would) and finishes each at step only once release is closed:
// checkpointing is closed at the first request, asked counts them. stop
// ends the responder.
type slowCheckpoint struct {
	checkpointing, release chan struct{}
	asked                  atomic.Int32
}

func (e *fleetEnv) slowCheckpoint(t *testing.T, ctx context.Context, g *gang, step string) (*slowCheckpoint, context.CancelFunc) {
	t.Helper()
	sc := &slowCheckpoint{checkpointing: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	dyn, err := dynamic.NewForConfig(e.planes[training].Config)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	r := &checkpoint.Responder{Client: dyn, Keys: checkpoint.DefaultKeys(),
		Target:       checkpoint.Target{Resource: jobsetGVR, Namespace: g.ns, Name: g.name},
		PollInterval: 200 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond,
		Checkpoint: func(ctx context.Context, _ checkpoint.Request) (checkpoint.Result, error) {
			sc.asked.Add(1)
			once.Do(func() { close(sc.checkpointing) })
			select {
			case <-sc.release:
			case <-ctx.Done():
				return checkpoint.Result{}, ctx.Err()
			}
			return checkpoint.Result{Step: step, URI: "s3://ckpt/" + g.name + "/step-" + step}, nil
		}}
	go func() { _ = r.Run(rctx) }()
	return sc, stop
}
