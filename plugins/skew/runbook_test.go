package skew

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// TestRunbookGolden pins the Markdown runbook of the kubeadm-looking test
// cluster and of the same cluster with EKS commands chosen by --provider.
func TestRunbookGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"runbook.kubeadm", []string{"plan", "--target", "v1.38", "--runbook"}},
		{"runbook.eks", []string{"plan", "--target", "v1.38", "--runbook", "--provider", "eks"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, getter(cluster("v1.37.2")), "", tc.args...)
			if r.Code != cli.ExitFindings || r.Err != "" {
				t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
			}
			golden(t, tc.name+".md", r.Out)
			// Every numbered step has its fenced sh blocks, each closed.
			steps := regexp.MustCompile(`(?m)^[0-9]+\. \*\*`).Split(r.Out, -1)[1:]
			if len(steps) < 2 || strings.Count(r.Out, "**")/2 != len(steps) {
				t.Fatalf("want numbered steps:\n%s", r.Out)
			}
			for i, st := range steps {
				if n := strings.Count(st, "```sh"); n == 0 || strings.Count(st, "```") != 2*n {
					t.Errorf("step %d has no sh block, or one left open:\n%s", i+1, st)
				}
			}
		})
	}
}

// runbookVariants are the inventories of testdata/runbook at the top of
// the repository: one per provider and variant the runbook writes commands
// for, each planned offline to v1.38.
var runbookVariants = []string{"kubeadm-apt", "kubeadm-rpm", "kubeadm-ha", "eks-managed", "eks-selfmanaged", "eks-automode",
	"gke", "aks", "capi", "k3s-sqlite", "k3s-etcd", "rke2"}

func variantRunbook(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "testdata", "runbook")
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, offline, "", "plan", "--from-file", filepath.Join(dir, name+".yaml"), "--target", "v1.38", "--runbook",
		"--calendar", filepath.Join(dir, "calendar.yaml"))
	if r.Err != "" || (r.Code != cli.ExitOK && r.Code != cli.ExitFindings) {
		t.Fatalf("%s: exit %d\n%s%s", name, r.Code, r.Out, r.Err)
	}
	return r.Out
}

// TestRunbookVariants pins the runbook of every provider and variant.
func TestRunbookVariants(t *testing.T) {
	for _, name := range runbookVariants {
		t.Run(name, func(t *testing.T) {
			golden(t, filepath.Join("runbook", name+".md"), variantRunbook(t, name))
		})
	}
}

func TestRunbookFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		errOut string
	}{
		{[]string{"plan", "--target", "v1.38", "--provider", "openshift"}, "--provider: provider \"openshift\": want one of"},
		{[]string{"plan", "--target", "v1.38", "--runbook", "-o", "json"}, "--runbook prints Markdown"},
		{[]string{"plan", "--target", "v1.38", "--runbook", "--asg", "gpu-a"}, "--asg \"gpu-a\": want POOL=GROUP"},
	} {
		r := run(t, getter(cluster("v1.37.2")), "", tc.args...)
		if r.Code != cli.ExitUsage || !strings.Contains(r.Err, tc.errOut) {
			t.Errorf("%v: exit %d err %q", tc.args, r.Code, r.Err)
		}
	}
	// -o json carries the provider and each step's commands.
	r := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "v1.38", "-o", "json", "--provider", "gke")
	if !strings.Contains(r.Out, `"provider": "gke"`) || !strings.Contains(r.Out, `"source": "--provider"`) ||
		!strings.Contains(r.Out, `"gcloud container clusters upgrade '<cluster-name>' --master --cluster-version=1.38 --location='<location>' --quiet && \\"`) {
		t.Errorf("json:\n%s", r.Out)
	}
}

// The summary line counts one minor and one node in the singular.
func TestSummaryGrammar(t *testing.T) {
	c := fake.NewClientset(gpuNode("a-0", "a", "v1.36.2"))
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	r := run(t, getter(c), "", "--color", "never")
	if !strings.Contains(r.Out, "max skew 1 minor;") || !strings.Contains(r.Out, "on 1 node\n") {
		t.Errorf("summary:\n%s", r.Out)
	}
}

// README's runbook example is the e2e golden runbook, byte for byte, so
// the README shows what the binary prints.
func TestReadmeRunbookIsGolden(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join("..", "..", "e2e", "skew", "testdata", "runbook-eks.md.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "````markdown\n"+string(g)+"````\n") {
		t.Error("README.md's runbook example differs from e2e/skew/testdata/runbook-eks.md.golden: copy the golden file into it")
	}
}

