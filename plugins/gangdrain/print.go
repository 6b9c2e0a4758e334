package gangdrain

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// PlanReport is the output of `plan` (kind GangDrainPlan).
type PlanReport struct {
	cli.Header
	RunID   string             `json:"runID,omitempty"`
	Nodes   []gang.PlanNode    `json:"nodes"`
	Items   []gang.PlanGang    `json:"items"`
	Pods    []eviction.Verdict `json:"pods"`
	Steps   []string           `json:"steps"`
	Summary PlanSummary        `json:"summary"`
}

// PlanSummary totals a plan.
type PlanSummary struct {
	Nodes                  int     `json:"nodes"`
	Gangs                  int     `json:"gangs"`
	Ranks                  int     `json:"ranks"`
	RanksOnNodes           int     `json:"ranksOnNodes"`
	GPUs                   int64   `json:"gpus"`
	GPUsOnNodes            int64   `json:"gpusOnNodes"`
	PlainDrainLossGPUHours float64 `json:"plainDrainLossGPUHours"`
	YieldLossGPUHours      float64 `json:"yieldLossGPUHours"`
	PodsToEvict            int     `json:"podsToEvict"`
	PodsLater              int     `json:"podsLater"`
	PodsNever              int     `json:"podsNever"`
	// Blocking counts gangs that cannot be stopped as a unit and pods that
	// can never be evicted: what would keep run from finishing.
	Blocking int `json:"blocking"`
}

func newPlanReport(md cli.Metadata, p *gang.Plan, o *Options) PlanReport {
	rep := PlanReport{Header: cli.NewHeader("GangDrainPlan", md), RunID: p.RunID, Nodes: p.Nodes, Items: p.Gangs, Pods: p.Pods, Steps: p.Steps}
	if rep.Items == nil {
		rep.Items = []gang.PlanGang{}
	}
	if rep.Pods == nil {
		rep.Pods = []eviction.Verdict{}
	}
	s := &rep.Summary
	s.Nodes = len(p.Nodes)
	for _, g := range p.Gangs {
		s.Gangs++
		s.Ranks += g.Ranks
		s.RanksOnNodes += g.RanksOnNodes
		s.GPUs += g.GPUs
		s.GPUsOnNodes += g.GPUsOnNodes
		s.PlainDrainLossGPUHours += g.PlainDrainLossGPUHours
		s.YieldLossGPUHours += g.YieldLossGPUHours
		if g.Method == gang.StopUnsupported {
			s.Blocking++
		}
	}
	for _, v := range p.Pods {
		switch v.Outcome {
		case eviction.OutcomeIgnored:
			continue
		case eviction.OutcomeLater:
			s.PodsLater++
		case eviction.OutcomeNever, eviction.OutcomeUnknown:
			s.PodsNever++
			s.Blocking++
		}
		s.PodsToEvict++
	}
	s.PlainDrainLossGPUHours = float64(int64(s.PlainDrainLossGPUHours*100+0.5)) / 100
	s.YieldLossGPUHours = float64(int64(s.YieldLossGPUHours*100+0.5)) / 100
	_ = o
	return rep
}

func age(seconds int64, known bool) string {
	if seconds == 0 && !known {
		return "unknown"
	}
	d := (time.Duration(seconds) * time.Second).Round(time.Second)
	s := shortDuration(d)
	if !known {
		s = ">" + s + " (none reported)"
	}
	return s
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%ds", int(d.Seconds()))
}

func protocolWord(s checkpoint.Support) string {
	switch s {
	case checkpoint.SupportYes:
		return "yes"
	case checkpoint.SupportNo:
		return "no"
	}
	return "unlabelled"
}

