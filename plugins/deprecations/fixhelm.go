package deprecations

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

// FixHelmKillEnv names the test hook of fix-helm: when it is set to
// "after-create", the process kills itself (SIGKILL, no clean-up) right
// after it has stored a release's new revision and before it marks the old
// one superseded, the worst moment to lose a run. The e2e suite uses it to
// prove that a re-run finishes the job.
const FixHelmKillEnv = "GPUFLEET_TEST_FIX_HELM_KILL"

// FixHelmOptions holds the state of `kubectl deprecations fix-helm`.
type FixHelmOptions struct {
	Print             *cli.PrintFlags
	TargetVersion     string
	IncludeDeprecated bool
	DryRun            bool
	AllNamespaces     bool
	RulesFiles        []string

	releases  []string
	cg        cli.ClientGetter
	namespace string
	table     *apilifecycle.Table
	target    dep.TargetSpec
	dryRun    cli.DryRunFlag
	genericiooptions.IOStreams
}

// FixHelmReport is what fix-helm prints with -o json|yaml.
type FixHelmReport struct {
	cli.Header
	TargetVersion string        `json:"target"`
	DryRun        bool          `json:"dryRun"`
	Items         []dep.HelmFix `json:"items"`
	// Errors are the storages that could not be read.
	Errors  []string       `json:"errors,omitempty"`
	Summary FixHelmSummary `json:"summary"`
}

// FixHelmSummary counts the releases by action.
type FixHelmSummary struct {
	Fixed            int `json:"fixed"`
	Finished         int `json:"finished"`
	Planned          int `json:"planned"`
	NeedsChartChange int `json:"needsChartChange"`
	UpToDate         int `json:"upToDate"`
	Skipped          int `json:"skipped"`
	Failed           int `json:"failed"`
}

func newFixHelmCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &FixHelmOptions{Print: cli.NewPrintFlags(), IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "fix-helm [RELEASE...] [-n NAMESPACE | --all-namespaces] [flags]",
		Short: "Map removed APIs in Helm release records to their replacements",
		Long: templates.LongDesc(`
			Repair Helm release records whose deployed revision stores an API that is
			removed at the target release (or deprecated, with --include-deprecated):
			helm upgrade and helm rollback fail on such a record even after the chart
			is fixed. fix-helm writes what Helm itself writes for an upgrade: a new
			revision (the last one + 1) whose stored manifest and hooks use each
			object's replacement apiVersion, status deployed, and marks the previous
			deployed revision superseded, so helm history and helm rollback keep
			working. Records are read and written with Helm's own storage drivers
			(Secret and ConfigMap), so releases made by Helm 3 and Helm 4 both work.

			Only a pure apiVersion/kind mapping from the lifecycle table is made. A
			release with an object whose replacement needs field changes (for
			example an extensions/v1beta1 Ingress with serviceName), or that has no
			replacement, is left alone and reported with the chart change it needs.

			Interrupted between its two writes, a run leaves two deployed revisions;
			running the same command again only supersedes the old one. --dry-run
			prints a unified diff of each stored manifest and changes nothing.`),
		Example: templates.Examples(`
  # What would change in one namespace, as diffs
  kubectl deprecations fix-helm -n apps --dry-run

  # Repair two releases
  kubectl deprecations fix-helm web api -n apps

  # Every namespace, two minors ahead, deprecated APIs too
  kubectl deprecations fix-helm --all-namespaces --target +2 --include-deprecated`),
		RunE: cli.RunE(cg, o),
	}
	f := cmd.Flags()
	cli.AddTargetFlag(cmd, &o.TargetVersion, "Release to check against: v1.35, or +1 / +2 minors after the server. Default: the server's next minor. (--target-version is an alias.)", []string{"+1", "+2"})
	f.BoolVar(&o.IncludeDeprecated, "include-deprecated", o.IncludeDeprecated, "Map APIs deprecated at the target too, not only removed ones.")
	o.dryRun = cli.DryRunFlag{Client: "print a unified diff of each stored manifest that would change, and write nothing", NoServer: "Helm's storage drivers write release records without a dry-run option"}
	o.dryRun.AddFlags(cmd)
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "Releases in every namespace.")
	f.StringSliceVar(&o.RulesFiles, "rules", o.RulesFiles, "Extra lifecycle rules files to merge (this tool's format or pluto's versions file).")
	_ = cmd.MarkFlagFilename("rules")
	o.Print.AddFlags(cmd)
	return cmd
}

