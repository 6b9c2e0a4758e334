package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster/scenario"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
)

// step is one command of the runbook.
type step struct {
	// Title says what the step is for.
	Title string
	// Kubectl is the command after "kubectl", as a user types it; {{run}}
	// is replaced by the gang-drain run id of an earlier step and
	// {{evidence}} by the evidence folder.
	Kubectl string
	// Mutating steps run once, with -o json into the evidence file, and
	// show their progress lines; read-only steps show their table and run
	// again with -o json for the evidence.
	Mutating bool
	// Expect is the exit code the step should end with, and Why says why
	// when it is not 0.
	Expect int
	Why    string
	// Evidence names the step's -o json file under the evidence folder.
	Evidence string
	// Do replaces Kubectl for steps that are not one plugin command.
	Do func(*runner) error
	// Then runs after the command, for what the demo does with its answer.
	Then func(*runner) error
	// NeedsGang marks steps that only make sense with the training gang.
	NeedsGang bool
}

// runbook is the upgrade of one GPU pool, in order. Each entry is one
// step; a new plugin command is one more line, for example
//
//	{Title: "Pre-flight checks", Kubectl: "skew preflight --target " + s.Upgrade.Target, Evidence: "skew-preflight"},
func runbook(s *scenario.Scenario) []step {
	pool := s.PoolSelector()
	var crds []string
	for _, mv := range s.StorageVersionMoves {
		crds = append(crds, mv.CRD)
	}
	return []step{
		{Title: "Plan the upgrade as a runbook: control-plane hops, when each pool moves, the commands", Kubectl: "skew plan --target " + s.Upgrade.Target + " --runbook", Evidence: "skew-plan"},
		{Title: "Pre-flight gates, saved as the baseline of the post-upgrade check", Kubectl: "skew preflight --target " + s.Upgrade.Target + " --save {{evidence}}/" + baselineFile,
			Expect: 1, Why: "draining the pools would block on the serving PDB: the next steps find it and fix it", Evidence: "skew-preflight"},
		{Title: "Who still calls APIs the next release removes", Kubectl: "deprecations", Expect: 1, Why: "a legacy client calls a deprecated API", Evidence: "deprecations"},
		{Title: "What blocks draining pool " + s.Upgrade.Pool, Kubectl: "pdb-blockers -l " + pool, Expect: 1, Why: "the serving PDB allows no disruption", Evidence: "pdb-blockers", Then: applyPrintedFix},
		{Title: "Check again after the fix: nothing that never clears", Kubectl: "pdb-blockers -l " + pool + " --fail-on blocking", Evidence: "pdb-blockers-after-fix"},
		{Title: "What a gang-aware drain of the pool will do", Kubectl: "gang-drain plan -l " + pool, Evidence: "gang-drain-plan"},
		{Title: "Drain: checkpoint, stop the gang as a unit, evict the rest", Kubectl: "gang-drain run -l " + pool, Mutating: true, Evidence: "gang-drain-run", Then: rememberRun},
		{Title: "Kueue holds the gang's workload while the pool is down", Kubectl: "get jobsets,workloads -n " + s.Gang.Namespace, NeedsGang: true},
		{Title: "Upgrade the nodes (SIMULATED)", Do: simulateUpgrade},
		{Title: "Validate the upgraded GPU nodes", Kubectl: "gpu-validate nodes -l " + pool + " --expected-gpus 8", Evidence: "gpu-validate"},
		{Title: "Bring the gang back", Kubectl: "gang-drain restore {{run}}", Mutating: true, Evidence: "gang-drain-restore"},
		{Title: "Post-upgrade check against the pre-flight baseline: regressions only", Kubectl: "skew verify --baseline {{evidence}}/" + baselineFile + " --pool " + s.Upgrade.Pool + "=" + s.Upgrade.Target, Evidence: "skew-verify"},
		{Title: "Rewrite stored objects to the new storage version, trim storedVersions", Kubectl: "crd-migrate run " + strings.Join(crds, " "), Mutating: true, Evidence: "crd-migrate-run"},
	}
}

