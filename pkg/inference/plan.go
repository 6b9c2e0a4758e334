package inference

// The plan of an inference pool's drain: surge, waves, cold-start times,
// serving capacity per model at every step, the ETA, and the reasons to
// refuse it.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// DefaultMaxColdStart is the MaxColdStart of `kubectl gang-drain plan
// --inference` and `run --inference` when --max-cold-start is not given:
// the one source of it for the commands and for the runbook's and the
// fleet programme's plans of the run, so that their waves and ETA are the
// run's.
const DefaultMaxColdStart = 15 * time.Minute

// DefaultOptions are the options of `kubectl gang-drain run --inference`
// with none of its shaping flags given: surge on, MaxColdStart
// DefaultMaxColdStart, no --min-serving, no --nodes-per-wave.
func DefaultOptions() Options {
	return Options{MaxColdStart: DefaultMaxColdStart}
}

// Options shape a plan.
type Options struct {
	// MinServing is the fraction (0 to 1) of each model's replicas that
	// must stay Ready at every step, on top of its PodDisruptionBudget.
	MinServing float64
	// NodesPerWave caps the nodes drained at once (0: no cap beyond the
	// floors and MaxColdStart).
	NodesPerWave int
	// MaxColdStart bounds a wave's cold start: the bytes its replacements
	// hydrate at once from each source stay within that source's
	// bandwidth times this (0: no bound).
	MaxColdStart time.Duration
	// NoSurge plans without surging the models first.
	NoSurge bool
	// Bandwidth is the hydrate bandwidth of each weight source.
	Bandwidth Bandwidth
	// AcceptNoReadinessProbe runs models whose serving container has no
	// readinessProbe (a note each); otherwise the plan refuses them: their
	// Ready means the process started, not that the weights are loaded,
	// so the waves would not wait for the weights.
	AcceptNoReadinessProbe bool
}

// ModelPlan is a model with its floor and planned surge.
type ModelPlan struct {
	*Model
	// Floor is the fewest Ready replicas the plan allows: the largest of
	// PDBFloor (the budget's desiredHealthy at the surged replica count,
	// which the eviction API enforces; under a budget shared with other
	// models, what is left of it once they count), MinServingFloor
	// (--min-serving of the replicas, which the plan's waves keep) and
	// NoPDBFloor (1 for a model that serves whose budget keeps none of it:
	// no PodDisruptionBudget, or a shared one the other models cover;
	// nothing else stops a drain from evicting every replica at once).
	Floor           int32  `json:"floor"`
	PDBFloor        int32  `json:"pdbFloor"`
	MinServingFloor int32  `json:"minServingFloor"`
	NoPDBFloor      int32  `json:"noPDBFloor,omitempty"`
	FloorFrom       string `json:"floorFrom"`
	// Surge is the replicas added before the first drain (applied earlier
	// by this run when Model.Surged is set).
	Surge int32 `json:"surge"`
}

// keep is the floor the plan's waves and the run's gate keep themselves
// (the eviction API keeps PDBFloor): --min-serving, and one replica of a
// model with no PodDisruptionBudget.
func (mp *ModelPlan) keep() int32 { return max(mp.MinServingFloor, mp.NoPDBFloor) }

// keepWord says where keep comes from, for a refusal.
func (mp *ModelPlan) keepWord() string {
	if mp.NoPDBFloor > mp.MinServingFloor && mp.pdb != nil {
		return fmt.Sprintf("its floor of %d: PodDisruptionBudget %s keeps none of it", mp.NoPDBFloor, mp.PDB)
	}
	if mp.NoPDBFloor > mp.MinServingFloor {
		return fmt.Sprintf("its floor of %d: no PodDisruptionBudget", mp.NoPDBFloor)
	}
	return fmt.Sprintf("--min-serving (%d of %d)", mp.MinServingFloor, mp.Replicas)
}

// Phase is the surge before the first wave.
type Phase struct {
	// Added are the replicas each model gains.
	Added        map[string]int32 `json:"added"`
	HydrateBytes map[Source]int64 `json:"hydrateBytes"`
	ColdStart    time.Duration    `json:"-"`
	// ColdStartSeconds is ColdStart in seconds.
	ColdStartSeconds float64          `json:"coldStartSeconds"`
	ServingAfter     map[string]int32 `json:"servingAfter"`
}

