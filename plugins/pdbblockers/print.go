package pdbblockers

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// Report is the result of `kubectl pdb-blockers` (kind PDBBlockersReport).
type Report struct {
	cli.Header
	// Time is when the verdicts were computed.
	Time metav1.Time `json:"time"`
	// Nodes are the checked nodes in drain order.
	Nodes []NodeStatus `json:"nodes"`
	// Items are the pods that hold up the drain (every pod with --all-pods),
	// in drain order.
	Items []Item `json:"items"`
	// Forbidden lists the namespaces that could not be read.
	Forbidden []ForbiddenNamespace `json:"forbiddenNamespaces,omitempty"`
	// Skipped says which pods of the Argo workflow this runs in were left
	// out (a fleet step on its own management cluster), "" when none.
	Skipped string `json:"skipped,omitempty"`
	// Summary counts the verdicts.
	Summary Summary `json:"summary"`
}

// NodeStatus summarises one node.
type NodeStatus struct {
	Name string `json:"name"`
	// Cordoned is true for an unschedulable node: a drain is in progress.
	Cordoned bool `json:"cordoned"`
	// CordonedSince is when it was cordoned, from the node's managed fields.
	CordonedSince *metav1.Time `json:"cordonedSince,omitempty"`
	// Pods counts the pods on the node; the rest count them by verdict.
	Pods    int `json:"pods"`
	Now     int `json:"now"`
	Later   int `json:"later"`
	Never   int `json:"never"`
	Ignored int `json:"ignored"`
	Unknown int `json:"unknown"`
	// Verdict is the worst verdict of its pods.
	Verdict eviction.Outcome `json:"verdict"`
}

// Item is one pod's verdict.
type Item struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PDBs names the PodDisruptionBudgets that select the pod.
	PDBs []string `json:"pdbs,omitempty"`
	// Verdict: Now, Later, Never, Ignored or Unknown.
	Verdict eviction.Outcome `json:"verdict"`
	// Severity is blocking for Never, warning for Later and Unknown.
	Severity cli.Severity `json:"severity"`
	// Eviction is the answer the eviction API would give at this point of
	// the drain.
	Eviction eviction.Result `json:"eviction"`
	// Budget is the pod's PodDisruptionBudget as the drain sees it.
	Budget *eviction.Budget `json:"budget,omitempty"`
	// Blockers explain the verdict, each with a fix.
	Blockers []eviction.Blocker `json:"blockers,omitempty"`
	// BlockingSince is set on cordoned nodes: the pod has held up the drain
	// since the cordon.
	BlockingSince *metav1.Time `json:"blockingSince,omitempty"`
	// DryRun is the server's answer to a dry-run eviction (--server-dry-run).
	DryRun *DryRun `json:"dryRun,omitempty"`
	// BreakGlass is the last resort for a pod a PodDisruptionBudget blocks
	// for good: deleting it without the eviction API.
	BreakGlass *BreakGlass `json:"breakGlass,omitempty"`
}

// BreakGlass is a command that bypasses the eviction API, and its warning.
type BreakGlass struct {
	Command string `json:"command"`
	Warning string `json:"warning"`
}

// DryRun is a server-side dry-run eviction and whether it agrees with the
// prediction for the pod evicted by itself.
type DryRun struct {
	// Result is the server's answer.
	Result eviction.Result `json:"result"`
	// Predicted is the pod's stand-alone prediction: the eviction as if the
	// drain had evicted nothing yet, since a dry run spends no budget (the
	// Item's Eviction is the drain-simulated one).
	Predicted eviction.Result `json:"predicted"`
	// Agrees is true when Result and Predicted have the same reason.
	Agrees bool `json:"agrees"`
}

// ForbiddenNamespace is a namespace whose pods or PDBs could not be read.
type ForbiddenNamespace struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
	Message   string   `json:"message"`
}

