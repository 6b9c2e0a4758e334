package fleetrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Kinds and version of what the programme writes.
const (
	APIVersion   = fleetfile.APIVersion
	KindPlan     = "FleetPlan"
	KindState    = "FleetClusterState"
	KindDecision = "FleetDecision"
	KindStatus   = "FleetStatus"
)

// Step kinds: what one step of a cluster does.
const (
	StepGate         = "gate"
	StepPreflight    = "preflight"
	StepEtcdSnapshot = "etcd-snapshot"
	StepHold         = "hold-rollouts"
	StepControlPlane = "control-plane"
	StepPDBBlockers  = "pdb-blockers"
	StepDrain        = "drain"
	StepPoolUpgrade  = "pool-upgrade"
	StepGPUValidate  = "gpu-validate"
	StepRestore      = "restore"
	StepVerify       = "verify"
	StepCRDMigrate   = "crd-migrate"
)

// Plan is a fleet programme's plan: rings in order, each ring's clusters in
// batches that respect the caps, windows and DR pairs, and each cluster's
// steps taken from its own `kubectl skew plan`. `plan --run` freezes it in
// the store, and every later command of the run reads that copy.
type Plan struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Fleet is the fleet's name, Run the run's (empty until frozen).
	Fleet string `json:"fleet"`
	Run   string `json:"run,omitempty"`
	// Target is the version the run upgrades to.
	Target string `json:"target"`
	// CreatedAt is when the plan was made; windows are evaluated from it.
	CreatedAt time.Time `json:"createdAt"`
	// FleetDigest is the sha256 of the fleet file as decoded, so a run
	// can tell when its file changed.
	FleetDigest string `json:"fleetDigest"`
	// GPUs counts the fleet's allocatable GPUs; MaxGPUsInFlight is the
	// GPU cap resolved against it (0: none), MaxClustersInFlight the
	// cluster cap (0: none).
	GPUs                int `json:"gpus"`
	MaxGPUsInFlight     int `json:"maxGPUsInFlight"`
	MaxClustersInFlight int `json:"maxClustersInFlight"`
	// StepDuration is the expected length of a disruptive step.
	StepDuration string `json:"stepDuration"`
	// Rings in order.
	Rings []RingPlan `json:"rings"`
	// Clusters in ring and batch order.
	Clusters []ClusterPlan `json:"clusters"`
	// Unplanned are clusters of the file no ring selects.
	Unplanned []string `json:"unplanned,omitempty"`
	// Warnings are caveats that do not stop the plan.
	Warnings []string `json:"warnings,omitempty"`
	// Spec is the fleet file's spec, so that a step running far from the
	// file (in an engine's pod) acts on the same file.
	Spec fleetfile.FleetSpec `json:"spec"`
}

// RingPlan is one ring.
type RingPlan struct {
	Name string `json:"name"`
	// Soak after the ring's last cluster, before the next ring.
	Soak string `json:"soak,omitempty"`
	// Approvers needed before the ring starts; 0 means no approval.
	Approvers int `json:"approvers,omitempty"`
	// MaxFailures is the ring's failure budget.
	MaxFailures int `json:"maxFailures"`
	// MaxConcurrent is the most clusters of the ring in flight at once
	// (ring and fleet caps together; 0: no cap).
	MaxConcurrent int `json:"maxConcurrent"`
	// Batches run one after the other; a batch's clusters run together.
	Batches []Batch `json:"batches"`
	// Projected is when the ring is expected to run: from the end of the
	// ring before it plus that ring's soak (absent when a window never
	// lets one of its clusters start).
	Projected *Span `json:"projected,omitempty"`
}

// Batch is clusters that run at the same time.
type Batch struct {
	Clusters []string `json:"clusters"`
	GPUs     int      `json:"gpus"`
	// Opens is when the batch's windows next let a step start (absent:
	// always open).
	Opens *time.Time `json:"opens,omitempty"`
	// Projected is when the batch is expected to run, after the batch
	// before it.
	Projected *Span `json:"projected,omitempty"`
}

