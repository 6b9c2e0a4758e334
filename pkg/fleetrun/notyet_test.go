package fleetrun

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// evidenceOf lists the evidence keys of a cluster's step.
func (h *harness) evidenceOf(t *testing.T, cluster, step string) []string {
	t.Helper()
	keys, err := h.p.Store.List(context.Background(), "runs/r1/evidence/"+cluster+"/"+step+"/")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestGateNotYetIsNoAttempt: a gate step held by the clock (a closed
// window, a freeze) or by the store (an approval) starts no attempt and
// writes no evidence, however often it is asked (its record says why it
// waits); the clock's waits answer
// with the next opening, the others with none. When the window opens the
// first attempt is attempt 1.
func TestGateNotYetIsNoAttempt(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour) // the canary ring's soak
	opens := time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 5; i++ {
		r := h.step(t, "prod-use1", "gate")
		if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(opens) || len(r.Evidence) != 0 {
			t.Fatalf("ask %d, window closed: %+v (next %v), want not yet, no attempt, next opening %s", i, r, r.NextAt, opens)
		}
		h.clock = h.clock.Add(15 * time.Minute)
	}
	if w := h.state(t, "prod-use1").Step("gate").Waiting; w == nil || w.Reason != "window" || w.Until == nil || !w.Until.Equal(opens) {
		t.Errorf("the waiting gate's record %+v: want waiting on the window until %s", w, opens)
	}
	if keys := h.evidenceOf(t, "prod-use1", "gate"); len(keys) != 0 {
		t.Errorf("the waiting gate wrote evidence %v", keys)
	}
	h.clock = opens.Add(30 * time.Minute)
	if r := h.step(t, "prod-use1", "gate"); r.ExitCode != 0 || r.Attempt != 1 || r.NextAt != nil {
		t.Fatalf("window open: %+v", r)
	}

	// A freeze: its end is the opening.
	h = newHarness(t, nil)
	h.clock = time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC)
	r := h.step(t, "canary-a", "gate")
	if want := time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
		t.Errorf("freeze: %+v (next %v), want next opening %s", r, r.NextAt, want)
	}

	// Approvals: not yet, no attempt, and no opening the clock knows.
	h = newHarness(t, nil)
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = h.clock.Add(2 * time.Hour)
	r = h.step(t, "prod-use1", "gate")
	if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt != nil || !strings.Contains(r.Message, "0 of 2 approvals") {
		t.Errorf("no approval: %+v (next %v)", r, r.NextAt)
	}
	if keys := h.evidenceOf(t, "prod-use1", "gate"); len(keys) != 0 {
		t.Errorf("the gate waiting for approvals wrote evidence %v", keys)
	}
}

// TestSoakAnswersItsOpening: a cluster gate asked during the earlier
// ring's soak answers when the soak ends.
func TestSoakAnswersItsOpening(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // the prod window is open
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	done := h.clock
	h.clock = h.clock.Add(30 * time.Minute)
	r := h.step(t, "prod-use1", "gate")
	if want := done.Add(2 * time.Hour); r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
		t.Errorf("during the soak: %+v (next %v), want %s", r, r.NextAt, want)
	}
}

// prodBeforeItsDrain runs the canary ring to its end and prod-use1 up to
// its drain, inside its window (Tuesday 01:30 LA).
func prodBeforeItsDrain(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		if r := h.step(t, "prod-use1", s); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s, r)
		}
	}
	return h
}

// TestDisruptiveStepWaitWritesOnce: a disruptive step refused by its
// window answers the next opening and records why once; asking again
// with the same answer writes nothing.
func TestDisruptiveStepWaitWritesOnce(t *testing.T) {
	h := prodBeforeItsDrain(t)
	// 04:00 LA: too late in the window for the drain; Wednesday 01:00 LA
	// is the next start.
	h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	want := time.Date(2026, 11, 4, 9, 0, 0, 0, time.UTC)
	var versions []string
	for i := 0; i < 3; i++ {
		r := h.step(t, "prod-use1", "pool-gpu-a-1-38-drain")
		if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || r.NextAt == nil || !r.NextAt.Equal(want) {
			t.Fatalf("drain late in the window: %+v (next %v), want %s", r, r.NextAt, want)
		}
		_, v, err := h.p.Store.ReadVersion(context.Background(), StateKey("r1", "prod-use1"))
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
		h.clock = h.clock.Add(time.Minute)
	}
	if versions[1] != versions[0] || versions[2] != versions[0] {
		t.Errorf("state versions %v: the same answer was written again", versions)
	}
}