// Summary counts pods by verdict.
type Summary struct {
	Nodes    int `json:"nodes"`
	Pods     int `json:"pods"`
	Now      int `json:"now"`
	Later    int `json:"later"`
	Never    int `json:"never"`
	Ignored  int `json:"ignored"`
	Unknown  int `json:"unknown"`
	Blocking int `json:"blocking"`
	Warning  int `json:"warning"`
	// CordonedNodes counts nodes with a drain in progress.
	CordonedNodes int `json:"cordonedNodes"`
	// DryRuns and DryRunDisagreements count --server-dry-run checks.
	DryRuns             int `json:"dryRuns,omitempty"`
	DryRunDisagreements int `json:"dryRunDisagreements,omitempty"`
}

// KindReport is the kind of the report; several contexts give a
// PDBBlockersReportList.
const KindReport = "PDBBlockersReport"

func newReport(md cli.Metadata, now time.Time) *Report {
	return &Report{Header: cli.NewHeader(KindReport, md), Time: metav1.NewTime(now.UTC()), Nodes: []NodeStatus{}, Items: []Item{}}
}

func severityOf(o eviction.Outcome) cli.Severity {
	switch o {
	case eviction.OutcomeNever:
		return cli.SeverityBlocking
	case eviction.OutcomeLater, eviction.OutcomeUnknown:
		return cli.SeverityWarning
	}
	return cli.SeverityNone
}

func (r *Report) addNode(node *corev1.Node, vs []eviction.Verdict, _ time.Time) {
	ns := NodeStatus{Name: node.Name, Pods: len(vs), Verdict: eviction.OutcomeNow}
	if since, ok := eviction.CordonedSince(node); ok {
		ns.Cordoned = true
		if !since.IsZero() {
			t := metav1.NewTime(since.UTC())
			ns.CordonedSince = &t
		}
	}
	for _, v := range vs {
		switch v.Outcome {
		case eviction.OutcomeNow:
			ns.Now++
		case eviction.OutcomeLater:
			ns.Later++
		case eviction.OutcomeNever:
			ns.Never++
		case eviction.OutcomeIgnored:
			ns.Ignored++
		default:
			ns.Unknown++
		}
		ns.Verdict = eviction.Worse(ns.Verdict, v.Outcome)
	}
	r.Nodes = append(r.Nodes, ns)
}

// addPod records a pod's verdict and returns its item, or nil when the pod
// is counted but not listed.
func (r *Report) addPod(node *corev1.Node, v eviction.Verdict, _ time.Time, all bool) *Item {
	sev := severityOf(v.Outcome)
	if sev == cli.SeverityNone && !all {
		return nil
	}
	it := Item{Node: node.Name, Namespace: v.Namespace, Name: v.Name, PDBs: v.PDBs, Verdict: v.Outcome, Severity: sev,
		Eviction: v.Eviction, Budget: v.Budget, Blockers: v.Blockers}
	if v.Outcome == eviction.OutcomeNever && v.Eviction.PDB != "" && !v.Eviction.Evicted() {
		cmd, warn := eviction.BreakGlass(v.Namespace, v.Name)
		it.BreakGlass = &BreakGlass{Command: cmd, Warning: warn}
	}
	if since, ok := eviction.CordonedSince(node); ok && sev != cli.SeverityNone && !since.IsZero() {
		t := metav1.NewTime(since.UTC())
		it.BlockingSince = &t
	}
	r.Items = append(r.Items, it)
	return &r.Items[len(r.Items)-1]
}

func (r *Report) addForbidden(s *eviction.Snapshot) {
	byNS := map[string]*ForbiddenNamespace{}
	add := func(m map[string]string, what string) {
		for ns, msg := range m {
			f := byNS[ns]
			if f == nil {
				f = &ForbiddenNamespace{Namespace: ns, Message: msg}
				byNS[ns] = f
			}
			f.Resources = append(f.Resources, what)
		}
	}
	add(s.ForbiddenPods, "pods")
	add(s.ForbiddenPDBs, "poddisruptionbudgets")
	for _, f := range byNS {
		r.Forbidden = append(r.Forbidden, *f)
	}
	sort.Slice(r.Forbidden, func(i, j int) bool { return r.Forbidden[i].Namespace < r.Forbidden[j].Namespace })
}

