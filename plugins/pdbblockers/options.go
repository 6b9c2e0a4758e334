package pdbblockers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// memoryLimit is the soft heap limit Run sets unless GOMEMLIMIT is set.
const memoryLimit = 200 << 20

// Options holds the parsed state of `kubectl pdb-blockers`.
type Options struct {
	Print  *cli.PrintFlags
	FailOn *cli.FailOnFlag

	// Nodes are the node names in drain order.
	Nodes []string
	// Selector selects nodes by label (-l).
	Selector string
	// AllNodes checks every node.
	AllNodes bool
	// DrainTimeout is how long the drain may take in all.
	DrainTimeout time.Duration
	// ServerDryRun confirms the first eviction per budget with dryRun=All.
	ServerDryRun bool
	// DeleteEmptyDirData and Force mirror kubectl drain's flags.
	DeleteEmptyDirData bool
	Force              bool
	// AllPods lists every pod, not only the ones that block.
	AllPods bool
	// AllowPartial turns unreadable namespaces into a note instead of exit 3.
	AllowPartial bool
	// PageSize is the list page size.
	PageSize int64
	// Contexts checks several kubeconfig contexts at once.
	Contexts *cli.ContextFlags

	namespace string
	cg        cli.ClientGetter
	clock     clock.PassiveClock
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	f := cli.NewFailOnFlag()
	f.Value = "warning"
	return &Options{
		Print:        cli.NewPrintFlags(),
		FailOn:       f,
		DrainTimeout: eviction.DefaultDrainTimeout,
		PageSize:     eviction.DefaultPageSize,
		Contexts:     cli.NewContextFlags(),
		clock:        clock.RealClock{},
		IOStreams:    streams,
	}
}

// AddFlags registers the command's flags.
func (o *Options) AddFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "Check the nodes matching this label selector (for example gpufleet.dev/rack-set=rs-14).")
	fs.BoolVar(&o.AllNodes, "all-nodes", o.AllNodes, "Check every node of the cluster.")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "How long the drain may take; pods whose terminationGracePeriodSeconds is longer block it. GKE: 1h, EKS managed node groups: 15m, AKS: 30m by default.")
	fs.BoolVar(&o.ServerDryRun, "server-dry-run", o.ServerDryRun, "Confirm the first eviction per PodDisruptionBudget with a server-side dry run (POST eviction with dryRun=All; needs create on pods/eviction; evicts nothing).")
	fs.BoolVar(&o.DeleteEmptyDirData, "delete-emptydir-data", o.DeleteEmptyDirData, "Assume the drain runs with --delete-emptydir-data: pods with emptyDir volumes do not block.")
	fs.BoolVar(&o.Force, "force", o.Force, "Assume the drain runs with --force: pods without a controller do not block.")
	fs.BoolVar(&o.AllPods, "all-pods", o.AllPods, "List every pod on the nodes, also the ones that evict now or that drain ignores.")
	fs.BoolVar(&o.AllowPartial, "allow-partial", o.AllowPartial, "When some namespaces may not be read, report the rest and exit as if they were fine instead of exit 3.")
	fs.Int64Var(&o.PageSize, "chunk-size", o.PageSize, "Objects per page when nodes, pods and PodDisruptionBudgets are listed in pages (servers without watch-list streaming, or roles without watch).")
	o.Contexts.AddFlags(cmd)
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
}

// Complete reads the arguments and the namespace.
func (o *Options) Complete(cg cli.ClientGetter, _ *cobra.Command, args []string) error {
	o.cg = cg
	o.Nodes = args
	cli.SetQuiet(cg, o.Print.Quiet)
	ns, explicit, err := cg.Namespace()
	if err != nil {
		return cli.KubeconfigErr(err)
	}
	if explicit {
		o.namespace = ns
	}
	return nil
}

// Validate checks the flags without touching the network.
func (o *Options) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
		return err
	}
	given := 0
	for _, b := range []bool{len(o.Nodes) > 0, o.Selector != "", o.AllNodes} {
		if b {
			given++
		}
	}
	switch {
	case given > 1:
		return errors.New("give node names, -l SELECTOR or --all-nodes, not several of them")
	case given == 0 && o.namespace == "":
		return cli.NoNodes("pass --all-nodes")
	}
	if o.Selector != "" {
		if err := cli.ParseSelector(o.Selector); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, n := range o.Nodes {
		if n == "" || strings.ContainsAny(n, " /") {
			return fmt.Errorf("invalid node name %q", n)
		}
		if seen[n] {
			return fmt.Errorf("node %s is given twice", n)
		}
		seen[n] = true
	}
	if o.DrainTimeout <= 0 {
		return fmt.Errorf("--drain-timeout must be positive, got %s", o.DrainTimeout)
	}
	if o.PageSize <= 0 {
		return fmt.Errorf("--chunk-size must be positive, got %d", o.PageSize)
	}
	return nil
}

