package gangdrain

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

// The demo cluster's names (testdata/demo): pool h100-c, the JobSet gang
// training/llama-pretrain, the llm-serve Deployment in inference, made a
// little longer, as real clusters name them.
const (
	demoRun   = "gd-20261205-101500-3f2a"
	demoGang  = "training/JobSet/llama-pretrain-70b-fsdp-multinode"
	demoServe = "inference/llm-serve-7d9f8c6b5d-x2k4q"
	demoNode  = "gke-gpu-prod-h100-c-8f3a2b1c-x7k2"
)

var demoNodes = []string{demoNode, "gke-gpu-prod-h100-c-8f3a2b1c-m4p9", "gke-gpu-prod-h100-c-8f3a2b1c-q2w8"}

func demoPlan() PlanReport {
	g := gang.PlanGang{Gang: &gang.Gang{Key: demoGang, Kind: gang.KindJobSet, Namespace: "training", Name: "llama-pretrain-70b-fsdp-multinode",
		Method: gang.StopKueue, Ranks: 4, RanksOnNodes: 4, GPUs: 32, GPUsOnNodes: 32, Nodes: demoNodes,
		Workload: &gang.Object{Name: "jobset-llama-pretrain-70b-fsdp-multinode-3c2f1"}},
		Support: checkpoint.SupportYes, Path: gang.PathProtocol, LastCheckpointAgeSeconds: 2400, LastCheckpointKnown: true,
		PlainDrainLossGPUHours: 21.33, YieldLossGPUHours: 0.03}
	blocked := gang.PlanGang{Gang: &gang.Gang{Key: "research/PyTorchJob/mixtral-finetune-long-context-ablation", Method: gang.StopUnsupported,
		Problem: "the PyTorchJob has no suspend field in this Kubeflow release and no Kueue workload", Ranks: 2, RanksOnNodes: 1, GPUs: 16, GPUsOnNodes: 8, Nodes: demoNodes[2:]},
		Path: gang.PathSIGTERM, GracePeriodSeconds: 300, LastCheckpointAgeSeconds: 5400, PlainDrainLossGPUHours: 12, YieldLossGPUHours: 12}
	serve := eviction.Verdict{Namespace: "inference", Name: "llm-serve-7d9f8c6b5d-x2k4q", Node: demoNodes[1], Outcome: eviction.OutcomeNever,
		Eviction: eviction.Result{Message: "The disruption budget llm-serve needs 1 healthy pods and has 1 currently"},
		Blockers: []eviction.Blocker{{Kind: eviction.BlockerMinAvailableAll, Outcome: eviction.OutcomeNever, PDB: "inference/llm-serve", Message: "minAvailable 1 asks for all 1 pods the budget expects (desiredHealthy 1), so no pod may ever be evicted",
			Fix: `kubectl patch pdb llm-serve -n inference --type merge -p '{"spec":{"minAvailable":0}}'`}}}
	later := eviction.Verdict{Namespace: "inference", Name: "llm-serve-canary-5f6d7c8b9a-r8t2z", Node: demoNodes[0], Outcome: eviction.OutcomeLater,
		Eviction: eviction.Result{Message: "The disruption budget llm-serve-canary does not allow evicting pods currently"}}
	p := &gang.Plan{Nodes: []gang.PlanNode{
		{Node: demoNodes[0], GPUs: 8, GangPods: 1, OtherPods: 1, Selected: true, RunID: demoRun},
		{Node: demoNodes[1], GPUs: 8, GangPods: 1, OtherPods: 1, Selected: true, RunID: demoRun},
		{Node: demoNodes[2], GPUs: 8, GangPods: 2, Selected: false},
	}, Gangs: []gang.PlanGang{g, blocked}, Pods: []eviction.Verdict{serve, later},
		Steps: []string{"cordon " + demoNodes[0] + " " + demoNodes[1], "ask " + demoGang + " to checkpoint and yield"}}
	return newPlanReport(cli.Metadata{Context: "demo"}, p, nil)
}

func demoRunReport() RunReport {
	at := time.Date(2026, 12, 5, 10, 15, 0, 0, time.UTC)
	return newRunReport(cli.Metadata{Context: "demo"}, &gang.RunResult{RunID: demoRun, Complete: false,
		Nodes: []gang.NodeRecord{
			{Node: demoNodes[0], State: gang.NodeDrained, Message: "drained: 1 gang stopped as a unit (kueue-deactivate), 1 pod evicted"},
			{Node: demoNodes[1], State: gang.NodeFailed, Message: "eviction of inference/llm-serve-7d9f8c6b5d-x2k4q blocked by PodDisruptionBudget llm-serve: minAvailable asks for every pod"},
		},
		Pending: []string{demoNodes[2]},
		Gangs: []gang.GangOutcome{{Key: demoGang, Method: gang.StopKueue, Action: "stopped",
			Verdict:       checkpoint.Verdict{Phase: checkpoint.PhaseReady, Reason: "ready-to-stop at step 12000 (s3://demo-checkpoints/llama-pretrain/step-12000)"},
			StopStartedAt: at, PodsGoneAt: at.Add(2340 * time.Millisecond), Message: "Kueue workload deactivated; 4 pods gone"}},
	})
}