// baselineFile is what skew preflight --save writes in the evidence folder
// and skew verify --baseline reads.
const baselineFile = "preflight-baseline.yaml"

// applyPrintedFix runs the fix pdb-blockers printed for the blocking PDB,
// as the user would paste it.
func applyPrintedFix(r *runner) error {
	var rep pdbblockers.Report
	if err := r.readEvidence("pdb-blockers", &rep); err != nil {
		return err
	}
	fix := ""
	for _, it := range rep.Items {
		for _, b := range it.Blockers {
			if b.Fix != "" && strings.HasPrefix(b.Fix, "kubectl ") {
				fix = b.Fix
				break
			}
		}
		if fix != "" {
			break
		}
	}
	if fix == "" {
		return fmt.Errorf("pdb-blockers printed no fix")
	}
	r.say("\nThe demo applies the fix pdb-blockers printed:")
	if err := r.shell(fix, 0); err != nil {
		return err
	}
	// The re-check is only meaningful once the new replica is Ready and
	// the disruption controller counted it, as it is by the time a person
	// types the next command.
	ns := rep.Items[0].Namespace
	return r.waitFor("the PDBs in "+ns+" to allow a disruption", func(ctx context.Context) (bool, error) {
		pdbs, err := r.kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, p := range pdbs.Items {
			if p.Status.ObservedGeneration < p.Generation || p.Status.DisruptionsAllowed < 1 {
				return false, nil
			}
		}
		return true, nil
	})
}

// rememberRun keeps the run id that restore needs.
func rememberRun(r *runner) error {
	var rep gangdrain.RunReport
	if err := r.readEvidence("gang-drain-run", &rep); err != nil {
		return err
	}
	if rep.RunResult == nil || rep.RunID == "" {
		return fmt.Errorf("gang-drain run reported no run id")
	}
	r.runID = rep.RunID
	r.say("run id: %s (restore takes it)", r.runID)
	return nil
}

// simulateUpgrade stands in for the provider's node-pool upgrade: it sets
// the KWOK nodes' kubelet version and uncordons them, as upgraded nodes
// come back.
func simulateUpgrade(r *runner) error {
	s := r.scn
	r.say("SIMULATED: on a real cluster this is your provider's node-pool upgrade (for example")
	r.say("`gcloud container node-pools upgrade %s --cluster=CLUSTER`), which brings the nodes back", s.Upgrade.Pool)
	r.say("on kubelet %s. The nodes here are simulated by KWOK, so the demo sets their reported", s.Upgrade.KubeletVersion)
	r.say("kubelet version and uncordons them, as upgraded nodes come back:")
	for _, cmd := range simulatedUpgrade(s.PoolSelector(), s.Upgrade.KubeletVersion, "") {
		if err := r.shell(cmd, 0); err != nil {
			return err
		}
	}
	return nil
}

// simulatedUpgrade are the shell commands that stand in for a provider's
// node-pool upgrade on KWOK nodes: set the nodes' reported kubelet version
// and uncordon them, as upgraded nodes come back. kubectlFlags (such as
// "--context prod") go on every kubectl. The runbook prints and runs them;
// `democluster upgrade-pool` runs them for the fleet programme's e2e suite,
// behind the fleet file's pool command.
func simulatedUpgrade(selector, kubelet, kubectlFlags string) []string {
	k := strings.TrimSpace("kubectl " + kubectlFlags)
	patch := fmt.Sprintf(`'{"status":{"nodeInfo":{"kubeletVersion":"%s"}}}'`, kubelet)
	return []string{
		fmt.Sprintf("for n in $(%s get nodes -l %s -o name); do %s patch \"$n\" --subresource=status --type=merge -p %s; done", k, selector, k, patch),
		k + " uncordon -l " + selector,
		k + " get nodes -l " + selector + " -o custom-columns=NAME:.metadata.name,KUBELET:.status.nodeInfo.kubeletVersion,UNSCHEDULABLE:.spec.unschedulable",
	}
}

