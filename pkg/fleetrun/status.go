package fleetrun

import (
	"context"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Status is a run's progress, read from the store.
type Status struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Fleet      string    `json:"fleet"`
	Run        string    `json:"run"`
	Target     string    `json:"target"`
	At         time.Time `json:"at"`
	// Phase is not-started, running, halted, waiting (for an approval,
	// a window or a cap) or completed.
	Phase string `json:"phase"`
	// Workflow is the engine's view, when it could be read.
	Workflow  *WorkflowView   `json:"workflow,omitempty"`
	Rings     []RingStatus    `json:"rings"`
	Clusters  []ClusterStatus `json:"clusters"`
	Decisions []Decision      `json:"decisions,omitempty"`
}

// WorkflowView is the Argo Workflow of the run.
type WorkflowView struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Phase     string    `json:"phase,omitempty"`
	Error     string    `json:"error,omitempty"`
	Waiting   []Resumed `json:"waiting,omitempty"`
}

// RingStatus is one ring's progress.
type RingStatus struct {
	Name            string   `json:"name"`
	Phase           string   `json:"phase"`
	Clusters        int      `json:"clusters"`
	Completed       int      `json:"completed"`
	InFlight        int      `json:"inFlight"`
	Failed          int      `json:"failed"`
	Skipped         int      `json:"skipped,omitempty"`
	MaxFailures     int      `json:"maxFailures"`
	ApprovalsNeeded int      `json:"approvalsNeeded,omitempty"`
	Approvers       []string `json:"approvers,omitempty"`
	Halt            string   `json:"halt,omitempty"`
}

// ClusterStatus is one cluster's progress.
type ClusterStatus struct {
	Name  string `json:"name"`
	Ring  string `json:"ring"`
	Batch int    `json:"batch"`
	// Phase is pending, in-flight, completed or failed.
	Phase      string      `json:"phase"`
	Step       string      `json:"step,omitempty"`
	StepsDone  int         `json:"stepsDone"`
	Steps      int         `json:"steps"`
	Attempts   int         `json:"attempts"`
	AdmittedAt *time.Time  `json:"admittedAt,omitempty"`
	FinishedAt *time.Time  `json:"finishedAt,omitempty"`
	Message    string      `json:"message,omitempty"`
	StepStates []StepState `json:"stepStates"`
}

// ReadStatus reads a run's progress from the store.
func ReadStatus(ctx context.Context, st Store, p *Plan, now time.Time) (*Status, error) {
	states, err := ReadStates(ctx, st, p)
	if err != nil {
		return nil, err
	}
	ds, err := ReadDecisions(ctx, st, p.Run)
	if err != nil {
		return nil, err
	}
	p.ApplySkips(ds, states)
	s := &Status{APIVersion: APIVersion, Kind: KindStatus, Fleet: p.Fleet, Run: p.Run, Target: p.Target, At: now.UTC(), Decisions: ds}
	for _, c := range p.Clusters {
		cs := states[c.Name]
		row := ClusterStatus{Name: c.Name, Ring: c.Ring, Batch: c.Batch, Phase: "pending", Steps: len(c.Steps), AdmittedAt: cs.AdmittedAt, FinishedAt: cs.FinishedAt}
		for _, step := range c.Steps {
			ss := *cs.Step(step.Name)
			row.StepStates = append(row.StepStates, ss)
			row.Attempts += ss.Attempt
			if ss.Phase == PhaseCompleted {
				row.StepsDone++
				continue
			}
			if row.Step == "" && (ss.Phase != PhasePending || ss.Attempt > 0 || cs.AdmittedAt != nil) {
				row.Step, row.Message = step.Name, ss.Message
			}
		}
		switch {
		case cs.FinishedAt != nil:
			row.Phase = "completed"
		case cs.LeftAt != nil:
			row.Phase = cs.Outcome
		case func() bool { _, f := cs.Failed(); return f }():
			row.Phase = "failed"
		case cs.AdmittedAt != nil:
			row.Phase = "in-flight"
		}
		s.Clusters = append(s.Clusters, row)
	}
	anyStarted, allDone, waiting := false, len(p.Clusters) > 0, false
	for _, r := range p.Rings {
		rs := RingStatus{Name: r.Name, MaxFailures: r.MaxFailures, ApprovalsNeeded: r.Approvers}
		if r.Approvers > 0 {
			rs.Approvers = Approvers(ds, r.Name)
		}
		if h, ok := p.ActiveHalt(ds, r.Name, ""); ok {
			rs.Halt = describeHalt(h)
		}
		for _, c := range s.Clusters {
			if c.Ring != r.Name {
				continue
			}
			rs.Clusters++
			switch c.Phase {
			case "completed":
				rs.Completed++
			case "failed":
				rs.Failed++
			case OutcomeSkipped:
				rs.Skipped++
			case "in-flight":
				rs.InFlight++
			}
		}
		switch {
		case rs.Halt != "":
			rs.Phase = "halted"
		case rs.Completed+rs.Skipped+rs.Failed == rs.Clusters && rs.Failed <= r.MaxFailures:
			rs.Phase = "completed"
		case rs.Completed+rs.InFlight+rs.Failed+rs.Skipped > 0:
			rs.Phase = "running"
		case r.Approvers > 0 && len(rs.Approvers) < r.Approvers:
			rs.Phase = fmt.Sprintf("awaiting approval (%d of %d)", len(rs.Approvers), r.Approvers)
		default:
			rs.Phase = "pending"
		}
		if rs.Completed+rs.InFlight+rs.Failed+rs.Skipped > 0 {
			anyStarted = true
		}
		if rs.Phase != "completed" {
			allDone = false
		}
		s.Rings = append(s.Rings, rs)
	}
	for _, c := range s.Clusters {
		if strings.HasPrefix(c.Message, "not starting") || strings.Contains(c.Message, "not yet") {
			waiting = true
		}
	}
	s.Phase = "not-started"
	switch {
	case allDone:
		s.Phase = "completed"
	case hasHalt(s.Rings):
		s.Phase = "halted"
	case waiting:
		s.Phase = "waiting"
	case anyStarted:
		s.Phase = "running"
	}
	return s, nil
}

