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
	if run, err := chooses("describe-addon failed with ResourceNotFoundException", probe); !run || err != nil || len(probe[0].Problems) != 0 {
		t.Errorf("failed-with alternative: run %v err %v problems %v", run, err, probe[0].Problems)
	}
	if run, _ := chooses("describe-addon printed a version", probe); run {
		t.Error("printed-a-version alternative chosen after a failed probe")
	}
}
