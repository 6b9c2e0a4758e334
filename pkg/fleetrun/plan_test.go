package fleetrun

import (
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

func batches(r RingPlan) string {
	var out []string
	for _, b := range r.Batches {
		out = append(out, strings.Join(b.Clusters, "+"))
	}
	return strings.Join(out, " | ")
}

func TestPlanRingsAndBatches(t *testing.T) {
	f := loadFleet(t, nil)
	// A cluster above the GPU cap on its own is a plan error...
	if _, err := MakePlan(f, infos(f, map[string]int{"train-a": 256}), monday0930); err == nil || !strings.Contains(err.Error(), "cluster train-a alone has 256 GPUs, above the 160 the cap lets in flight") {
		t.Fatalf("oversize cluster: %v", err)
	}
	// ...unless the file names it as an exception.
	f.Spec.Caps.GPUCapExceptions = []string{"train-a"}
	p := mustPlan(t, f, infos(f, map[string]int{"train-a": 256}), monday0930)
	if p.GPUs != 6*64+256 || p.MaxGPUsInFlight != (6*64+256)*25/100 {
		t.Fatalf("gpus %d, cap %d", p.GPUs, p.MaxGPUsInFlight)
	}
	want := map[string]string{
		// maxConcurrent 2: three canaries in two batches.
		"canary": "canary-a+canary-b | canary-c",
		// Both under the prod window, 128 GPUs, under the 160 GPU cap.
		"prod":     "prod-euw1+prod-use1",
		"prod-2":   "prod-usw2",
		"training": "train-a",
	}
	for _, r := range p.Rings {
		if got := batches(r); got != want[r.Name] {
			t.Errorf("ring %s batches %q, want %q", r.Name, got, want[r.Name])
		}
	}
	if r, _ := p.Ring("prod"); r.Approvers != 2 || r.MaxConcurrent != 4 {
		t.Errorf("prod: approvers %d, max concurrent %d (ring 5, fleet 4)", r.Approvers, r.MaxConcurrent)
	}
	if r, _ := p.Ring("training"); r.Approvers != 1 {
		t.Errorf("training approvers %d, want 1 (approval: {})", r.Approvers)
	}
	// train-a alone is above the GPU cap: it runs alone, with a warning.
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "train-a alone has 256 GPUs") {
		t.Errorf("warnings %q", p.Warnings)
	}
	c, _ := p.Cluster("prod-use1")
	if c.NextWindow == nil || c.NextWindow.Format("2006-01-02T15:04Z") != "2026-11-03T09:00Z" {
		// Tuesday 01:00 in Los Angeles (PST, UTC-8).
		t.Errorf("prod-use1 next window %v", c.NextWindow)
	}
	if c, _ := p.Cluster("canary-a"); c.NextWindow != nil || len(c.Windows) != 0 {
		t.Errorf("canary-a has no window: always open, got %v %v", c.NextWindow, c.Windows)
	}
}

func TestPlanGPUCapSplitsBatches(t *testing.T) {
	f := loadFleet(t, func(f *fleetfile.Fleet) {
		f.Spec.Caps.MaxGPUPercentInFlight = 15 // of 3*20+4*64 = 316 GPUs: 47
		f.Spec.Rings[0].MaxConcurrent = 0
	})
	f.Spec.Caps.GPUCapExceptions = []string{"prod-use1", "prod-euw1", "prod-usw2", "train-a"}
	in := infos(f, map[string]int{"canary-a": 20, "canary-b": 20, "canary-c": 20})
	p := mustPlan(t, f, in, monday0930)
	r, _ := p.Ring("canary")
	if got := batches(*r); got != "canary-a+canary-b | canary-c" {
		t.Errorf("batches %q: 20+20 fit a 47-GPU cap, a third does not", got)
	}
	for _, b := range r.Batches {
		if b.GPUs > p.MaxGPUsInFlight {
			t.Errorf("batch %v has %d GPUs, cap %d", b.Clusters, b.GPUs, p.MaxGPUsInFlight)
		}
	}
}

