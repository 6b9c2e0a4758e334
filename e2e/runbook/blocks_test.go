package runbooke2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseRunbook splits the kubeadm runbook the plugin's golden test
// pins into steps, blocks, host segments and loops.
func TestParseRunbook(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "plugins", "skew", "testdata", "runbook", "kubeadm-apt.md.golden"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := ParseRunbook(string(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 5 || steps[0].Number != 1 || steps[0].Phase != "pre-flight" {
		t.Fatalf("steps %+v", steps)
	}
	var hosts, loops int
	for _, st := range steps {
		if len(st.Blocks) == 0 {
			t.Errorf("step %d has no block", st.Number)
		}
		for _, b := range st.Blocks {
			for _, sg := range b.Segments() {
				if sg.Host != "" {
					hosts++
					for _, l := range sg.Lines {
						if strings.HasPrefix(l, "kubectl ") {
							t.Errorf("%s: kubectl in a host segment: %q", b.ID(), l)
						}
					}
				}
			}
			loops += len(b.Loops())
		}
	}
	if hosts == 0 || loops == 0 {
		t.Errorf("%d host segments, %d loops: want both", hosts, loops)
	}
}

func TestConditionAndPlaceholders(t *testing.T) {
	b := &Block{Intro: []string{"Run one of the next 2 blocks, by who manages vpc-cni:", "Only if describe-addon printed a version: vpc-cni is an EKS add-on:"}}
	if got := b.Condition(); got != "describe-addon printed a version" {
		t.Errorf("condition %q", got)
	}
	if got := Placeholders("a '<region>' b '1.38.<patch>' '<region>'"); strings.Join(got, ",") != "<region>,<patch>" {
		t.Errorf("placeholders %v", got)
	}
	probe := []*BlockResult{{Failures: []Failure{{Code: 254}}, Output: "An error occurred (ResourceNotFoundException)", Problems: []string{"exit 254: aws eks describe-addon"}}}
	if run, err := chooses("describe-addon failed with ResourceNotFoundException", probe, nil, nil, nil, nil); !run || err != nil || len(probe[0].Problems) != 0 {
		t.Errorf("failed-with alternative: run %v err %v problems %v", run, err, probe[0].Problems)
	}
	if run, _ := chooses("describe-addon printed a version", probe, nil, nil, nil, nil); run {
		t.Error("printed-a-version alternative chosen after a failed probe")
	}
}

// TestOSAlternatives reads where the OS alternatives of the kubeadm
// runbook are pasted (the prose's "on cp-0:", the "# on the node:" a
// per-node block ends on) and chooses the one of the node's OS family.
func TestOSAlternatives(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "plugins", "skew", "testdata", "runbook.kubeadm.md.golden"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := ParseRunbook(string(md))
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorld("kubeadm", "mixed-pools")
	hosts := &Hosts{W: w}
	var alts, apt, dnf, inLoop int
	for _, st := range steps {
		for i, b := range st.Blocks {
			cond := b.Condition()
			if !strings.HasPrefix(cond, "the node runs ") {
				continue
			}
			alts++
			if b.StartHost == "" {
				t.Errorf("%s: an OS alternative without the node it is pasted on", b.ID())
				continue
			}
			if b.StartHost == "the node" || strings.Contains(b.StartHost, "$") {
				if loops := st.Blocks[i-1].Loops(); len(loops) == 0 && !usesLoop(b, []Loop{{Var: "NODE"}}) {
					t.Errorf("%s: pasted on the loop's node but not in its loop", b.ID())
				}
				inLoop++
				continue
			}
			run, err := chooses(cond, nil, hosts, st, b, nil)
			if err != nil {
				t.Errorf("%s: %v", b.ID(), err)
			}
			if run && strings.Contains(cond, "Debian") {
				apt++
			}
			if run && strings.Contains(cond, "RHEL") {
				dnf++
			}
		}
	}
	// The control-plane nodes of the world run Ubuntu: the apt way only.
	if alts == 0 || inLoop == 0 || apt == 0 || dnf != 0 {
		t.Errorf("%d OS alternatives (%d in a node loop): %d apt, %d dnf chosen on Ubuntu control-plane nodes", alts, inLoop, apt, dnf)
	}
}

// "# on the node:" after a detour to another host returns to the node the
// block went to: each node of a batch, not the last $NODE of the terminal.
func TestTheNodeReturnsToTheBatch(t *testing.T) {
	b := &Block{Lines: []string{"# on each node of $NODES:", "# on cp-0, a control-plane node:", "sudo kubeadm token create --print-join-command", "# on the node:", "sudo kubeadm reset --force"}}
	segs := b.Segments()
	if len(segs) != 3 || segs[1].Host != "cp-0" || segs[2].Host != "each node of $NODES" {
		t.Errorf("segments %+v", segs)
	}
}

// TestRollbackBlocks marks a step's "Rollback, only if" section, and only
// it: the blocks before it are the step's own (the trigger declared under
// the heading marks none), every block after it is the rollback the reader
// pastes when the step failed.
func TestRollbackBlocks(t *testing.T) {
	md := "## Steps\n\n" +
		"1. **addons 1.36**: upgrade addons\n\n" +
		"   Roll back if an addon's rollout does not finish within 10 minutes: stop there and follow this step's rollback, at its end, instead of going on.\n\n" +
		"   ```sh\n   kubectl -n kube-system rollout status daemonset/kube-proxy\n   ```\n\n" +
		"   Rollback, only if the trigger above fired (otherwise go on to the next step):\n\n" +
		"   ```sh\n   kubectl -n kube-system rollout undo daemonset/kube-proxy\n   ```\n\n" +
		"   ```sh\n   # here:\n   kubectl uncordon \"$NODE\"\n   ```\n\n" +
		"2. **node-pool cpu**: upgrade node pool cpu\n\n" +
		"   ```sh\n   kubectl get nodes\n   ```\n"
	steps, err := ParseRunbook(md)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, st := range steps {
		for _, b := range st.Blocks {
			got = append(got, b.Rollback)
		}
	}
	if want := []bool{false, true, true, false}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("rollback marks %v, want %v", got, want)
	}
}
