package skew

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// fleetProgrammeCmds are the fleet programme's subcommands (plan, step,
// gate, approve, halt, status, render, end). The orchestration lives in
// pkg/fleetrun; these wire flags and print.
func fleetProgrammeCmds(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) []*cobra.Command {
	return []*cobra.Command{
		newFleetPlanCmd(cg, streams, d), newFleetStepCmd(cg, streams, d), newFleetGateCmd(cg, streams, d),
		newFleetDecisionCmd(cg, streams, d, fleetrun.DecisionApprove), newFleetDecisionCmd(cg, streams, d, fleetrun.DecisionHalt),
		newFleetDecisionCmd(cg, streams, d, fleetrun.DecisionSkip),
		newFleetStatusCmd(cg, streams, d), newFleetRenderCmd(cg, streams, d), newFleetEndCmd(cg, streams, d),
	}
}

// runFlags are the flags that name a run and its store.
type runFlags struct {
	File    string
	Store   string
	RunName string

	fleet *fleetfile.Fleet
	cmd   *cobra.Command
}

func (f *runFlags) add(cmd *cobra.Command, needFile bool) {
	if needFile {
		cmd.Flags().StringVarP(&f.File, "filename", "f", f.File, "The fleet file (kind Fleet, gpufleet.dev/v1alpha1).")
	} else {
		cmd.Flags().StringVarP(&f.File, "filename", "f", f.File, "The fleet file, for its store URL (instead of --store).")
		cmd.Flags().StringVar(&f.Store, "store", f.Store, "The run's store: file:///path, s3://bucket/prefix, gs://bucket/prefix or azblob://container/prefix (default: the fleet file's spec.store.url).")
	}
	cmd.Flags().StringVar(&f.RunName, "run", f.RunName, "The run's name, a DNS label such as 2026-12-v1-38.")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
}

// load reads the fleet file when one is given; a bad file is exit 3 (an
// input file) with the field path. Its kubeconfig and a store given as a plain directory
// are relative to the file; its kubeconfig is used unless --kubeconfig is
// given.
func (f *runFlags) load(cmd *cobra.Command) error {
	f.cmd = cmd
	if f.File == "" {
		return nil
	}
	fl, err := fleetfile.LoadFile(f.File)
	if err != nil {
		// A fleet file that cannot be read or used is refused as
		// input (exit 3), as every file a flag names.
		return cli.InputErr(fmt.Errorf("-f %w", err))
	}
	dir, err := filepath.Abs(filepath.Dir(f.File))
	if err != nil {
		return cli.UsageErr(err)
	}
	if kc := fl.Spec.Kubeconfig; kc != "" && !filepath.IsAbs(kc) {
		fl.Spec.Kubeconfig = filepath.Join(dir, kc)
	}
	if st := fl.Spec.Store; st != nil && !strings.Contains(st.URL, "://") && !filepath.IsAbs(st.URL) {
		st.URL = filepath.Join(dir, st.URL)
	}
	f.fleet = fl
	return useFleetKubeconfig(cmd, f.File, fl.Spec.Kubeconfig)
}

func (f *runFlags) storeURL() (string, error) {
	switch {
	case f.Store != "":
		return f.Store, nil
	case f.fleet != nil && f.fleet.Spec.Store != nil:
		return f.fleet.Spec.Store.URL, nil
	}
	return "", cli.Usagef("no store: give --store URL, or -f FLEET with spec.store.url")
}

// programme opens the store and reads the run's frozen plan.
func (f *runFlags) programme(ctx context.Context, cg cli.ClientGetter, d deps, errOut io.Writer) (*fleetrun.Programme, error) {
	url, err := f.storeURL()
	if err != nil {
		return nil, err
	}
	st, err := fleetrun.OpenStore(ctx, url)
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	p, err := fleetrun.ReadPlan(ctx, st, f.RunName)
	if err != nil {
		_ = st.Close()
		if errors.Is(err, fleetrun.ErrNotFound) {
			return nil, cli.UsageErr(err)
		}
		return nil, cli.ClusterErr(err)
	}
	if f.fleet == nil && f.cmd != nil {
		// The frozen plan's kubeconfig (made absolute when it was
		// planned), unless --kubeconfig is given.
		if err := useFleetKubeconfig(f.cmd, "the run's plan", p.Spec.Kubeconfig); err != nil {
			_ = st.Close()
			return nil, err
		}
	}
	return &fleetrun.Programme{Store: st, Plan: p, Now: d.now, ErrOut: errOut,
		Access: &fleetrun.Access{Getter: cg, Credentials: p.Spec.Credentials}}, nil
}

func closeProgramme(p *fleetrun.Programme) {
	if p != nil {
		p.Access.Close()
		_ = p.Store.Close()
	}
}

// ---- plan

var fleetPlanLong = templates.LongDesc(`
	Plan a fleet programme: the file's rings in order, each ring's clusters in
	batches that respect every cap (clusters in flight in the ring and in the
	fleet, the percent of the fleet's GPUs in flight), maintenance window and
	DR pair, and each cluster's steps from its own "kubectl skew plan" (the
	pre-flight per hop, the etcd snapshot where etcd is the cluster's own,
	each control-plane hop, each pool's pdb-blockers, drain, upgrade,
	gpu-validate and restore, then verify against the baseline).

	The file is linted first: a ring selecting nothing, a cluster in two rings,
	both halves of a DR pair in one ring, a window that can never fit a step,
	a cluster no upgrade action selects. Each problem is one line naming its
	field path, exit 2.

	Each cluster is read live through its kubeconfig context (its version
	inventory and allocatable GPUs), or offline from reports saved with
	"kubectl skew -o yaml" in --from-dir. With --run the plan is frozen in the
	store as that run's plan; every later command of the run reads it.`)

