package fleetrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fakekube "k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// servingInfos are infos with canary-a's GPU pool holding inference
// workloads, as its inventory recorded them.
func servingInfos(f *fleetfile.Fleet, ip *pkgskew.InferencePool) map[string]ClusterInfo {
	in := infos(f, nil)
	inv := inventory("v1.38.1", "gpu-a", "v1.35.4")
	inv.Pools[0].Inference = ip
	in["canary-a"] = ClusterInfo{Inventory: inv, GPUs: 64}
	return in
}

func withBandwidth(f *fleetfile.Fleet) {
	f.Spec.Upgrade.HydrateBandwidth = map[string]string{"object-store": "1250M/s"}
}

// A pool that holds inference workloads drains with gang-drain run
// --inference and restores with --inference; its drain step's expected
// duration adds the planned cold starts, which push the cluster's
// projected end out by exactly the ETA. Another cluster's pools keep the
// gang drain.
func TestPlanInferencePool(t *testing.T) {
	f := loadFleet(t, withBandwidth)
	ip := &pkgskew.InferencePool{Models: 2, WithPDB: 2, Reason: "r", Waves: 3, ETASeconds: 5400, Bandwidth: "object-store=1250000000/s"}
	p := mustPlan(t, f, servingInfos(f, ip), monday0930)
	base := mustPlan(t, f, infos(f, nil), monday0930)
	c, _ := p.Cluster("canary-a")
	drain, _, _ := c.Step("pool-gpu-a-1-38-drain")
	restore, _, _ := c.Step("pool-gpu-a-1-38-restore")
	if drain.Inference == nil || restore.Inference == nil || drain.Inference.ETASeconds != 5400 {
		t.Fatalf("drain %+v, restore %+v", drain, restore)
	}
	if !strings.Contains(drain.Action, "gang-drain run --inference -l cloud.google.com/gke-nodepool=gpu-a") || !strings.Contains(drain.Action, "3 waves, ETA 1h30m0s at object-store=1250000000/s") {
		t.Errorf("drain action %q", drain.Action)
	}
	if !strings.Contains(restore.Action, "restore --inference") {
		t.Errorf("restore action %q", restore.Action)
	}
	if up, _, _ := c.Step("pool-gpu-a-1-38-upgrade"); up.Inference != nil {
		t.Errorf("upgrade step carries the inference drain: %+v", up)
	}
	if got := expectedDuration(f.Spec.Upgrade, drain); got != time.Hour+90*time.Minute {
		t.Errorf("drain expected %s", got)
	}
	bc, _ := base.Cluster("canary-a")
	if c.Projected == nil || bc.Projected == nil || c.Projected.End.Sub(bc.Projected.End) != 90*time.Minute || !c.Projected.Start.Equal(bc.Projected.Start) {
		t.Errorf("projected %+v, without inference %+v", c.Projected, bc.Projected)
	}
	other, _ := p.Cluster("canary-b")
	if d, _, _ := other.Step("pool-gpu-a-1-38-drain"); d.Inference != nil || strings.Contains(d.Action, "--inference") {
		t.Errorf("canary-b drain %+v", d)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w, "inference") {
			t.Errorf("warning %q", w)
		}
	}
}

// A drain with no hydrate bandwidth, or that would be refused as read, is
// a plan error naming the cluster, the pool and the fleet file fields to
// set (exit 2, as a lint problem), not a warning: the step would fail
// inside the window.
func TestPlanInferencePoolErrors(t *testing.T) {
	f := loadFleet(t, nil)
	for _, tc := range []struct {
		ip   *pkgskew.InferencePool
		want string
	}{
		{&pkgskew.InferencePool{Models: 1, WithPDB: 1, Reason: "r"}, "cluster canary-a: pool gpu-a holds inference workloads and its drain (gang-drain run --inference) has no hydrate bandwidth to pace by: set spec.upgrade.hydrateBandwidth or spec.clusters[].hydrateBandwidth for cluster canary-a"},
		{&pkgskew.InferencePool{Models: 1, WithPDB: 1, Reason: "r", ETASeconds: 60, Bandwidth: "object-store=1250000000/s", Refusals: []string{"model serving/llm: no weight size"}}, "cluster canary-a: pool gpu-a holds inference workloads and its drain (gang-drain run --inference) would be refused as read: model serving/llm: no weight size"},
	} {
		_, err := MakePlan(f, servingInfos(f, tc.ip), monday0930)
		var le *LintError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) || le.Problems[0].Field != "spec.upgrade.hydrateBandwidth" {
			t.Errorf("plan error %v, want a lint problem with %q", err, tc.want)
		}
	}
	// With a bandwidth and no refusal the plan has neither error nor
	// inference warning.
	p := mustPlan(t, f, servingInfos(f, &pkgskew.InferencePool{Models: 1, WithPDB: 1, Reason: "r", Bandwidth: "object-store=1250000000/s"}), monday0930)
	for _, w := range p.Warnings {
		if strings.Contains(w, "inference") {
			t.Errorf("warning %q", w)
		}
	}
}

