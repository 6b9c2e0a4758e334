package skew

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// TestRunbookInferenceVariant pins the runbook of a kubeadm cluster with a
// training GPU pool and a GPU pool of inference workloads beside it
// (testdata/runbook/kubeadm-inference.yaml at the top of the repository).
func TestRunbookInferenceVariant(t *testing.T) {
	golden(t, filepath.Join("runbook", "kubeadm-inference.md"), variantRunbook(t, "kubeadm-inference"))
}

// Every gang-drain command of the runbooks (a line of a sh block that
// starts with it) parses with the real gang-drain command's arguments and
// flags; the inference pool's plan, run and restore carry --inference,
// and its plan and run a --hydrate-bandwidth.
func TestRunbookGangDrainFlags(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "runbook", "*.md.golden"))
	more, _ := filepath.Glob(filepath.Join("testdata", "runbook.*.md.golden"))
	files = append(files, more...)
	n, inf := 0, map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inSh := false
		for _, line := range strings.Split(string(b), "\n") {
			c := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(c, "```sh"):
				inSh = true
				continue
			case strings.HasPrefix(c, "```"):
				inSh = false
				continue
			}
			if !inSh || !strings.HasPrefix(c, "kubectl gang-drain ") {
				continue
			}
			if j := strings.Index(c, " &&"); j >= 0 {
				c = c[:j]
			}
			// The shell variables the runbook sets before: a batch of
			// nodes, a node, a fabric unit.
			c = strings.NewReplacer("$NODES", "node-1 node-2", "$NODE", "node-1", "$UNIT", "rs-01").Replace(c)
			n++
			args := shellWords(t, c)[2:]
			root := gangdrain.NewCmd(cli.NewTestClientGetter(), genericiooptions.NewTestIOStreamsDiscard())
			sub, rest, err := root.Find(args)
			if err != nil || sub == root {
				t.Errorf("%s: %q: no such gang-drain command: %v", f, c, err)
				continue
			}
			if err := sub.ParseFlags(rest); err != nil {
				t.Errorf("%s: %q: %v", f, c, err)
				continue
			}
			if err := sub.ValidateArgs(sub.Flags().Args()); err != nil {
				t.Errorf("%s: %q: %v", f, c, err)
			}
			on, err := sub.Flags().GetBool("inference")
			if err != nil || !on {
				continue
			}
			inf[sub.Name()]++
			if sub.Name() != "restore" && !sub.Flags().Changed("hydrate-bandwidth") {
				t.Errorf("%s: %q lacks --hydrate-bandwidth", f, c)
			}
		}
	}
	if n == 0 {
		t.Fatal("no gang-drain command in the runbook goldens")
	}
	for _, name := range []string{"plan", "run", "restore"} {
		if inf[name] == 0 {
			t.Errorf("no gang-drain %s --inference in the runbook goldens (%v)", name, inf)
		}
	}
}