var fleetPlanExample = templates.Examples(`
	# Plan the fleet and check the file
	kubectl skew fleet plan -f fleet.yaml

	# Freeze it as a run, then render the run for Argo Workflows
	kubectl skew fleet plan -f fleet.yaml --run 2026-12-v1-38
	kubectl skew fleet render -f fleet.yaml --run 2026-12-v1-38 --engine argo > run.yaml

	# Plan offline from saved reports (one DIR/<cluster>.yaml per cluster)
	mkdir -p saved; for c in $(kubectl config get-contexts -o name); do kubectl skew --context "$c" -o yaml > "saved/$c.yaml"; done
	kubectl skew fleet plan -f fleet.yaml --from-dir saved -o yaml`)

type fleetPlanOptions struct {
	runFlags
	Print    *cli.PrintFlags
	FromDir  string
	Parallel int
	Replace  bool

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetPlanCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetPlanOptions{Print: cli.NewPrintFlags(), Parallel: 8, deps: d, IOStreams: streams}
	cmd := &cobra.Command{
		Use:     "plan -f FLEET [--run RUN]",
		Short:   "Plan a fleet programme: rings, batches under the caps, windows and DR pairs, each cluster's steps",
		Long:    fleetPlanLong,
		Example: fleetPlanExample,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	o.add(cmd, true)
	cmd.Flags().StringVar(&o.FromDir, "from-dir", o.FromDir, "Plan offline from DIR/<cluster>.yaml, reports saved with kubectl skew -o yaml.")
	cmd.Flags().IntVar(&o.Parallel, "parallel", o.Parallel, "Clusters read at once.")
	cmd.Flags().BoolVar(&o.Replace, "replace", o.Replace, "With --run: replace a plan already frozen for the run from another fleet file.")
	return cmd
}

func (o *fleetPlanOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	// A bad -o is reported as itself, before what else is missing.
	if err := o.Print.Validate(); err != nil {
		return cli.UsageErr(err)
	}
	if o.File == "" {
		return cli.Usagef("-f FLEET is required")
	}
	return o.load(cmd)
}

func (o *fleetPlanOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if o.RunName != "" {
		return fleetrun.ValidRun(o.RunName)
	}
	return nil
}

// lintErr prints every lint problem but the last, which it returns (exit
// 2), each as one line with the file and field path.
func lintErr(w io.Writer, file string, err error) error {
	var le *fleetrun.LintError
	if !errors.As(err, &le) {
		return err
	}
	for i, p := range le.Problems {
		p.File = file
		if i < len(le.Problems)-1 {
			fmt.Fprintln(w, "error: "+p.Error())
		}
	}
	return cli.UsageErr(le.Problems[len(le.Problems)-1])
}

func (o *fleetPlanOptions) Run(ctx context.Context) error {
	p, err := makeFleetPlan(ctx, o.cg, o.deps, o.fleet, o.File, o.FromDir, o.Parallel, o.ErrOut)
	if err != nil {
		return err
	}
	frozen := ""
	if o.RunName != "" {
		p.Run = o.RunName
		st, err := fleetrun.OpenStore(ctx, o.fleet.Spec.Store.URL)
		if err != nil {
			return cli.UsageErr(err)
		}
		defer st.Close()
		kept, err := fleetrun.FreezePlan(ctx, st, p, o.Replace)
		if err != nil {
			return cli.UsageErr(err)
		}
		if kept {
			old, err := fleetrun.ReadPlan(ctx, st, o.RunName)
			if err != nil {
				return cli.ClusterErr(err)
			}
			p = old
			frozen = fmt.Sprintf("run %s: the plan frozen at %s is kept (same fleet file) in %s", o.RunName, p.CreatedAt.Format(time.RFC3339), st.URL())
		} else {
			frozen = fmt.Sprintf("run %s: plan frozen in %s", o.RunName, st.URL())
		}
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		if err := cli.PrintStructured(o.Out, o.Print.Output, p); err != nil {
			return err
		}
	} else if err := printFleetPlan(o.Out, p, o.Print.TableOptions()); err != nil {
		return err
	}
	if frozen != "" {
		fmt.Fprintln(o.ErrOut, frozen)
	}
	return nil
}

// makeFleetPlan reads the clusters (live or saved) and plans.
func makeFleetPlan(ctx context.Context, cg cli.ClientGetter, d deps, f *fleetfile.Fleet, file, fromDir string, parallel int, errOut io.Writer) (*fleetrun.Plan, error) {
	now := d.now()
	if problems := fleetrun.Lint(f, now); len(problems) > 0 {
		return nil, lintErr(errOut, file, &fleetrun.LintError{Problems: problems})
	}
	var (
		infos map[string]fleetrun.ClusterInfo
		errs  []*fleetrun.ClusterError
	)
	if fromDir != "" {
		infos, errs = fleetrun.LoadSaved(f, fromDir)
	} else {
		a := &fleetrun.Access{Getter: cg, Credentials: f.Spec.Credentials}
		defer a.Close()
		infos, errs = fleetrun.Collect(ctx, f, a, parallel)
	}
	if len(errs) > 0 {
		codes := []int{}
		for _, e := range errs[:len(errs)-1] {
			fmt.Fprintln(errOut, "error: "+e.Error())
			codes = append(codes, cli.ExitCode(e.Err))
		}
		last := errs[len(errs)-1]
		code := cli.Worst(append(codes, cli.ExitCode(last.Err))...)
		where := ""
		if fromDir == "" && strings.Contains(last.Error(), "is not in the kubeconfig") {
			where = " (kubeconfig " + fleetrun.KubeconfigFiles(cg) + ")"
		}
		return nil, &cli.ExitError{Code: code, Err: fmt.Errorf("%s%s (a plan needs every cluster of its rings)", last.Error(), where), Hint: cli.ContextHint}
	}
	p, err := fleetrun.MakePlan(f, infos, now)
	if err != nil {
		if le := (*fleetrun.LintError)(nil); errors.As(err, &le) {
			return nil, lintErr(errOut, file, err)
		}
		return nil, cli.UsageErr(err)
	}
	return p, nil
}

func printFleetPlan(w io.Writer, p *fleetrun.Plan, opts cli.TableOptions) error {
	caps := []string{}
	if p.MaxClustersInFlight > 0 {
		caps = append(caps, cli.Plural(p.MaxClustersInFlight, "cluster"))
	}
	if p.MaxGPUsInFlight > 0 {
		caps = append(caps, cli.Plural(p.MaxGPUsInFlight, "GPU"))
	}
	capText := "no fleet cap"
	if len(caps) > 0 {
		capText = "at most " + strings.Join(caps, " and ") + " in flight"
	}
	fmt.Fprintf(w, "Fleet %s to %s: %s in %s, %s; %s; a disruptive step takes %s\n\n",
		p.Fleet, p.Target, cli.Plural(len(p.Clusters), "cluster"), cli.Plural(len(p.Rings), "ring"), cli.Plural(p.GPUs, "GPU"), capText, p.StepDuration)
	t := cli.Table{Columns: []cli.Column{{Name: "ring"}, {Name: "batch"}, {Name: "cluster"}, {Name: "gpus"}, {Name: "from"}, {Name: "steps"},
		{Name: "action", Shrink: true, Min: 12, Drop: true}, {Name: "next start"}, {Name: "gate before ring"}, {Name: "projected", Wide: true}, {Name: "windows", Wide: true}, {Name: "step names", Wide: true}}}
	for _, r := range p.Rings {
		gate := "-"
		if r.Approvers > 0 {
			gate = cli.Plural(r.Approvers, "approval")
		}
		for bi, b := range r.Batches {
			for _, name := range b.Clusters {
				c, _ := p.Cluster(name)
				next := "now (always open)"
				if c.NextWindow != nil {
					next = c.NextWindow.Format("2006-01-02T15:04Z")
				} else if len(c.Windows) > 0 {
					next = "never"
				}
				var names []string
				for _, s := range c.Steps {
					names = append(names, s.Name)
				}
				t.AddRow(r.Name, fmt.Sprint(bi+1), c.Name, fmt.Sprint(c.GPUs), c.From, fmt.Sprint(len(c.Steps)), c.Action, next, gate, spanText(c.Projected),
					orNoneText(strings.Join(c.Windows, "; ")), strings.Join(names, ","))
				gate = ""
			}
		}
	}
	if err := t.Print(w, opts); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i, r := range p.Rings {
		line := fmt.Sprintf("ring %s: %s, at most %s at once, failure budget %d", r.Name, cli.PluralOf(len(r.Batches), "batch", "batches"), atMost(r.MaxConcurrent), r.MaxFailures)
		if r.Projected != nil {
			line += ", projected " + spanText(r.Projected)
			if r.Approvers > 0 {
				line += " once approved"
			}
		}
		if r.Soak != "" && i < len(p.Rings)-1 {
			line += ", then soak " + r.Soak
			if r.Projected != nil {
				line += " until " + r.Projected.End.Add(fleetfile.Duration(r.Soak).Value()).Format("2006-01-02T15:04Z")
			}
		}
		fmt.Fprintln(w, line+", then the ring gate")
	}
	if len(p.Rings) > 0 && p.Rings[0].Projected != nil {
		fmt.Fprintln(w, "projected: each step at its kind's expected duration, each ring from the end of the one before and its soak, gates and approvals at once")
	}
	for _, c := range p.Clusters {
		if c.DrainOverride {
			fmt.Fprintf(w, "cluster %s drains with its own settings (spec.clusters[].drain): gang-drain run %s\n", c.Name, strings.Join(c.DrainArgs, " "))
		}
	}
	for _, u := range p.Unplanned {
		fmt.Fprintf(w, "not in any ring: %s\n", u)
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	return nil
}

// spanText is a projected span, or "-" where a window never opens.
func spanText(s *fleetrun.Span) string {
	if s == nil {
		return "-"
	}
	return s.Start.Format("2006-01-02T15:04Z") + " to " + s.End.Format("2006-01-02T15:04Z")
}

func atMost(n int) string {
	if n == 0 {
		return "any number"
	}
	return fmt.Sprint(n)
}

func orNoneText(s string) string {
	if s == "" {
		return "none (always open)"
	}
	return s
}

// ---- step

type fleetStepOptions struct {
	runFlags
	Print      *cli.PrintFlags
	Cluster    string
	Step       string
	BinDir     string
	RateWindow time.Duration
	WaitFile   string

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetStepCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetStepOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputJSON, cli.OutputYAML), deps: d, IOStreams: streams, RateWindow: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "step --run RUN --cluster CLUSTER --step STEP",
		Short: "Run one step of one cluster of a run: the only thing the engine runs",
		Long: templates.LongDesc(`
			Run one step of a cluster, as the run's frozen plan defines it: the gate,
			a pre-flight (the first saves the baseline), an etcd snapshot, a
			control-plane hop and its check, a pool's pdb-blockers, drain
			(gang-drain run), upgrade and its check, gpu-validate and restore
			(gang-drain restore), verify against the baseline, crd-migrate.

			The step is idempotent. Its state in the store (pending, in-progress,
			completed, failed; the attempt; the digest of its inputs) decides: a
			step completed with the same inputs is not run again; an earlier step
			not completed, a halt, a closed window or freeze, or the same step
			running elsewhere (a fresh heartbeat) start nothing. Each attempt's
			evidence (the plugin's -o json, its stderr, meta.json) goes under its
			own attempt number and is never overwritten. Drain and restore name a
			gang-drain run fixed by the run, cluster, pool and version, so a
			repeated attempt resumes the drain's own state in the cluster.

			A failed step counts against its ring's failure budget (maxFailures,
			as Azure Fleet Manager's maxAllowedFailures): within it the cluster
			leaves the run with its record and the ring goes on without it (exit
			5); past it the ring halts (exit 1), and so do the later rings, until
			as many distinct people as the ring's approvers lift the halt with
			"kubectl skew fleet approve". "kubectl skew fleet skip" takes a cluster
			out of the run. A step refused by a halt changes nothing (exit 1).

			A gate step held by the store and the clock (an earlier ring, a soak,
			an approval, the window) is no attempt and no evidence; it records
			once why it waits, and when the clock decides it, -o json gives the
			next opening (nextAt). With
			--wait-file, a "not yet" that only the clock ends (a window, a freeze,
			a soak) writes the seconds until its opening there and exits 0.`) + "\n\n" + `Exit codes:
  0    done, or nothing to do (completed, or the cluster left the run; with
       --wait-file, a "not yet" that only the clock ends)
  1    halt: a person decides
  2    usage or local configuration error (bad flag, unknown context, unreadable kubeconfig)
  3    the cluster could not be evaluated, or an input file could not be read
  4    not yet (an earlier step not done, window closed, cap full, manual step pending,
       update in flight, interrupted): run it again later
  5    failed within the ring's failure budget: the cluster left the run
  130  interrupted`,
		Example: templates.Examples(`
			kubectl skew fleet step --store file:///var/lib/gpufleet --run 2026-12-v1-38 --cluster canary-use1 --step gate
			kubectl skew fleet step -f fleet.yaml --run 2026-12-v1-38 --cluster canary-use1 --step pool-gpu-a-1-38-drain -o json`),
		Args: cobra.NoArgs,
		RunE: cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	o.add(cmd, false)
	cmd.Flags().StringVar(&o.Cluster, "cluster", o.Cluster, "The cluster, as named in the fleet file.")
	cmd.Flags().StringVar(&o.Step, "step", o.Step, "The step, as kubectl skew fleet plan -o wide names it.")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", o.BinDir, "Where the suite's plugins are (default: next to this binary, then PATH).")
	cmd.Flags().DurationVar(&o.RateWindow, "rate-window", o.RateWindow, "Time between the two /metrics reads of the apiserver-429-rate check.")
	cmd.Flags().StringVar(&o.WaitFile, "wait-file", o.WaitFile, "Write here how many seconds to wait (0: none); a \"not yet\" that only the clock ends (window, freeze, soak) then exits 0, and the engine waits that long before asking again.")
	return cmd
}

func (o *fleetStepOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return o.load(cmd)
}

func (o *fleetStepOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := fleetrun.ValidRun(o.RunName); err != nil {
		return err
	}
	if o.Cluster == "" || o.Step == "" {
		return fmt.Errorf("--cluster and --step are required")
	}
	return nil
}

func (o *fleetStepOptions) Run(ctx context.Context) error {
	p, err := o.programme(ctx, o.cg, o.deps, o.ErrOut)
	if err != nil {
		return err
	}
	defer closeProgramme(p)
	ex := fleetrun.ExecPlugins{BinDir: o.BinDir}
	if self, err := os.Executable(); err == nil {
		ex.Supervisor = []string{self, "fleet", "supervise", "--"}
	}
	p.Exec = ex
	p.RateWindow = o.RateWindow
	res, err := p.RunStep(ctx, o.Cluster, o.Step)
	if err != nil {
		return err
	}
	if o.WaitFile != "" {
		wait, err := fleetrun.WriteWaitFile(o.WaitFile, res.NextAt, time.Now())
		if err != nil {
			return err
		}
		if wait > 0 && res.ExitCode == cli.ExitIncomplete {
			// Answered: the engine waits until the opening.
			res.ExitCode = cli.ExitOK
			res.Message += fmt.Sprintf(" (asking again in %ds)", wait)
		}
	}
	if !o.Print.Quiet {
		if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, res); err != nil {
				return err
			}
		} else {
			line := fmt.Sprintf("%s/%s: %s", res.Cluster, res.Step, res.Phase)
			if res.Attempt > 0 {
				line += fmt.Sprintf(" (attempt %d)", res.Attempt)
			}
			if res.Message != "" {
				line += ": " + res.Message
			}
			fmt.Fprintln(o.Out, line)
		}
	}
	if res.ExitCode == 0 {
		return nil
	}
	e := res.Err()
	if res.ExitCode == cli.ExitFindings {
		// Printed already: the report carries the halt. The hint lifts
		// the halt that holds the cluster, whichever scope it has.
		ds, _ := fleetrun.ReadDecisions(ctx, p.Store, o.RunName)
		return &cli.ExitError{Code: res.ExitCode, Err: fmt.Errorf("halt: %s", res.Message), Hint: "after the fix: " + p.Plan.LiftCommand(ds, o.Cluster)}
	}
	return e
}