// Wave is a set of nodes drained at once.
type Wave struct {
	Index int      `json:"index"`
	Nodes []string `json:"nodes"`
	// Displaced are the model replicas the wave evicts; Placed those whose
	// replacements find a free GPU outside the pool, Unplaced the rest
	// (Pending until the pool is back).
	Displaced map[string]int32 `json:"displaced"`
	Placed    map[string]int32 `json:"placed"`
	Unplaced  map[string]int32 `json:"unplaced,omitempty"`
	// AtOnce are the Ready replicas each model loses at once: the
	// displaced ones, or fewer when its PodDisruptionBudget paces them.
	AtOnce map[string]int32 `json:"atOnce"`
	// HydrateBytes are the bytes the replacements load at once, per source;
	// ColdStart is the longest source's bytes over its bandwidth.
	HydrateBytes     map[Source]int64 `json:"hydrateBytes"`
	ColdStart        time.Duration    `json:"-"`
	ColdStartSeconds float64          `json:"coldStartSeconds"`
	// ServingDuring is each model's Ready replicas while the replacements
	// hydrate, ServingAfter once they are Ready.
	ServingDuring map[string]int32 `json:"servingDuring"`
	ServingAfter  map[string]int32 `json:"servingAfter"`
	// Below lists the models under their floor at this wave.
	Below []string `json:"below,omitempty"`
}