// --asg names a pool's Auto Scaling group: its step replaces the nodes by
// an instance refresh instead of upgrading them in place.
func TestRunbookASGFlag(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "runbook")
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, offline, "", "plan", "--from-file", filepath.Join(dir, "kubeadm-aws.yaml"), "--target", "v1.38", "--runbook",
		"--calendar", filepath.Join(dir, "calendar.yaml"), "--asg", "gpu-h100=gpu-h100-asg")
	if r.Err != "" || !strings.Contains(r.Out, "ASG=gpu-h100-asg") || !strings.Contains(r.Out, "aws autoscaling start-instance-refresh") {
		t.Errorf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	// Refused with exit 2 where the path cannot follow the pool.
	for _, tc := range []struct {
		file, asg, want string
	}{
		{"kubeadm-apt.yaml", "gpu-h100=gpu-h100-asg", "0 of pool gpu-h100's 4 nodes have an aws:// provider ID"},
		{"kubeadm-aws.yaml", "gpu-h10=gpu-h100-asg", "the cluster has no pool gpu-h10"},
		{"eks-managed.yaml", "gpu-p5=gpu-p5-asg", "EKS replaces pool gpu-p5's nodes itself"},
	} {
		r := run(t, offline, "", "plan", "--from-file", filepath.Join(dir, tc.file), "--target", "v1.38", "--runbook",
			"--calendar", filepath.Join(dir, "calendar.yaml"), "--asg", tc.asg)
		if r.Code != 2 || !strings.Contains(r.Err, tc.want) || r.Out != "" {
			t.Errorf("%s --asg %s: exit %d, want 2 with %q\n%s%s", tc.file, tc.asg, r.Code, tc.want, r.Out, r.Err)
		}
	}
}

// Every runbook says how to paste it into zsh, and what it says works: an
// interactive zsh with interactive_comments set takes a block's comment
// lines and trailing notes as bash does, one without it does not.
func TestRunbookZshPasteNote(t *testing.T) {
	for _, name := range []string{"kubeadm-ha", "eks-managed", "k3s-etcd"} {
		if out := variantRunbook(t, name); !strings.Contains(out, "\n"+pasteNote+"\n") {
			t.Errorf("%s: no paste note:\n%s", name, out[:min(len(out), 400)])
		}
	}
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh is not installed")
	}
	const setopt = "setopt interactive_comments sh_word_split"
	if !strings.Contains(pasteNote, "`"+setopt+"`") {
		t.Fatalf("the paste note does not say %q: %s", setopt, pasteNote)
	}
	// A block that passes several nodes in $NODES, as the GPU batches do.
	block := "# the backup directory\nBACKUP_DIR='/backups'   # a directory off the cluster\nNODES='n-1 n-2'\nset -- $NODES\nprintf 'got=%s words=%d\\n' \"$BACKUP_DIR\" $#\nexit\n"
	for _, tc := range []struct {
		setopt bool
		want   string
	}{{true, "got=/backups words=2"}, {false, "got= words=1\n"}} {
		in := block
		if tc.setopt {
			in = setopt + "\n" + block
		}
		cmd := exec.Command("zsh", "-f", "-i")
		cmd.Stdin = strings.NewReader(in)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("setopt %v: want %q in\n%s", tc.setopt, tc.want, out)
		}
	}
}

// A step with a way back names its trigger right under its heading, before
// any of its commands, so that a reader pasting top down knows when to stop
// before acting; its rollback blocks close the step, after its own.
func TestRunbookTriggerBeforeCommands(t *testing.T) {
	runbooks := map[string]string{}
	for _, name := range runbookVariants {
		runbooks[name] = variantRunbook(t, name)
	}
	dir := filepath.Join("..", "..", "testdata", "runbook")
	offline := &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}
	r := run(t, offline, "", "plan", "--from-file", filepath.Join(dir, "kubeadm-aws.yaml"), "--target", "v1.38", "--runbook",
		"--calendar", filepath.Join(dir, "calendar.yaml"), "--asg", "gpu-h100=gpu-h100-asg")
	runbooks["kubeadm-aws --asg"] = r.Out
	head := regexp.MustCompile(`(?m)^[0-9]+\. \*\*`)
	withRollback := 0
	for name, md := range runbooks {
		for _, st := range head.Split(md, -1)[1:] {
			lines := strings.Split(st, "\n")
			trigger, firstBlock, back := -1, -1, -1
			for i, l := range lines {
				switch {
				case strings.HasPrefix(l, "   "+triggerHead+" "):
					if trigger >= 0 {
						t.Errorf("%s: two triggers in step %s", name, lines[0])
					}
					trigger = i
				case strings.TrimSpace(l) == "```sh" && firstBlock < 0:
					firstBlock = i
				case strings.TrimSpace(l) == rollbackHead:
					back = i
				}
			}
			if back < 0 {
				if trigger >= 0 {
					t.Errorf("%s: step %s names a trigger but has no rollback", name, lines[0])
				}
				continue
			}
			withRollback++
			// The heading, a blank line, then the trigger.
			if trigger != 2 || (firstBlock >= 0 && firstBlock < trigger) || back < firstBlock {
				t.Errorf("%s: step %s: trigger on line %d, first block on line %d, rollback on line %d; want the trigger right under the heading and the rollback after the step's blocks:\n%s",
					name, lines[0], trigger, firstBlock, back, st)
			}
		}
	}
	if withRollback == 0 {
		t.Fatal("no step with a rollback: the test checks nothing")
	}
}