// Run reads the cluster, simulates the drain and prints the report.
func (o *Options) Run(ctx context.Context) error {
	if os.Getenv("GOMEMLIMIT") == "" {
		// Keep the heap close to what is live: a report over 50,000 pods
		// otherwise doubles its peak RSS through GC pacing alone.
		debug.SetMemoryLimit(memoryLimit)
	}
	if o.Contexts.Multi() {
		return o.runContexts(ctx)
	}
	rep, md, err := o.check(ctx, o.cg)
	if err != nil {
		return err
	}
	if err := o.print(rep); err != nil {
		return err
	}
	return o.outcome(rep, md)
}

// check reads one cluster and simulates the drain.
func (o *Options) check(ctx context.Context, cg cli.ClientGetter) (*Report, cli.Metadata, error) {
	md, err := cli.Connect(ctx, cg)
	if err != nil {
		return nil, md, err
	}
	kc, err := client(cg)
	if err != nil {
		return nil, md, cli.ClassifyClusterErr(err, md, "building the client")
	}
	lo := eviction.LoadOptions{Namespace: o.namespace, NodeSelector: o.Selector, PageSize: o.PageSize}
	if _, real := kc.(*kubernetes.Clientset); real {
		lo.Stream = true
		if cfg, err := cg.ToRESTConfig(); err == nil {
			lo.StreamTimeout = cfg.Timeout
		}
	}
	snap, err := eviction.Load(ctx, kc, lo)
	if err != nil {
		return nil, md, cli.WithHint(cli.ClassifyClusterErr(err, md, "reading the cluster"), canIHint(md, o.namespace))
	}
	skipped := snap.SkipRunningWorkflow(eviction.SelfFromEnv())
	idx := snap.Index()
	nodes, err := o.drainOrder(snap, idx)
	if err != nil {
		return nil, md, err
	}
	now := o.clock.Now()
	sim := eviction.Evaluator{Now: now, DrainTimeout: o.DrainTimeout, DeleteEmptyDirData: o.DeleteEmptyDirData, Force: o.Force}.NewSimulation(idx)
	rep := newReport(md, now)
	rep.Skipped = skipped
	// Room for every pod of the nodes up front: growing the items one
	// doubling at a time copied 42,500 of them over and over at 50,000
	// pods. Memory fresh from the system that no item uses is not touched.
	listed := 0
	for _, name := range nodes {
		listed += len(idx.PodsOn(name))
	}
	rep.Items = make([]Item, 0, listed)
	var dry *dryRunner
	if o.ServerDryRun {
		dry = &dryRunner{helper: eviction.NewHelper(kc), done: map[string]bool{}}
		dry.helper.DryRun = true
	}
	for _, name := range nodes {
		node := idx.Node(name)
		// DrainNode answers for PodsOn's pods, in their order.
		pods, verdicts := idx.PodsOn(name), sim.DrainNode(name)
		if o.namespace != "" {
			pods, verdicts = onlyNamespace(pods, verdicts, o.namespace)
		}
		rep.addNode(node, verdicts, now)
		for i := range verdicts {
			// The first eviction per budget is confirmed by the server and
			// listed with its answer, even when it evicts now.
			first := dry != nil && dry.first(verdicts[i])
			it := rep.addPod(node, verdicts[i], now, o.AllPods || first)
			if first {
				dry.check(ctx, it, sim.PredictAlone(pods[i]))
			}
		}
	}
	rep.addForbidden(snap)
	rep.finish()
	return rep, md, nil
}

// outcome is the error Run returns for a printed report: exit 3 when
// namespaces could not be read (unless --allow-partial), else the findings.
func (o *Options) outcome(rep *Report, md cli.Metadata) error {
	if len(rep.Forbidden) > 0 && !o.AllowPartial {
		var names []string
		for _, f := range rep.Forbidden {
			names = append(names, f.Namespace)
		}
		return cli.WithHint(cli.ClusterErr(fmt.Errorf("could not read %s %s; the rest was checked", cli.Agree(len(names), "namespace", "namespaces"), strings.Join(names, ", "))),
			canIHint(md, rep.Forbidden[0].Namespace))
	}
	return cli.Findings(o.FailOn.Count(rep.severities()...))
}

