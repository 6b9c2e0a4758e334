package inference

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

const h100 = "NVIDIA-H100-80GB-HBM3"

func pdbMin(v intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb"}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &v}}
}

func pdbMax(v intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb"}, Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &v}}
}

// model builds a model with its replicas spread over nodes as given (all
// Ready), weights bytes from object-store.
func model(name string, gpus int64, bytes int64, pdb *policyv1.PodDisruptionBudget, onPool map[string]int32) *Model {
	m := &Model{Key: "serving/" + name, Namespace: "serving", Name: name, GPUsPerReplica: gpus, Product: h100,
		Weights: &Weights{Bytes: bytes, Source: SourceObjectStore, From: "annotation"}, OnPool: onPool, OnPoolReady: map[string]int32{}}
	for n, v := range onPool {
		m.OnPoolReady[n] = v
		m.Replicas += v
	}
	m.Desired, m.Ready = m.Replicas, m.Replicas
	if pdb != nil {
		m.pdb, m.PDB, m.PDBRule = pdb, pdb.Name, pdbRule(pdb)
	}
	return m
}

func pool(nodes []string, headroomGPUs []int64, models ...*Model) *Pool {
	p := &Pool{Models: models}
	for _, n := range nodes {
		p.Nodes = append(p.Nodes, PoolNode{Name: n, GPUs: 8, Product: h100})
	}
	for i, g := range headroomGPUs {
		p.Headroom = append(p.Headroom, HeadroomNode{Name: "spare-" + string(rune('a'+i)), Product: h100, FreeGPUs: g})
	}
	return p
}

var bw = Bandwidth{SourceObjectStore: 1_000_000} // 1 MB/s

func TestPDBFloor(t *testing.T) {
	for _, tc := range []struct {
		pdb      *policyv1.PodDisruptionBudget
		expected int32
		want     int32
	}{
		{pdbMin(intstr.FromInt32(2)), 6, 2},
		{pdbMin(intstr.FromString("50%")), 5, 3}, // rounds up
		{pdbMax(intstr.FromInt32(1)), 4, 3},
		{pdbMax(intstr.FromString("50%")), 5, 2}, // maxUnavailable rounds up too: 3 may go
		{pdbMax(intstr.FromInt32(9)), 4, 0},
		{nil, 4, 0},
	} {
		got, err := PDBFloor(tc.pdb, tc.expected)
		if err != nil || got != tc.want {
			t.Errorf("PDBFloor(%v, %d) = %d, %v; want %d", tc.pdb, tc.expected, got, err, tc.want)
		}
	}
}

// Two models on four nodes with room for every replica and a surge
// outside the pool: the surge covers one node's replicas, so each wave
// keeps every model at its replicas, and the ETA adds the cold starts.
func TestComputeSurgeKeepsFloors(t *testing.T) {
	a := model("llama", 4, 8_000_000, pdbMax(intstr.FromString("50%")), map[string]int32{"p0": 1, "p1": 1, "p2": 1, "p3": 1})
	b := model("mistral", 2, 4_000_000, pdbMin(intstr.FromInt32(2)), map[string]int32{"p0": 1, "p1": 1, "p2": 1, "p3": 1})
	p := pool([]string{"p0", "p1", "p2", "p3"}, []int64{8, 8, 8, 8}, a, b)
	plan := Compute(p, Options{MinServing: 0.75, NodesPerWave: 1, Bandwidth: bw})
	if plan.Refused() {
		t.Fatalf("refused: %v", plan.Refusals)
	}
	if plan.Surge == nil || plan.Surge.Added["serving/llama"] != 1 || plan.Surge.Added["serving/mistral"] != 1 {
		t.Fatalf("surge = %+v, want +1 each", plan.Surge)
	}
	if got, want := plan.Surge.ColdStart, 12*time.Second; got != want {
		t.Errorf("surge cold start %s, want %s (12 MB at 1 MB/s)", got, want)
	}
	if len(plan.Waves) != 4 {
		t.Fatalf("%d waves, want 4 (one node each)", len(plan.Waves))
	}
	for _, w := range plan.Waves {
		if w.ServingDuring["serving/llama"] != 4 || w.ServingAfter["serving/llama"] != 5 {
			t.Errorf("wave %d llama during %d after %d, want 4 and 5", w.Index, w.ServingDuring["serving/llama"], w.ServingAfter["serving/llama"])
		}
		if w.ColdStart != 12*time.Second {
			t.Errorf("wave %d cold start %s, want 12s", w.Index, w.ColdStart)
		}
	}
	if plan.ETA != 5*12*time.Second {
		t.Errorf("ETA %s, want 1m0s", plan.ETA)
	}
	// What the run says before its first wave (and its dry run first).
	if got, want := plan.ETALine(), "ETA 1m0s: surge 12s + 4 waves, each a cold start of bytes over hydrate bandwidth (scheduling, image pulls and evictions not included)"; got != want {
		t.Errorf("ETALine() = %q, want %q", got, want)
	}
	mp := plan.Model("serving/llama")
	if mp.PDBFloor != 2 || mp.MinServingFloor != 3 || mp.Floor != 3 {
		t.Errorf("llama floors pdb %d min-serving %d floor %d, want 2 3 3", mp.PDBFloor, mp.MinServingFloor, mp.Floor)
	}
}

