package gangdrain

// `plan --inference` and `run --inference`: an inference pool drained
// without a cold-start storm (pkg/inference), and restore's undoing of the
// surge such a run recorded.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// inferenceFlags are the flags of --inference.
type inferenceFlags struct {
	Inference        bool
	HydrateBandwidth []string
	Weights          []string
	MinServing       float64
	NodesPerWave     int
	MaxColdStart     time.Duration
	Surge            bool
	// AcceptNoReadinessProbe runs models whose serving container has no
	// readinessProbe.
	AcceptNoReadinessProbe bool

	bandwidth inference.Bandwidth
	weights   map[string]inference.Weights
}

func (o *Options) addInferenceFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.inf.Inference, "inference", o.inf.Inference, "Treat the nodes as an inference pool: surge the model Deployments first where GPUs of the same product are free outside the pool, then drain in waves paced by weight-hydrate bandwidth, each once the replicas the previous one displaced are Ready elsewhere (docs/inference.md).")
	f.StringArrayVar(&o.inf.HydrateBandwidth, "hydrate-bandwidth", o.inf.HydrateBandwidth, "With --inference: the bytes per second each weight source serves the cluster, SOURCE=RATE (object-store, registry, shared-fs), e.g. object-store=1250M/s; repeat or separate with commas.")
	f.StringArrayVar(&o.inf.Weights, "weights", o.inf.Weights, "With --inference: the weights one replica of a model loads, NAMESPACE/DEPLOYMENT=SIZE[@SOURCE], e.g. serving/llama-70b=140Gi@object-store; overrides the "+inference.AnnWeightsBytes+" annotation.")
	f.Float64Var(&o.inf.MinServing, "min-serving", o.inf.MinServing, "With --inference: the fraction of each model's replicas that stays Ready at every step, on top of its PodDisruptionBudget (0 to 1).")
	f.IntVar(&o.inf.NodesPerWave, "nodes-per-wave", o.inf.NodesPerWave, "With --inference: the most nodes drained at once (0: as many as the floors and --max-cold-start allow).")
	f.DurationVar(&o.inf.MaxColdStart, "max-cold-start", o.inf.MaxColdStart, "With --inference: the longest a wave's replacements may take to load their weights at the hydrate bandwidth; bounds the bytes hydrated at once (0: no bound).")
	f.BoolVar(&o.inf.Surge, "surge", o.inf.Surge, "With --inference: scale the models up before the first drain where headroom exists, and back after the last (--surge=false: no surge).")
	f.BoolVar(&o.inf.AcceptNoReadinessProbe, "accept-no-readiness-probe", o.inf.AcceptNoReadinessProbe, "With --inference: run models whose serving container has no readinessProbe or startupProbe, whose Ready then means only that the process started, not that the weights are loaded (refused otherwise; docs/inference.md says which probe to add).")
}

func (o *Options) validateInference(cmd *cobra.Command) error {
	if !o.inf.Inference {
		for _, name := range []string{"hydrate-bandwidth", "weights", "min-serving", "nodes-per-wave", "max-cold-start", "surge", "accept-no-readiness-probe"} {
			if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
				return fmt.Errorf("--%s needs --inference", name)
			}
		}
		return nil
	}
	if o.DisableEviction {
		return errors.New("--disable-eviction bypasses the PodDisruptionBudgets an --inference run is paced by; drop one of them")
	}
	if o.inf.MinServing < 0 || o.inf.MinServing > 1 {
		return fmt.Errorf("--min-serving %g: want a fraction between 0 and 1, e.g. 0.75", o.inf.MinServing)
	}
	if o.inf.NodesPerWave < 0 {
		return errors.New("--nodes-per-wave must not be negative")
	}
	if o.inf.MaxColdStart < 0 {
		return errors.New("--max-cold-start must not be negative")
	}
	bw, err := inference.ParseBandwidth(o.inf.HydrateBandwidth)
	if err != nil {
		return err
	}
	o.inf.bandwidth = bw
	o.inf.weights = map[string]inference.Weights{}
	for _, v := range o.inf.Weights {
		k, w, err := inference.ParseWeightsFlag(v)
		if err != nil {
			return err
		}
		if _, dup := o.inf.weights[k]; dup {
			return fmt.Errorf("--weights: model %s given twice", k)
		}
		o.inf.weights[k] = w
	}
	return nil
}