// ClusterPlan is one cluster of the run.
type ClusterPlan struct {
	Name    string            `json:"name"`
	Context string            `json:"context"`
	Labels  map[string]string `json:"labels,omitempty"`
	Ring    string            `json:"ring"`
	// Batch counts from 1 within the ring.
	Batch int `json:"batch"`
	// GPUs is the cluster's allocatable GPUs when planned.
	GPUs int `json:"gpus"`
	// From is the control plane's minor when planned.
	From string `json:"from"`
	// Provider is who the cluster's plan is written for.
	Provider string `json:"provider"`
	// Action is how it is upgraded: clusterAPI, command or manual.
	Action string `json:"action"`
	// Windows describes the windows that apply ("" when none: always
	// open); NextWindow is when a step may next start.
	Windows    []string   `json:"windows,omitempty"`
	NextWindow *time.Time `json:"nextWindow,omitempty"`
	// Projected is when the cluster's disruptive steps are expected to
	// run, in its batch's place of the timeline (NextWindow is from the
	// plan's time alone).
	Projected *Span `json:"projected,omitempty"`
	// DrainArgs are the gang-drain run flags of its pools' drains
	// (spec.upgrade.drain with the cluster's own drain over it);
	// DrainOverride is set when the cluster has its own.
	DrainArgs     []string `json:"drainArgs,omitempty"`
	DrainOverride bool     `json:"drainOverride,omitempty"`
	// DRPair is the cluster's DR pair label value.
	DRPair string `json:"drPair,omitempty"`
	// Steps in order.
	Steps []Step `json:"steps"`
	// Skew is the cluster's own `kubectl skew plan`, the one source of
	// the steps.
	Skew pkgskew.Plan `json:"skew"`
}

// Step is one step of a cluster: the unit `kubectl skew fleet step` runs.
type Step struct {
	// Name is unique in the cluster and safe as an Argo task name:
	// gate, preflight-1-38, control-plane-1-38, pool-gpu-a-1-38-drain.
	Name string `json:"name"`
	// Kind is one of the Step* constants.
	Kind string `json:"kind"`
	// Disruptive steps start only inside a window and outside freezes.
	Disruptive bool `json:"disruptive,omitempty"`
	// Minor is the control-plane minor the step works towards
	// (MAJOR.MINOR), or the pool's new kubelet minor.
	Minor string `json:"minor,omitempty"`
	// Pool, PoolFrom and Selector are a pool step's pool, its kubelet
	// minor before, and the label selector of its nodes.
	Pool     string `json:"pool,omitempty"`
	PoolFrom string `json:"poolFrom,omitempty"`
	Selector string `json:"selector,omitempty"`
	// Nodes is how many nodes the pool had when planned: a pool step
	// whose selector then matches none fails rather than pass over an
	// empty set.
	Nodes int `json:"nodes,omitempty"`
	// ControlPlane marks the control-plane nodes' pool.
	ControlPlane bool `json:"controlPlane,omitempty"`
	// GPUPool is set when the pool has GPU nodes (gpu-validate runs).
	GPUPool bool `json:"gpuPool,omitempty"`
	// Inference is set on the drain and restore of a pool that holds
	// inference workloads: the drain is gang-drain run --inference, the
	// restore scales the surge back, and the drain's expected duration
	// adds its planned cold starts (inference.go).
	Inference *StepInference `json:"inference,omitempty"`
	// Holds are the pools a hold-rollouts step keeps from rolling with
	// the control plane; each is released at its own upgrade.
	Holds []string `json:"holds,omitempty"`
	// Commands are the runbook's commands for a step a person may have to
	// do (an etcd snapshot, a hold the action cannot make).
	Commands []string `json:"commands,omitempty"`
	// PlanStep is the number of the skew plan's step it carries out.
	PlanStep int `json:"planStep,omitempty"`
	// Action says what it does, for people.
	Action string `json:"action"`
}

// Cluster returns the named cluster of the plan.
func (p *Plan) Cluster(name string) (*ClusterPlan, bool) {
	for i := range p.Clusters {
		if p.Clusters[i].Name == name {
			return &p.Clusters[i], true
		}
	}
	return nil, false
}

// Ring returns the named ring.
func (p *Plan) Ring(name string) (*RingPlan, bool) {
	for i := range p.Rings {
		if p.Rings[i].Name == name {
			return &p.Rings[i], true
		}
	}
	return nil, false
}

