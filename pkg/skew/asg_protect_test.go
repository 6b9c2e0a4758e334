package skew

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// An instance refresh waits an hour for an instance protected from scale
// in, or one in Standby, and then fails, unless told otherwise
// (RefreshPreferences ScaleInProtectedInstances and StandbyInstances,
// "Wait (default)": aws-cli 1.45.11 help, asg.go). The step asks for
// Refresh on protected instances (each still waits at the terminating hook
// for its drain), refuses a group with instances in Standby before the
// refresh starts, and a GPU pool's step says that the refresh, not the
// fabric units, sets the order. The way back's refresh asks the same.
func TestRunbookASGProtectedStandbyOrder(t *testing.T) {
	asgs := map[string]string{"gpu-h100": "gpu-h100-asg", "cpu": "cpu-asg"}
	p, err := MakePlan(awsKubeadm(t), MustParseVersion("v1.38"), PlanOptions{ASGs: asgs})
	if err != nil {
		t.Fatal(err)
	}
	const prefs = `"ScaleInProtectedInstances":"Refresh","StandbyInstances":"Wait"}'`
	const order = "# and the order is the refresh's: an instance refresh has no preference that chooses which instances go next"
	for _, tc := range []struct {
		pool string
		gpu  bool
	}{
		{"gpu-h100", true},
		{"cpu", false},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			s := lastStepOf(t, p, PhaseNodePool, tc.pool)
			c := cmds(s)
			wantInOrder(t, "step", c, "contains(LifecycleState, 'Standby')", "aws autoscaling start-instance-refresh", prefs)
			if got := strings.Contains(c, order); got != tc.gpu {
				t.Errorf("the refresh's order stated: %v, want %v:\n%s", got, tc.gpu, c)
			}
			if tc.gpu && strings.Index(c, order) > strings.Index(c, "start-instance-refresh") {
				t.Errorf("the order's cost comes after the refresh starts:\n%s", c)
			}
			wantInOrder(t, "rollback", rollbackText(s), "aws autoscaling start-instance-refresh", prefs)
		})
	}
}

// The Standby check's query, run by the JMESPath library the aws CLI
// evaluates --query with, counts EnteringStandby and Standby instances
// and no other state.
func TestASGStandbyQuery(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil || exec.Command("python3", "-c", "import jmespath").Run() != nil {
		t.Skip("python3 with jmespath (botocore's dependency) is not installed")
	}
	q := regexp.MustCompile(`--query "([^"]+)"`).FindStringSubmatch(asgNoStandby("aws autoscaling describe-auto-scaling-groups"))
	if q == nil {
		t.Fatal("no --query in the Standby check")
	}
	for _, tc := range []struct {
		states string
		want   string
	}{
		{`"InService","Terminating:Wait","Pending"`, "0"},
		{`"InService","Standby"`, "1"},
		{`"EnteringStandby","Standby","InService"`, "2"},
		{``, "0"},
	} {
		script := `import jmespath, json, sys
states = json.loads("[" + sys.argv[2] + "]")
doc = {"AutoScalingGroups": [{"Instances": [{"LifecycleState": s} for s in states]}]}
print(jmespath.search(sys.argv[1], doc))`
		out, err := exec.Command("python3", "-c", script, q[1], tc.states).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.states, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("states [%s]: %s instances counted, want %s", tc.states, got, tc.want)
		}
	}
}
