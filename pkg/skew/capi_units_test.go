package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// capiStubs is kubectl as a bash function over files in $D, for the
// Cluster API GPU pool's blocks: each call is logged to $D/calls; the
// pool's nodes are $D/nodes, a unit's $D/unit; the Machines' "node name
// version" lines $D/machines, with the hook column $D/hooked; the nodes
// of Machines being deleted $D/deleting; node N's unit label $D/label-N;
// $D/annotate-rc fails annotate.
const capiStubs = `
kubectl() { echo "kubectl $*" >> "$D/calls"
  case "$*" in
  *"get nodes -l "*rack-set=*) cat "$D/unit" 2>/dev/null;;
  *"get nodes -l "*) cat "$D/nodes";;
  *"get node "*) cat "$D/label-$3" 2>/dev/null || true;;
  *" hook={"*) cat "$D/hooked" 2>/dev/null;;
  *deletionTimestamp*) awk '{print "2026-12-07T20:00:00Z", $1}' "$D/deleting" 2>/dev/null;;
  *deployment-name*) echo "n1 h100-a-md";;
  *"{.spec.version}{"*) cat "$D/machines";;
  *" annotate "*) return $(cat "$D/annotate-rc" 2>/dev/null || echo 0);;
  esac; }
`

// runCAPI runs script in $D after the stubs, with files there.
func runCAPI(t *testing.T, script string, files map[string]string) (calls, out string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	d := t.TempDir()
	// The pool's nodes as the step's first block wrote them.
	files["pool-h100-a-nodes.txt"] = files["nodes"]
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", capiStubs+"cd \"$D\"\n"+script)
	cmd.Env = append(os.Environ(), "D="+d)
	b, _ := cmd.CombinedOutput()
	c, _ := os.ReadFile(filepath.Join(d, "calls"))
	return string(c), string(b)
}

// blockWith is the commands of the first block holding s.
func blockWith(t *testing.T, bs []Block, s string) string {
	t.Helper()
	for _, b := range bs {
		if c := strings.Join(b.Commands, "\n"); strings.Contains(c, s) {
			return c
		}
	}
	t.Fatalf("no block holds %q", s)
	return ""
}

// The Cluster API GPU pool's blocks, pasted into bash against a kubectl
// that answers from files: the topologies are released only once every
// old Machine of the pool carries the pre-drain hook; the unit block says
// what to do when no Machine is being deleted or none is left old, drains
// a node without the unit label alone, by name, under the step's run, and
// waits an hour per Machine of the unit.
func TestCAPIUnitBlocksPasted(t *testing.T) {
	s := lastStepOf(t, variantPlan(t, "capi"), PhaseNodePool, "h100-a")
	release := blockWith(t, s.Blocks, "MACHINES=$(")
	unit := blockWith(t, s.Blocks, "WAITING=$(")
	const nodes = "n1\nn2\nn3\n"
	const old = "n1 m1 v1.37.4\nn2 m2 v1.37.4\nn3 m3 v1.37.4\n"
	for _, tc := range []struct {
		name     string
		block    string
		files    map[string]string
		want     []string // in the calls, in order
		wantNot  []string // not in the calls
		wantSaid string   // in the output
	}{
		{"every old Machine hooked: released", release,
			map[string]string{"nodes": nodes, "machines": old, "hooked": "n1 m1 v1.37.4 hook=gpufleet\nn2 m2 v1.37.4 hook=gpufleet\nn3 m3 v1.37.4 hook=gpufleet\n"},
			[]string{"annotate machines.cluster.x-k8s.io m1 m2 m3 " + capiHook + "=gpufleet", "apply --server-side --field-manager=gpufleet-defer-h100-a-md"}, nil, ""},
		{"an old Machine without the hook: held", release,
			map[string]string{"nodes": nodes, "machines": old, "hooked": "n1 m1 v1.37.4 hook=gpufleet\nn2 m2 v1.37.4 hook=\nn3 m3 v1.37.4 hook=gpufleet\n"},
			nil, []string{"apply --server-side"}, "lack the " + capiHook + " annotation: m2"},
		{"the annotate fails: held", release,
			map[string]string{"nodes": nodes, "machines": old, "annotate-rc": "1"},
			nil, []string{"apply --server-side", " hook={"}, ""},
		{"no old Machine: held", release,
			map[string]string{"nodes": nodes, "machines": "n1 m1 v1.38.0\n"},
			nil, []string{"annotate", "apply --server-side"}, ""},
		{"no Machine being deleted yet", unit,
			map[string]string{"nodes": nodes, "machines": old},
			nil, []string{"pdb-blockers", "gang-drain run", " annotate "}, "no Machine of the pool is being deleted yet: paste this block again"},
		{"no old Machine left", unit,
			map[string]string{"nodes": nodes, "machines": "n1 m4 v1.38.0\n"},
			nil, []string{"pdb-blockers", "gang-drain run", " annotate "}, "the rollout is done, go on below"},
		{"a unit of two Machines", unit,
			map[string]string{"nodes": nodes, "machines": old, "deleting": "n2\n", "label-n2": "rack-b", "unit": "n2\nn3\n"},
			[]string{"kubectl gang-drain run n2 n3 --run-id h100-a-to-1.38 --timeout 1h",
				"annotate machines.cluster.x-k8s.io m2 m3 " + capiDeleteFirst + "=gpufleet " + capiHook + "- --overwrite",
				"wait machines.cluster.x-k8s.io m2 m3 --for=delete --timeout=2h"}, nil, ""},
		{"a node without the unit label", unit,
			map[string]string{"nodes": nodes, "machines": old, "deleting": "n3\n", "unit": "n1\nn2\nn3\n"},
			[]string{"kubectl gang-drain run n3 --run-id h100-a-to-1.38 --timeout 1h",
				"annotate machines.cluster.x-k8s.io m3 " + capiDeleteFirst,
				"wait machines.cluster.x-k8s.io m3 --for=delete --timeout=1h"}, []string{"gang-drain run n1"}, "node n3 has no gpufleet.dev/rack-set label: it is drained alone, by name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, out := runCAPI(t, tc.block, tc.files)
			if len(tc.want) > 0 {
				wantInOrder(t, "calls", calls, tc.want...)
			}
			if len(tc.wantNot) > 0 {
				wantNotIn(t, "calls", calls, tc.wantNot...)
			}
			if tc.wantSaid != "" {
				wantIn(t, "output", out, tc.wantSaid)
			}
		})
	}
}