// Without a wave cap the plan groups nodes while the floors and the cold
// start bound allow.
func TestComputeGroupsNodes(t *testing.T) {
	a := model("llama", 2, 10_000_000, pdbMin(intstr.FromInt32(1)), map[string]int32{"p0": 1, "p1": 1, "p2": 1, "p3": 1})
	p := pool([]string{"p0", "p1", "p2", "p3"}, []int64{8, 8}, a)
	plan := Compute(p, Options{MinServing: 0.5, NoSurge: true, Bandwidth: bw, MaxColdStart: 25 * time.Second})
	if plan.Refused() {
		t.Fatalf("refused: %v", plan.Refusals)
	}
	var got [][]string
	for _, w := range plan.Waves {
		got = append(got, w.Nodes)
	}
	// Two at a time: a third node breaks the 25s bound (30 MB at 1 MB/s).
	if diff := cmp.Diff([][]string{{"p0", "p1"}, {"p2", "p3"}}, got); diff != "" {
		t.Errorf("waves (-want +got):\n%s", diff)
	}
	if plan.Waves[0].ServingDuring["serving/llama"] != 2 {
		t.Errorf("during wave 1: %d Ready, want 2", plan.Waves[0].ServingDuring["serving/llama"])
	}
}

// No headroom: the first drain takes the model below --min-serving and
// its replacements find no GPU: refused, with the reason.
func TestComputeRefusesBelowMinServing(t *testing.T) {
	a := model("llama", 4, 8_000_000, pdbMin(intstr.FromInt32(1)), map[string]int32{"p0": 2, "p1": 2})
	p := pool([]string{"p0", "p1"}, nil, a)
	plan := Compute(p, Options{MinServing: 0.75, Bandwidth: bw})
	if !plan.Refused() {
		t.Fatal("not refused")
	}
	if !strings.Contains(plan.Refusals[0], "takes model serving/llama to 2 Ready replicas while its replacements hydrate, below --min-serving (3 of 4)") {
		t.Errorf("refusal: %s", plan.Refusals[0])
	}
	if plan.Waves[0].Below[0] != "serving/llama" {
		t.Errorf("wave 1 below: %v", plan.Waves[0].Below)
	}
}

// A budget that allows no disruption blocks the drain for ever; one whose
// replacements find no GPU leaves the model under it.
func TestComputeRefusesBelowPDB(t *testing.T) {
	a := model("llama", 4, 8_000_000, pdbMin(intstr.FromInt32(2)), map[string]int32{"p0": 1, "p1": 1})
	plan := Compute(pool([]string{"p0", "p1"}, nil, a), Options{Bandwidth: bw})
	if !plan.Refused() || !strings.Contains(strings.Join(plan.Refusals, "\n"), "allows no disruption of model serving/llama") {
		t.Errorf("refusals: %v", plan.Refusals)
	}
	b := model("mistral", 4, 8_000_000, pdbMin(intstr.FromInt32(1)), map[string]int32{"p0": 2})
	plan = Compute(pool([]string{"p0"}, nil, b), Options{Bandwidth: bw})
	if !strings.Contains(strings.Join(plan.Refusals, "\n"), "wave 1 (p0) takes model serving/mistral below its PodDisruptionBudget pdb (minAvailable 1: at least 1): 2 replacements find no free GPU") {
		t.Errorf("refusals: %v", plan.Refusals)
	}
}