// Step returns a cluster's named step and its index.
func (c *ClusterPlan) Step(name string) (Step, int, bool) {
	for i, s := range c.Steps {
		if s.Name == name {
			return s, i, true
		}
	}
	return Step{}, -1, false
}

// ClusterInfo is what planning read from one cluster.
type ClusterInfo struct {
	// Inventory is the cluster's version inventory (kubectl skew).
	Inventory pkgskew.Inventory
	// GPUs is its allocatable nvidia.com/gpu over every node.
	GPUs int
	// Provider, when not "", overrides detection (the file's provider).
	Provider pkgskew.Provider
	// Saved is set on an inventory read from a saved report (LoadSaved,
	// plan --from-dir), whose inference pools may not have been read at
	// the fleet file's bandwidth, or at all (readInference).
	Saved bool
}

// Digest is the sha256 of a value's JSON.
func Digest(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

var nonName = regexp.MustCompile(`[^a-z0-9]+`)

// stepName makes an Argo-safe name (alphanumerics and '-', at most 63
// characters, a short hash when shortened).
func stepName(parts ...string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-"), "-")
	if len(s) <= 63 {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:54], "-") + "-" + hex.EncodeToString(h[:4])
}

func minorName(m string) string { return strings.ReplaceAll(m, ".", "-") }

// invPool is a pool of the inventory by name.
func invPool(inv pkgskew.Inventory, pool string) pkgskew.Pool {
	for _, p := range inv.Pools {
		if p.Name == pool {
			return p
		}
	}
	return pkgskew.Pool{}
}

func gpuPool(inv pkgskew.Inventory, pool string) bool {
	for _, p := range inv.Pools {
		if p.Name == pool {
			// Not knowing counts as a GPU pool: validating costs a
			// little, skipping it on a GPU pool costs a training run.
			return p.GPUNodes == nil || *p.GPUNodes > 0
		}
	}
	return true
}