// ---- gate

type fleetGateOptions struct {
	runFlags
	Print      *cli.PrintFlags
	Ring       string
	Cluster    string
	RateWindow time.Duration
	WaitFile   string

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetGateCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetGateOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputJSON, cli.OutputYAML), deps: d, IOStreams: streams, RateWindow: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "gate --run RUN [--ring RING | --cluster CLUSTER]",
		Short: "Evaluate a run's gate: halts, approvals, failure budgets, windows, caps and halt checks",
		Long: templates.LongDesc(`
			Evaluate a gate of a run and print every check.

			With --ring, the gate after the ring's soak: no halt, every cluster of
			the ring finished, the failure budget, and the file's halt checks on
			each of its clusters (nodes not Ready, the apiserver's 429 rate from
			two /metrics reads, GPU allocatable against the planned count, the
			verify and gpu-validate steps' verdicts).

			With --cluster, the gate before the cluster starts, read-only (the
			step "gate" runs the same and then admits the cluster under the caps):
			no halt, the earlier rings finished, the ring's approvals, its failure
			budget, its window and freezes, its halt checks. Without either, the
			run's halts and every ring's failure budget.

			A "not yet" that only the clock ends (a soak, a window) carries its
			next opening (nextAt in -o json); with --wait-file it writes the
			seconds until that opening there and exits 0. A ring gate that waits
			so records no report.`) + "\n\n" + `Exit codes:
  0    go (with --wait-file, also a "not yet" that only the clock ends)
  1    halt: a person decides
  2    usage or local configuration error (bad flag, unknown context, unreadable kubeconfig)
  3    cannot evaluate, or could not read an input file (missing, empty, or not what its flag takes)
  4    not yet: run it again later
  130  interrupted`,
		Example: templates.Examples(`
			kubectl skew fleet gate -f fleet.yaml --run 2026-12-v1-38 --ring canary
			kubectl skew fleet gate --store s3://gpufleet-state/prod --run 2026-12-v1-38 -o json`),
		Args: cobra.NoArgs,
		RunE: cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, gateCheckWords...)
	o.Print.AddFlags(cmd)
	o.add(cmd, false)
	cmd.Flags().StringVar(&o.Ring, "ring", o.Ring, "The ring whose gate to evaluate (after its soak).")
	cmd.Flags().StringVar(&o.Cluster, "cluster", o.Cluster, "The cluster whose start gate to evaluate (read-only).")
	cmd.Flags().DurationVar(&o.RateWindow, "rate-window", o.RateWindow, "Time between the two /metrics reads of the apiserver-429-rate check.")
	cmd.Flags().StringVar(&o.WaitFile, "wait-file", o.WaitFile, "Write here how many seconds to wait (0: none); a \"not yet\" that only the clock ends (window, freeze, soak) then exits 0, and the engine waits that long before asking again.")
	return cmd
}

