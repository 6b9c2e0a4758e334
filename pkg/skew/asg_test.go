package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asgPlan is the kubeadm-on-EC2 plan with the named pools' groups.
func asgPlan(t *testing.T, inv Inventory, asgs map[string]string) Plan {
	t.Helper()
	p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{ASGs: asgs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// --asg is refused (MakePlan's error: exit 2 from kubectl skew plan) where
// the immutable path cannot follow the pool.
func TestASGRefused(t *testing.T) {
	noIDs := awsKubeadm(t)
	for i := range noIDs.Pools {
		if noIDs.Pools[i].Name == "gpu-h100" {
			noIDs.Pools[i].AWSNodes = 3
		}
	}
	for _, tc := range []struct {
		name string
		inv  Inventory
		asgs map[string]string
		want string // "" passes
	}{
		{"every node has an aws:// provider ID", awsKubeadm(t), map[string]string{"gpu-h100": "g"}, ""},
		{"a node without one", noIDs, map[string]string{"gpu-h100": "g"}, "--asg gpu-h100=g: 3 of pool gpu-h100's 4 nodes have an aws:// provider ID"},
		{"no provider IDs at all", variantInventory(t, "kubeadm-apt"), map[string]string{"cpu": "c"}, "--asg cpu=c: 0 of pool cpu's 3 nodes have an aws:// provider ID"},
		{"a misspelt pool", awsKubeadm(t), map[string]string{"gpu-h10": "g"}, "--asg gpu-h10=g: the cluster has no pool gpu-h10 (its pools: control-plane, cpu, gpu-h100)"},
		{"an EKS managed node group", variantInventory(t, "eks-managed"), map[string]string{"gpu-p5": "g"}, "--asg gpu-p5=g: EKS replaces pool gpu-p5's nodes itself"},
		{"the control plane", awsKubeadm(t), map[string]string{"control-plane": "cp"}, "--asg control-plane=cp: pool control-plane is the control plane's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MakePlan(tc.inv, MustParseVersion("v1.38"), PlanOptions{ASGs: tc.asgs})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// The hook holds each terminating instance with ABANDON as its default
// result, on a group that retains abandoned instances: an instance whose
// node was never drained is kept, not terminated. Both the step and its
// way back set it before the hook.
func TestASGHookRetainsUndrained(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	for where, text := range map[string]string{"step": cmds(s), "rollback": rollbackText(s)} {
		wantInOrder(t, where, text,
			`aws autoscaling update-auto-scaling-group --region us-east-2 --auto-scaling-group-name "$ASG" --instance-lifecycle-policy '{"RetentionTriggers":{"TerminateHookAbandon":"retain"}}' && \`,
			"--lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING --heartbeat-timeout 7200 --default-result ABANDON")
		wantNotIn(t, where, text, "--default-result CONTINUE")
	}
}

// asgStubs are aws, kubectl and sleep as bash functions over files in
// $D: each call is logged to $D/calls; describe-instance-refreshes says
// InProgress for $D/passes passes, then what $D/end holds (Successful);
// the group's instances in Terminating:Wait are $D/waiting; the nodes'
// provider IDs are $D/nodes; NotReady pool nodes are $D/notready.
const asgStubs = `
aws() { echo "aws $*" >> "$D/calls"
  local a p= v= q=
  for a; do case "$p" in --versions) v=$a;; --query) q=$a;; esac; p=$a; done
  case "$q" in
  'InstanceRefreshes[0].Status') n=$(cat "$D/n" 2>/dev/null || echo 0); echo $((n+1)) > "$D/n"
    if [ "$n" -lt "$(cat "$D/passes")" ]; then echo InProgress; else cat "$D/end"; fi;;
  *"Terminating:Wait"*) cat "$D/waiting" 2>/dev/null;;
  *LaunchTemplate.LaunchTemplateId) cat "$D/lt";;
  *LaunchTemplate.Version) cat "$D/ver";;
  'LaunchTemplateVersions[0].VersionNumber') cat "$D/vernum-$v" 2>/dev/null || echo None;;
  'LaunchTemplateVersions[0].LaunchTemplateData') cat "$D/data-$v";;
  LaunchTemplateVersion.VersionNumber) echo 8;;
  InstanceRefreshId) echo r-1;;
  'Images[0].State') cat "$D/image" 2>/dev/null || echo None;;
  *Standby*) cat "$D/standby" 2>/dev/null || echo 0;;
  length*) cat "$D/up" 2>/dev/null;;
  esac; }
