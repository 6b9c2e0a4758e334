package deprecations

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl deprecations`.
// The live-objects source lists every served resource, about fifty
// requests on a bare cluster: at client-go's default 5 requests a second
// that was eight seconds of waiting per context (the server took 0.2 s),
// and a sweep waited it out once per --parallel slot's worth of
// contexts. The server's priority and fairness still bounds what it
// serves.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s", QPS: 50, Burst: 100}

var long = templates.LongDesc(`
	Find who still uses deprecated or removed Kubernetes APIs, judged against a
	target release (default: the server's next minor).

	Sources, most reliable first: the apiserver metric
	apiserver_requested_deprecated_apis (per apiserver instance, reset on
	restart), audit logs (--audit-log: who called, with user agent, verb,
	counts and first/last seen), live objects (the apiVersion each field
	manager wrote in, and kubectl's last-applied annotation when a live writer
	still uses it), Helm release records (the deployed revision, or every kept
	one with --helm-history), CustomResourceDefinitions (deprecated versions,
	stored versions that are deprecated or no longer served) and manifests
	(-f files, directories, stdin, -k kustomizations).

	The lifecycle data is generated from the prerelease-lifecycle markers of
	Kubernetes itself; add third-party APIs with --rules (this tool's format
	or pluto's versions file). Removed at the target is blocking (exit 1),
	deprecated is a warning. Files that cannot be parsed, and charts with
	unrendered templates, are listed on stderr (and under notScanned in
	-o json), counted in the summary and never dropped silently: a file
	that is not scanned at all makes the exit code 3 (could not read
	everything), unless a worse code applies. A -f, -k or --audit-log path
	that does not exist, and a file, directory or stdin that holds no
	object (an audit log no event), are refused with exit 3 before
	anything is printed.`)

var example = templates.Examples(`
  # What the apiserver saw, objects, Helm releases and CRDs, for the next minor
  kubectl deprecations

  # Two minors ahead, with the callers from the audit log
  kubectl deprecations --target +2 --audit-log /var/log/kubernetes/audit.log

  # Manifests in a repository, for CI: exit 1 on anything removed within two minors
  kubectl deprecations --ci -f ./deploy

  # A rendered chart
  helm template my-release ./chart | kubectl deprecations --target v1.36 -f -

  # Every context of the kubeconfig, each against its own server's next minor
  kubectl deprecations --all-contexts

  # The lifecycle table
  kubectl deprecations rules -o yaml`)

// NewCmd returns the root command of kubectl-deprecations.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:         "deprecations [flags]",
		Short:       "Find who still uses deprecated or removed Kubernetes APIs",
		Long:        long,
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl deprecations"},
		RunE:        cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, statusWords...)
	o.AddFlags(cmd)
	cmd.AddCommand(newRulesCmd(streams))
	cmd.AddCommand(newFixHelmCmd(cg, streams))
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}

// RulesOptions holds the state of `kubectl deprecations rules`.
type RulesOptions struct {
	Print      *cli.PrintFlags
	RulesFiles []string
	genericiooptions.IOStreams
}

// RulesReport is the lifecycle table as printed by `rules -o json|yaml`; it
// is also a valid --rules file.
type RulesReport struct {
	APIVersion string               `json:"apiVersion"`
	Kind       string               `json:"kind"`
	Source     string               `json:"source"`
	Items      []apilifecycle.Entry `json:"items"`
}

func newRulesCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := &RulesOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputWide, cli.OutputJSON, cli.OutputYAML, outputMapKubeAPIs), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "rules [flags]",
		Short: "Print the API lifecycle table",
		Long: templates.LongDesc(`
			Print the API lifecycle table: for every prerelease API kind, the release it
			was introduced, deprecated and removed in, and its replacement with the
			release that first served it. Generated from the prerelease-lifecycle
			markers of k8s.io/api, k8s.io/apiextensions-apiserver and
			k8s.io/kube-aggregator; --rules adds or overrides entries. The yaml output
			is itself a valid --rules file; -o mapkubeapis prints the Kubernetes
			entries as a map file of the helm-mapkubeapis plugin.`),
		Example: templates.Examples(`
  # Every entry
  kubectl deprecations rules

  # Edit and feed back
  kubectl deprecations rules -o yaml > rules.yaml && kubectl deprecations --rules rules.yaml

  # A map file for the helm-mapkubeapis plugin
  kubectl deprecations rules -o mapkubeapis > Map.yaml && helm mapkubeapis RELEASE --mapfile Map.yaml`),
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cli.OfflineAnnotation: "true"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Print.Validate(); err != nil {
				return cli.UsageErr(err)
			}
			cmd.SilenceUsage = true
			return o.Run()
		},
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringSliceVar(&o.RulesFiles, "rules", o.RulesFiles, "Extra lifecycle rules files to merge (this tool's format or pluto's versions file).")
	_ = cmd.MarkFlagFilename("rules")
	return cmd
}

// Run prints the table.
func (o *RulesOptions) Run() error {
	tab, err := loadTable(o.RulesFiles)
	if err != nil {
		return err
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Output == outputMapKubeAPIs {
		return printMapKubeAPIs(o.Out, tab)
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, RulesReport{APIVersion: cli.APIVersion, Kind: apilifecycle.RulesKind,
			Source: apilifecycle.BuiltinSource(), Items: tab.Entries()})
	}
	// API and KIND stay whole; REPLACEMENT is shortened and AVAILABLE
	// left to -o wide when they do not fit beside them.
	t := cli.Table{Columns: []cli.Column{{Name: "API"},
		{Name: "KIND"}, {Name: "RESOURCE", Wide: true}, {Name: "INTRODUCED", Wide: true},
		{Name: "DEPRECATED"}, {Name: "REMOVED"}, {Name: "REPLACEMENT", Shrink: true, Min: 18, Elide: cli.ElideMiddle},
		{Name: "AVAILABLE", Drop: true}, {Name: "SOURCE", Wide: true}}}
	for _, e := range tab.Entries() {
		kind := e.Kind
		if kind == "" {
			kind = "*"
		}
		if e.Component != "" {
			kind += fmt.Sprintf(" (%s)", e.Component)
		}
		// The kind is said once, in KIND, when it stays the same.
		repl := e.Replacement.String()
		if e.Replacement.Kind == e.Kind {
			repl = e.Replacement.APIVersion()
		}
		if e.Replacement.IsZero() {
			repl = ""
		}
		t.AddRow(e.APIVersion(), kind, e.Resource, e.Introduced.String(), e.Deprecated.String(), e.Removed.String(),
			repl, e.ReplacementAvailable.String(), e.Source)
	}
	return t.Print(o.Out, o.Print.TableOptions())
}

// outputMapKubeAPIs is the -o of `rules` that prints a helm-mapkubeapis
// map file.
const outputMapKubeAPIs = "mapkubeapis"

func printMapKubeAPIs(w io.Writer, tab *apilifecycle.Table) error {
	b, err := yaml.Marshal(tab.MapKubeAPIs())
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "# helm-mapkubeapis map file, from %s (kubectl deprecations rules -o mapkubeapis)\n%s", apilifecycle.BuiltinSource(), b)
	return err
}