func (o *Options) planOptions() inference.Options {
	return inference.Options{MinServing: o.inf.MinServing, NodesPerWave: o.inf.NodesPerWave, MaxColdStart: o.inf.MaxColdStart, NoSurge: !o.inf.Surge, Bandwidth: o.inf.bandwidth, AcceptNoReadinessProbe: o.inf.AcceptNoReadinessProbe}
}

func (o *Options) runner(ctx context.Context, requester string) (*inference.Runner, error) {
	d, err := o.drainer(ctx, requester)
	if err != nil {
		return nil, err
	}
	return &inference.Runner{Kube: d.Kube, Dynamic: d.Dynamic, Kueue: d.Kueue, Clock: o.clock, Weights: o.inf.weights,
		Options: inference.RunOptions{Plan: o.planOptions(), Drain: d.Options}}, nil
}

// InferencePlanReport is the output of `plan --inference` (kind
// GangDrainInferencePlan).
type InferencePlanReport struct {
	cli.Header
	Nodes    []inference.PoolNode     `json:"nodes"`
	Headroom []inference.HeadroomNode `json:"headroom"`
	*inference.Plan
	Summary InferencePlanSummary `json:"summary"`
}

// InferencePlanSummary totals a plan.
type InferencePlanSummary struct {
	Nodes        int     `json:"nodes"`
	Models       int     `json:"models"`
	Waves        int     `json:"waves"`
	HeadroomGPUs int64   `json:"headroomGPUs"`
	ETASeconds   float64 `json:"etaSeconds"`
	ETA          string  `json:"eta"`
	Refused      bool    `json:"refused"`
	Refusals     int     `json:"refusals"`
}

func newInferencePlanReport(md cli.Metadata, pool *inference.Pool, p *inference.Plan) InferencePlanReport {
	rep := InferencePlanReport{Header: cli.NewHeader("GangDrainInferencePlan", md), Nodes: pool.Nodes, Headroom: pool.Headroom, Plan: p}
	if rep.Headroom == nil {
		rep.Headroom = []inference.HeadroomNode{}
	}
	if p.Models == nil {
		p.Models = []inference.ModelPlan{}
	}
	if p.Waves == nil {
		p.Waves = []inference.Wave{}
	}
	rep.Summary = InferencePlanSummary{Nodes: len(pool.Nodes), Models: len(p.Models), Waves: len(p.Waves), HeadroomGPUs: p.Headroom,
		ETASeconds: p.ETASeconds, ETA: p.ETA.Round(time.Second).String(), Refused: p.Refused(), Refusals: len(p.Refusals)}
	return rep
}

// RunInferencePlan prints the plan of an inference pool's drain.
func (o *Options) RunInferencePlan(ctx context.Context) error {
	md, nodes, err := o.connectNodes(ctx)
	if err != nil {
		return err
	}
	r, err := o.runner(ctx, "")
	if err != nil {
		return err
	}
	pool, plan, err := r.Plan(ctx, nodes)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "planning the inference pool's drain")
	}
	rep := newInferencePlanReport(md, pool, plan)
	if o.Print.Quiet {
		return cli.Findings(len(plan.Refusals))
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(o.ErrOut, "note: "+n)
	}
	if o.Print.Structured() {
		if err := cli.PrintStructured(o.Out, o.Print.Output, rep); err != nil {
			return err
		}
	} else if err := printInferencePlan(o.Out, rep, o.Print, o.colorizer()); err != nil {
		return err
	}
	return cli.Findings(len(plan.Refusals))
}

func modelCell(during, after int32, below bool, c cli.Colorizer) string {
	s := fmt.Sprintf("%d->%d", during, after)
	if during == after {
		s = fmt.Sprint(after)
	}
	if below {
		s += " " + c.Status("BLOCKED")
	}
	return s
}