// A budget that lets fewer replicas go than a node holds paces the drain:
// the plan notes it and counts only what goes at once.
func TestComputePDBPacesNode(t *testing.T) {
	a := model("llama", 4, 8_000_000, pdbMax(intstr.FromInt32(1)), map[string]int32{"p0": 2})
	plan := Compute(pool([]string{"p0"}, []int64{8}, a), Options{NoSurge: true, Bandwidth: bw})
	if plan.Refused() {
		t.Fatalf("refused: %v", plan.Refusals)
	}
	w := plan.Waves[0]
	if w.AtOnce["serving/llama"] != 1 || w.ServingDuring["serving/llama"] != 1 || w.ServingAfter["serving/llama"] != 2 {
		t.Errorf("wave: %+v", w)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "lets 1 of the 2 Ready replicas of serving/llama go at once") {
		t.Errorf("notes: %v", plan.Notes)
	}
}

// Missing weights, bandwidth and a second PDB are refusals that say what
// to do; gangs on the pool send it to the gang drain.
func TestComputeRefusesMissingInputs(t *testing.T) {
	a := model("llama", 4, 8_000_000, nil, map[string]int32{"p0": 1})
	a.Weights, a.WeightsProblem = nil, "model serving/llama: no weight size: kubectl annotate ..."
	b := model("mistral", 2, 1, nil, map[string]int32{"p0": 1})
	b.Weights.Source = SourceRegistry
	p := pool([]string{"p0"}, []int64{8}, a, b)
	p.Gangs = []string{"train/JobSet/pretrain"}
	plan := Compute(p, Options{Bandwidth: bw})
	got := strings.Join(plan.Refusals, "\n")
	for _, want := range []string{"training gang train/JobSet/pretrain", "no weight size", "pass --hydrate-bandwidth registry="} {
		if !strings.Contains(got, want) {
			t.Errorf("refusals lack %q:\n%s", want, got)
		}
	}
}

// A resumed run: the surge is applied, one node drained; the plan adds
// no surge and plans the rest.
func TestComputeResume(t *testing.T) {
	a := model("llama", 4, 8_000_000, pdbMin(intstr.FromInt32(2)), map[string]int32{"p1": 1})
	// One replica moved off p0 is still loading: it counts from the
	// first wave on, which the run starts only once it is Ready.
	a.Replicas, a.Desired, a.Surged, a.SurgedBy, a.Ready, a.Loading = 2, 3, 1, "gd-1", 2, 1
	p := pool([]string{"p0", "p1"}, []int64{8}, a)
	p.Nodes[0].Drained = true
	p.Nodes[0].RunID, p.Nodes[0].State = "gd-1", gang.NodeDrained
	p.Nodes[1].RunID, p.Nodes[1].State = "gd-1", gang.NodeCordoned
	plan := Compute(p, Options{Bandwidth: bw})
	if plan.Refused() {
		t.Fatalf("refused: %v", plan.Refusals)
	}
	if plan.Surge != nil {
		t.Errorf("surge planned again: %+v", plan.Surge)
	}
	if diff := cmp.Diff([]string{"p0"}, plan.Drained); diff != "" {
		t.Errorf("drained: %s", diff)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "1 replica outside the pool is still loading") {
		t.Errorf("notes: %v", plan.Notes)
	}
	if len(plan.Waves) != 1 || plan.Waves[0].Nodes[0] != "p1" || plan.Model("serving/llama").Surge != 1 || plan.Waves[0].ServingDuring["serving/llama"] != 2 {
		t.Errorf("plan: %+v", plan)
	}
}