func hasHalt(rs []RingStatus) bool {
	for _, r := range rs {
		if r.Halt != "" {
			return true
		}
	}
	return false
}

// PrintStatusTable prints the rings and clusters as two tables.
func PrintStatusTable(w io.Writer, s *Status, opts cli.TableOptions) error {
	fmt.Fprintf(w, "Run %s of fleet %s to %s: %s", s.Run, s.Fleet, s.Target, s.Phase)
	if s.Workflow != nil {
		if s.Workflow.Error != "" {
			fmt.Fprintf(w, " (workflow %s/%s: %s)", s.Workflow.Namespace, s.Workflow.Name, s.Workflow.Error)
		} else {
			fmt.Fprintf(w, " (workflow %s/%s: %s)", s.Workflow.Namespace, s.Workflow.Name, orDash(s.Workflow.Phase))
		}
	}
	fmt.Fprint(w, "\n\n")
	rings := cli.Table{Columns: []cli.Column{{Name: "ring"}, {Name: "phase"}, {Name: "clusters"}, {Name: "completed"}, {Name: "in flight"}, {Name: "failed"}, {Name: "approvals", Shrink: true, Min: 12}}}
	for _, r := range s.Rings {
		ap := "-"
		if r.ApprovalsNeeded > 0 {
			ap = strings.TrimSpace(fmt.Sprintf("%d/%d %s", len(r.Approvers), r.ApprovalsNeeded, strings.Join(r.Approvers, ",")))
		}
		rings.AddRow(r.Name, r.Phase, fmt.Sprint(r.Clusters), fmt.Sprint(r.Completed), fmt.Sprint(r.InFlight), fmt.Sprintf("%d (budget %d)", r.Failed, r.MaxFailures), ap)
	}
	if err := rings.Print(w, opts); err != nil {
		return err
	}
	fmt.Fprintln(w)
	// Two timestamps leave a long cluster name no room: the phase says a
	// cluster finished, -o wide says when, and the message.
	clusters := cli.Table{Columns: []cli.Column{{Name: "cluster", Shrink: true, Min: 12, Elide: cli.ElideMiddle}, {Name: "ring"}, {Name: "batch"}, {Name: "phase"}, {Name: "steps"}, {Name: "attempts"},
		{Name: "admitted"}, {Name: "finished", Wide: true}, {Name: "step", Shrink: true, Min: 12}, {Name: "message", Wide: true}}}
	for _, c := range s.Clusters {
		clusters.AddRow(c.Name, c.Ring, fmt.Sprint(c.Batch), c.Phase, fmt.Sprintf("%d/%d", c.StepsDone, c.Steps), fmt.Sprint(c.Attempts),
			timeOrDash(c.AdmittedAt), timeOrDash(c.FinishedAt), orDash(c.Step), orDash(c.Message))
	}
	if err := clusters.Print(w, opts); err != nil {
		return err
	}
	if s.Workflow != nil && len(s.Workflow.Waiting) > 0 {
		fmt.Fprintln(w)
		for _, n := range s.Workflow.Waiting {
			what := "waiting for approve"
			if n.Kind == SuspendWait {
				// A timed suspend until the gate's next opening: the
				// clock ends it, not approve.
				what = "waiting for its opening"
				if n.OpensAt != nil {
					what += " at " + n.OpensAt.Format(time.RFC3339)
				}
			}
			fmt.Fprintf(w, "%s: %s (%s, ring %s %s)\n", what, n.Node, n.Kind, n.Ring, strings.Trim(n.Cluster+" "+n.Step, " -"))
		}
	}
	sep := "\n"
	for _, r := range s.Rings {
		if r.Halt != "" {
			fmt.Fprintf(w, "%s%s\n", sep, r.Halt)
			sep = ""
		}
	}
	if len(s.Decisions) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	ds := cli.Table{Columns: []cli.Column{{Name: "decided"}, {Name: "decision"}, {Name: "scope", Shrink: true, Min: 12}, {Name: "by", Shrink: true, Min: 8}, {Name: "reason", Shrink: true, Min: 12}}}
	for _, d := range s.Decisions {
		ds.AddRow(d.At.UTC().Format("2006-01-02T15:04:05Z"), d.Decision, d.Scope(), d.By, orDash(oneLine(d.Reason, 200)))
	}
	return ds.Print(w, opts)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

var statusHTML = template.Must(template.New("status").Funcs(template.FuncMap{"t": timeOrDash}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Fleet}} run {{.Run}}: {{.Phase}}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
.completed{background:#e6f4ea}.failed,.halted{background:#fce8e6}.in-flight,.running{background:#fef7e0}</style></head><body>
<h1>Fleet {{.Fleet}}, run {{.Run}} to {{.Target}}: {{.Phase}}</h1>
<p>As of {{.At.Format "2006-01-02T15:04:05Z"}}{{with .Workflow}}; workflow {{.Namespace}}/{{.Name}}: {{.Phase}}{{.Error}}{{end}}.</p>
<h2>Rings</h2><table><tr><th>Ring</th><th>Phase</th><th>Clusters</th><th>Completed</th><th>In flight</th><th>Failed (budget)</th><th>Approvals</th></tr>
{{range .Rings}}<tr class="{{.Phase}}"><td>{{.Name}}</td><td>{{.Phase}}{{with .Halt}}: {{.}}{{end}}</td><td>{{.Clusters}}</td><td>{{.Completed}}</td><td>{{.InFlight}}</td><td>{{.Failed}} ({{.MaxFailures}})</td><td>{{if .ApprovalsNeeded}}{{len .Approvers}}/{{.ApprovalsNeeded}} {{range .Approvers}}{{.}} {{end}}{{end}}</td></tr>
{{end}}</table>
<h2>Clusters</h2><table><tr><th>Cluster</th><th>Ring</th><th>Batch</th><th>Phase</th><th>Steps</th><th>Attempts</th><th>Admitted</th><th>Finished</th><th>Step</th><th>Message</th></tr>
{{range .Clusters}}<tr class="{{.Phase}}"><td>{{.Name}}</td><td>{{.Ring}}</td><td>{{.Batch}}</td><td>{{.Phase}}</td><td>{{.StepsDone}}/{{.Steps}}</td><td>{{.Attempts}}</td><td>{{t .AdmittedAt}}</td><td>{{t .FinishedAt}}</td><td>{{.Step}}</td><td>{{.Message}}</td></tr>
{{end}}</table>
{{if .Decisions}}<h2>Decisions</h2><table><tr><th>At</th><th>Decision</th><th>Scope</th><th>By</th><th>Reason</th></tr>
{{range .Decisions}}<tr><td>{{.At.Format "2006-01-02T15:04:05Z"}}</td><td>{{.Decision}}</td><td>{{.Scope}}</td><td>{{.By}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{end}}
</body></html>
`))

// PrintStatusHTML writes the status as one self-contained HTML page.
func PrintStatusHTML(w io.Writer, s *Status) error { return statusHTML.Execute(w, s) }