func demoStatus() StatusReport {
	rec := gang.GangRecord{Key: demoGang, Method: gang.StopKueue}
	return StatusReport{Header: cli.NewHeader("GangDrainStatus", cli.Metadata{Context: "demo"}), Items: []gang.RunSummary{{RunID: demoRun,
		Nodes: []gang.NodeRecord{
			{Node: demoNodes[0], State: gang.NodeDrained, UpdatedAt: time.Date(2026, 12, 5, 10, 16, 2, 0, time.UTC), Message: "drained: 1 gang stopped as a unit (kueue-deactivate), 1 pod evicted", Requester: "oncall@example.com"},
			{Node: demoNodes[1], State: gang.NodeFailed, UpdatedAt: time.Date(2026, 12, 5, 10, 21, 40, 0, time.UTC), Message: "eviction of inference/llm-serve-7d9f8c6b5d-x2k4q blocked by PodDisruptionBudget llm-serve: minAvailable asks for every pod"},
		},
		Gangs: []gang.GangStatus{{GangRecord: rec, StopState: "stopped after ready-to-stop; pods gone in 2.34s, Kueue holds the workload", CheckpointStatus: "ready-to-stop",
			CheckpointStep: "12000", CheckpointURI: "s3://demo-checkpoints/llama-pretrain/step-12000"}},
	}}}
}

func demoRestore() RestoreReport {
	rec := gang.GangRecord{Key: demoGang, Method: gang.StopKueue, Ranks: 4}
	return RestoreReport{Header: cli.NewHeader("GangDrainRestore", cli.Metadata{Context: "demo"}), RestoreResult: &gang.RestoreResult{RunIDs: []string{demoRun},
		Nodes: []gang.NodeRecord{{Node: demoNodes[0], RunID: demoRun, State: gang.NodeDone}, {Node: demoNodes[1], RunID: demoRun, State: gang.NodeDone, WasCordoned: true, Unschedulable: true}},
		Gangs: []gang.RestoreOutcome{{GangRecord: rec, Action: "reactivated", Requeued: true, Admitted: true, ReadyPods: 4,
			Message: "running again: 4/4 pods Ready on h100-c after Kueue admitted the workload to ClusterQueue h100-c"}}}}
}

// Every table of plan, run, status and restore fits 120 columns by
// default, keeps the node, state and pasted fix whole, and shows every
// value whole in -o wide.
func TestTablesGolden(t *testing.T) {
	c := cli.Colorizer{}
	printed := func(f func(io.Writer, cli.TableOptions) error) func(cli.TableOptions) string {
		return func(o cli.TableOptions) string {
			var b strings.Builder
			if err := f(&b, o); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
	}
	print := map[string]func(cli.TableOptions) string{
		"plan":    printed(func(w io.Writer, o cli.TableOptions) error { return printPlan(w, demoPlan(), o, c) }),
		"run":     printed(func(w io.Writer, o cli.TableOptions) error { return printRun(w, demoRunReport(), o, c) }),
		"status":  printed(func(w io.Writer, o cli.TableOptions) error { return printStatus(w, demoStatus(), o, c) }),
		"restore": printed(func(w io.Writer, o cli.TableOptions) error { return printRestore(w, demoRestore(), o, c) }),
	}
	full := []string{demoGang, `kubectl patch pdb llm-serve -n inference --type merge -p '{"spec":{"minAvailable":0}}'`,
		"blocked by PodDisruptionBudget llm-serve: minAvailable asks for every pod", "ready-to-stop at step 12000 (s3://demo-checkpoints/llama-pretrain/step-12000)",
		"after Kueue admitted the workload to ClusterQueue h100-c", "Kueue holds the workload"}
	for _, name := range []string{"plan", "run", "status", "restore"} {
		t.Run(name, func(t *testing.T) {
			out := print[name](cli.TableOptions{})
			goldenfile.Check(t, name+".table.golden", out)
			goldenfile.CheckFits(t, out, cli.DefaultTableWidth)
			if !strings.Contains(out, demoNode) {
				t.Errorf("node names are never shortened:\n%s", out)
			}
			wide := print[name](cli.TableOptions{Wide: true})
			goldenfile.Check(t, name+".wide.golden", wide)
			if strings.Contains(wide, cli.ElisionMark) {
				t.Errorf("-o wide shortened a value:\n%s", wide)
			}
			for _, s := range full {
				if strings.Contains(out, s) && !strings.Contains(wide, s) {
					t.Errorf("-o wide lacks %q", s)
				}
			}
		})
	}
	// The same reports as -o json writes them: the goldens the JSON Schemas
	// of their kinds are held to (plugins/contract).
	for name, rep := range map[string]any{"plan": demoPlan(), "run": demoRunReport(), "status": demoStatus(), "restore": demoRestore()} {
		var b strings.Builder
		if err := cli.PrintStructured(&b, cli.OutputJSON, rep); err != nil {
			t.Fatal(err)
		}
		goldenfile.Check(t, name+".json.golden", b.String())
	}
	// The fix is pasted: whole in the default table, in its own column.
	if out := print["plan"](cli.TableOptions{}); !strings.Contains(out, full[1]) {
		t.Errorf("the plan's fix was cut:\n%s", out)
	}
}
