package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

// StatusReport is the output of `kubectl crd-migrate status`.
type StatusReport struct {
	cli.Header
	Items   []crdmigrate.CRDStatus `json:"items"`
	Summary StatusSummary          `json:"summary"`
}

// StatusSummary counts CRDs by verdict.
type StatusSummary struct {
	CRDs            int `json:"crds"`
	UpToDate        int `json:"upToDate"`
	MigrationNeeded int `json:"migrationNeeded"`
	Blocked         int `json:"blocked"`
	// InTreeAPI is the served StorageVersionMigration group/version, or "".
	InTreeAPI string `json:"inTreeAPI,omitempty"`
}

func newStatusReport(md cli.Metadata, items []crdmigrate.CRDStatus, svm string) *StatusReport {
	if items == nil {
		items = []crdmigrate.CRDStatus{}
	}
	crdmigrate.SortStatuses(items)
	rep := &StatusReport{Header: cli.NewHeader("CRDStatusReport", md), Items: items}
	rep.Summary.CRDs = len(items)
	if svm != "" {
		rep.Summary.InTreeAPI = crdmigrate.SVMGroup + "/" + svm
	}
	for _, it := range items {
		switch it.Verdict {
		case crdmigrate.VerdictUpToDate:
			rep.Summary.UpToDate++
		case crdmigrate.VerdictMigrationNeeded:
			rep.Summary.MigrationNeeded++
		case crdmigrate.VerdictBlocked:
			rep.Summary.Blocked++
		}
	}
	return rep
}

// summaryLine counts the CRDs by verdict.
func (rep *StatusReport) summaryLine() string {
	s := rep.Summary
	if s.CRDs == 0 {
		return "No CustomResourceDefinitions found."
	}
	return fmt.Sprintf("%s: %d OK, %d %s a migration (WARN), %d blocked by a webhook (BLOCKED).", cli.Plural(s.CRDs, "CRD"), s.UpToDate, s.MigrationNeeded, cli.Agree(s.MigrationNeeded, "needs", "need"), s.Blocked)
}

// statusWords are the words of the status tables (status and run
// --dry-run).
var statusWords = []cli.Status{cli.StatusOK, cli.StatusWarn, cli.StatusBlocked}

// verdictWord is the status word for a verdict: WARN for a CRD that needs
// a migration.
func verdictWord(v crdmigrate.Verdict) cli.Status { return v.Word() }

func list(s []string) string {
	if len(s) == 0 {
		return cli.EmptyCell
	}
	return strings.Join(s, ",")
}

func healthWord(h crdmigrate.HealthState) string { return h.Word().String() }

func conversionCell(st crdmigrate.CRDStatus, c cli.Colorizer) string {
	if st.ConversionWebhook == nil {
		return st.Conversion
	}
	return st.Conversion + " " + c.Status(healthWord(st.ConversionWebhook.Health))
}

func webhooksCell(st crdmigrate.CRDStatus, c cli.Colorizer) string {
	if len(st.Webhooks) == 0 {
		return "none"
	}
	counts := map[crdmigrate.HealthState]int{}
	for _, h := range st.Webhooks {
		counts[h.Health]++
	}
	var parts []string
	for _, h := range []crdmigrate.HealthState{crdmigrate.HealthDown, crdmigrate.HealthUnknown, crdmigrate.HealthOK} {
		if counts[h] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[h], c.Status(healthWord(h))))
		}
	}
	return strings.Join(parts, ", ")
}

func objectsCell(n int64) string {
	if n < 0 {
		return "?"
	}
	return strconv.FormatInt(n, 10)
}