func (o *fleetGateOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return o.load(cmd)
}

func (o *fleetGateOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if o.Ring != "" && o.Cluster != "" {
		return fmt.Errorf("give --ring or --cluster, not both")
	}
	return fleetrun.ValidRun(o.RunName)
}

func (o *fleetGateOptions) Run(ctx context.Context) error {
	p, err := o.programme(ctx, o.cg, o.deps, o.ErrOut)
	if err != nil {
		return err
	}
	defer closeProgramme(p)
	p.RateWindow = o.RateWindow
	var g *fleetrun.GateReport
	switch {
	case o.Ring != "":
		g, err = p.GateRing(ctx, o.Ring)
	case o.Cluster != "":
		g, err = p.PreviewClusterGate(ctx, o.Cluster)
	default:
		g, err = p.GateRun(ctx)
	}
	if err != nil {
		return err
	}
	var wait int64
	if o.WaitFile != "" {
		if wait, err = fleetrun.WriteWaitFile(o.WaitFile, g.NextAt, time.Now()); err != nil {
			return err
		}
	}
	// A gate waiting on the clock alone is asked again at its opening:
	// that wait is no evidence.
	if o.Ring != "" && (g.ExitCode != cli.ExitIncomplete || g.NextAt == nil) {
		if err := p.RecordRingGate(ctx, g); err != nil {
			return err
		}
	}
	if !o.Print.Quiet {
		if o.Print.Structured() {
			if err := cli.PrintStructured(o.Out, o.Print.Output, g); err != nil {
				return err
			}
		} else if err := printGateTable(o.Out, g, o.Print.TableOptions()); err != nil {
			return err
		}
	}
	if g.ExitCode == 0 || (wait > 0 && g.ExitCode == cli.ExitIncomplete) {
		return nil
	}
	return &cli.ExitError{Code: g.ExitCode, Err: fmt.Errorf("gate %s: %s", g.Verdict, g.Reason())}
}

