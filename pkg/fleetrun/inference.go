package fleetrun

// Pools that hold inference workloads in the programme. The cluster's
// inventory says which GPU pools hold model Deployments behind
// PodDisruptionBudgets and no training gang (pkg/skew's Pool.Inference,
// read with pkg/inference); their drain step is `kubectl gang-drain run
// --inference` paced by the cluster's hydrate bandwidth (the fleet file's
// spec.upgrade.hydrateBandwidth and spec.clusters[].hydrateBandwidth),
// their restore uncordons the nodes (a completed run has scaled its surge
// back; restore --inference undoes one a stopped run left), and the plan's timeline adds the
// drain's waves of cold starts (pkg/inference's ETA) to the drain step.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// expectedDuration is how long a step is expected to take: its kind's
// expected duration (spec.upgrade.stepDurations), and for the drain of an
// inference pool also the cold starts of its waves, which the paced run
// waits for on top of cordoning and evicting.
func expectedDuration(u *fleetfile.Upgrade, s Step) time.Duration {
	d := u.ExpectedDuration(s.Kind)
	if s.Kind == StepDrain && s.Inference != nil {
		d += time.Duration(s.Inference.ETASeconds * float64(time.Second)).Round(time.Second)
	}
	return d
}

// StepInference is what a pool step of an inference pool carries from the
// cluster's inventory: the planned drain's waves and ETA, with the
// bandwidth it was planned with.
type StepInference struct {
	// Models counts the model Deployments on the pool.
	Models int `json:"models"`
	// Waves and ETASeconds are the planned drain's waves and the sum of
	// their cold starts (0 when no bandwidth was known).
	Waves      int     `json:"waves"`
	ETASeconds float64 `json:"etaSeconds,omitempty"`
	// Bandwidth is the --hydrate-bandwidth the ETA was planned with.
	Bandwidth string `json:"bandwidth,omitempty"`
}

// inferenceStep returns the inference part of a pool step and the plan's
// warnings about it; a drain that would be refused, or has no bandwidth,
// is a plan error (inferenceProblem).
func inferenceStep(pl pkgskew.Pool) (*StepInference, []string) {
	ip := pl.Inference
	if ip == nil || pl.ControlPlane() {
		return nil, nil
	}
	if !ip.EveryModelBudgeted() {
		// As the runbook: a model without a PodDisruptionBudget would have
		// no floor in the inference drain; the pool keeps the gang drain.
		return nil, []string{fmt.Sprintf("pool %s holds %s, %d behind a PodDisruptionBudget that keeps one of its own replicas: a model without one (or under a budget other models cover) has no floor in an inference drain, so it drains as a training pool (kubectl gang-drain run); give every model a PodDisruptionBudget of its own to drain it paced", pl.Name, cli.Plural(ip.Models, "model Deployment"), ip.WithPDB)}
	}
	return &StepInference{Models: ip.Models, Waves: ip.Waves, ETASeconds: ip.ETASeconds, Bandwidth: ip.Bandwidth}, nil
}

// inferenceProblem is why a cluster's inference drain cannot run as read,
// a plan error: the drain would be refused (or, with no hydrate
// bandwidth, has none to pace by) inside the window. Empty when it can.
func inferenceProblem(cluster string, pl pkgskew.Pool) string {
	ip := pl.Inference
	const fields = "spec.upgrade.hydrateBandwidth or spec.clusters[].hydrateBandwidth"
	switch {
	case ip == nil:
		return ""
	case ip.Bandwidth == "":
		return fmt.Sprintf("cluster %s: pool %s holds inference workloads and its drain (gang-drain run --inference) has no hydrate bandwidth to pace by: set %s for cluster %s", cluster, pl.Name, fields, cluster)
	case len(ip.Refusals) > 0:
		return fmt.Sprintf("cluster %s: pool %s holds inference workloads and its drain (gang-drain run --inference) would be refused as read: %s (a source's bandwidth is set in %s for cluster %s)", cluster, pl.Name, strings.Join(ip.Refusals, "; "), fields, cluster)
	}
	return ""
}