func statusTable(items []crdmigrate.CRDStatus, c cli.Colorizer) *cli.Table {
	t := &cli.Table{Columns: []cli.Column{
		{Name: "NAME"}, {Name: "STORAGE"},
		{Name: "STORED", Shrink: true, Min: 10, Drop: true}, {Name: "SERVED", Wide: true}, {Name: "DEPRECATED", Wide: true},
		{Name: "OBJECTS"}, {Name: "CONVERSION"}, {Name: "WEBHOOKS"}, {Name: cli.StatusColumn}, {Name: "REASON", Shrink: true, Min: 20},
	}}
	for _, st := range items {
		reason := strings.Join(reasonsFirstCause(st.Reasons), "; ")
		t.AddRow(st.Name, st.StorageVersion, list(st.StoredVersions), list(st.ServedVersions), list(st.DeprecatedVersions),
			objectsCell(st.Objects), conversionCell(st, c), webhooksCell(st, c), c.Status(verdictWord(st.Verdict).String()), orDash(reason))
	}
	return t
}

// reasonsFirstCause puts what blocks or endangers a migration before the
// storedVersions reason, which STORED and STORAGE already show: a REASON
// shortened to the table's width then still says why.
func reasonsFirstCause(reasons []string) []string {
	if len(reasons) < 2 || !strings.HasPrefix(reasons[0], "storedVersions still lists") {
		return reasons
	}
	return append(slices.Clone(reasons[1:]), reasons[0])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Outcome is one CRD's run: the status word of the table's STATUS column,
// in lower case (gpufleet.dev/v1alpha2 of CRDMigrationReport).
// gpufleet.dev/v1alpha1 wrote Migrated, NothingToDo, Failed and Incomplete;
// UnmarshalText still reads them.
type Outcome string

// Outcomes of one CRD's run.
const (
	// OutcomeMigrated: every object was rewritten at the storage version
	// and storedVersions trimmed (DONE).
	OutcomeMigrated Outcome = "done"
	// OutcomeNothingToDo: storedVersions already held only the storage
	// version (OK).
	OutcomeNothingToDo Outcome = "ok"
	// OutcomeFailed: refused by a preflight or storedVersions check
	// before any object was written (FAIL).
	OutcomeFailed Outcome = "fail"
	// OutcomeIncomplete: stopped part way; a re-run resumes (ERROR).
	OutcomeIncomplete Outcome = "error"
)

// v1alpha1Outcomes are the words gpufleet.dev/v1alpha1 wrote.
var v1alpha1Outcomes = map[string]Outcome{
	"Migrated": OutcomeMigrated, "NothingToDo": OutcomeNothingToDo, "Failed": OutcomeFailed, "Incomplete": OutcomeIncomplete,
}

// UnmarshalText reads an outcome as this release writes it, or as
// gpufleet.dev/v1alpha1 did.
func (o *Outcome) UnmarshalText(b []byte) error {
	w := string(b)
	switch Outcome(w) {
	case OutcomeMigrated, OutcomeNothingToDo, OutcomeFailed, OutcomeIncomplete:
		*o = Outcome(w)
		return nil
	}
	if old, ok := v1alpha1Outcomes[w]; ok {
		*o = old
		return nil
	}
	return fmt.Errorf("outcome %q is not one of done, ok, fail, error", w)
}

// RunItem is one CRD's line of a RunReport.
type RunItem struct {
	crdmigrate.Result
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

func itemFor(res *crdmigrate.Result, err error) *RunItem {
	if res == nil {
		return nil
	}
	it := &RunItem{Result: *res, Outcome: OutcomeMigrated}
	if res.StoredVersionsBefore == nil {
		it.StoredVersionsBefore = []string{}
	}
	if res.StoredVersionsAfter == nil {
		it.StoredVersionsAfter = []string{}
	}
	switch {
	case err != nil:
		it.Error = err.Error()
		it.Outcome = OutcomeIncomplete
		var pre *crdmigrate.PreflightError
		var sv *crdmigrate.StoredVersionsError
		if errors.As(err, &pre) || errors.As(err, &sv) {
			it.Outcome = OutcomeFailed
		}
	case res.NothingToDo:
		it.Outcome = OutcomeNothingToDo
	}
	return it
}

// RunReport is the output of `kubectl crd-migrate run`.
type RunReport struct {
	cli.Header
	Items   []RunItem  `json:"items"`
	Summary RunSummary `json:"summary"`
}

// RunSummary adds up a run.
type RunSummary struct {
	CRDs        int   `json:"crds"`
	Migrated    int   `json:"migrated"`
	NothingToDo int   `json:"nothingToDo"`
	Incomplete  int   `json:"incomplete"`
	Objects     int64 `json:"objects"`
	Rewritten   int64 `json:"rewritten"`
}

func newRunReport(md cli.Metadata, items []RunItem) *RunReport {
	if items == nil {
		items = []RunItem{}
	}
	rep := &RunReport{Header: cli.NewHeader("CRDMigrationReport", md), Items: items}
	rep.Summary.CRDs = len(items)
	for _, it := range items {
		switch it.Outcome {
		case OutcomeMigrated:
			rep.Summary.Migrated++
		case OutcomeNothingToDo:
			rep.Summary.NothingToDo++
		default:
			rep.Summary.Incomplete++
		}
		rep.Summary.Objects += it.Processed
		rep.Summary.Rewritten += it.Rewritten
	}
	return rep
}

// outcomeWord is the table's status word for a run's outcome: DONE
// (migrated), OK (nothing to do), FAIL (refused by a preflight or
// storedVersions check) and ERROR (stopped part way); JSON writes the same
// word in lower case.
func outcomeWord(o Outcome) cli.Status {
	if w, ok := cli.ParseStatus(string(o)); ok {
		return w
	}
	return cli.StatusError
}

func (o *RunOptions) printRun(rep *RunReport) error {
	switch {
	case o.Print.Quiet:
		return nil
	case o.Print.Structured():
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	if len(rep.Items) == 0 {
		return o.Print.PrintSummary(o.Out, false, "No CustomResourceDefinition needs a migration.")
	}
	c := o.Print.Colorizer(o.Out)
	t := &cli.Table{Columns: []cli.Column{
		{Name: "NAME"}, {Name: "METHOD", Drop: true}, {Name: "STORAGE"}, {Name: "OBJECTS"},
		{Name: "REWRITTEN"}, {Name: "UNCHANGED"}, {Name: "CONFLICTS", Wide: true}, {Name: "GONE", Wide: true}, {Name: "RUN", Wide: true},
		{Name: "STORED", Shrink: true, Min: 16, Drop: true}, {Name: "DURATION"}, {Name: cli.StatusColumn},
	}}
	for _, it := range rep.Items {
		stored := list(it.StoredVersionsBefore)
		if it.Outcome == OutcomeMigrated {
			stored += " -> " + list(it.StoredVersionsAfter)
		}
		run := it.RunID
		if it.Migration != "" {
			run = it.Migration
		}
		t.AddRow(it.CRD, it.Method, it.StorageVersion, strconv.FormatInt(it.Processed, 10), strconv.FormatInt(it.Rewritten, 10),
			strconv.FormatInt(it.Unchanged, 10), strconv.FormatInt(it.Conflicts, 10), strconv.FormatInt(it.Gone, 10), orDash(run),
			stored, (time.Duration(it.Seconds * float64(time.Second))).Round(100*time.Millisecond).String(), c.Status(outcomeWord(it.Outcome).String()))
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	sm := rep.Summary
	return o.Print.PrintSummary(o.Out, true, fmt.Sprintf("%s: %d migrated, %d with nothing to do, %d incomplete; %s, %d rewritten.",
		cli.Plural(sm.CRDs, "CRD"), sm.Migrated, sm.NothingToDo, sm.Incomplete, cli.Plural(int(sm.Objects), "object"), sm.Rewritten))
}

// PlanReport is the output of `kubectl crd-migrate run --dry-run`.
type PlanReport struct {
	cli.Header
	Items   []crdmigrate.DryRunItem  `json:"items"`
	Summary crdmigrate.DryRunSummary `json:"summary"`
}

func (o *RunOptions) printPlan(rep *PlanReport) error {
	switch {
	case o.Print.Quiet:
		return nil
	case o.Print.Structured():
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	if len(rep.Items) == 0 {
		return o.Print.PrintSummary(o.Out, false, "No CustomResourceDefinition needs a migration.")
	}
	c := o.Print.Colorizer(o.Out)
	t := &cli.Table{Columns: []cli.Column{
		{Name: "NAME"}, {Name: "STORAGE"}, {Name: "STORED", Shrink: true, Min: 10, Drop: true},
		{Name: "OBJECTS"}, {Name: "REQUESTS"}, {Name: "ESTIMATE"},
		{Name: "METHOD", Wide: true}, {Name: "PROBE", Wide: true}, {Name: cli.StatusColumn}, {Name: "PROBLEMS", Shrink: true, Min: 24},
	}}
	for _, it := range rep.Items {
		req, est := "-", "-"
		if it.Estimate != nil {
			req = strconv.FormatInt(it.Estimate.Requests, 10)
			est = it.Estimate.Duration().Round(100 * time.Millisecond).String()
		}
		v := cli.StatusOK
		switch {
		case len(it.Problems) > 0:
			v = cli.StatusBlocked
		case it.NeedsMigration:
			v = cli.StatusWarn
		}
		t.AddRow(it.CRD, it.StorageVersion, list(it.StoredVersions), objectsCell(it.Objects), req, est, it.Method, orDash(it.Probe),
			c.Status(v.String()), orDash(strings.Join(it.Problems, "; ")))
	}
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	s := rep.Summary
	return o.Print.PrintSummary(o.Out, true, fmt.Sprintf("%s, %s: about %s at --qps %g --burst %d (dry run, nothing changed); %d of %s blocked.",
		cli.Plural(int(s.Objects), "object"), cli.Plural(int(s.Requests), "request"), time.Duration(s.Seconds*float64(time.Second)).Round(100*time.Millisecond), s.QPS, s.Burst, s.Blocked, cli.Plural(s.CRDs, "CRD")))
}

// progressPrinter turns migration events and counts into progress lines:
// one line per state change, and on a terminal a redrawn bar with
// done/total, rate and ETA.
type progressPrinter struct {
	p     *cli.Progress
	tty   bool
	mu    sync.Mutex
	crd   string
	began time.Time
	drawn time.Time
}

func newProgressPrinter(w io.Writer, tty, quiet bool) *progressPrinter {
	return &progressPrinter{p: cli.NewProgress(w, tty, quiet), tty: tty && !quiet}
}

func (pp *progressPrinter) start(crd string) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	pp.crd, pp.began, pp.drawn = crd, time.Now(), time.Time{}
}

func (pp *progressPrinter) event(e crdmigrate.Event) {
	pp.p.Event("%s", e.Message)
}

func (pp *progressPrinter) progress(pr crdmigrate.Progress) {
	if !pp.tty {
		return
	}
	pp.mu.Lock()
	now := time.Now()
	if now.Sub(pp.drawn) < 100*time.Millisecond && pr.Processed < pr.Total {
		pp.mu.Unlock()
		return
	}
	pp.drawn = now
	elapsed := now.Sub(pp.began)
	pp.mu.Unlock()
	pp.p.Update("%s", progressLine(pr, elapsed))
}

// progressLine renders "name [#####.....] done/total pct rate ETA".
func progressLine(pr crdmigrate.Progress, elapsed time.Duration) string {
	const width = 24
	frac := 0.0
	if pr.Total > 0 {
		frac = min(1, float64(pr.Processed)/float64(pr.Total))
	}
	filled := int(frac * width)
	bar := strings.Repeat("#", filled) + strings.Repeat(".", width-filled)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(pr.Session) / elapsed.Seconds()
	}
	eta := "?"
	if rate > 0 && pr.Total >= pr.Processed {
		eta = (time.Duration(float64(pr.Total-pr.Processed) / rate * float64(time.Second))).Round(time.Second).String()
	}
	return fmt.Sprintf("%s [%s] %d/%d %3.0f%% %.0f obj/s ETA %s", pr.CRD, bar, pr.Processed, pr.Total, frac*100, rate, eta)
}

func (pp *progressPrinter) done() { pp.p.Done() }

// completeCRDs completes CRD names.
func completeCRDs(cg cli.ClientGetter) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		ext, err := cg.APIExtensions()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := ext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := make([]string, 0, len(l.Items))
		for _, c := range l.Items {
			names = append(names, c.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