// gateCheckWord is a gate check's result in the STATUS column: pass is
// OK. JSON keeps the result.
func gateCheckWord(result string) cli.Status {
	switch result {
	case fleetrun.CheckPass:
		return cli.StatusOK
	case fleetrun.CheckFail:
		return cli.StatusFail
	case fleetrun.CheckWait:
		return cli.StatusWait
	case fleetrun.CheckSkip:
		return cli.StatusSkip
	}
	return cli.StatusUnknown
}

// gateCheckWords are the words gateCheckWord returns.
var gateCheckWords = []cli.Status{cli.StatusOK, cli.StatusSkip, cli.StatusWait, cli.StatusUnknown, cli.StatusFail}

// printGateTable prints a gate's checks and its verdict; messages and
// cluster names give way to fit 120 columns, -o wide has them whole. A
// command a message quotes (`kubectl skew fleet approve ...`) is pasted:
// the default view repeats it whole on a line of its own.
func printGateTable(w io.Writer, g *fleetrun.GateReport, opts cli.TableOptions) error {
	t := cli.Table{Columns: []cli.Column{{Name: "check"}, {Name: "cluster"}, {Name: cli.StatusColumn}, {Name: "message", Shrink: true, Min: 20}}}
	var cmds []string
	seen := map[string]bool{}
	for _, c := range g.Checks {
		t.AddRow(c.Name, orDashText(c.Cluster), gateCheckWord(c.Result).String(), c.Message)
		for _, m := range quotedCommand.FindAllStringSubmatch(c.Message, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				cmds = append(cmds, m[1])
			}
		}
	}
	if err := t.Print(w, opts); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nverdict: %s\n", g.Verdict); err != nil {
		return err
	}
	if opts.Wide || opts.NoHeaders {
		return nil
	}
	for _, c := range cmds {
		if _, err := fmt.Fprintln(w, "  "+c); err != nil {
			return err
		}
	}
	return nil
}

// quotedCommand finds a kubectl command quoted in backticks.
var quotedCommand = regexp.MustCompile("`(kubectl [^`]+)`")

func orDashText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---- approve and halt