// The step runs pkg/inference's run arguments with the cluster's hydrate
// bandwidth from the fleet file, and the restore scales the surge back.
func TestStepInferencePool(t *testing.T) {
	f := loadFleet(t, withBandwidth)
	plan := mustPlan(t, f, servingInfos(f, &pkgskew.InferencePool{Models: 1, WithPDB: 1, Reason: "r", ETASeconds: 60, Bandwidth: "object-store=1250000000/s"}), monday0930)
	plan.Run = "r1"
	st := tempStore(t)
	if _, err := FreezePlan(context.Background(), st, plan, false); err != nil {
		t.Fatal(err)
	}
	h := &harness{exec: &fakeExec{codes: map[string]int{}, nodes: map[string]*fakekube.Clientset{}}, kube: map[string]*fakekube.Clientset{}, clock: monday0930}
	cg := cli.NewTestClientGetter()
	cg.PerContext = map[string]*cli.TestClientGetter{}
	for _, c := range plan.Clusters {
		k := fakekube.NewClientset(gpuNode(c.Name+"-n1", "v1.35.4", true), gpuNode(c.Name+"-n2", "v1.35.4", true))
		h.kube[c.Name] = k
		h.exec.nodes[c.Context] = k
		cg.PerContext[c.Context] = cli.NewTestClientGetter().WithKube(k)
	}
	h.p = &Programme{Store: st, Plan: plan, Access: &Access{Getter: cg}, Exec: h.exec, Holder: "test/1", Now: func() time.Time { return h.clock }}
	h.runCluster(t, "canary-a")
	cmds := strings.Join(h.exec.commands(), "\n")
	s := h.state(t, "canary-a")
	run := s.Step("pool-gpu-a-1-38-drain").RunID
	for _, want := range []string{
		"kubectl-gang_drain run --inference -l cloud.google.com/gke-nodepool=gpu-a --hydrate-bandwidth object-store=1250000000/s --run-id " + run + " --context canary-a -o json",
		"kubectl-gang_drain restore " + run + " --inference --context canary-a -o json",
	} {
		if !strings.Contains(cmds, want) {
			t.Errorf("commands lack %q:\n%s", want, cmds)
		}
	}
}

// As in the runbook, a pool with a model outside any PodDisruptionBudget
// keeps the gang drain, and the plan says why.
func TestPlanInferencePoolModelWithoutPDB(t *testing.T) {
	f := loadFleet(t, withBandwidth)
	p := mustPlan(t, f, servingInfos(f, &pkgskew.InferencePool{Models: 2, WithPDB: 1, Reason: "r", ETASeconds: 60}), monday0930)
	c, _ := p.Cluster("canary-a")
	d, _, _ := c.Step("pool-gpu-a-1-38-drain")
	if d.Inference != nil || strings.Contains(d.Action, "--inference") {
		t.Errorf("drain %+v", d)
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "pool gpu-a holds 2 model Deployments, 1 behind a PodDisruptionBudget") {
		t.Errorf("warnings %q", p.Warnings)
	}
}

// An inference pool's drain takes the file's drain settings but an
// --eviction-timeout shorter than a wave's cold start (the run's
// --max-cold-start bound): a model's budget holds an eviction until the
// replacements it waits for have loaded their weights. A training pool's
// drain keeps it.
func TestInferenceDrainArgsEvictionTimeout(t *testing.T) {
	f := loadFleet(t, func(f *fleetfile.Fleet) {
		withBandwidth(f)
		f.Spec.Upgrade.Drain = &fleetfile.Drain{OnTimeout: "abort", EvictionTimeout: "300s"}
	})
	p := &Programme{Plan: mustPlan(t, f, servingInfos(f, &pkgskew.InferencePool{Models: 1, WithPDB: 1, Reason: "r", Bandwidth: "object-store=1250000000/s"}), monday0930)}
	inf := Step{Selector: "pool=a", Inference: &StepInference{Models: 1}}
	got, err := p.drainArgs("canary-a", inf, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); strings.Contains(s, "--eviction-timeout") || !strings.Contains(s, "--on-timeout abort") || !strings.Contains(s, "--inference") {
		t.Errorf("inference drain args %q", s)
	}
	train, _ := p.drainArgs("canary-a", Step{Selector: "pool=a"}, "r1")
	if s := strings.Join(train, " "); !strings.Contains(s, "--eviction-timeout 5m0s") {
		t.Errorf("training drain args %q", s)
	}
	f.Spec.Upgrade.Drain.EvictionTimeout = "20m"
	got, _ = p.drainArgs("canary-a", inf, "r1")
	if s := strings.Join(got, " "); !strings.Contains(s, "--eviction-timeout 20m0s") {
		t.Errorf("inference drain args with a long eviction timeout %q", s)
	}
}

// The plan's ETA is planned as the drain step's run runs: its default
// --max-cold-start, not an unbounded wave.
func TestCollectOptionsRunDefaults(t *testing.T) {
	bw := collectBandwidth(loadFleet(t, withBandwidth), "canary-a")
	o := collectOptions(bw)
	if o.MaxColdStart != inference.DefaultMaxColdStart || o.NoSurge || len(o.Bandwidth) == 0 {
		t.Errorf("%+v", o)
	}
}