func (r *Report) finish() {
	s := &r.Summary
	s.Nodes = len(r.Nodes)
	for _, n := range r.Nodes {
		s.Pods += n.Pods
		s.Now += n.Now
		s.Later += n.Later
		s.Never += n.Never
		s.Ignored += n.Ignored
		s.Unknown += n.Unknown
		if n.Cordoned {
			s.CordonedNodes++
		}
	}
	for _, it := range r.Items {
		switch it.Severity {
		case cli.SeverityBlocking:
			s.Blocking++
		case cli.SeverityWarning:
			s.Warning++
		}
		if it.DryRun != nil {
			s.DryRuns++
			if !it.DryRun.Agrees {
				s.DryRunDisagreements++
			}
		}
	}
}

func (r *Report) severities() []cli.Severity {
	out := make([]cli.Severity, 0, len(r.Items))
	for _, it := range r.Items {
		out = append(out, it.Severity)
	}
	return out
}

func (o *Options) print(r *Report) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		var err error
		if o.Print.Output == cli.OutputJSON {
			err = writeJSON(o.Out, r)
		} else {
			err = cli.PrintStructured(o.Out, o.Print.Output, r)
		}
		if err != nil {
			return err
		}
		o.printWarnings(r, "")
		return nil
	}
	t := o.table(false)
	o.addRows(&t, r, "")
	if len(t.Rows) > 0 {
		if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
			return err
		}
	}
	if err := o.Print.PrintSummary(o.Out, len(t.Rows) > 0, summaryLines(r, "")...); err != nil {
		return err
	}
	o.printWarnings(r, "")
	return nil
}

// summaryLines are the counts and the drains in progress, each line
// prefixed (with the context, when several are reported).
func summaryLines(r *Report, prefix string) []string {
	s := r.Summary
	now := r.Time.Time
	var out []string
	switch {
	case s.Nodes == 0:
		out = append(out, prefix+"No nodes to check.")
	case s.Blocking+s.Warning == 0:
		out = append(out, fmt.Sprintf("%sNo pods block draining %s: %s evict now, %d skipped.", prefix, cli.Plural(s.Nodes, "node"), cli.Plural(s.Now, "pod"), s.Ignored))
	default:
		out = append(out, fmt.Sprintf("%s%s, %s: %d evict now, %d wait, %d blocked, %d unknown, %d skipped.",
			prefix, cli.Plural(s.Nodes, "node"), cli.Plural(s.Pods, "pod"), s.Now, s.Later, s.Never, s.Unknown, s.Ignored))
	}
	for _, n := range r.Nodes {
		if !n.Cordoned || n.Pods == n.Ignored {
			continue
		}
		since := "at an unknown time"
		if n.CordonedSince != nil {
			since = fmt.Sprintf("%s ago", duration.HumanDuration(now.Sub(n.CordonedSince.Time)))
		}
		out = append(out, fmt.Sprintf("%sDrain in progress on %s: cordoned %s, %s left, %d not evictable now.", prefix, n.Name, since, cli.Plural(n.Pods-n.Ignored, "pod"), n.Later+n.Never+n.Unknown))
	}
	return out
}

// nameContext adds --context to every fix and break-glass command, for
// reports of several contexts.
func (r *Report) nameContext(name string) {
	flag := " --context " + name
	for i := range r.Items {
		it := &r.Items[i]
		if len(it.Blockers) > 0 {
			bs := append([]eviction.Blocker(nil), it.Blockers...)
			for k := range bs {
				if strings.HasPrefix(bs[k].Fix, "kubectl ") {
					bs[k].Fix += flag
				}
			}
			it.Blockers = bs
		}
		if it.BreakGlass != nil {
			bg := *it.BreakGlass
			bg.Command += flag
			it.BreakGlass = &bg
		}
	}
}

// printWarnings writes what the reader must not miss to stderr, whatever
// the output format.
func (o *Options) printWarnings(r *Report, prefix string) {
	if r.Skipped != "" {
		fmt.Fprintf(o.ErrOut, "%sNote: %s.\n", prefix, r.Skipped)
	}
	for _, f := range r.Forbidden {
		fmt.Fprintf(o.ErrOut, "%sWarning: namespace %s not checked: cannot list %s.\n", prefix, f.Namespace, strings.Join(f.Resources, " or "))
	}
	if r.Summary.DryRunDisagreements > 0 {
		verb := "disagree"
		if r.Summary.DryRunDisagreements == 1 {
			verb = "disagrees"
		}
		fmt.Fprintf(o.ErrOut, "%sWarning: %s %s with the prediction; see the DRY-RUN column (-o wide).\n", prefix, cli.Plural(r.Summary.DryRunDisagreements, "server dry run"), verb)
	}
}