func TestWaitSeconds(t *testing.T) {
	now := monday0930
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		next *time.Time
		want int64
	}{
		{nil, 0}, {at(-time.Second), 0}, {at(0), 0}, {at(time.Millisecond), 1}, {at(90 * time.Second), 90}, {at(90*time.Second + 1), 91},
	} {
		if got := WaitSeconds(tc.next, now); got != tc.want {
			t.Errorf("WaitSeconds(%v) = %d, want %d", tc.next, got, tc.want)
		}
	}
	p := filepath.Join(t.TempDir(), "wait")
	if s, err := WriteWaitFile(p, at(time.Hour), now); err != nil || s != 3600 || readFile(t, p) != "3600" {
		t.Errorf("WriteWaitFile: %d %v %q", s, err, readFile(t, p))
	}
	if s, err := WriteWaitFile(p, nil, now); err != nil || s != 0 || readFile(t, p) != "0" {
		t.Errorf("WriteWaitFile without an opening: %d %v %q", s, err, readFile(t, p))
	}
}

// TestRenderPacesWaits: each cluster's step and each ring's gate run
// paced: the pod writes its wait (--wait-file) into the output parameter
// "wait", and a timed suspend of that many seconds comes before asking
// again; a hold still catches a failure.
func TestRenderPacesWaits(t *testing.T) {
	_, r := mustRender(t, withSecrets)
	str := func(m map[string]any, path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
		return fmt.Sprint(v)
	}
	seen := 0
	for _, o := range renderedObjects(t, r.YAML) {
		tmpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
		byName := map[string]map[string]any{}
		for _, x := range tmpls {
			byName[x.(map[string]any)["name"].(string)] = x.(map[string]any)
		}
		for _, pod := range []string{"step", "gate"} {
			tm, ok := byName[pod]
			if !ok {
				continue
			}
			seen++
			args := str(tm, "container", "args")
			if !strings.Contains(args, "--wait-file "+WaitFile) {
				t.Errorf("%s/%s args %s lack --wait-file %s", o.GetName(), pod, args, WaitFile)
			}
			outs, _, _ := unstructured.NestedSlice(tm, "outputs", "parameters")
			if len(outs) != 1 || str(outs[0].(map[string]any), "name") != "wait" || str(outs[0].(map[string]any), "valueFrom", "path") != WaitFile || str(outs[0].(map[string]any), "valueFrom", "default") != "0" {
				t.Errorf("%s/%s outputs %v", o.GetName(), pod, outs)
			}
			paced := byName["paced-"+pod]
			steps, _, _ := unstructured.NestedSlice(paced, "steps")
			if len(steps) != 3 {
				t.Fatalf("%s/paced-%s steps %v", o.GetName(), pod, steps)
			}
			run := steps[0].([]any)[0].(map[string]any)
			wait := steps[1].([]any)[0].(map[string]any)
			again := steps[2].([]any)[0].(map[string]any)
			if run["template"] != pod || wait["template"] != SuspendWait || again["template"] != "paced-"+pod ||
				wait["when"] != "{{steps.run.outputs.parameters.wait}} > 0" || again["when"] != wait["when"] {
				t.Errorf("%s/paced-%s: run %v, wait %v, again %v", o.GetName(), pod, run, wait, again)
			}
			if d := str(byName[SuspendWait], "suspend", "duration"); d != "{{inputs.parameters.seconds}}" {
				t.Errorf("%s/%s suspend duration %q", o.GetName(), SuspendWait, d)
			}
			guarded := byName["guarded-"+pod]
			gs, _, _ := unstructured.NestedSlice(guarded, "steps")
			if gs[0].([]any)[0].(map[string]any)["template"] != "paced-"+pod {
				t.Errorf("%s/guarded-%s runs %v, want paced-%s", o.GetName(), pod, gs[0], pod)
			}
		}
	}
	if seen < 2 {
		t.Fatalf("%d step and gate templates", seen)
	}
}

// TestNextStepRefusesWhenAWaitIsLost: a wait the Workflow never read (its
// file lost: the output parameter takes its default "0") ends the paced
// template as if the step were done, and the next step runs; it must
// refuse, since the store says the earlier step is not completed.
func TestNextStepRefusesWhenAWaitIsLost(t *testing.T) {
	h := prodBeforeItsDrain(t)
	h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	drain := "pool-gpu-a-1-38-drain"
	if r := h.step(t, "prod-use1", drain); r.ExitCode != cli.ExitIncomplete || r.NextAt == nil {
		t.Fatalf("drain late in the window: %+v, want a wait until its opening", r)
	}
	c, _ := h.p.Plan.Cluster("prod-use1")
	next := ""
	for i, s := range c.Steps {
		if s.Name == drain && i+1 < len(c.Steps) {
			next = c.Steps[i+1].Name
		}
	}
	if next == "" {
		t.Fatalf("no step after %s in %+v", drain, c.Steps)
	}
	r := h.step(t, "prod-use1", next)
	if r.ExitCode != cli.ExitIncomplete || r.Attempt != 0 || !strings.Contains(r.Message, "comes after "+drain) {
		t.Fatalf("%s after a lost wait of %s: %+v, want not yet, the earlier step first", next, drain, r)
	}
	if st := h.state(t, "prod-use1").Step(next); st.Phase == PhaseCompleted || st.Phase == PhaseInProgress {
		t.Errorf("%s after a lost wait: %+v", next, st)
	}
}