// Complete reads the release names and the namespace.
func (o *FixHelmOptions) Complete(cg cli.ClientGetter, _ *cobra.Command, args []string) error {
	o.cg, o.releases = cg, args
	cli.SetQuiet(cg, o.Print.Quiet)
	ns, explicit, err := cg.Namespace()
	if err != nil {
		return cli.KubeconfigErr(err)
	}
	if o.AllNamespaces && explicit {
		return cli.Usagef("give -n or --all-namespaces, not both")
	}
	if !o.AllNamespaces {
		o.namespace = ns
	}
	return nil
}

// Validate checks the flags without touching the network.
func (o *FixHelmOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.dryRun.Validate(); err != nil {
		return err
	}
	o.DryRun = o.dryRun.Enabled()
	t, err := dep.ParseTarget(o.TargetVersion)
	if err != nil {
		return err
	}
	o.target = t
	if o.AllNamespaces && len(o.releases) > 0 {
		return errors.New("name releases with -n NAMESPACE; --all-namespaces takes no release names")
	}
	if !o.AllNamespaces && o.namespace == "" {
		return errors.New("no namespace: give -n NAMESPACE or --all-namespaces")
	}
	tab, err := loadTable(o.RulesFiles)
	if err != nil {
		return err
	}
	o.table = tab
	return nil
}

// Run fixes (or plans) the releases and prints the report.
func (o *FixHelmOptions) Run(ctx context.Context) error {
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return err
	}
	sv, err := apilifecycle.ParseRelease(md.ServerVersion)
	if err != nil {
		return cli.ClusterErr(fmt.Errorf("cannot read the server version %q: %w", md.ServerVersion, err))
	}
	target, err := o.target.Resolve(sv)
	if err != nil {
		return cli.UsageErr(err)
	}
	if err := checkTarget(target, "kubectl deprecations fix-helm"); err != nil {
		return err
	}
	kc, err := o.cg.Kube()
	if err != nil {
		return err
	}
	fixer := &dep.HelmFixer{Kube: kc, Table: o.table, Target: target, IncludeDeprecated: o.IncludeDeprecated,
		Namespace: o.namespace, Releases: o.releases, DryRun: o.DryRun}
	if dc, derr := o.cg.Discovery(); derr == nil {
		if served, serr := dep.Discover(dc); serr == nil && served != nil {
			fixer.Served = served.Serves
		}
	}
	progress := cli.NewProgress(o.ErrOut, cli.IsTerminal(o.ErrOut), o.Print.Quiet || o.Print.Structured())
	fixer.OnChange = func(f dep.HelmFix, what string) {
		progress.Event("%s/%s: %s (%s storage)", f.Namespace, f.Release, what, strings.ToLower(f.Storage))
	}
	if os.Getenv(FixHelmKillEnv) == "after-create" {
		fixer.AfterCreate = func(dep.HelmFix) error {
			p, err := os.FindProcess(os.Getpid())
			if err == nil {
				err = p.Kill()
			}
			return fmt.Errorf("%s=after-create: %v", FixHelmKillEnv, err)
		}
	}
	res, runErr := fixer.Run(ctx)
	var nf *dep.HelmReleaseNotFoundError
	if errors.As(runErr, &nf) {
		return cli.WithHint(cli.UsageErr(runErr), "helm list "+o.namespaceArgs())
	}
	if runErr != nil && len(res.Items) == 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(res.ListErrors) > 0 {
			runErr = res.ListErrors[0]
		}
		return cli.ClassifyClusterErr(runErr, md, "reading Helm releases")
	}
	rep := FixHelmReport{Header: cli.NewHeader("FixHelmReport", md), TargetVersion: target.String(), DryRun: o.DryRun, Items: res.Items}
	if rep.Items == nil {
		rep.Items = []dep.HelmFix{}
	}
	code := cli.ExitOK
	// first is the first failure, for the error line: a storage that could
	// not be listed, else a release that could not be written.
	var first error
	for _, e := range res.ListErrors {
		rep.Errors = append(rep.Errors, e.Error())
		ce := cli.ClassifyClusterErr(e, md, "reading Helm releases")
		code = cli.Worst(code, cli.ExitCode(ce))
		if first == nil {
			first = ce
		}
	}
	for _, it := range res.Items {
		switch it.Action {
		case dep.HelmFixFixed:
			rep.Summary.Fixed++
		case dep.HelmFixFinished:
			rep.Summary.Finished++
		case dep.HelmFixPlanned:
			rep.Summary.Planned++
		case dep.HelmFixNeedsChart:
			rep.Summary.NeedsChartChange++
			code = cli.Worst(code, cli.ExitFindings)
		case dep.HelmFixUpToDate:
			rep.Summary.UpToDate++
		case dep.HelmFixSkipped:
			rep.Summary.Skipped++
			code = cli.Worst(code, cli.ExitFindings)
		case dep.HelmFixFailed:
			rep.Summary.Failed++
			c := cli.ExitIncomplete
			if it.Forbidden {
				c = cli.ExitUnavailable
			}
			code = cli.Worst(code, c)
			if first == nil {
				first = fmt.Errorf("%s/%s: %s", it.Namespace, it.Release, it.Error)
			}
		}
	}
	if err := o.print(rep); err != nil {
		return err
	}
	if runErr != nil {
		return cli.Incomplete(fmt.Errorf("stopped: %w", runErr))
	}
	again := "kubectl deprecations fix-helm " + o.namespaceArgs()
	switch code {
	case cli.ExitOK:
		return nil
	case cli.ExitFindings:
		return cli.Findings(rep.Summary.NeedsChartChange + rep.Summary.Skipped)
	case cli.ExitIncomplete:
		return cli.WithHint(cli.Incomplete(fmt.Errorf("%s not fixed, first %w; run the same command again", cli.Plural(rep.Summary.Failed, "release"), first)), again)
	}
	if rep.Summary.Failed+len(res.ListErrors) > 1 {
		first = fmt.Errorf("%w (and %d more failures in the report)", first, rep.Summary.Failed+len(res.ListErrors)-1)
	}
	return cli.WithHint(&cli.ExitError{Code: code, Err: first}, "grant deploy/rbac/deprecations-fix-helm.yaml, then "+again)
}