// runContexts checks several contexts at once and reports them together;
// one failing context does not stop the others, and the exit code is the
// worst of them. Fixes name their context, since they are pasted into a
// shell whose current context is any of them.
func (o *Options) runContexts(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	type checked struct {
		rep *Report
		md  cli.Metadata
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (checked, error) {
		rep, md, err := o.check(ctx, o.cg.ForContext(name))
		if rep != nil {
			rep.nameContext(name)
		}
		return checked{rep, md}, err
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	list := cli.ReportList{APIVersion: cli.ReportAPIVersion(KindReport + "List"), Kind: KindReport + "List", Items: []cli.ContextReport{}}
	t := o.table(true)
	codes := make([]int, 0, len(results))
	var summary []string
	for _, r := range results {
		cr, ok := cli.ContextEntry(r, o.ErrOut, o.Print.Quiet)
		if ok {
			cr.Report = r.Value.rep
			cr.ExitCode = cli.ExitCode(o.outcome(r.Value.rep, r.Value.md))
			o.addRows(&t, r.Value.rep, r.Context)
			if !o.Print.Quiet {
				o.printWarnings(r.Value.rep, r.Context+": ")
			}
			summary = append(summary, summaryLines(r.Value.rep, r.Context+": ")...)
		}
		codes = append(codes, cr.ExitCode)
		list.Items = append(list.Items, cr)
	}
	if err := o.Print.PrintContexts(o.Out, list, t); err != nil {
		return err
	}
	if err := o.Print.PrintSummary(o.Out, len(t.Rows) > 0, summary...); err != nil {
		return err
	}
	return cli.ContextsOutcome(codes)
}

// client returns the Kubernetes client, asking for protobuf when it talks
// to a real server: decoding tens of thousands of pods is several times
// faster than JSON.
func client(cg cli.ClientGetter) (kubernetes.Interface, error) {
	kc, err := cg.Kube()
	if err != nil {
		return nil, err
	}
	if _, real := kc.(*kubernetes.Clientset); !real {
		return kc, nil
	}
	cfg, err := cg.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return kubernetes.NewForConfig(cfg)
}

// drainOrder returns the nodes to drain: the named ones in the order given,
// or every listed node by name.
func (o *Options) drainOrder(snap *eviction.Snapshot, idx *eviction.Index) ([]string, error) {
	if len(o.Nodes) == 0 {
		names := make([]string, 0, len(snap.Nodes))
		for _, n := range snap.Nodes {
			names = append(names, n.Name)
		}
		sort.Strings(names)
		if len(names) == 0 && o.Selector != "" {
			fmt.Fprintf(o.ErrOut, "Note: %s.\n", cli.NoNodesMatch(o.Selector))
		}
		return names, nil
	}
	var missing []string
	for _, n := range o.Nodes {
		if idx.Node(n) == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, cli.WithHint(cli.UsageErr(fmt.Errorf("%s not found: %s", cli.Agree(len(missing), "node", "nodes"), strings.Join(missing, ", "))), "kubectl get nodes")
	}
	return o.Nodes, nil
}

// onlyNamespace keeps the pods of namespace ns and their verdicts.
func onlyNamespace(pods []*corev1.Pod, vs []eviction.Verdict, ns string) ([]*corev1.Pod, []eviction.Verdict) {
	var keepPods []*corev1.Pod
	var keep []eviction.Verdict
	for i, v := range vs {
		if v.Namespace == ns {
			keepPods, keep = append(keepPods, pods[i]), append(keep, v)
		}
	}
	return keepPods, keep
}

func canIHint(md cli.Metadata, ns string) string {
	h := "kubectl auth can-i list pods"
	if ns != "" {
		h += " -n " + ns
	} else {
		h += " -A"
	}
	if md.Context != "" {
		h += " --context " + md.Context
	}
	return h
}

// dryRunRetries is how many times a throttled dry run is asked again.
const dryRunRetries = 3

// dryRunner sends the first eviction per budget as a server-side dry run.
type dryRunner struct {
	helper *eviction.Helper
	done   map[string]bool
}

// first says whether v is the drain's first eviction under its budget (its
// set of PDBs), which the server is asked about, and records it.
func (d *dryRunner) first(v eviction.Verdict) bool {
	if len(v.PDBs) == 0 || v.Outcome == eviction.OutcomeIgnored {
		return false
	}
	key := v.Namespace + "/" + strings.Join(v.PDBs, ",")
	if d.done[key] {
		return false
	}
	d.done[key] = true
	return true
}

// check sends the dry-run eviction of the pod of it and compares the
// server's answer with alone, the pod's stand-alone prediction: a dry run
// spends no budget, so it answers as if the drain had evicted nothing yet,
// and the drain-simulated verdict (which spends budget) is not what it
// checks.
func (d *dryRunner) check(ctx context.Context, it *Item, alone eviction.Verdict) {
	pod := podRef(alone)
	r := d.helper.EvictOnce(ctx, pod)
	// A server that throttles (429 without a disruption budget cause) has
	// not judged the eviction yet: ask again after Retry-After, a few times.
	for try := 0; try < dryRunRetries && r.Reason == eviction.ReasonThrottled; try++ {
		wait := min(max(r.RetryAfter, time.Second), 10*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r = d.helper.EvictOnce(ctx, pod)
	}
	it.DryRun = &DryRun{Result: r, Predicted: alone.Eviction, Agrees: r.Reason == alone.Eviction.Reason}
}

func nodeCompletion(cg cli.ClientGetter) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		kc, err := cg.Kube()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		given := map[string]bool{}
		for _, a := range args {
			given[a] = true
		}
		var out []string
		for _, n := range l.Items {
			if !given[n.Name] {
				out = append(out, n.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