kubectl() { echo "kubectl $*" >> "$D/calls"
  case "$*" in
  *custom-columns=NAME:.metadata.name,ID:.spec.providerID*) cat "$D/nodes";;
  "get nodes -l "*) cat "$D/notready" 2>/dev/null;;
  esac; }
sleep() { :; }
date() { n=$(cat "$D/clock" 2>/dev/null || echo 1000); echo $((n+600)) > "$D/clock"; echo "$n"; }
`

// runASG runs script after the stubs with files in a new $D, and returns
// the calls it made and its output.
func runASG(t *testing.T, script string, files map[string]string) (calls, out string, err error) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	d := t.TempDir()
	files = mergeFiles(map[string]string{"passes": "2", "end": "Successful"}, files)
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", asgStubs+script)
	cmd.Env = append(os.Environ(), "D="+d, "ASG=gpu-h100-asg", "REFRESH=r-1")
	b, err := cmd.CombinedOutput()
	c, _ := os.ReadFile(filepath.Join(d, "calls"))
	return string(c), string(b), err
}

func mergeFiles(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// asgWatchOf is the watch loop of a step's (or its rollback's) blocks.
func asgWatchOf(t *testing.T, blocks []Block) string {
	t.Helper()
	for _, b := range blocks {
		for _, c := range b.Commands {
			if strings.HasPrefix(c, "while S=$(aws autoscaling describe-instance-refreshes") {
				return c
			}
		}
	}
	t.Fatal("no watch loop")
	return ""
}

// The watch drains the node of each instance held in Terminating:Wait and
// lets the instance go; an instance without a node cancels the refresh and
// stops the watch, its instance never let go undrained.
func TestASGWatchStopsOnInstanceWithoutNode(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	for where, blocks := range map[string][]Block{"step": s.Blocks, "rollback": s.Rollback.Blocks} {
		watch := asgWatchOf(t, blocks)
		for _, tc := range []struct {
			name     string
			nodes    string
			want     []string
			wantNot  []string
			wantSaid string
		}{
			{"the node is found", "h100-a-1 aws:///us-east-2a/i-0aaa\nh100-a-2 aws:///us-east-2a/i-0bbb\n",
				[]string{"kubectl gang-drain run h100-a-1 --run-id", "aws autoscaling complete-lifecycle-action --region us-east-2 --auto-scaling-group-name gpu-h100-asg --lifecycle-hook-name gpufleet-drain --instance-id i-0aaa --lifecycle-action-result CONTINUE"},
				[]string{"cancel-instance-refresh"}, ""},
			{"no node has the instance's ID", "h100-a-2 aws:///us-east-2a/i-0bbb\n",
				[]string{"aws autoscaling cancel-instance-refresh --region us-east-2 --auto-scaling-group-name gpu-h100-asg"},
				[]string{"gang-drain run", "complete-lifecycle-action"}, "instance i-0aaa has no node"},
		} {
			t.Run(where+" "+tc.name, func(t *testing.T) {
				calls, out, err := runASG(t, watch, map[string]string{"waiting": "i-0aaa\n", "nodes": tc.nodes})
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				wantIn(t, "calls", calls, tc.want...)
				wantNotIn(t, "calls", calls, tc.wantNot...)
				if tc.wantSaid != "" {
					wantIn(t, "output", out, tc.wantSaid)
					// It stopped at once: one status read, no second pass.
					if n := strings.Count(calls, "describe-instance-refreshes"); n != 1 {
						t.Errorf("%d status reads after the cancel, want 1:\n%s", n, calls)
					}
				}
			})
		}
	}
}

// asgPrepOf is the step's first block: the launch template version, its
// diff, the refusal and the refresh's start.
func asgPrepOf(t *testing.T, s Step) string {
	t.Helper()
	for _, b := range s.Blocks {
		c := strings.Join(b.Commands, "\n")
		if strings.Contains(c, "create-launch-template-version") {
			return c
		}
	}
	t.Fatal("no launch template block")
	return ""
}

// ltData is a launch template version's LaunchTemplateData as the aws
// CLI prints it with --output json.
func ltData(ami, itype string) string {
	return "{\n    \"ImageId\": \"" + ami + "\",\n    \"InstanceType\": \"" + itype + "\",\n    \"UserData\": \"IyEvYmluL2Jhc2g=\"\n}\n"
}

// The version kept for the way back is a number: a group on $Latest or
// $Default has it resolved (and is put on the number before the new
// version exists); a group without a launch template of its own is
// refused before anything is made.
func TestASGOldVersionIsANumber(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	prep := asgPrepOf(t, s)
	for _, tc := range []struct {
		name, lt, ver string
		ok            bool
		said          string
	}{
		{"a number", "lt-0abc", "7", true, ""},
		{"$Latest", "lt-0abc", "$Latest", true, ""},
		{"$Default", "lt-0abc", "$Default", true, ""},
		{"a mixed instances policy", "None", "None", false, "has no launch template of its own"},
		{"an AMI that is not available", "lt-0abc", "7", false, "is not an available image"},
		{"an instance in Standby", "lt-0abc", "7", false, "has instances in Standby"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"lt": tc.lt + "\n", "ver": tc.ver + "\n", "vernum-" + tc.ver: "7\n", "vernum-7": "7\n",
				"data-7": ltData("ami-old", "p5.48xlarge"), "data-8": ltData("<1.38-ami-id>", "p5.48xlarge"), "image": "available\n"}
			if tc.name == "an AMI that is not available" {
				files["image"] = "pending\n"
			}
			if tc.name == "an instance in Standby" {
				// An instance refresh waits an hour for it, then fails.
				files["standby"] = "1\n"
			}
			calls, out, err := runASG(t, "cd \"$D\"\n"+prep+"\necho KEPT=$(cat lt-gpu-h100-old.version)", files)
			if !tc.ok {
				wantIn(t, "output", out, tc.said)
				wantNotIn(t, "calls", calls, "create-launch-template-version", "--launch-template {", "put-lifecycle-hook", "start-instance-refresh")
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, out, calls)
			}
			wantInOrder(t, "calls", calls,
				`update-auto-scaling-group --region us-east-2 --auto-scaling-group-name gpu-h100-asg --launch-template {"LaunchTemplateId":"lt-0abc","Version":"7"}`,
				"create-launch-template-version --region us-east-2 --launch-template-id lt-0abc --source-version 7 ",
				"start-instance-refresh")
			wantIn(t, "output", out, "KEPT=7\n")
		})
	}
}

// The refusal passes only when both versions were read and the AMI alone
// differs; a missing file, another field or another AMI stops the chain
// before the hook and the refresh.
func TestASGRefusesAnythingButTheAMI(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	refuse := strings.TrimSuffix(lineWith(t, asgPrepOf(t, s), "{ [ -s lt-gpu-h100-old.json ]"), " && \\")
	for _, tc := range []struct {
		name     string
		old, new string // "" leaves the file out
		ok       bool
	}{
		{"the AMI alone differs", ltData("ami-old", "p5.48xlarge"), ltData("ami-new", "p5.48xlarge"), true},
		{"the instance type differs too", ltData("ami-old", "p5.48xlarge"), ltData("ami-new", "p4d.24xlarge"), false},
		{"another AMI", ltData("ami-old", "p5.48xlarge"), ltData("ami-other", "p5.48xlarge"), false},
		{"neither file", "", "", false},
		{"the new version unread", ltData("ami-old", "p5.48xlarge"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			if tc.old != "" {
				files["lt-gpu-h100-old.json"] = tc.old
			}
			if tc.new != "" {
				files["lt-gpu-h100-new.json"] = tc.new
			}
			calls, out, err := runASG(t, "cd \"$D\" && AMI=ami-new OLD=7 NEW=8 && "+refuse+" && aws autoscaling start-instance-refresh", files)
			if started := strings.Contains(calls, "start-instance-refresh"); started != tc.ok || (err == nil) != tc.ok {
				t.Fatalf("started %v, exit %v, want passing %v\n%s", started, err, tc.ok, out)
			}
			if !tc.ok {
				wantIn(t, "output", out, "refused; version 8 stays unused")
			}
		})
	}
}

// Instances waiting together are drained together, each first given a
// heartbeat, and let go together; their Nodes are deleted once the
// instances are terminated, so they do not count as NotReady.
func TestASGWatchDrainsWaitingInstancesAtOnce(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	watch := asgWatchOf(t, s.Blocks)
	calls, out, err := runASG(t, watch, map[string]string{"passes": "1", "waiting": "i-0aaa i-0bbb\n",
		"nodes": "h100-a-1 aws:///us-east-2a/i-0aaa\nh100-a-2 aws:///us-east-2a/i-0bbb\nh100-b-1 aws:///us-east-2b/i-0ccc\n"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantInOrder(t, "calls", calls,
		"record-lifecycle-action-heartbeat --region us-east-2 --auto-scaling-group-name gpu-h100-asg --lifecycle-hook-name gpufleet-drain --instance-id i-0aaa",
		"record-lifecycle-action-heartbeat --region us-east-2 --auto-scaling-group-name gpu-h100-asg --lifecycle-hook-name gpufleet-drain --instance-id i-0bbb",
		"kubectl gang-drain run h100-a-1 h100-a-2 --run-id gpu-h100-to-1.38 --timeout 1h",
		"complete-lifecycle-action --region us-east-2 --auto-scaling-group-name gpu-h100-asg --lifecycle-hook-name gpufleet-drain --instance-id i-0aaa",
		"complete-lifecycle-action --region us-east-2 --auto-scaling-group-name gpu-h100-asg --lifecycle-hook-name gpufleet-drain --instance-id i-0bbb",
		"aws ec2 wait instance-terminated --region us-east-2 --instance-ids i-0aaa i-0bbb",
		"kubectl delete node h100-a-1 h100-a-2 --ignore-not-found")
	if n := strings.Count(calls, "gang-drain run"); n != 1 {
		t.Errorf("%d drains, want one for both nodes:\n%s", n, calls)
	}
}

// The forward watch rolls the refresh back when instances launched from
// the new version are InService but do not become Ready nodes at the
// target minor within 15 minutes (each date call here is 10 minutes
// later); nodes that join keep it going, and the rollback's own watch has
// no such check.
func TestASGWatchRollsBackWhenTheImageDoesNotJoin(t *testing.T) {
	s := lastStepOf(t, asgPlan(t, awsKubeadm(t), map[string]string{"gpu-h100": "gpu-h100-asg"}), PhaseNodePool, "gpu-h100")
	watch := "NEW=9; " + asgWatchOf(t, s.Blocks)
	for _, tc := range []struct {
		name, ready string
		rollback    bool
	}{
		{"two InService, none joined", "h100-a-1   NotReady   <none>   3m   v1.38.2\nh100-a-2   Ready   <none>   90d   v1.37.4\n", true},
		{"two InService, two joined", "h100-a-1   Ready   <none>   3m   v1.38.2\nh100-a-2   Ready   <none>   4m   v1.38.2\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, out, err := runASG(t, watch, map[string]string{"passes": "4", "up": "2\n", "notready": strings.ReplaceAll(tc.ready, `\n`, "\n"), "nodes": ""})
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			wantInOrder(t, "calls", calls, `length(AutoScalingGroups[0].Instances[?LaunchTemplate.Version=='9' && LifecycleState=='InService'])`)
			if got := strings.Contains(calls, "aws autoscaling rollback-instance-refresh --region us-east-2 --auto-scaling-group-name gpu-h100-asg"); got != tc.rollback {
				t.Errorf("rollback-instance-refresh called: %v, want %v\n%s\n%s", got, tc.rollback, calls, out)
			}
			if tc.rollback && !strings.Contains(out, "2 instances launched from launch template version 9 are InService but 0 nodes of the pool are Ready at v1.38") {
				t.Errorf("no reason given:\n%s", out)
			}
		})
	}
	if w := asgWatchOf(t, s.Rollback.Blocks); strings.Contains(w, "rollback-instance-refresh") {
		t.Errorf("the rollback's watch rolls back itself:\n%s", w)
	}
}