// Plan is the drain of an inference pool, step by step.
type Plan struct {
	Models []ModelPlan `json:"models"`
	// Start is each model's Ready replicas now.
	Start    map[string]int32 `json:"start"`
	Surge    *Phase           `json:"surge,omitempty"`
	Waves    []Wave           `json:"waves"`
	Headroom int64            `json:"headroomGPUs"`
	// Drained are the pool's nodes a run drained already (resume).
	Drained []string `json:"drained,omitempty"`
	// ETA is the surge's and every wave's cold start, one after another.
	ETA        time.Duration `json:"-"`
	ETASeconds float64       `json:"etaSeconds"`
	// Refusals say why the plan must not run; Notes what it cannot help.
	Refusals []string `json:"refusals,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

// Refused reports whether the plan must not run.
func (p *Plan) Refused() bool { return len(p.Refusals) > 0 }

// Model returns the model plan of key, or nil.
func (p *Plan) Model(key string) *ModelPlan {
	for i := range p.Models {
		if p.Models[i].Key == key {
			return &p.Models[i]
		}
	}
	return nil
}

// PDBFloor is the number of healthy pods a PodDisruptionBudget keeps when
// expected pods are wanted: the disruption controller's desiredHealthy
// (kubernetes/kubernetes@v1.37.2 pkg/controller/disruption/disruption.go,
// getExpectedPodCount): maxUnavailable, scaled against the expected count
// rounding up, is subtracted from it; minAvailable is taken as it is when
// a number, scaled rounding up when a percentage.
func PDBFloor(pdb *policyv1.PodDisruptionBudget, expected int32) (int32, error) {
	if pdb == nil {
		return 0, nil
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		mu, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, err
		}
		return max(expected-int32(mu), 0), nil
	case pdb.Spec.MinAvailable != nil:
		if pdb.Spec.MinAvailable.Type == intstr.Int {
			return pdb.Spec.MinAvailable.IntVal, nil
		}
		v, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		return int32(v), err
	}
	return 0, nil
}

// Compute plans the drain of the pool's nodes that are not drained yet.
// It never touches the cluster.
func Compute(pool *Pool, o Options) *Plan {
	plan := &Plan{Start: map[string]int32{}}
	var undrained []string
	for _, n := range pool.Nodes {
		if n.Drained {
			plan.Drained = append(plan.Drained, n.Name)
		} else {
			undrained = append(undrained, n.Name)
		}
	}
	free := newPlacement(pool)
	for _, h := range pool.Headroom {
		plan.Headroom += h.FreeGPUs
	}
	active := map[string]bool{}
	for _, n := range pool.Nodes {
		if n.RunID != "" && n.State.Active() {
			active[n.RunID] = true
		}
	}
	for _, m := range pool.Models {
		if m.SurgedBy != "" && !active[m.SurgedBy] {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("deployment %s carries the surge of run %s, which runs on none of these nodes: undo it first with `kubectl gang-drain restore %s --inference`", m.Key, m.SurgedBy, m.SurgedBy))
		}
	}
	for _, g := range pool.Gangs {
		plan.Refusals = append(plan.Refusals, fmt.Sprintf("training gang %s has ranks on the pool: drain it with `kubectl gang-drain run` (checkpoint-and-yield), not --inference", g))
	}
	plan.Notes = append(plan.Notes, pool.Notes...)
	if len(pool.Models) == 0 && len(undrained) > 0 {
		plan.Notes = append(plan.Notes, "no model Deployment (pods asking for GPUs) runs on the pool: it drains as any pool does")
	}
	models := make([]*Model, len(pool.Models))
	copy(models, pool.Models)
	sort.Slice(models, func(i, j int) bool { return models[i].Key < models[j].Key })
	needSource := map[Source][]string{}
	for _, m := range models {
		plan.Models = append(plan.Models, ModelPlan{Model: m, Surge: m.Surged})
		plan.Start[m.Key] = m.Ready
		if m.WeightsProblem != "" {
			plan.Refusals = append(plan.Refusals, m.WeightsProblem)
		} else if m.Weights != nil {
			if _, ok := o.Bandwidth[m.Weights.Source]; !ok {
				needSource[m.Weights.Source] = append(needSource[m.Weights.Source], m.Key)
			}
		}
		if m.PDBProblem != "" {
			plan.Refusals = append(plan.Refusals, m.PDBProblem)
		}
		if len(m.NoReadinessProbe) > 0 {
			what := fmt.Sprintf("model %s: serving container %s has no readinessProbe or startupProbe: its Ready means the process started, not that the weights are loaded, so the waves would not wait for them",
				m.Key, strings.Join(m.NoReadinessProbe, ", "))
			if o.AcceptNoReadinessProbe {
				plan.Notes = append(plan.Notes, what+" (accepted with --accept-no-readiness-probe)")
			} else {
				plan.Refusals = append(plan.Refusals, what+"; add one on the server's health endpoint (vLLM /health, TGI /health, Triton /v2/health/ready: docs/inference.md), or pass --accept-no-readiness-probe")
			}
		}
	}
	for _, s := range sortedSources(needSource) {
		plan.Refusals = append(plan.Refusals, fmt.Sprintf("no hydrate bandwidth for source %s (models %s): pass --hydrate-bandwidth %s=<bytes per second, e.g. 1250M/s>", s, strings.Join(needSource[s], ", "), s))
	}

	// 1. Surge: each model gains up to the most replicas it has on one
	// node, from the headroom left once every displaced replica has a
	// place, round robin over the models.
	if !o.NoSurge && len(undrained) > 0 {
		// Every replica on the pool is displaced by the end: the pool's
		// nodes hold none of them then.
		scratch := free.clone()
		scratch.evict(undrained)
		for _, m := range models {
			for i := int32(0); i < m.OnPoolTotal(); i++ {
				scratch.place(m)
			}
		}
		target := map[string]int32{}
		for _, m := range models {
			if m.Surged > 0 {
				continue // applied earlier by this run
			}
			if m.Autoscaler != "" {
				// The autoscaler sets spec.replicas: back to maxReplicas at
				// once when above it ("Current number of replicas above
				// Spec.MaxReplicas"), else to what its metrics want once
				// the downscale stabilization window (5m by default) has
				// passed (kubernetes/kubernetes@v1.37.2
				// pkg/controller/podautoscaler/horizontal.go and
				// config/v1alpha1/defaults.go), so a surge would not stay.
				plan.Notes = append(plan.Notes, fmt.Sprintf("model %s: no surge: HorizontalPodAutoscaler %s sets its replicas and would scale a surge away; to surge it, raise the autoscaler's minReplicas for the drain and plan again", m.Key, m.Autoscaler))
				continue
			}
			if m.GitOps != "" {
				// A GitOps sync puts spec.replicas back to its source
				// (Argo CD's self-heal, Flux's interval), so a surge would
				// not stay and the run would wait on a budget planned at
				// the surged count.
				plan.Notes = append(plan.Notes, fmt.Sprintf("model %s: no surge: it is applied by %s, whose sync would put its replicas back; to surge it, raise its replicas in the source (or pause the sync) for the drain and plan again", m.Key, m.GitOps))
				continue
			}
			for _, n := range undrained {
				target[m.Key] = max(target[m.Key], m.OnPool[n])
			}
		}
		added := map[string]int32{}
		for more := true; more; {
			more = false
			for _, m := range models {
				// The surge is placed with the pool's replicas still on
				// it (free) and must leave room for all of them once
				// displaced (scratch).
				if target[m.Key] <= added[m.Key] || free.find(m) < 0 || !scratch.place(m) {
					continue
				}
				free.place(m)
				added[m.Key]++
				more = true
			}
		}
		for _, m := range models {
			if n := target[m.Key] - added[m.Key]; n > 0 && free.blocked[m.Key] != "" {
				plan.Notes = append(plan.Notes, fmt.Sprintf("model %s: surge of %d, not %d%s", m.Key, added[m.Key], target[m.Key], free.why(m.Key)))
			}
		}
		if len(added) > 0 {
			ph := &Phase{Added: added, HydrateBytes: map[Source]int64{}, ServingAfter: map[string]int32{}}
			for i := range plan.Models {
				mp := &plan.Models[i]
				mp.Surge += added[mp.Key]
				if mp.Weights != nil {
					if n := added[mp.Key]; n > 0 {
						ph.HydrateBytes[mp.Weights.Source] += int64(n) * mp.Weights.Bytes
					}
				}
				ph.ServingAfter[mp.Key] = mp.Ready + mp.Loading + added[mp.Key]
			}
			ph.ColdStart = coldStart(ph.HydrateBytes, o.Bandwidth)
			ph.ColdStartSeconds = ph.ColdStart.Seconds()
			plan.Surge = ph
		} else if plan.Headroom == 0 {
			plan.Notes = append(plan.Notes, "no free GPU of the pool's product outside it: no surge, and each displaced replica waits for the pool to come back")
		}
	}

	// 2. Floors, at the replica count the waves run with.
	serving := map[string]int32{}
	// A PodDisruptionBudget keeps its floor across every pod it selects,
	// whichever Deployment owns it: the disruption controller's expected
	// count is the scale of each controller of its pods and its healthy
	// count all of their Ready pods (kubernetes/kubernetes@v1.37.2
	// pkg/controller/disruption/disruption.go, getExpectedPodCount and
	// countHealthyPods). A budget selecting several models is computed
	// across them. Pods it selects outside the models are counted at the
	// budget's live expected count (status.expectedPods less the models'
	// replicas now): what a model is guaranteed by itself is the floor
	// less everything else the budget selects at its expected count, since
	// once those are Ready they cover the floor alone and the eviction API
	// lets every replica of the model go.
	budgets := newBudgets(plan.Models)
	for i := range plan.Models {
		mp := &plan.Models[i]
		serving[mp.Key] = mp.Ready + mp.Loading
		if plan.Surge != nil {
			serving[mp.Key] = plan.Surge.ServingAfter[mp.Key]
		}
	}
	for i := range plan.Models {
		mp := &plan.Models[i]
		desired := mp.Desired + mp.Surge - mp.Surged
		b := budgets.of(mp)
		pf, err := PDBFloor(mp.pdb, budgets.expected[b])
		if err != nil {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("model %s: PodDisruptionBudget %s: %v", mp.Key, mp.PDB, err))
		}
		// What the models must keep across them: the floor less the pods
		// outside them (taken as Ready, as the plan cannot wait for them).
		budgets.floor[b] = max(pf-budgets.outside[b], 0)
		// What the budget guarantees this model alone: its floor less
		// everything else it selects, at its expected count.
		mp.PDBFloor = 0
		if b != "" {
			mp.PDBFloor = max(pf-(budgets.expected[b]-desired), 0)
		}
		mp.MinServingFloor = int32(math.Ceil(o.MinServing*float64(mp.Replicas) - 1e-9))
		// A model that serves keeps one replica whatever its budget says:
		// with none, or under a budget whose floor the other models it
		// selects cover, the eviction API lets every replica go.
		if mp.PDBFloor < 1 && mp.PDBProblem == "" && mp.Replicas >= 1 && mp.Ready+mp.Loading >= 1 {
			mp.NoPDBFloor = 1
		}
		mp.Floor = max(mp.PDBFloor, mp.keep())
		switch {
		case mp.Floor == 0:
			mp.FloorFrom = "none"
		case mp.PDBFloor >= mp.keep() && len(budgets.coverers(b, mp.Key)) > 0:
			mp.FloorFrom = fmt.Sprintf("PodDisruptionBudget %s (%s of %d, shared with %s)", mp.PDB, mp.PDBRule, budgets.expected[b], strings.Join(budgets.coverers(b, mp.Key), ", "))
		case mp.PDBFloor >= mp.keep():
			mp.FloorFrom = fmt.Sprintf("PodDisruptionBudget %s (%s of %d)", mp.PDB, mp.PDBRule, desired)
		case mp.NoPDBFloor > mp.MinServingFloor && mp.pdb != nil:
			mp.FloorFrom = fmt.Sprintf("PodDisruptionBudget %s keeps none of it: 1 kept", mp.PDB)
		case mp.NoPDBFloor > mp.MinServingFloor:
			mp.FloorFrom = "no PodDisruptionBudget: 1 kept"
		default:
			mp.FloorFrom = fmt.Sprintf("--min-serving %g of %d", o.MinServing, mp.Replicas)
		}
		if mp.NoPDBFloor > 0 && mp.pdb != nil {
			why := fmt.Sprintf("its floor of %d (%s of %d)", pf, mp.PDBRule, budgets.expected[b])
			if others := budgets.coverers(b, mp.Key); len(others) > 0 {
				why = fmt.Sprintf("its floor of %d (%s of %d) is covered by %s", pf, mp.PDBRule, budgets.expected[b], strings.Join(others, ", "))
			}
			plan.Notes = append(plan.Notes, fmt.Sprintf("model %s: PodDisruptionBudget %s guarantees it no replica (%s), so the eviction API would let all of its replicas go: the plan keeps at least %d Ready (%s); give the model a budget of its own", mp.Key, mp.PDB, why, mp.Floor, mp.FloorFrom))
		} else if mp.NoPDBFloor > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("model %s has no PodDisruptionBudget: the plan keeps at least %d of its replicas Ready (%s), but nothing stops another drain from evicting them all; add one", mp.Key, mp.Floor, mp.FloorFrom))
		}
		// Replicas still loading their weights outside the pool count as
		// serving from the first wave on (serving above): the run waits
		// for them first.
		if mp.Loading > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("model %s: %s outside the pool %s still loading their weights: the first wave waits for them", mp.Key, cli.Plural(int(mp.Loading), "replica"), cli.Agree(int(mp.Loading), "is", "are")))
		}
		// A model with nothing left on the pool (its replicas displaced
		// by an interrupted run) loses nothing more: the run only waits
		// for its replacements.
		if mp.Ready+mp.Loading < mp.Floor && len(undrained) > 0 && mp.OnPoolTotal() > 0 {
			plan.Refusals = append(plan.Refusals, fmt.Sprintf("model %s serves %d Ready replicas now, below its floor of %d (%s), before any drain", mp.Key, mp.Ready+mp.Loading, mp.Floor, mp.FloorFrom))
		}
	}

	// 3. Waves. The eviction API keeps each model at its
	// PodDisruptionBudget by itself: past the disruptions the budget
	// allows, evictions wait for replacements to be Ready. The plan adds a
	// node to a wave while every model can lose the wave's Ready replicas
	// at once within its budget and keep its --min-serving floor, the
	// bytes hydrated at once stay within bandwidth x MaxColdStart, and the
	// wave is under NodesPerWave.
	for _, b := range budgets.sharedKeys() {
		plan.Notes = append(plan.Notes, fmt.Sprintf("PodDisruptionBudget %s selects the pods of models %s: its floor of %d (of %d) is kept across them", b, strings.Join(budgets.members[b], ", "), budgets.floor[b], budgets.expected[b]))
	}
	for _, b := range sortedKeys(budgets.outside) {
		if n := budgets.outside[b]; n > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("PodDisruptionBudget %s also selects %s outside the models (its expectedPods less their replicas): the plan counts them Ready; the run stops if they keep the budget from allowing the wave", b, cli.Plural(int(n), "pod")))
		}
	}
	// allowed are the disruptions a model's budget allows at once (all of
	// a model's Ready replicas with no budget).
	allowed := func(mp *ModelPlan) int32 {
		b := budgets.of(mp)
		if b == "" {
			return serving[mp.Key]
		}
		return max(budgets.serving(b, serving)-budgets.floor[b], 0)
	}
	fitsWave := func(nodes []string) bool {
		if o.NodesPerWave > 0 && len(nodes) > o.NodesPerWave {
			return false
		}
		d, _ := displaced(plan.Models, nodes)
		taken := map[string]int32{}
		for i := range plan.Models {
			mp := &plan.Models[i]
			b := budgets.of(mp)
			taken[b] += d[mp.Key]
			if (b == "" && d[mp.Key] > allowed(mp)) || (b != "" && taken[b] > allowed(mp)) || serving[mp.Key]-d[mp.Key] < mp.keep() {
				return false
			}
		}
		if o.MaxColdStart > 0 {
			bytes, _, _ := hydrate(plan.Models, nodes, free.clone())
			if coldStart(bytes, o.Bandwidth) > o.MaxColdStart {
				return false
			}
		}
		return true
	}
	var cur []string
	closeWave := func() {
		if len(cur) == 0 {
			return
		}
		w := Wave{Index: len(plan.Waves) + 1, Nodes: cur, AtOnce: map[string]int32{}, ServingDuring: map[string]int32{}, ServingAfter: map[string]int32{}}
		nodes := strings.Join(cur, ", ")
		dReady, dAll := displaced(plan.Models, cur)
		w.Displaced = dAll
		w.HydrateBytes, w.Placed, w.Unplaced = hydrate(plan.Models, cur, free)
		w.ColdStart = coldStart(w.HydrateBytes, o.Bandwidth)
		w.ColdStartSeconds = w.ColdStart.Seconds()
		// The disruptions each budget allows at the wave's start, shared by
		// the models it selects in order.
		left := map[string]int32{}
		for i := range plan.Models {
			mp := &plan.Models[i]
			if b := budgets.of(mp); b != "" {
				left[b] = allowed(mp)
			}
		}
		sharedAfter := map[string]int32{}
		for i := range plan.Models {
			mp := &plan.Models[i]
			b := budgets.of(mp)
			a, d := allowed(mp), dReady[mp.Key]
			if b != "" {
				a = left[b]
			}
			atOnce := min(d, a)
			left[b] -= atOnce
			during := serving[mp.Key] - atOnce
			after := serving[mp.Key] - d + w.Placed[mp.Key]
			w.AtOnce[mp.Key], w.ServingDuring[mp.Key], w.ServingAfter[mp.Key] = atOnce, during, after
			below := true
			switch {
			case d > 0 && allowed(mp) == 0:
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("wave %d (%s): PodDisruptionBudget %s/%s (%s) allows no disruption of model %s (%d Ready, at least %d kept): its evictions would wait for ever",
					w.Index, nodes, mp.Namespace, mp.PDB, mp.PDBRule, mp.Key, serving[mp.Key], mp.PDBFloor))
			case after < mp.PDBFloor && !budgets.shared(b):
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("wave %d (%s) takes model %s below its PodDisruptionBudget %s (%s: at least %d): %s no free GPU outside the pool, so it serves %d and the budget refuses further evictions%s",
					w.Index, nodes, mp.Key, mp.PDB, mp.PDBRule, mp.PDBFloor, findNoGPU(w.Unplaced[mp.Key]), after, free.why(mp.Key)))
			case during < mp.keep():
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("wave %d (%s) takes model %s to %d Ready replicas while its replacements hydrate, below %s: free %s more of %s outside the pool for surge, or lower --min-serving%s",
					w.Index, nodes, mp.Key, during, mp.keepWord(), cli.Plural(int(int64(mp.keep()-during)*mp.GPUsPerReplica), "GPU"), productWord(mp.Product), free.why(mp.Key)))
			case after < mp.keep():
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("after wave %d (%s) model %s serves %s, below %s: %s no free GPU outside the pool%s",
					w.Index, nodes, mp.Key, cli.Plural(int(after), "replica"), mp.keepWord(), findNoGPU(w.Unplaced[mp.Key]), free.why(mp.Key)))
			default:
				below = false
			}
			if below {
				w.Below = append(w.Below, mp.Key)
			}
			if d > a && a > 0 {
				plan.Notes = append(plan.Notes, fmt.Sprintf("wave %d: PodDisruptionBudget %s/%s lets %d of the %d Ready replicas of %s go at once; the drain evicts the rest as their replacements become Ready",
					w.Index, mp.Namespace, mp.PDB, a, d, mp.Key))
			}
			if n := w.Unplaced[mp.Key]; n > 0 {
				plan.Notes = append(plan.Notes, fmt.Sprintf("wave %d: %s of %s %s no free GPU outside the pool and %s Pending until the pool is back%s", w.Index, cli.Plural(int(n), "replica"), mp.Key, cli.Agree(int(n), "finds", "find"), cli.Agree(int(n), "stays", "stay"), free.why(mp.Key)))
			}
			sharedAfter[b] += after
		}
		for i := range plan.Models {
			mp := &plan.Models[i]
			serving[mp.Key] = w.ServingAfter[mp.Key]
		}
		for _, b := range budgets.sharedKeys() {
			if after := sharedAfter[b]; after < budgets.floor[b] {
				plan.Refusals = append(plan.Refusals, fmt.Sprintf("wave %d (%s) takes models %s below their shared PodDisruptionBudget %s (at least %d): replacements find no free GPU outside the pool, so they serve %d and the budget refuses further evictions",
					w.Index, nodes, strings.Join(budgets.members[b], ", "), b, budgets.floor[b], after))
				for _, k := range budgets.members[b] {
					if !slices.Contains(w.Below, k) {
						w.Below = append(w.Below, k)
					}
				}
			}
		}
		if o.MaxColdStart > 0 && len(cur) == 1 && w.ColdStart > o.MaxColdStart {
			plan.Notes = append(plan.Notes, fmt.Sprintf("node %s alone hydrates for %s, above --max-cold-start %s: its wave holds it alone", cur[0], w.ColdStart.Round(time.Second), o.MaxColdStart))
		}
		plan.Waves = append(plan.Waves, w)
		cur = nil
	}
	for _, n := range undrained {
		try := append(append([]string(nil), cur...), n)
		if len(cur) > 0 && !fitsWave(try) {
			closeWave()
			try = []string{n}
		}
		cur = try
	}
	closeWave()

	if plan.Surge != nil {
		plan.ETA += plan.Surge.ColdStart
	}
	for _, w := range plan.Waves {
		plan.ETA += w.ColdStart
	}
	plan.ETASeconds = plan.ETA.Seconds()
	return plan
}

// ETALine says the plan's ETA and what it is made of, as `run
// --inference` says it before its first wave: the cold starts of the surge
// and of each wave (bytes over bandwidth), each wave starting once the
// previous one's replicas are Ready.
func (p *Plan) ETALine() string {
	var surge time.Duration
	if p.Surge != nil {
		surge = p.Surge.ColdStart
	}
	waves := cli.Plural(len(p.Waves), "wave")
	return fmt.Sprintf("ETA %s: surge %s + %s, each a cold start of bytes over hydrate bandwidth (scheduling, image pulls and evictions not included)",
		p.ETA.Round(time.Second), surge.Round(time.Second), waves)
}

// displaced counts, per model, the Ready and all pods on nodes.
func displaced(models []ModelPlan, nodes []string) (ready, all map[string]int32) {
	ready, all = map[string]int32{}, map[string]int32{}
	for _, mp := range models {
		for _, n := range nodes {
			ready[mp.Key] += mp.OnPoolReady[n]
			all[mp.Key] += mp.OnPool[n]
		}
	}
	return ready, all
}

// hydrate drains nodes in free, places the replacements of their pods
// there (first fit, models in order) and sums the bytes they load, per
// source.
func hydrate(models []ModelPlan, nodes []string, free *placement) (bytes map[Source]int64, placed, unplaced map[string]int32) {
	bytes, placed, unplaced = map[Source]int64{}, map[string]int32{}, map[string]int32{}
	free.evict(nodes)
	for _, mp := range models {
		for _, n := range nodes {
			for i := int32(0); i < mp.OnPool[n]; i++ {
				if !free.place(mp.Model) {
					unplaced[mp.Key]++
					continue
				}
				placed[mp.Key]++
				if mp.Weights != nil {
					bytes[mp.Weights.Source] += mp.Weights.Bytes
				}
			}
		}
	}
	for k, v := range unplaced {
		if v == 0 {
			delete(unplaced, k)
		}
	}
	return bytes, placed, unplaced
}

// coldStart is the time the slowest source takes to serve its bytes; the
// sources serve at once, each at its own bandwidth.
func coldStart(bytes map[Source]int64, bw Bandwidth) time.Duration {
	var d time.Duration
	for s, b := range bytes {
		d = max(d, HydrateTime(b, bw[s]))
	}
	return d
}

// budgets are the PodDisruptionBudgets of the models, by namespace/name,
// with the models each selects and its expected count (their replicas at
// the count the waves run with).
type budgets struct {
	members  map[string][]string
	expected map[string]int32
	floor    map[string]int32
	// outside are the pods each budget selects outside the models: its
	// live status.expectedPods less the models' replicas now (0 where the
	// disruption controller has not counted yet).
	outside map[string]int32
	// key names each budget object (the same object for every model it
	// selects, as pkg/eviction's Index returns it).
	key map[*policyv1.PodDisruptionBudget]string
}

func newBudgets(models []ModelPlan) *budgets {
	bs := &budgets{members: map[string][]string{}, expected: map[string]int32{}, floor: map[string]int32{}, outside: map[string]int32{}, key: map[*policyv1.PodDisruptionBudget]string{}}
	names := map[string]int{}
	for i := range models {
		mp := &models[i]
		if mp.pdb == nil || bs.key[mp.pdb] != "" {
			continue
		}
		k := mp.Namespace + "/" + mp.pdb.Name
		if names[k]++; names[k] > 1 {
			k = fmt.Sprintf("%s#%d", k, names[k])
		}
		bs.key[mp.pdb] = k
	}
	for i := range models {
		mp := &models[i]
		b := bs.of(mp)
		if b == "" {
			continue
		}
		bs.members[b] = append(bs.members[b], mp.Key)
		bs.expected[b] += mp.Desired + mp.Surge - mp.Surged
	}
	now := map[string]int32{}
	for i := range models {
		if b := bs.of(&models[i]); b != "" {
			now[b] += models[i].Desired
		}
	}
	for pdb, b := range bs.key {
		if n := pdb.Status.ExpectedPods - now[b]; n > 0 {
			bs.outside[b] = n
			bs.expected[b] += n
		}
	}
	return bs
}

// coverers names what else budget b selects besides model key: the other
// models and the pods outside them.
func (bs *budgets) coverers(b, key string) []string {
	out := bs.others(b, key)
	if n := bs.outside[b]; n > 0 {
		out = append(out, cli.Plural(int(n), "pod")+" outside the models")
	}
	return out
}

// of is the budget of a model ("" for none).
func (bs *budgets) of(mp *ModelPlan) string {
	if mp.pdb == nil {
		return ""
	}
	return bs.key[mp.pdb]
}

func (bs *budgets) shared(b string) bool { return len(bs.members[b]) > 1 }

func (bs *budgets) sharedKeys() []string {
	var out []string
	for _, b := range sortedKeys(bs.members) {
		if bs.shared(b) {
			out = append(out, b)
		}
	}
	return out
}

// serving sums the serving replicas of the models b selects.
func (bs *budgets) serving(b string, serving map[string]int32) int32 {
	var n int32
	for _, k := range bs.members[b] {
		n += serving[k]
	}
	return n
}

func (bs *budgets) others(b, key string) []string {
	var out []string
	for _, k := range bs.members[b] {
		if k != key {
			out = append(out, k)
		}
	}
	return out
}

func productWord(p string) string {
	if p == "" {
		return "the pool's GPU product"
	}
	return p
}

// findNoGPU says how many replacements find no free GPU: "1 replacement
// finds", "2 replacements find".
func findNoGPU(n int32) string {
	return cli.Plural(int(n), "replacement") + " " + cli.Agree(int(n), "finds", "find")
}
