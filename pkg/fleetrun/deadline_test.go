package fleetrun

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// An inference drain planned longer than the table's 6 hours renders with
// a deadline sized from its expected duration (1h + an 8h ETA, half again
// as margin), so the kubelet does not stop it mid-drain; another
// cluster's gang drain keeps the table's 6 hours.
func TestRenderInferenceDrainDeadline(t *testing.T) {
	f := loadFleet(t, func(f *fleetfile.Fleet) { withSecrets(f); withBandwidth(f) })
	ip := &pkgskew.InferencePool{Models: 2, WithPDB: 2, Reason: "r", Waves: 8, ETASeconds: 8 * 3600, Bandwidth: "object-store=1250000000/s"}
	p := mustPlan(t, f, servingInfos(f, ip), monday0930)
	p.Run = "r1"
	r, err := Render(p, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(int64((9 * time.Hour * 3 / 2).Seconds()))
	found := false
	for _, o := range renderedObjects(t, r.YAML) {
		if o.GetKind() != "WorkflowTemplate" {
			continue
		}
		cluster := o.GetLabels()["gpufleet.dev/cluster"]
		tmpls := o.Object["spec"].(map[string]any)["templates"].([]any)
		for _, task := range tmpls[0].(map[string]any)["dag"].(map[string]any)["tasks"].([]any) {
			tk := task.(map[string]any)
			if tk["name"] != "pool-gpu-a-1-38-drain" {
				continue
			}
			for _, pa := range tk["arguments"].(map[string]any)["parameters"].([]any) {
				pm := pa.(map[string]any)
				if pm["name"] != "deadline" {
					continue
				}
				got := fmt.Sprint(pm["value"])
				switch cluster {
				case "canary-a":
					found = true
					if got != want {
						t.Errorf("canary-a inference drain deadline %s, want %s", got, want)
					}
				default:
					if got != fmt.Sprint(int64(StepDeadlines[StepDrain].Seconds())) {
						t.Errorf("%s gang drain deadline %s", cluster, got)
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("no drain deadline for canary-a")
	}
}

// A drain whose attempt was stopped (in progress, its holder silent)
// resumes late in the window: it is not refused for want of room for its
// whole expected duration, as a drain not yet started is
// (TestStepWaitsForItsWindow).
func TestStepResumesInProgressDrainLateInWindow(t *testing.T) {
	h := newHarness(t, func(f *fleetfile.Fleet) { f.Spec.Rings[1].Approval = nil })
	for _, c := range []string{"canary-a", "canary-b", "canary-c"} {
		h.runCluster(t, c)
	}
	h.clock = time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC) // prod window open
	for _, s := range []string{"gate", "preflight-1-38", "pool-gpu-a-1-38-pdb-blockers"} {
		if r := h.step(t, "prod-use1", s); r.ExitCode != 0 {
			t.Fatalf("%s: %+v", s, r)
		}
	}
	st := h.state(t, "prod-use1")
	ss := st.Step("pool-gpu-a-1-38-drain")
	started := h.clock
	ss.Phase, ss.Attempt, ss.Holder, ss.StartedAt, ss.Heartbeat = PhaseInProgress, 1, "elsewhere/1", &started, &started
	if err := WriteState(context.Background(), h.p.Store, st); err != nil {
		t.Fatal(err)
	}
	// 04:00 LA: 1h left, less than the drain and its margin.
	h.clock = time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	r := h.step(t, "prod-use1", "pool-gpu-a-1-38-drain")
	if r.ExitCode != cli.ExitOK || r.Attempt != 2 {
		t.Fatalf("resumed drain late in the window: %+v", r)
	}
	ran := false
	for _, c := range h.exec.commands() {
		if strings.Contains(c, "gang_drain run") && strings.Contains(c, "prod-use1") {
			ran = true
		}
	}
	if !ran {
		t.Error("the resumed drain did not run")
	}
}