// drainArgs are the gang-drain arguments of a pool's drain step: the gang
// drain, or for an inference pool pkg/inference's RunArgs with the
// cluster's hydrate bandwidth; then the run id and the file's drain
// settings.
func (p *Programme) drainArgs(cluster string, s Step, runID string) ([]string, error) {
	args := []string{"run", "-l", s.Selector}
	if s.Inference != nil {
		bw, err := inference.ParseBandwidth(p.Plan.Spec.HydrateBandwidth(cluster))
		if err != nil {
			return nil, err
		}
		args = inference.RunArgs(s.Selector, inference.Options{Bandwidth: bw})
	}
	args = append(args, "--run-id", runID)
	drain := p.Plan.Spec.DrainArgs(cluster)
	if s.Inference != nil {
		drain = inferenceDrainArgs(drain)
	}
	return append(args, drain...), nil
}

// inferenceDrainArgs are the file's drain settings as an inference run
// takes them: an --eviction-timeout, set for training gangs, is dropped
// where it is shorter than a wave's cold start (bounded by the run's
// --max-cold-start, pkg/inference's DefaultMaxColdStart), which an
// eviction held by a model's budget waits out.
func inferenceDrainArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--eviction-timeout" && i+1 < len(args) {
			if d, err := time.ParseDuration(args[i+1]); err != nil || d < inference.DefaultMaxColdStart {
				i++
				continue
			}
		}
		out = append(out, args[i])
	}
	return out
}

// restoreArgs are the gang-drain arguments of a pool's restore step; an
// inference pool's also scales back a surge its run left in place (a run
// that completed scaled it back itself).
func restoreArgs(s Step, runID string) []string {
	if s.Inference != nil {
		return []string{"restore", runID, "--inference"}
	}
	return []string{"restore", runID}
}

// collectBandwidth is the hydrate bandwidth a cluster's inventory plans
// its inference pools' drains with: the fleet file's, parsed as gang-drain
// parses it (Lint has checked it).
func collectBandwidth(f *fleetfile.Fleet, cluster string) inference.Bandwidth {
	bw, err := inference.ParseBandwidth(f.Spec.HydrateBandwidth(cluster))
	if err != nil {
		return nil
	}
	return bw
}

// readInference is the inventory a cluster's inference pools are planned
// from when it was saved (ClusterInfo.Saved), and the plan's warnings
// about it. A live read (Collect) planned
// each inference pool's drain at the cluster's bandwidth in the fleet
// file. A saved report (plan --from-dir) may hold less: the version
// check's (kubectl skew -o yaml) holds no read of the GPU pools'
// workloads, and one read at another bandwidth holds waves, an ETA and
// refusals that are not this plan's. Either is one warning per cluster
// that the pool must be planned live, and the plan goes on: the drain
// step stays the one its read says (gang-drain run, or run --inference at
// the fleet file's bandwidth, which plans the waves again when it runs),
// without an ETA it cannot know.
func readInference(f *fleetfile.Fleet, cluster string, inv pkgskew.Inventory) (pkgskew.Inventory, []string) {
	if !inv.ReadForInference() {
		if w := pkgskew.NoInferenceRead(inv, "the saved report", "kubectl skew fleet plan without --from-dir"); w != "" {
			return inv, []string{w}
		}
		return inv, nil
	}
	var want string
	if a := collectBandwidth(f, cluster).Args(); len(a) == 2 {
		want = a[1]
	}
	if want == "" {
		// No bandwidth in the fleet file: inferenceProblem says so.
		return inv, nil
	}
	pools := slices.Clone(inv.Pools)
	var stale []string
	for i, pl := range pools {
		ip := pl.Inference
		if ip == nil || ip.Bandwidth == want || !ip.EveryModelBudgeted() {
			continue
		}
		at := "no hydrate bandwidth"
		if ip.Bandwidth != "" {
			at = ip.Bandwidth
		}
		what := fmt.Sprintf("%s (read at %s", pl.Name, at)
		if len(ip.Refusals) > 0 {
			what += "; refused then: " + strings.Join(ip.Refusals, "; ")
		}
		stale = append(stale, what+")")
		c := *ip
		c.Bandwidth, c.Waves, c.ETASeconds, c.Refusals = want, 0, 0, nil
		pools[i].Inference = &c
	}
	if len(stale) == 0 {
		return inv, nil
	}
	inv.Pools = pools
	return inv, []string{fmt.Sprintf("inference pool(s) %s: the saved report planned the drain at another bandwidth than the fleet file's %s, so this plan has no waves, ETA or refusals for it (gang-drain run --inference plans them again when it runs); plan it live (kubectl skew fleet plan without --from-dir) for them",
		strings.Join(stale, ", "), want)}
}