func TestPlanSteps(t *testing.T) {
	f := loadFleet(t, func(f *fleetfile.Fleet) { f.Spec.Upgrade.MigrateCRDs = true })
	in := infos(f, nil)
	// Two hops on a kubeadm cluster: the pool at 1.34 must move before the
	// hop to 1.38 (limit 3) and again to the target.
	in["canary-a"] = ClusterInfo{Inventory: inventory("v1.36.3", "gpu-a", "v1.34.1", "cpu", "v1.36.3"), GPUs: 64}
	p := mustPlan(t, f, in, monday0930)
	c, _ := p.Cluster("canary-a")
	var names []string
	for _, s := range c.Steps {
		names = append(names, s.Name)
	}
	got := strings.Join(names, " ")
	for _, want := range []string{
		"gate preflight-1-37 etcd-snapshot-1-37 control-plane-1-37",
		"pool-gpu-a-1-37-pdb-blockers pool-gpu-a-1-37-drain pool-gpu-a-1-37-upgrade pool-gpu-a-1-37-gpu-validate pool-gpu-a-1-37-restore preflight-1-38",
		"verify crd-migrate",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("steps\n%s\nlack %q", got, want)
		}
	}
	if !strings.HasPrefix(got, "gate preflight-1-37") {
		t.Errorf("steps start %q", got)
	}
	s, _, _ := c.Step("pool-gpu-a-1-37-drain")
	if s.Selector != "cloud.google.com/gke-nodepool=gpu-a" || !s.Disruptive || s.PoolFrom != "1.34" {
		t.Errorf("drain step %+v", s)
	}
	if got := c.FinalPools(); got["gpu-a"] != "1.38" || got["cpu"] != "1.38" {
		t.Errorf("final pools %v", got)
	}
}

func TestLint(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*fleetfile.Fleet)
		want   string
	}{
		{"ring selects nothing", func(f *fleetfile.Fleet) {
			f.Spec.Rings[3].Selector.MatchLabels = map[string]string{"gpufleet.dev/ring": "nope"}
		}, `spec.rings[3].selector: ring training selects no cluster`},
		{"cluster in two rings", func(f *fleetfile.Fleet) {
			f.Spec.Rings[3].Selector.MatchLabels = nil
		}, `spec.clusters[0]: cluster canary-a is in rings canary (spec.rings[0]) and training (spec.rings[3])`},
		{"window never fits a step", func(f *fleetfile.Fleet) {
			f.Spec.Windows[0].Duration = "1h"
		}, `spec.windows[0].duration: "1h" leaves 45m0s after the finish margin, less than a step (spec.upgrade.stepDuration 1h0m0s)`},
		{"window never opens", func(f *fleetfile.Fleet) {
			f.Spec.Windows[0].Schedule = "0 1 30 2 *"
		}, `spec.windows[0].schedule: "0 1 30 2 *" never opens in the coming year`},
		{"no action", func(f *fleetfile.Fleet) {
			f.Spec.Upgrade.Actions[0].Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
		}, `spec.upgrade.actions: no action selects cluster canary-a (spec.clusters[0])`},
		{"no target", func(f *fleetfile.Fleet) { f.Spec.Target = nil }, `spec.target.version: required`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := loadFleet(t, tc.mutate)
			_, err := MakePlan(f, infos(f, nil), monday0930)
			var le *LintError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a lint error", err)
			}
			var all []string
			for _, p := range le.Problems {
				if strings.Contains(p.Error(), "\n") {
					t.Errorf("more than one line: %q", p.Error())
				}
				all = append(all, p.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tc.want) {
				t.Errorf("problems\n%s\nwant %q", strings.Join(all, "\n"), tc.want)
			}
		})
	}
}

func TestPlanUnreachable(t *testing.T) {
	f := loadFleet(t, nil)
	in := infos(f, nil)
	delete(in, "prod-euw1")
	if _, err := MakePlan(f, in, monday0930); !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "prod-euw1") {
		t.Fatalf("err = %v", err)
	}
}

// TestPlanDRHalvesApartByBatch: both halves of a DR pair in one ring are
// planned in different batches (the seed's rule kept by batch, not by
// refusing the ring).
func TestPlanDRHalvesApartByBatch(t *testing.T) {
	f := loadFleet(t, func(f *fleetfile.Fleet) {
		f.Spec.Clusters[5].Labels["gpufleet.dev/ring"] = "prod"
		f.Spec.Rings = append(f.Spec.Rings[:2], f.Spec.Rings[3:]...)
	})
	p := mustPlan(t, f, infos(f, nil), monday0930)
	r, _ := p.Ring("prod")
	for _, b := range r.Batches {
		if slices.Contains(b.Clusters, "prod-use1") && slices.Contains(b.Clusters, "prod-usw2") {
			t.Fatalf("DR halves in one batch: %s", batches(*r))
		}
	}
}