// clusterSteps turns a cluster's skew plan into the programme's steps: the
// gate, a pre-flight per hop (the first saves the baseline), the etcd
// snapshot where etcd is the cluster's own, one control-plane step per hop,
// each pool upgrade as pdb-blockers, drain, upgrade, gpu-validate and
// restore, then verify against the baseline.
func clusterSteps(sp pkgskew.Plan, inv pkgskew.Inventory, target pkgskew.Version, migrateCRDs bool) ([]Step, []string) {
	steps := []Step{{Name: StepGate, Kind: StepGate, Action: "gate: halts, approvals, the ring's failure budget, caps and the cluster's halt checks"}}
	var warnings []string
	seen := map[string]bool{}
	add := func(s Step) {
		if seen[s.Name] {
			return
		}
		seen[s.Name] = true
		steps = append(steps, s)
	}
	hasPreflight := false
	for _, s := range sp.Steps {
		m := s.ControlPlane
		switch s.Phase {
		case pkgskew.PhasePreflight:
			hasPreflight = true
			add(Step{Name: stepName(StepPreflight, minorName(m)), Kind: StepPreflight, Minor: m, PlanStep: s.Number,
				Action: "kubectl skew preflight --target v" + m})
		case pkgskew.PhaseEtcd:
			add(Step{Name: stepName(StepEtcdSnapshot, minorName(m)), Kind: StepEtcdSnapshot, Minor: m, PlanStep: s.Number, Disruptive: true,
				Action: s.Action, Commands: s.Commands})
		case pkgskew.PhaseHold:
			add(Step{Name: stepName(StepHold, minorName(m)), Kind: StepHold, Minor: m, PlanStep: s.Number, Disruptive: true,
				Holds: s.Holds, Action: s.Action, Commands: s.Commands})
		case pkgskew.PhaseAPIServers, pkgskew.PhaseControllers, pkgskew.PhaseAddons, pkgskew.PhaseControlPlane:
			add(Step{Name: stepName(StepControlPlane, minorName(m)), Kind: StepControlPlane, Minor: m, PlanStep: s.Number, Disruptive: true,
				Action: fmt.Sprintf("upgrade the control plane to %s, then check that every apiserver reports it", m)})
		case pkgskew.PhaseNodePool:
			if !hasPreflight {
				// Nodes move before any hop: take the baseline first.
				hasPreflight = true
				add(Step{Name: stepName(StepPreflight, minorName(target.MinorString())), Kind: StepPreflight, Minor: target.MinorString(),
					Action: "kubectl skew preflight --target v" + target.MinorString()})
			}
			pl := invPool(inv, s.Pool)
			sel := pl.Selector()
			if sel == "" {
				warnings = append(warnings, fmt.Sprintf("pool %s has no pool label: its nodes cannot be selected, so its upgrade is left to a person", s.Pool))
				continue
			}
			gpu := gpuPool(inv, s.Pool)
			inf, w := inferenceStep(pl)
			warnings = append(warnings, w...)
			drain := "kubectl gang-drain run -l " + sel + ": checkpoint and stop gangs as units, evict the rest"
			restore := "kubectl gang-drain restore: uncordon and readmit what the drain stopped"
			if inf != nil {
				drain = fmt.Sprintf("kubectl gang-drain run --inference -l %s: surge the %s, then drain in waves paced by hydrate bandwidth", sel, cli.Plural(inf.Models, "model Deployment"))
				if inf.ETASeconds > 0 {
					drain += fmt.Sprintf(" (%s, ETA %s at %s)", cli.Plural(inf.Waves, "wave"), time.Duration(inf.ETASeconds*float64(time.Second)).Round(time.Second), inf.Bandwidth)
				}
				restore = "kubectl gang-drain restore --inference: uncordon, and scale the models back by the surge the drain recorded"
			}
			base := Step{Minor: s.To, Pool: s.Pool, PoolFrom: s.From, Selector: sel, Nodes: pl.Nodes, GPUPool: gpu, ControlPlane: pl.ControlPlane(), PlanStep: s.Number}
			for _, k := range []struct {
				kind, suffix, action string
				disruptive           bool
			}{
				{StepPDBBlockers, "pdb-blockers", "kubectl pdb-blockers -l " + sel + ": nothing may block the drain", false},
				{StepDrain, "drain", drain, true},
				{StepPoolUpgrade, "upgrade", "upgrade node pool " + s.Pool + " to " + s.To, true},
				{StepGPUValidate, "gpu-validate", "kubectl gpu-validate nodes -l " + sel, false},
				{StepRestore, "restore", restore, false},
			} {
				if k.kind == StepGPUValidate && !gpu {
					continue
				}
				if k.kind != StepPoolUpgrade && pl.ControlPlane() && sp.Provider.Provider == pkgskew.ProviderCAPI {
					// KubeadmControlPlane replaces the control-plane
					// machines with its own drain when the control plane
					// moves: the pool step only checks their kubelets.
					continue
				}
				st := base
				st.Kind, st.Disruptive, st.Action = k.kind, k.disruptive, k.action
				if k.kind == StepDrain || k.kind == StepRestore {
					st.Inference = inf
				}
				st.Name = stepName("pool", s.Pool, minorName(s.To), k.suffix)
				add(st)
			}
		default:
			warnings = append(warnings, fmt.Sprintf("step %d (%s) is not one the programme runs: do it by hand before the run", s.Number, s.Phase))
		}
	}
	if !hasPreflight {
		add(Step{Name: stepName(StepPreflight, minorName(target.MinorString())), Kind: StepPreflight, Minor: target.MinorString(),
			Action: "kubectl skew preflight --target v" + target.MinorString()})
	}
	add(Step{Name: StepVerify, Kind: StepVerify, Minor: target.MinorString(), Action: "kubectl skew verify --baseline: regressions against the pre-flight baseline"})
	if migrateCRDs {
		add(Step{Name: StepCRDMigrate, Kind: StepCRDMigrate, Action: "kubectl crd-migrate run --all: stored objects to their storage version"})
	}
	return steps, warnings
}

// FinalPools is the kubelet minor each pool ends on in a cluster's plan,
// which verify checks.
func (c *ClusterPlan) FinalPools() map[string]string {
	out := map[string]string{}
	for _, s := range c.Steps {
		if s.Kind == StepPoolUpgrade {
			out[s.Pool] = s.Minor
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