// A MachineDeployment the release moved stays at the Cluster's version
// under a defer-upgrade (cluster-api v1.14.0 computeMachineDeploymentVersion),
// so the GPU pool's way back says its rollout only goes forward, keeps the
// hooks, sends the reader back to the unit block and restores the run only
// after gpu-validate passes, never draining the whole pool or lifting the
// hooks; and the step and Before you start say what the serial rollout
// costs.
func TestCAPIRollbackGoesForward(t *testing.T) {
	p := variantPlan(t, "capi")
	s := lastStepOf(t, p, PhaseNodePool, "h100-a")
	back := rollbackText(s)
	wantIn(t, "rollback", back, "holding the topologies again stops only those not yet moved", "only goes forward", "keep the pre-drain hooks", "paste the step's unit block again")
	wantInOrder(t, "rollback", back,
		"kubectl gpu-validate nodes -l node.cluster.x-k8s.io/pool=h100-a --kubelet-version v1.38 --xid --dcgm && \\",
		`kubectl gang-drain restore "h100-a-to-1.38" --dry-run && \`,
		`kubectl gang-drain restore "h100-a-to-1.38"`)
	wantNotIn(t, "rollback", back, capiHook+"-", "kubectl gang-drain run -l")
	cost := "sits cordoned for k replacement cycles"
	wantIn(t, "step", cmds(s), cost, "the earliest-drained gangs stay stopped for the pool's whole serial time (8 Machines, one cycle each)")
	wantIn(t, "Before you start", strings.Join(p.Warnings, "\n"), cost, "the earliest-drained gangs stay stopped for the pool's whole serial time")
}

// The Standby check tells a describe call that failed from a group with
// instances in Standby, and the way back's new refresh makes it too.
func TestASGStandbyCheck(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	start := lineWith(t, rollbackText(s), `case "$S" in Pending|InProgress|Baking) aws autoscaling rollback-instance-refresh`)
	check := asgNoStandby(`aws autoscaling describe-auto-scaling-groups --auto-scaling-group-names "$ASG"`)
	failing := `aws() { echo "aws $*" >> "$D/calls"; case "$*" in *Standby*) echo "An error occurred (AccessDenied) when calling the DescribeAutoScalingGroups operation" >&2; return 254;; esac; }` + "\n"
	for _, tc := range []struct {
		name     string
		script   string
		files    map[string]string
		started  bool
		wantSaid string
	}{
		{"none in Standby", check + " && echo checked", nil, false, "checked"},
		{"one in Standby", check, map[string]string{"standby": "1\n"}, false, "has instances in Standby (1)"},
		{"the describe fails", failing + check, nil, false, "could not read the instances of group gpu-h100-asg"},
		{"no count printed", check, map[string]string{"standby": "None\n"}, false, "could not read the instances of group gpu-h100-asg"},
		{"the way back, none in Standby", "S=Successful LT=lt-0abc OLD=7 && " + start, nil, true, ""},
		{"the way back, one in Standby", "S=Successful LT=lt-0abc OLD=7 && " + start, map[string]string{"standby": "1\n"}, false, "has instances in Standby (1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, out, _ := runASG(t, tc.script, tc.files)
			if got := strings.Contains(calls, "start-instance-refresh"); got != tc.started {
				t.Errorf("refresh started %v, want %v\n%s\n%s", got, tc.started, out, calls)
			}
			if tc.wantSaid != "" {
				wantIn(t, "output", out, tc.wantSaid)
			}
			if strings.Contains(tc.name, "fails") || strings.Contains(tc.name, "no count") {
				wantNotIn(t, "output", out, "in Standby (")
			}
		})
	}
}