// summary ends the demo: work lost against a plain drain's estimate, the
// pool's state, and where the evidence is.
func (r *runner) summary() {
	r.say("\n== Summary")
	var plan gangdrain.PlanReport
	var run gangdrain.RunReport
	var restore gangdrain.RestoreReport
	_ = r.readEvidence("gang-drain-plan", &plan)
	_ = r.readEvidence("gang-drain-run", &run)
	_ = r.readEvidence("gang-drain-restore", &restore)
	if run.RunResult != nil && len(run.Gangs) > 0 {
		lost := 0.0
		for _, g := range run.Gangs {
			if g.Verdict.Phase != checkpoint.PhaseReady {
				// Stopped without a fresh checkpoint: the plan's estimate is lost.
				for _, pg := range plan.Items {
					if pg.Gang != nil && pg.Key == g.Key {
						lost += pg.PlainDrainLossGPUHours * 3600
					}
				}
			}
		}
		r.result.GPUSecondsLost = lost
		r.say("GPU-seconds of training lost: %.0f (the gang checkpointed on request and stopped as a unit)", lost)
	} else {
		r.say("No training gang ran (Kueue and JobSet were not running): nothing to checkpoint.")
	}
	if plan.Summary.Gangs > 0 {
		r.result.PlainDrainLossGPUSeconds = plan.Summary.PlainDrainLossGPUHours * 3600
		r.say("A plain kubectl drain would have lost about %.0f GPU-seconds (%.2f GPU-h: %d GPUs x the time since the",
			r.result.PlainDrainLossGPUSeconds, plan.Summary.PlainDrainLossGPUHours, plan.Summary.GPUs)
		r.say("  gang's last checkpoint; estimate from gang-drain plan)")
	}
	if restore.RestoreResult != nil {
		for _, g := range restore.Gangs {
			r.say("Gang %s: %s, admitted %v, %d pods Ready", g.Key, g.Action, g.Admitted, g.ReadyPods)
		}
	}
	if nodes, err := r.kube.CoreV1().Nodes().List(r.ctx, metav1.ListOptions{LabelSelector: r.scn.PoolSelector()}); err == nil {
		up := 0
		for _, n := range nodes.Items {
			if n.Status.NodeInfo.KubeletVersion == r.scn.Upgrade.KubeletVersion && !n.Spec.Unschedulable {
				up++
			}
		}
		r.result.NodesUpgraded, r.result.Nodes = up, len(nodes.Items)
		r.say("Pool %s: %d of %d nodes on kubelet %s and schedulable.", r.scn.Upgrade.Pool, up, len(nodes.Items), r.scn.Upgrade.KubeletVersion)
	}
	r.say("Evidence: %s (each step's -o json; runbook.json lists the commands and exit codes)", r.display(r.evidence))
}

// Result is runbook.json: what ran and how it ended, for scripts and the
// e2e test.
type Result struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Pool       string       `json:"pool"`
	Steps      []StepResult `json:"steps"`
	// OK is true when every step ended with its expected exit code.
	OK                       bool    `json:"ok"`
	GPUSecondsLost           float64 `json:"gpuSecondsLost"`
	PlainDrainLossGPUSeconds float64 `json:"plainDrainLossGPUSeconds"`
	Checkpointed             bool    `json:"checkpointed"`
	// Nodes of the pool, and how many ended on the new kubelet, schedulable.
	Nodes         int `json:"nodes"`
	NodesUpgraded int `json:"nodesUpgraded"`
}

// StepResult is one step of runbook.json.
type StepResult struct {
	Title    string   `json:"title"`
	Commands []string `json:"commands"`
	ExitCode int      `json:"exitCode"`
	Expected int      `json:"expected"`
	Evidence string   `json:"evidence,omitempty"`
	Seconds  float64  `json:"seconds"`
	Error    string   `json:"error,omitempty"`
	Skipped  string   `json:"skipped,omitempty"`
}

func (r *runner) writeResult() error {
	b, err := json.MarshalIndent(r.result, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.evidence, "runbook.json"), append(b, '\n'), 0o644)
}