func printPlan(w io.Writer, rep PlanReport, opts cli.TableOptions, c cli.Colorizer) error {
	nt := cli.Table{Columns: []cli.Column{{Name: "NODE"}, {Name: "GPUS"}, {Name: "GANG-PODS"}, {Name: "OTHER-PODS"}, {Name: "CORDONED"}, {Name: "RUN"}, {Name: "STATE", Wide: true}}}
	for _, n := range rep.Nodes {
		run := n.RunID
		if !n.Selected {
			run = "later (--max-unavailable-gpus)"
		}
		nt.AddRow(n.Node, fmt.Sprint(n.GPUs), fmt.Sprint(n.GangPods), fmt.Sprint(n.OtherPods), fmt.Sprint(n.Unschedulable), run, string(n.State))
	}
	if err := nt.Print(w, opts); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(rep.Items) > 0 {
		// The GPU-hours a plain drain loses against checkpoint-and-yield
		// are the point of the table; the protocol label (SAVE PATH says
		// what it means) and the rank count go to -o wide to fit 120
		// columns.
		gt := cli.Table{Columns: []cli.Column{{Name: "GANG"}, {Name: "STOP"}, {Name: "PROTOCOL", Wide: true}, {Name: "SAVE PATH", Shrink: true, Min: 20, Drop: true}, {Name: "RANKS ON/ALL", Wide: true}, {Name: "GPUS ON/ALL", Drop: true},
			{Name: "LAST CHECKPOINT", Shrink: true, Min: 15, Drop: true}, {Name: "PLAIN DRAIN"}, {Name: "WITH YIELD"}, {Name: "WORKLOAD", Wide: true}, {Name: "NODES", Wide: true}, {Name: "PROBLEM", Wide: true}}}
		for _, g := range rep.Items {
			stop := string(g.Method)
			if g.Method == gang.StopUnsupported {
				stop = c.Status("BLOCKED") + " " + stop
			}
			wl := ""
			if g.Workload != nil {
				wl = g.Workload.Name
			}
			gt.AddRow(g.Key, stop, protocolWord(g.Support), gang.PathWords(g.Path, g.GracePeriodSeconds), fmt.Sprintf("%d/%d", g.RanksOnNodes, g.Ranks), fmt.Sprintf("%d/%d", g.GPUsOnNodes, g.GPUs),
				age(g.LastCheckpointAgeSeconds, g.LastCheckpointKnown), fmt.Sprintf("%.2f GPU-h", g.PlainDrainLossGPUHours), fmt.Sprintf("%.2f GPU-h", g.YieldLossGPUHours),
				wl, strings.Join(g.Nodes, ","), g.Problem)
		}
		if err := gt.Print(w, opts); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	// A fix is a command to paste, never shortened: whole in -o wide's FIX
	// column, and on a line of its own under the default table, whose
	// reasons give way to fit 120 columns.
	pt := cli.Table{Columns: []cli.Column{{Name: "POD"}, {Name: "NODE"}, {Name: cli.StatusColumn}, {Name: "WHY", Shrink: true, Min: 20}, {Name: "FIX", Wide: true}}}
	var fixes []string
	fixed := map[string]bool{}
	for _, v := range rep.Pods {
		if v.Outcome == eviction.OutcomeIgnored || v.Outcome == eviction.OutcomeNow && !opts.Wide {
			continue
		}
		why, fix := v.Eviction.Message, "-"
		if len(v.Blockers) > 0 {
			why = v.Blockers[0].Message
			if v.Blockers[0].Fix != "" {
				fix = v.Blockers[0].Fix
			}
		}
		pt.AddRow(v.Namespace+"/"+v.Name, v.Node, c.Status(v.Outcome.Status().String()), why, fix)
		if fix != "-" && !fixed[fix] {
			fixed[fix] = true
			fixes = append(fixes, fmt.Sprintf("# %s/%s\n  %s", v.Namespace, v.Name, fix))
		}
	}
	if len(pt.Rows) > 0 {
		if err := pt.Print(w, opts); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(fixes) > 0 && !opts.Wide {
		fmt.Fprintln(w, "Fixes (paste to unblock):")
		for _, f := range fixes {
			fmt.Fprintln(w, "  "+f)
		}
		fmt.Fprintln(w)
	}
	s := rep.Summary
	summary := fmt.Sprintf("%s, %d/%d ranks and %d/%d GPUs on the %s; a plain drain loses %.2f GPU-h, checkpoint-and-yield %.2f GPU-h; %s to evict (%d wait, %d blocked)",
		cli.Plural(s.Gangs, "gang"), s.RanksOnNodes, s.Ranks, s.GPUsOnNodes, s.GPUs, cli.Plural(s.Nodes, "node"), s.PlainDrainLossGPUHours, s.YieldLossGPUHours, cli.Plural(s.PodsToEvict, "other pod"), s.PodsLater, s.PodsNever)
	for _, l := range cli.WrapSummary(summary, cli.DefaultTableWidth) {
		fmt.Fprintln(w, l)
	}
	if len(rep.Steps) > 0 {
		fmt.Fprintln(w, "\nSteps of `run`:")
		for _, st := range rep.Steps {
			fmt.Fprintln(w, "  "+st)
		}
	}
	return nil
}

// RunReport is the output of `run` (kind GangDrainRun).
type RunReport struct {
	cli.Header
	*gang.RunResult
}

func newRunReport(md cli.Metadata, r *gang.RunResult) RunReport {
	if r.Gangs == nil {
		r.Gangs = []gang.GangOutcome{}
	}
	if r.Nodes == nil {
		r.Nodes = []gang.NodeRecord{}
	}
	return RunReport{Header: cli.NewHeader("GangDrainRun", md), RunResult: r}
}

func stateWord(c cli.Colorizer, s gang.NodeState) string {
	switch s {
	case gang.NodeFailed:
		return c.Red(string(s))
	case gang.NodePending:
		return "pending"
	}
	return string(s)
}

func printRun(w io.Writer, rep RunReport, opts cli.TableOptions, c cli.Colorizer) error {
	if rep.DryRun {
		fmt.Fprintf(w, "Dry run (run %s): nothing was changed.\n", rep.RunID)
		for _, s := range rep.Steps {
			fmt.Fprintln(w, "  "+s)
		}
		return nil
	}
	nt := cli.Table{Columns: []cli.Column{{Name: "NODE"}, {Name: "STATE"}, {Name: "WAS-CORDONED"}, {Name: "MESSAGE", Shrink: true, Min: 20}}}
	for _, n := range rep.Nodes {
		nt.AddRow(n.Node, stateWord(c, n.State), fmt.Sprint(n.WasCordoned), n.Message)
	}
	for _, n := range rep.Pending {
		nt.AddRow(n, "pending", "", "waits for the --max-unavailable-gpus budget")
	}
	if err := nt.Print(w, opts); err != nil {
		return err
	}
	if len(rep.Gangs) > 0 {
		fmt.Fprintln(w)
		gt := cli.Table{Columns: []cli.Column{{Name: "GANG"}, {Name: "ACTION"}, {Name: "STOP"}, {Name: "CHECKPOINT", Shrink: true, Min: 20, Drop: true}, {Name: "PODS GONE IN"}, {Name: "MESSAGE", Wide: true}}}
		for _, g := range rep.Gangs {
			gone := ""
			if !g.PodsGoneAt.IsZero() {
				gone = g.PodsGoneAt.Sub(g.StopStartedAt).Round(10 * time.Millisecond).String()
			}
			gt.AddRow(g.Key, g.Action, string(g.Method), g.Verdict.Reason, gone, g.Message)
		}
		if err := gt.Print(w, opts); err != nil {
			return err
		}
	}
	state := "complete"
	if !rep.Complete {
		state = "incomplete"
	}
	fmt.Fprintf(w, "\nRun %s %s. Restore after the upgrade: kubectl gang-drain restore %s\n", rep.RunID, state, rep.RunID)
	return nil
}

// StatusReport is the output of `status` (kind GangDrainStatus).
type StatusReport struct {
	cli.Header
	Items []gang.RunSummary `json:"items"`
}

func printStatus(w io.Writer, rep StatusReport, opts cli.TableOptions, c cli.Colorizer) error {
	nt := cli.Table{Columns: []cli.Column{{Name: "RUN"}, {Name: "NODE"}, {Name: "STATE"}, {Name: "WAS-CORDONED", Wide: true}, {Name: "UPDATED"}, {Name: "MESSAGE", Shrink: true, Min: 20}, {Name: "REQUESTER", Wide: true}, {Name: "DISABLE-EVICTION-BY", Wide: true}}}
	gt := cli.Table{Columns: []cli.Column{{Name: "RUN"}, {Name: "GANG"}, {Name: "STOP"}, {Name: "STATE", Shrink: true, Min: 12}, {Name: "CHECKPOINT", Drop: true}, {Name: "STEP", Drop: true}, {Name: "RESTORED"}, {Name: "URI", Wide: true}}}
	for _, r := range rep.Items {
		for _, n := range r.Nodes {
			upd := ""
			if !n.UpdatedAt.IsZero() {
				upd = n.UpdatedAt.UTC().Format(time.RFC3339)
			}
			nt.AddRow(r.RunID, n.Node, stateWord(c, n.State), fmt.Sprint(n.WasCordoned), upd, n.Message, n.Requester, n.DisableEvictionBy)
		}
		for _, g := range r.Gangs {
			st := g.StopState
			if st == "" && g.Message != "" {
				st = g.Message
			}
			gt.AddRow(r.RunID, g.Key, string(g.Method), st, g.CheckpointStatus, g.CheckpointStep, fmt.Sprint(g.Restored), g.CheckpointURI)
		}
	}
	if err := nt.Print(w, opts); err != nil {
		return err
	}
	if len(gt.Rows) > 0 {
		fmt.Fprintln(w)
		return gt.Print(w, opts)
	}
	return nil
}

// RestoreReport is the output of `restore` (kind GangDrainRestore).
type RestoreReport struct {
	cli.Header
	*gang.RestoreResult
	// Surges are the model Deployments an --inference run surged, scaled
	// back.
	Surges []inference.SurgeOutcome `json:"surges,omitempty"`
}

func printRestore(w io.Writer, rep RestoreReport, opts cli.TableOptions, c cli.Colorizer) error {
	if rep.DryRun {
		fmt.Fprintln(w, "Dry run: nothing was changed.")
	}
	nt := cli.Table{Columns: []cli.Column{{Name: "NODE"}, {Name: "RUN"}, {Name: "STATE"}, {Name: "WAS-CORDONED"}, {Name: "CORDONED-NOW"}}}
	for _, n := range rep.Nodes {
		nt.AddRow(n.Node, n.RunID, stateWord(c, n.State), fmt.Sprint(n.WasCordoned), fmt.Sprint(n.Unschedulable))
	}
	if err := nt.Print(w, opts); err != nil {
		return err
	}
	if len(rep.Gangs) > 0 {
		fmt.Fprintln(w)
		gt := cli.Table{Columns: []cli.Column{{Name: "GANG"}, {Name: "ACTION"}, {Name: "REQUEUED"}, {Name: "ADMITTED"}, {Name: "READY"}, {Name: "MESSAGE", Shrink: true, Min: 20}}}
		for _, g := range rep.Gangs {
			gt.AddRow(g.Key, g.Action, fmt.Sprint(g.Requeued), fmt.Sprint(g.Admitted), fmt.Sprintf("%d/%d", g.ReadyPods, g.Ranks), g.Message)
		}
		if err := gt.Print(w, opts); err != nil {
			return err
		}
	}
	if len(rep.Surges) > 0 {
		fmt.Fprintln(w)
		st := cli.Table{Columns: []cli.Column{{Name: "DEPLOYMENT", Shrink: true, Min: 16, Elide: cli.ElideMiddle}, {Name: "RUN"}, {Name: "SURGE"}, {Name: "REPLICAS"}, {Name: "ACTION"}, {Name: "MESSAGE", Shrink: true, Min: 20}}}
		for _, s := range rep.Surges {
			st.AddRow(s.Deployment, s.Run, fmt.Sprintf("+%d", s.Surge), fmt.Sprintf("%d->%d", s.ReplicasNow, s.ReplicasAfter), s.Action, s.Message)
		}
		return st.Print(w, opts)
	}
	return nil
}