func (o *FixHelmOptions) namespaceArgs() string {
	if o.AllNamespaces {
		return "--all-namespaces"
	}
	return "-n " + o.namespace
}

// print writes the report: JSON or YAML, or a table of releases with, on
// a dry run, each diff, and the chart changes that are needed.
func (o *FixHelmOptions) print(rep FixHelmReport) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	if len(rep.Items) == 0 {
		for _, e := range rep.Errors {
			fmt.Fprintf(o.ErrOut, "warning: %s\n", e)
		}
		_ = o.Print.PrintSummary(o.Out, false, fmt.Sprintf("No Helm releases found in %s.", strings.TrimPrefix(o.namespaceArgs(), "-n ")))
		return nil
	}
	if o.DryRun {
		for _, it := range rep.Items {
			if it.Diff != "" {
				fmt.Fprint(o.Out, it.Diff)
			}
		}
	}
	// The namespace and release stay whole: CHANGES is shortened, then
	// left to -o wide.
	t := cli.Table{Columns: []cli.Column{{Name: "NAMESPACE"},
		{Name: "RELEASE"}, {Name: "REVISION"}, {Name: "ACTION"},
		{Name: "CHANGES", Shrink: true, Min: 30, Drop: true}, {Name: "STORAGE", Wide: true}, {Name: "CHART", Wide: true}, {Name: "DETAIL", Wide: true}}}
	for _, it := range rep.Items {
		rev := fmt.Sprint(it.Revision)
		if it.NewRevision != 0 {
			rev += " -> " + fmt.Sprint(it.NewRevision)
		}
		var ch []string
		for _, c := range it.Changes {
			ch = append(ch, fmt.Sprintf("%s %s: %s -> %s", c.Kind, c.Name, c.APIVersion, c.NewAPIVersion))
		}
		for _, m := range it.NeedsChange {
			ch = append(ch, fmt.Sprintf("%s %s: %s needs a chart change", m.Kind, m.Name, m.APIVersion))
		}
		detail := it.Detail
		if it.Error != "" {
			detail = it.Error
		}
		t.AddRow(it.Namespace, it.Release, rev, string(it.Action), strings.Join(ch, "; "), it.Storage, it.Chart, detail)
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(o.ErrOut, "warning: %s\n", e)
	}
	for _, it := range rep.Items {
		for _, m := range it.NeedsChange {
			fmt.Fprintf(o.ErrOut, "%s/%s: %s %s (%s): %s. Chart change: %s\n", it.Namespace, it.Release, m.Kind, m.Name, m.APIVersion, m.Reason, m.Change)
		}
		if it.Action == dep.HelmFixSkipped || it.Action == dep.HelmFixFailed {
			msg := it.Detail
			if it.Error != "" {
				msg = it.Error
			}
			fmt.Fprintf(o.ErrOut, "%s/%s: %s: %s\n", it.Namespace, it.Release, it.Action, msg)
		}
	}
	return nil
}
