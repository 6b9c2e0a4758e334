// Package contract holds the suite-wide bad-input test: every plugin and
// subcommand through the same bad inputs (pkg/cli/contracttest).
package contract

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/cli/contracttest"
	"github.com/gpufleet/upgrade-plugins/plugins/crdmigrate"
	"github.com/gpufleet/upgrade-plugins/plugins/deprecations"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
	"github.com/gpufleet/upgrade-plugins/plugins/gpuvalidate"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
	"github.com/gpufleet/upgrade-plugins/plugins/skew"
)

// The roots as each cmd/kubectl-*/main.go builds them.
func TestBadInput(t *testing.T) {
	for _, p := range []struct {
		name string
		root contracttest.NewRoot
	}{
		{"skew", func(s genericiooptions.IOStreams) *cobra.Command {
			return skew.NewCmd(cli.NewClientGetter(s, skew.ConfigOptions), s)
		}},
		{"deprecations", func(s genericiooptions.IOStreams) *cobra.Command {
			return deprecations.NewCmd(cli.NewClientGetter(s, deprecations.ConfigOptions), s)
		}},
		{"gang-drain", func(s genericiooptions.IOStreams) *cobra.Command {
			return gangdrain.NewCmd(cli.NewClientGetter(s, gangdrain.ConfigOptions), s)
		}},
		{"gpu-validate", func(s genericiooptions.IOStreams) *cobra.Command {
			return gpuvalidate.NewCmd(cli.NewClientGetter(s, gpuvalidate.ConfigOptions), s)
		}},
		{"pdb-blockers", func(s genericiooptions.IOStreams) *cobra.Command {
			return pdbblockers.NewCmd(cli.NewClientGetter(s, pdbblockers.ConfigOptions), s)
		}},
		{"crd-migrate", func(s genericiooptions.IOStreams) *cobra.Command {
			return crdmigrate.NewCmd(cli.NewClientGetter(s, crdmigrate.ConfigOptions), s)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			contracttest.Run(t, p.root, want, base)
			contracttest.CheckHelpLegend(t, p.root)
		})
	}
}

// TestTableVocabulary holds every table the plugins' goldens record (the
// output of each command's tables, default, wide and coloured) to the
// suite's vocabulary: the status column is STATUS, its words are pkg/cli's
// closed set, an empty cell is -.
func TestTableVocabulary(t *testing.T) {
	files, err := filepath.Glob("../*/testdata/*.golden")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("../../pkg/fleetrun/testdata/*.golden")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, more...)
	tables := 0
	for _, f := range files {
		if !strings.Contains(f, ".table.") && !strings.Contains(f, ".wide.") && !strings.Contains(f, ".color.") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		contracttest.CheckTables(t, f, string(b))
		tables++
	}
	// Every plugin's tables are recorded: a glob that stopped matching
	// would check nothing.
	if tables < 40 {
		t.Errorf("only %d table goldens found", tables)
	}
}

// want are the exit codes that are not 2 (usage).
var want = contracttest.Want{
	// A manifest that does not parse is listed under notScanned and the
	// run could not read everything: exit 3 (README's exit codes).
	"kubectl deprecations unparsable-file": 3,
	// A local input that cannot be read, or holds no object or audit
	// event, is refused: exit 3 (README's exit codes), nothing on stdout.
	"kubectl deprecations missing-file":    3,
	"kubectl deprecations empty-file":      3,
	"kubectl deprecations empty-audit-log": 3,
}

// base are the arguments a command needs before the flag under test.
var base = contracttest.Base{
	"kubectl deprecations":       {"--target", "v1.37"},
	"kubectl gang-drain restore": {"node-1"},
}