func bytesWord(b map[inference.Source]int64) string {
	var parts []string
	for _, s := range inference.Sources {
		if v, ok := b[s]; ok {
			parts = append(parts, inference.FormatBytes(v)+" "+string(s))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func printInferencePlan(w io.Writer, rep InferencePlanReport, pf *cli.PrintFlags, c cli.Colorizer) error {
	opts := pf.TableOptions()
	p := rep.Plan
	// Identifiers are never cut: the namespace, the model (the step table
	// below heads a column with it) and its PodDisruptionBudget, which a
	// reader looks up. The budget's rule and the weights' source shorten
	// first. READY is Ready/desired replicas, as kubectl prints a
	// Deployment; GPUS is per replica.
	mt := cli.Table{Columns: []cli.Column{{Name: "NAMESPACE"}, {Name: "MODEL"}, {Name: "READY"}, {Name: "ON POOL"}, {Name: "GPUS"},
		{Name: "WEIGHTS", Shrink: true, Min: 10}, {Name: "PDB"}, {Name: "BUDGET", Shrink: true, Min: 8}, {Name: "FLOOR"}, {Name: "SURGE"}, {Name: "FLOOR FROM", Wide: true}}}
	for _, m := range p.Models {
		weights := "unknown"
		if m.Weights != nil {
			weights = inference.FormatBytes(m.Weights.Bytes) + " " + string(m.Weights.Source)
		}
		pdb, rule := "-", "-"
		if m.PDB != "" {
			pdb, rule = m.PDB, m.PDBRule
		}
		surge := "-"
		if m.Surge > 0 {
			surge = fmt.Sprintf("+%d", m.Surge)
		}
		mt.AddRow(m.Namespace, m.Name, fmt.Sprintf("%d/%d", m.Ready, m.Replicas), fmt.Sprint(m.OnPoolTotal()), fmt.Sprint(m.GPUsPerReplica), weights, pdb, rule, fmt.Sprint(m.Floor), surge, m.FloorFrom)
	}
	if len(mt.Rows) > 0 {
		if err := mt.Print(w, opts); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	// One column per model: its Ready replicas while the wave's
	// replacements hydrate -> once they are Ready.
	cols := []cli.Column{{Name: "STEP"}, {Name: "NODES", Shrink: true, Min: 12}, {Name: "HYDRATE", Shrink: true, Min: 12}, {Name: "COLD START"}}
	for _, h := range modelHeads(p.Models) {
		cols = append(cols, cli.Column{Name: h})
	}
	st := cli.Table{Columns: cols}
	row := func(step, nodes, hydrate, cold string, cell func(key string) string) {
		cells := []string{step, nodes, hydrate, cold}
		for _, m := range p.Models {
			cells = append(cells, cell(m.Key))
		}
		st.AddRow(cells...)
	}
	row("now", "-", "-", "-", func(k string) string { return fmt.Sprint(p.Start[k]) })
	if s := p.Surge; s != nil {
		row("surge", "-", bytesWord(s.HydrateBytes), s.ColdStart.Round(time.Second).String(), func(k string) string {
			return modelCell(p.Start[k], s.ServingAfter[k], false, c)
		})
	}
	for _, wv := range p.Waves {
		below := map[string]bool{}
		for _, k := range wv.Below {
			below[k] = true
		}
		row(fmt.Sprintf("wave %d", wv.Index), strings.Join(wv.Nodes, ","), bytesWord(wv.HydrateBytes), wv.ColdStart.Round(time.Second).String(), func(k string) string {
			return modelCell(wv.ServingDuring[k], wv.ServingAfter[k], below[k], c)
		})
	}
	if err := st.Print(w, opts); err != nil {
		return err
	}
	if len(p.Refusals) > 0 {
		fmt.Fprintf(w, "\n%s: the run would take a model below its floor or cannot pace it:\n", c.Status("BLOCKED"))
		for _, r := range p.Refusals {
			fmt.Fprintln(w, "  "+r)
		}
	}
	verdict := "every model at or above its floor"
	if p.Refused() {
		verdict = fmt.Sprintf("REFUSED (%s)", cli.Plural(len(p.Refusals), "reason"))
	}
	var surge time.Duration
	if p.Surge != nil {
		surge = p.Surge.ColdStart
	}
	return pf.PrintSummary(w, true, fmt.Sprintf("ETA %s: surge %s + %s over %s, %s outside the pool; %s",
		p.ETA.Round(time.Second), surge.Round(time.Second), cli.Plural(len(p.Waves), "wave"), cli.Plural(rep.Summary.Nodes, "node"), cli.Plural(int(p.Headroom), "free GPU"), verdict))
}

// modelHeads are the step table's column heads, one per model: its name,
// or namespace/name where two models share a name.
func modelHeads(models []inference.ModelPlan) []string {
	n := map[string]int{}
	for _, m := range models {
		n[m.Name]++
	}
	out := make([]string, 0, len(models))
	for _, m := range models {
		h := m.Name
		if n[m.Name] > 1 {
			h = m.Key
		}
		out = append(out, strings.ToUpper(h))
	}
	return out
}

// InferenceRunReport is the output of `run --inference` (kind
// GangDrainInferenceRun).
type InferenceRunReport struct {
	cli.Header
	*inference.RunResult
}

// RunInference drains an inference pool by its plan.
func (o *Options) RunInference(ctx context.Context) error {
	md, nodes, err := o.connectNodes(ctx)
	if err != nil {
		return err
	}
	r, err := o.runner(ctx, o.requester(ctx))
	if err != nil {
		return err
	}
	prog := o.progress()
	var mu sync.Mutex
	r.OnEvent = func(e gang.Event) {
		mu.Lock()
		defer mu.Unlock()
		prog.Event("%s", eventLine(e))
	}
	runCtx, cancel := o.withTimeout(ctx)
	defer cancel()
	res, err := r.Run(runCtx, nodes)
	prog.Done()
	if res != nil && !o.Print.Quiet {
		rep := InferenceRunReport{Header: cli.NewHeader("GangDrainInferenceRun", md), RunResult: res}
		if o.Print.Structured() {
			if perr := cli.PrintStructured(o.Out, o.Print.Output, rep); perr != nil {
				return perr
			}
		} else if perr := printInferenceRun(o.Out, rep, o.Print, o.colorizer()); perr != nil {
			return perr
		}
	}
	if errors.Is(err, inference.ErrRefused) {
		hint := "kubectl gang-drain plan --inference " + strings.Join(o.nodeArgs(), " ")
		// A resumed run refused: its nodes stay cordoned and its surge in
		// place until the plan allows it again or restore undoes it.
		if runs, rerr := inferenceRuns(ctx, o, nodes, true); rerr == nil && len(runs) > 0 {
			hint += fmt.Sprintf("; run %s stays as it is (nodes cordoned, surge in place): resume it once the plan allows, or undo it with kubectl gang-drain restore %s", strings.Join(runs, ", "), runs[0])
		}
		return cli.WithHint(&cli.ExitError{Code: cli.ExitFindings, Err: err}, hint)
	}
	hint := "kubectl gang-drain status"
	if res != nil && res.RunID != "" {
		hint = fmt.Sprintf("kubectl gang-drain status %s, then run the same command again to resume", res.RunID)
	}
	if err != nil && runCtx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w: stopped after --timeout %s", gang.ErrIncomplete, o.Timeout)
	}
	return finish(runCtx, err, md, hint)
}

// nodeArgs are the node choice as given on the command line.
func (o *Options) nodeArgs() []string {
	out := append([]string(nil), o.Args...)
	if o.Selector != "" {
		out = append(out, "-l", o.Selector)
	}
	return out
}

func printInferenceRun(w io.Writer, rep InferenceRunReport, pf *cli.PrintFlags, c cli.Colorizer) error {
	opts := pf.TableOptions()
	if rep.DryRun {
		fmt.Fprintf(w, "Dry run (run %s): nothing was changed.\n", rep.RunID)
		for _, s := range rep.Steps {
			fmt.Fprintln(w, "  "+s)
		}
		return nil
	}
	if rep.Plan != nil && rep.Plan.Refused() && rep.RunID == "" {
		fmt.Fprintf(w, "%s: nothing was changed:\n", c.Status("BLOCKED"))
		for _, r := range rep.Plan.Refusals {
			fmt.Fprintln(w, "  "+r)
		}
		return nil
	}
	wt := cli.Table{Columns: []cli.Column{{Name: "WAVE"}, {Name: "NODES", Shrink: true, Min: 12}, {Name: "PLANNED COLD START"}, {Name: "DRAIN"}, {Name: "READY AFTER"}}}
	for _, wv := range rep.Waves {
		drain, ready := "-", "-"
		if !wv.DrainedAt.IsZero() {
			drain = wv.DrainedAt.Sub(wv.DrainStartedAt).Round(10 * time.Millisecond).String()
		}
		if !wv.ReadyAt.IsZero() && !wv.DrainStartedAt.IsZero() {
			ready = wv.ReadyAt.Sub(wv.DrainStartedAt).Round(10 * time.Millisecond).String()
		}
		wt.AddRow(fmt.Sprint(wv.Index), strings.Join(wv.Nodes, ","), (time.Duration(wv.PlannedColdStartSeconds * float64(time.Second))).Round(time.Second).String(), drain, ready)
	}
	if err := wt.Print(w, opts); err != nil {
		return err
	}
	mt := cli.Table{Columns: []cli.Column{{Name: "NAMESPACE", Shrink: true, Min: 9, Elide: cli.ElideMiddle}, {Name: "MODEL"}, {Name: "FLOOR"}, {Name: "MIN READY SEEN"}, {Name: "SURGE"}}}
	surge := map[string]string{}
	for _, s := range rep.Surges {
		surge[s.Deployment] = fmt.Sprintf("+%d", s.Surge)
	}
	for _, s := range rep.ScaledBack {
		surge[s.Deployment] += fmt.Sprintf(" (back to %d)", s.ReplicasAfter)
	}
	keys := make([]string, 0, len(rep.Floor))
	for k := range rep.Floor {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		seen := "-"
		if v, ok := rep.MinServing[k]; ok {
			seen = fmt.Sprint(v)
			if v < rep.Floor[k] {
				seen += " " + c.Status("BLOCKED")
			}
		}
		ns, name, _ := strings.Cut(k, "/")
		mt.AddRow(ns, name, fmt.Sprint(rep.Floor[k]), seen, strings.TrimSpace(surge[k]))
	}
	if len(mt.Rows) > 0 {
		fmt.Fprintln(w)
		if err := mt.Print(w, opts); err != nil {
			return err
		}
	}
	state := "complete"
	if !rep.Complete {
		state = "incomplete"
	}
	took := ""
	if !rep.FinishedAt.IsZero() && !rep.StartedAt.IsZero() {
		took = " in " + rep.FinishedAt.Sub(rep.StartedAt).Round(100*time.Millisecond).String()
	}
	return pf.PrintSummary(w, true, fmt.Sprintf("Run %s %s%s. Restore after the upgrade: kubectl gang-drain restore %s", rep.RunID, state, took, rep.RunID))
}

// inferenceRuns returns the runs of nodes recorded as inference runs
// (activeOnly: those not yet restored).
func inferenceRuns(ctx context.Context, o *Options, nodes []string, activeOnly bool) ([]string, error) {
	kube, err := o.cg.Kube()
	if err != nil {
		return nil, err
	}
	var ns []*corev1.Node
	for _, n := range nodes {
		node, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		ns = append(ns, node)
	}
	return inference.Runs(ns, activeOnly), nil
}

// refuseInferenceResume stops a plain run that would resume an --inference
// run under way on the nodes: it would drain the rest of the pool at once,
// unpaced, and leave the run's surge in place.
func (o *Options) refuseInferenceResume(ctx context.Context, md cli.Metadata, nodes []string) error {
	runs, err := inferenceRuns(ctx, o, nodes, true)
	if err != nil {
		return cli.ClassifyClusterErr(err, md, "reading the nodes' run records")
	}
	if len(runs) == 0 {
		return nil
	}
	return cli.WithHint(cli.UsageErr(fmt.Errorf("run %s on these nodes is an --inference run: without --inference the rest of the pool would drain at once, unpaced, and its surge stay in place; resume it with the same `kubectl gang-drain run --inference` command, or undo it with `kubectl gang-drain restore %s`", strings.Join(runs, ", "), runs[0])),
		"kubectl gang-drain status "+runs[0])
}