type fleetDecisionOptions struct {
	runFlags
	Print     *cli.PrintFlags
	Kind      string
	Ring      string
	Cluster   string
	Step      string
	Reason    string
	Approver  string
	Namespace string
	NoResume  bool

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetDecisionCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps, kind string) *cobra.Command {
	o := &fleetDecisionOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputJSON, cli.OutputYAML), Kind: kind, deps: d, IOStreams: streams}
	cmd := &cobra.Command{Args: cobra.NoArgs, RunE: cli.RunE(cg, o)}
	if kind == fleetrun.DecisionApprove {
		cmd.Use = "approve --run RUN [--ring RING | --cluster CLUSTER [--step STEP]] --reason WHY"
		cmd.Short = "Approve a ring, lift a halt, or mark a manual step done; resumes the run's Workflow"
		cmd.Long = templates.LongDesc(`
			Record an approval in the run's store (who, when, why) and release what
			it unblocks in the run's Argo Workflow on the current context (the
			management cluster), as "argo resume" would.

			--ring RING approves the ring: it counts towards the approvers the ring
			needs (distinct people; a ring needing two does not start with one),
			and lifts a halt of the ring or of its clusters. Once the ring has
			enough approvals its approval suspend is released, and every held step
			of the ring runs again. Completed steps are never run again.

			--cluster C --step S marks a manual step done (spec.upgrade.actions[]
			manual). Without --ring or --cluster the approval lifts a halt of the
			whole run.

			The approver is the user the management cluster (the current context)
			authenticates, as "kubectl auth whoami" shows it (SelfSubjectReview):
			its name, UID and groups are recorded, and the distinct people a rule
			counts are distinct user names. To decide for someone else (a
			change-ticket system acting for a person), impersonate them with
			--as, which needs the impersonate verb on users. Nothing is recorded
			when the cluster cannot say who you are (exit 3).`)
		cmd.Example = templates.Examples(`
			kubectl skew fleet approve -f fleet.yaml --run 2026-12-v1-38 --ring prod --reason "CHG-1234: canary soaked clean"
			kubectl skew fleet approve -f fleet.yaml --run 2026-12-v1-38 --ring canary --reason "node fixed, gate re-run"`)
	} else if kind == fleetrun.DecisionSkip {
		cmd.Use = "skip --run RUN --cluster CLUSTER --reason WHY"
		cmd.Short = "Take a cluster out of a run; the ring and the later rings go on without it"
		cmd.Long = templates.LongDesc(`
			Record a skip of one cluster in the run's store (who, when, why), as
			"az fleet updaterun skip" takes a member out of an update run. It takes
			the same approvals as lifting a halt of the cluster's ring: once as many
			distinct people as the ring's approval.approvers (at least one) have
			skipped the cluster, its remaining steps do nothing (exit 0), its place
			in flight is free, it does not count against the ring's failure budget,
			and the gates of later rings treat it as decided. The steps of the
			cluster held in the run's Argo Workflow are released. Who skips is the
			user the management cluster authenticates, as for approve.`)
		cmd.Example = templates.Examples(`
			kubectl skew fleet skip -f fleet.yaml --run 2026-12-v1-38 --cluster prod-use1 --reason "CHG-1240: node RMA, upgrade next run"`)
	} else {
		cmd.Use = "halt --run RUN [--ring RING | --cluster CLUSTER] --reason WHY"
		cmd.Short = "Halt a run, a ring or a cluster: no further step starts until approve"
		cmd.Long = templates.LongDesc(`
			Record a halt in the run's store (who, when, why). From then on no step
			of what it covers starts: each answers exit 1 and the engine holds it
			until "kubectl skew fleet approve" lifts the halt. A step already
			running finishes. Who halts is the user the management cluster
			authenticates, as for approve.`)
		cmd.Example = templates.Examples(`
			kubectl skew fleet halt -f fleet.yaml --run 2026-12-v1-38 --ring prod --reason "p99 TTFT regression in use1"`)
	}
	o.Print.AddFlags(cmd)
	o.add(cmd, false)
	cmd.Flags().StringVar(&o.Ring, "ring", o.Ring, "The ring the decision covers.")
	cmd.Flags().StringVar(&o.Cluster, "cluster", o.Cluster, "The cluster the decision covers.")
	cmd.Flags().StringVar(&o.Reason, "reason", o.Reason, "Why (kept with the decision).")
	cmd.Flags().StringVar(&o.Approver, "approver", o.Approver, "A check only: the user the management cluster authenticates must be this one (exit 2 otherwise); to decide for someone else use --as.")
	if kind == fleetrun.DecisionApprove || kind == fleetrun.DecisionSkip {
		if kind == fleetrun.DecisionApprove {
			cmd.Flags().StringVar(&o.Step, "step", o.Step, "With --cluster: the manual step done.")
		}
		cmd.Flags().StringVar(&o.Namespace, "workflow-namespace", o.Namespace, "Namespace of the run's Workflow (default: the file's spec.engine.argo.namespace, else argo).")
		cmd.Flags().BoolVar(&o.NoResume, "no-resume", o.NoResume, "Record the decision only; leave the Workflow alone.")
	}
	return cmd
}

func (o *fleetDecisionOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return o.load(cmd)
}

func (o *fleetDecisionOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := fleetrun.ValidRun(o.RunName); err != nil {
		return err
	}
	if strings.TrimSpace(o.Reason) == "" {
		return fmt.Errorf("--reason is required: the decision is kept with who and why")
	}
	if o.Step != "" && o.Cluster == "" {
		return fmt.Errorf("--step needs --cluster")
	}
	if o.Kind == fleetrun.DecisionSkip && o.Cluster == "" {
		return fmt.Errorf("skip needs --cluster CLUSTER: it takes one cluster out of the run")
	}
	return nil
}