func podRef(v eviction.Verdict) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name, UID: v.UID}}
}

// writeJSON prints the report as cli.PrintStructured would, streaming the
// items (tens of thousands of pods) in chunks.
func writeJSON(w io.Writer, r *Report) error {
	head := *r
	head.Items = nil
	return cli.WriteJSONItems(w, head, r.Items)
}

// fixReserve is the width the default table keeps for FIX within its
// budget: a longer fix runs past it, whole.
const fixReserve = 30

// table returns the empty verdict table, with a CONTEXT column first when
// several contexts are reported together.
func (o *Options) table(withContext bool) cli.Table {
	// FIX is the command to paste: never shortened, it ends the default
	// view and may run past the width budget; the columns before it are
	// fitted to leave it fixReserve columns. The context, node, pod and
	// PDB are names to act on and stay whole, as do STATUS and FOR:
	// REASON is shortened, then left to -o wide, when they do not fit.
	cols := []cli.Column{
		{Name: "NODE"}, {Name: "POD"}, {Name: "PDB"},
		{Name: cli.StatusColumn}, {Name: "REASON", Shrink: true, Min: 20, Drop: true}, {Name: "FOR"}, {Name: "FIX", Overflow: true, Min: fixReserve},
		{Name: "EVICTION", Wide: true}, {Name: "DRY-RUN", Wide: true}, {Name: "FIX-WARNING", Wide: true}, {Name: "BREAK-GLASS", Wide: true},
	}
	if withContext {
		cols = append([]cli.Column{{Name: "CONTEXT"}}, cols...)
	}
	return cli.Table{Columns: cols}
}

// addRows adds one row per blocker of every item of r; context, when not
// empty, fills the CONTEXT column.
func (o *Options) addRows(t *cli.Table, r *Report, context string) {
	c := o.Print.Colorizer(o.Out)
	now := r.Time.Time
	add := func(cells ...string) {
		if context != "" {
			cells = append([]string{context}, cells...)
		}
		t.AddRow(cells...)
	}
	for _, it := range r.Items {
		pod := it.Namespace + "/" + it.Name
		pdb := strings.Join(it.PDBs, ",")
		if pdb == "" {
			pdb = "-"
		}
		since := "-"
		if it.BlockingSince != nil {
			since = duration.HumanDuration(now.Sub(it.BlockingSince.Time))
		}
		evic := fmt.Sprintf("%d %s", it.Eviction.Code, it.Eviction.Reason)
		dry := "-"
		if it.DryRun != nil {
			dry = fmt.Sprintf("%d %s", it.DryRun.Result.Code, it.DryRun.Result.Reason)
			if it.DryRun.Agrees {
				dry += " (agrees)"
			} else {
				dry += " (DIFFERS)"
			}
		}
		breakGlass := "-"
		if it.BreakGlass != nil {
			breakGlass = it.BreakGlass.Command + "  # " + it.BreakGlass.Warning
		}
		rows := 0
		for _, b := range it.Blockers {
			if severityOf(b.Outcome) == cli.SeverityNone && it.Verdict != eviction.OutcomeIgnored && !(o.AllPods && severityOf(it.Verdict) == cli.SeverityNone) {
				continue
			}
			fix := b.Fix
			if fix == "" {
				fix = "-"
			}
			warn := b.FixWarning
			if warn == "" {
				warn = "-"
			}
			add(it.Node, pod, pdb, c.Status(b.Outcome.Status().String()), b.Message, since, fix, evic, dry, warn, breakGlass)
			rows++
		}
		if rows == 0 {
			msg := it.Eviction.Message
			if msg == "" {
				msg = "evicts now"
			}
			add(it.Node, pod, pdb, c.Status(it.Verdict.Status().String()), msg, since, "-", evic, dry, "-", breakGlass)
		}
	}
}
