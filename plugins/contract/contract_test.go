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
			contracttest.RunWith(t, p.root, want, base, files)
			contracttest.CheckHelpLegend(t, p.root)
		})
	}
}

// TestTableVocabulary holds every table the plugins' goldens record (the
// output of each command's tables, default, wide and coloured) to the
// suite's vocabulary: the status column is STATUS, its words are pkg/cli's
// closed set, an empty cell is -, and a count's noun takes its number.
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
		contracttest.CheckPlurals(t, f, string(b))
		tables++
	}
	// Every plugin's tables are recorded: a glob that stopped matching
	// would check nothing.
	if tables < 40 {
		t.Errorf("only %d table goldens found", tables)
	}
}

// want are the exit codes that are not 2 (usage), and the file cases a
// flag takes as input (every other bad file is refused with exit 3).
var want = contracttest.Want{
	// A Deployment is a manifest to scan, and a probe to run.
	"kubectl deprecations --filename wrong-kind":     contracttest.Accepted,
	"kubectl skew preflight --probe-file wrong-kind": contracttest.Accepted,
	// A probe file that does not parse is a line of the admission-probes
	// gate (UNKNOWN) and the other gates run (TestPreflightBadProbeFiles).
	"kubectl skew preflight --probe-file unparsable": contracttest.Accepted,
}

// base are the arguments a command needs before the flag under test, and
// those a file flag needs to be read (the flags it goes with).
var base = contracttest.Base{
	"kubectl deprecations":       {"--target", "v1.37"},
	"kubectl gang-drain restore": {"node-1"},
	"kubectl skew preflight":     {"--target", "v1.37"},
	"kubectl skew verify":        {"--baseline", "{dir}/baseline.yaml"},
	// The audit log alone, as `zcat audit.log* | kubectl deprecations
	// --source audit --audit-log -` reads it.
	"kubectl deprecations --audit-log":           {"--source", "audit"},
	"kubectl skew preflight --promql-checks":     {"--prometheus-url", "http://127.0.0.1:1"},
	"kubectl skew preflight --etcd-cert":         {"--etcd-key", "{dir}/etcd.pem"},
	"kubectl skew preflight --etcd-key":          {"--etcd-cert", "{dir}/etcd.pem"},
	"kubectl skew verify --etcd-cert":            {"--etcd-key", "{dir}/etcd.pem"},
	"kubectl skew verify --etcd-key":             {"--etcd-cert", "{dir}/etcd.pem"},
	"kubectl gpu-validate nodes":                 {"-l", "pool=gpu"},
	"kubectl gpu-validate nodes --xid-catalog":   {"--xid"},
	"kubectl gpu-validate nodes --removed-gates": {"--config-drift"},
}

// files are the fixtures base names: a pre-flight baseline and a PEM file.
var files = contracttest.Files{
	"baseline.yaml": "apiVersion: gpufleet.dev/v1alpha1\nkind: SkewPreflightReport\ntarget: \"1.37\"\nevidence:\n  collectedAt: \"2026-12-04T13:57:43Z\"\n",
	"etcd.pem":      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
}