// whoDecides asks the management cluster who runs the command
// (SelfSubjectReview): the decision is recorded under that identity, so
// the rules of distinct people count people the cluster authenticated,
// not names typed. --approver, when given, must name that user: deciding
// for someone else is kubectl's impersonation (--as), which the API server
// authorises with the impersonate verb. Nothing is recorded when the
// cluster cannot say (exit 3) or the names differ (exit 2).
func (o *fleetDecisionOptions) whoDecides(ctx context.Context) (*cli.Identity, error) {
	kc, err := o.cg.Kube()
	if err != nil {
		return nil, cli.ClassifyClusterErr(err, o.cg.Metadata(), o.Kind+" not recorded: cannot tell who you are: "+cli.WhoAmIAction)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, err := cli.WhoAmI(ctx, kc)
	if err != nil {
		return nil, fmt.Errorf("%s not recorded: %w", o.Kind, err)
	}
	if o.Approver != "" && o.Approver != id.User {
		return nil, cli.Usagef("%s not recorded: --approver %s is not who the management cluster authenticates (%s); to decide as %s, run with --as %s (impersonation, granted by the impersonate verb on users), or drop --approver",
			o.Kind, o.Approver, id.User, o.Approver, o.Approver)
	}
	return &id, nil
}

func (o *fleetDecisionOptions) Run(ctx context.Context) error {
	p, err := o.programme(ctx, o.cg, o.deps, o.ErrOut)
	if err != nil {
		return err
	}
	defer closeProgramme(p)
	id, err := o.whoDecides(ctx)
	if err != nil {
		return err
	}
	d := fleetrun.Decision{Run: o.RunName, Decision: o.Kind, Ring: o.Ring, Cluster: o.Cluster, Step: o.Step, Reason: o.Reason, By: id.User, Identity: id, At: o.deps.now()}
	res, err := p.Decide(ctx, d, fleetrun.DecideOptions{Resume: o.Kind != fleetrun.DecisionHalt && !o.NoResume, Namespace: o.Namespace})
	if err != nil {
		return err
	}
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, res)
	}
	fmt.Fprintf(o.Out, "%s of %s recorded: by %s at %s (%s)\n", o.Kind, res.Decision.Scope(), res.Decision.By, res.Decision.At.Format(time.RFC3339), res.Decision.Key)
	if res.Approvals != "" {
		fmt.Fprintln(o.Out, res.Approvals)
	}
	for _, r := range res.Resumed {
		fmt.Fprintf(o.Out, "resumed %s (%s)\n", r.Node, r.Kind)
	}
	if res.WorkflowNote != "" {
		fmt.Fprintln(o.ErrOut, res.WorkflowNote)
	}
	return nil
}

// ---- status

type fleetStatusOptions struct {
	runFlags
	Print      *cli.PrintFlags
	Namespace  string
	NoWorkflow bool

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetStatusCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetStatusOptions{Print: cli.NewPrintFlags(cli.OutputTable, cli.OutputWide, cli.OutputJSON, cli.OutputYAML, "html"), deps: d, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "status --run RUN [-o table|wide|json|yaml|html]",
		Short: "Show a run's progress per ring and cluster from its store",
		Long: templates.LongDesc(`
			Show a run's progress from its store: per ring its phase, clusters
			completed, in flight and failed against the failure budget, and its
			approvals; per cluster its batch, steps done, attempts, when it was
			admitted in flight and when it finished, and the step it is on with
			why it waits. The decisions (approvals, halts) are listed with who and
			why. The run's Argo Workflow on the current context adds its phase and
			its suspend nodes that wait: for approve (an approval, a hold), or
			for their opening (a step or gate the clock holds, ended by the
			controller at the time shown, its start plus its seconds). -o html
			writes one self-contained page.`),
		Example: templates.Examples(`
			kubectl skew fleet status -f fleet.yaml --run 2026-12-v1-38
			kubectl skew fleet status --store s3://gpufleet-state/prod --run 2026-12-v1-38 -o html > run.html`),
		Args: cobra.NoArgs,
		RunE: cli.RunE(cg, o),
	}
	o.Print.AddFlags(cmd)
	o.add(cmd, false)
	cmd.Flags().StringVar(&o.Namespace, "workflow-namespace", o.Namespace, "Namespace of the run's Workflow (default: the file's spec.engine.argo.namespace, else argo).")
	cmd.Flags().BoolVar(&o.NoWorkflow, "no-workflow", o.NoWorkflow, "Read the store only, not the Workflow.")
	return cmd
}

func (o *fleetStatusOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	cli.SetQuiet(cg, o.Print.Quiet)
	return o.load(cmd)
}

func (o *fleetStatusOptions) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	return fleetrun.ValidRun(o.RunName)
}

func (o *fleetStatusOptions) Run(ctx context.Context) error {
	p, err := o.programme(ctx, o.cg, o.deps, o.ErrOut)
	if err != nil {
		return err
	}
	defer closeProgramme(p)
	s, err := fleetrun.ReadStatus(ctx, p.Store, p.Plan, o.deps.now())
	if err != nil {
		return cli.ClusterErr(err)
	}
	if !o.NoWorkflow {
		s.Workflow = p.Workflow(ctx, o.Namespace)
	}
	if o.Print.Quiet {
		return nil
	}
	switch {
	case o.Print.Output == "html":
		return fleetrun.PrintStatusHTML(o.Out, s)
	case o.Print.Structured():
		return cli.PrintStructured(o.Out, o.Print.Output, s)
	}
	return fleetrun.PrintStatusTable(o.Out, s, o.Print.TableOptions())
}

// ---- render

type fleetRenderOptions struct {
	runFlags
	Engine        string
	FromDir       string
	Parallel      int
	AllowUnpinned bool
	Image         string
	PerCluster    bool

	cg   cli.ClientGetter
	deps deps
	genericiooptions.IOStreams
}

func newFleetRenderCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	o := &fleetRenderOptions{Engine: "argo", Parallel: 8, deps: d, IOStreams: streams}
	cmd := &cobra.Command{
		Use:   "render -f FLEET --run RUN --engine argo",
		Short: "Write a run as Argo Workflows objects (plain YAML for Git review)",
		Long: templates.LongDesc(`
			Write the run as Argo Workflows objects on stdout, for review in Git and
			kubectl apply: a WorkflowTemplate per cluster (its steps as one DAG of
			"kubectl skew fleet step" tasks), the run's Workflow (rings in order,
			each ring's batches one after the other, the ring's cap as its
			parallelism, a soak as a timed suspend, a gate after each ring, an
			approval suspend before a ring that needs one, released by "kubectl
			skew fleet approve"), the semaphore ConfigMap of the fleet's cluster
			cap, and the step pods' ServiceAccount and Role.

			A step that answers "not yet" (exit 4) or was killed is retried with
			backoff (spec.engine.argo.retryInterval doubling to retryCap); one that
			halts waits in a "hold" suspend until approve releases it, then runs
			again. The suite's image (--image, else spec.engine.argo.image) must be
			pinned by digest, REPO@sha256:...: make image prints the digest of
			its multi-arch index; a tag alone is refused (exit 2).

			The run's frozen plan is used when the store has one (plan --run),
			else the plan is made now as plan would make it. With --from-dir the
			plan is made from the saved reports and the store is not read, so a
			render needs no access to it.

			The render refuses (exit 2) a run its step pods could not serve: each
			cluster's kubeconfig must be a Secret (spec.credentials). A Cluster
			API management cluster is read from the Secret named for its
			managementContext as for a cluster. It grants the step pods get on
			those Secrets in their own namespace. The store's credentials
			(spec.engine.argo.storeSecret) reach the pods under the prefix
			GPUFLEET_STORE_, for the store's client alone: the commands a step
			starts run without them.

			With --workflow-per-cluster each cluster runs as a Workflow of its
			own (its steps, holds and exit handler; a mutex per cluster), made
			from its WorkflowTemplate: the run's Workflow creates and watches
			it with a resource template (Argo's workflow of workflows), so no
			object holds every cluster's steps and status. That resource
			template runs as a launcher ServiceAccount of its own
			(SERVICEACCOUNT-launcher), the only one granted create and get on
			Workflows.`),
		Example: templates.Examples(`
			kubectl skew fleet plan -f fleet.yaml --run 2026-12-v1-38
			kubectl skew fleet render -f fleet.yaml --run 2026-12-v1-38 --engine argo > gitops/fleet/run.yaml
			# pin the image make image built and pushed (it prints the digest)
			kubectl skew fleet render -f fleet.yaml --run 2026-12-v1-38 --engine argo --image ghcr.io/gpufleet/suite@sha256:<digest>`),
		Args: cobra.NoArgs,
		RunE: cli.RunE(cg, o),
	}
	o.add(cmd, true)
	cmd.Flags().StringVar(&o.Engine, "engine", o.Engine, "The engine to render for: argo.")
	cmd.Flags().StringVar(&o.FromDir, "from-dir", o.FromDir, "Plan offline from DIR/<cluster>.yaml and render that plan, without reading the store.")
	cmd.Flags().IntVar(&o.Parallel, "parallel", o.Parallel, "Clusters read at once when planning.")
	cmd.Flags().StringVar(&o.Image, "image", o.Image, "The suite's image by digest, REPO@sha256:... (make image prints it); overrides spec.engine.argo.image.")
	cmd.Flags().BoolVar(&o.AllowUnpinned, "allow-unpinned-image", o.AllowUnpinned, "Accept an image without a digest (for a local test, never for a real run).")
	cmd.Flags().BoolVar(&o.PerCluster, "workflow-per-cluster", o.PerCluster, "Render a Workflow per cluster, created and watched by the run's Workflow (workflow of workflows).")
	return cmd
}

func (o *fleetRenderOptions) Complete(cg cli.ClientGetter, cmd *cobra.Command, _ []string) error {
	o.cg = cg
	if o.File == "" {
		return cli.Usagef("-f FLEET is required")
	}
	return o.load(cmd)
}

func (o *fleetRenderOptions) Validate() error {
	if o.Engine != "argo" {
		return fmt.Errorf("unknown --engine %q: want argo", o.Engine)
	}
	if o.Image != "" && !o.AllowUnpinned {
		if err := fleetrun.CheckPinned("--image", o.Image); err != nil {
			return err
		}
	}
	return fleetrun.ValidRun(o.RunName)
}

func (o *fleetRenderOptions) Run(ctx context.Context) error {
	var p *fleetrun.Plan
	// --from-dir renders offline: the plan made from the saved reports,
	// the store not read (a render in CI or Git review has no access to it).
	if s := o.fleet.Spec.Store; s != nil && o.FromDir == "" {
		if st, err := fleetrun.OpenStore(ctx, s.URL); err == nil {
			p, err = fleetrun.ReadPlan(ctx, st, o.RunName)
			_ = st.Close()
			if err != nil && !errors.Is(err, fleetrun.ErrNotFound) {
				return cli.ClusterErr(err)
			}
		}
	}
	if p == nil {
		np, err := makeFleetPlan(ctx, o.cg, o.deps, o.fleet, o.File, o.FromDir, o.Parallel, o.ErrOut)
		if err != nil {
			return err
		}
		np.Run = o.RunName
		p = np
		if o.FromDir != "" {
			fmt.Fprintf(o.ErrOut, "rendered from the plan made from %s, without reading the store; the steps run the plan frozen in the store: freeze this one with kubectl skew fleet plan -f %s --run %s --from-dir %s before applying\n", o.FromDir, o.File, o.RunName, o.FromDir)
		} else {
			fmt.Fprintf(o.ErrOut, "run %s has no frozen plan: rendered from a plan made now; freeze it with kubectl skew fleet plan -f %s --run %s before applying\n", o.RunName, o.File, o.RunName)
		}
	} else if p.FleetDigest != fleetrun.Digest(o.fleet) {
		fmt.Fprintf(o.ErrOut, "warning: the fleet file changed since run %s was planned (%s): rendering the frozen plan\n", o.RunName, p.CreatedAt.Format(time.RFC3339))
	}
	r, err := fleetrun.Render(p, fleetrun.RenderOptions{AllowUnpinned: o.AllowUnpinned, Image: o.Image, WorkflowPerCluster: o.PerCluster})
	if err != nil {
		return err
	}
	_, err = o.Out.Write(r.YAML)
	return err
}