func TestParseWeightsAndBandwidth(t *testing.T) {
	k, w, err := ParseWeightsFlag("serving/llama-70b=140Gi@registry")
	if err != nil || k != "serving/llama-70b" || w.Bytes != 140<<30 || w.Source != SourceRegistry {
		t.Errorf("got %s %+v %v", k, w, err)
	}
	for _, bad := range []string{"llama=1G", "serving/llama=lots", "serving/llama=1G@nfs", "serving/llama=-1G"} {
		if _, _, err := ParseWeightsFlag(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	b, err := ParseBandwidth([]string{"object-store=1250M/s,registry=2Gi/s", "shared-fs=500M"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Bandwidth{SourceObjectStore: 1_250_000_000, SourceRegistry: 2 << 30, SourceSharedFS: 500_000_000}, b); diff != "" {
		t.Errorf("bandwidth (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"object-store", "s3=1G/s", "object-store=fast", "object-store=1G/s,object-store=2G/s"} {
		if _, err := ParseBandwidth([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got := HydrateTime(140<<30, 1_250_000_000); got.Round(time.Second) != 120*time.Second {
		t.Errorf("140Gi at 1250M/s: %s", got)
	}
	if got := FormatBytes(150_300_000_000); got != "150.3 GB" {
		t.Errorf("FormatBytes: %s", got)
	}
}

// A surge left by a run that holds none of the nodes is refused: the new
// run would neither count it nor undo it.
func TestComputeRefusesForeignSurge(t *testing.T) {
	a := model("llama", 4, 8_000_000, nil, map[string]int32{"p0": 1})
	a.Surged, a.SurgedBy = 1, "gd-old"
	plan := Compute(pool([]string{"p0"}, []int64{8}, a), Options{Bandwidth: bw})
	if !strings.Contains(strings.Join(plan.Refusals, "\n"), "kubectl gang-drain restore gd-old --inference") {
		t.Errorf("refusals: %v", plan.Refusals)
	}
}

// The runbook and the fleet programme plan the run with the run's own
// defaults: a wave's cold start bounded at 15m, surge on.
func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	if DefaultMaxColdStart != 15*time.Minute || o.MaxColdStart != DefaultMaxColdStart || o.NoSurge || o.MinServing != 0 || o.NodesPerWave != 0 {
		t.Errorf("%+v", o)
	}
}

// A model under a budget shared with another model that alone covers the
// budget's floor is guaranteed no replica by it: the eviction API would
// let every one of its replicas go (the disruption controller counts the
// budget across all the pods it selects). The plan keeps one of it Ready
// all the same, and refuses the drain where it cannot.
func TestComputeSharedPDBKeepsOneOfEachModel(t *testing.T) {
	shared := pdbMin(intstr.FromInt32(4))
	big := model("llama-70b", 4, 8_000_000, shared, map[string]int32{"p0": 1, "p1": 1})
	small := model("llama-8b", 1, 1_000_000, shared, map[string]int32{})
	small.Replicas, small.Desired, small.Ready = 6, 6, 6
	plan := Compute(pool([]string{"p0", "p1"}, nil, big, small), Options{Bandwidth: bw, NoSurge: true})
	mp := plan.Model("serving/llama-70b")
	if mp.Floor != 1 || mp.PDBFloor != 0 || !strings.Contains(mp.FloorFrom, "1 kept") {
		t.Errorf("llama-70b floor %d (budget's own %d) from %q; want 1 kept: its budget guarantees it none", mp.Floor, mp.PDBFloor, mp.FloorFrom)
	}
	for _, w := range plan.Waves {
		if w.ServingDuring["serving/llama-70b"] < 1 && !slices.Contains(w.Below, "serving/llama-70b") {
			t.Errorf("wave %d takes llama-70b to %d without refusing it", w.Index, w.ServingDuring["serving/llama-70b"])
		}
	}
	if !plan.Refused() || !strings.Contains(strings.Join(plan.Refusals, "\n"), "model serving/llama-70b to 0 Ready replicas") {
		t.Errorf("refusals %q; want llama-70b refused at 0", plan.Refusals)
	}
	if !strings.Contains(strings.Join(plan.Notes, "\n"), "model serving/llama-70b: PodDisruptionBudget pdb guarantees it no replica") {
		t.Errorf("notes: %q", plan.Notes)
	}
	// With room for one replica outside the pool it drains one node at a
	// time and keeps one Ready.
	plan = Compute(pool([]string{"p0", "p1"}, []int64{4}, big, small), Options{Bandwidth: bw, NoSurge: true})
	if plan.Refused() || len(plan.Waves) != 2 {
		t.Errorf("with room for one: refusals %q, waves %d; want two waves", plan.Refusals, len(plan.Waves))
	}
}

// A budget whose floor the rest of what it selects covers at its expected
// count guarantees a model nothing, and the plan keeps one of it:
// (A) minAvailable 4 shared with mistral at 4 replicas, one still
// Pending, which covers the 4 alone once Ready; (B) minAvailable 50% also
// selecting 4 pods of a Deployment off the pool (its live expectedPods
// 6), which cover the 3 it asks alone.
func TestComputeKeepsOneUnderACoveredBudget(t *testing.T) {
	shared := pdbMin(intstr.FromInt32(4))
	llama := model("llama", 2, 8_000_000, shared, map[string]int32{"p0": 1, "p1": 1})
	mistral := model("mistral", 1, 4_000_000, shared, map[string]int32{"p0": 1, "p1": 2})
	mistral.Desired = 4
	plan := Compute(pool([]string{"p0", "p1"}, []int64{8}, llama, mistral), Options{Bandwidth: bw, NoSurge: true})
	if mp := plan.Model("serving/llama"); mp.PDBFloor != 0 || mp.keep() != 1 {
		t.Errorf("shared: llama guaranteed %d by its budget, kept %d; want 0 and 1 (mistral covers the floor at 4)", mp.PDBFloor, mp.keep())
	}

	half := pdbMin(intstr.FromString("50%"))
	half.Status.ExpectedPods = 6
	llama = model("llama", 2, 8_000_000, half, map[string]int32{"p0": 1, "p1": 1})
	plan = Compute(pool([]string{"p0", "p1"}, []int64{8}, llama), Options{Bandwidth: bw, NoSurge: true})
	mp := plan.Model("serving/llama")
	if mp.PDBFloor != 0 || mp.keep() != 1 {
		t.Errorf("outside pods: llama guaranteed %d by its budget, kept %d; want 0 and 1 (4 pods outside cover 3 of 6)", mp.PDBFloor, mp.keep())
	}
	notes := strings.Join(plan.Notes, "\n")
	if !strings.Contains(notes, "its floor of 3 (minAvailable 50% of 6) is covered by 4 pods outside the models") || !strings.Contains(notes, "also selects 4 pods outside the models") {
		t.Errorf("notes:\n%s", notes)
	}
	for _, w := range plan.Waves {
		if plan.Start["serving/llama"]-w.AtOnce["serving/llama"] < 1 {
			t.Errorf("wave %d takes llama to %d", w.Index, plan.Start["serving/llama"]-w.AtOnce["serving/llama"])
		}
	}
}

// A budget's floor shared with pods outside the models is said against
// the count it is taken of, naming them.
func TestComputeFloorFromNamesPodsOutside(t *testing.T) {
	five := pdbMin(intstr.FromInt32(5))
	five.Status.ExpectedPods = 6
	llama := model("llama", 2, 8_000_000, five, map[string]int32{"p0": 1, "p1": 1})
	plan := Compute(pool([]string{"p0", "p1"}, []int64{8}, llama), Options{Bandwidth: bw, NoSurge: true})
	if mp := plan.Model("serving/llama"); mp.PDBFloor != 1 || mp.FloorFrom != "PodDisruptionBudget pdb (minAvailable 5 of 6, shared with 4 pods outside the models)" {
		t.Errorf("llama floor %d from %q", mp.PDBFloor, mp.FloorFrom)
	}
}
