package skew

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func (o *Options) colorizer() cli.Colorizer {
	return o.Print.Colorizer(o.Out)
}

// printReport writes one context's report.
func (o *Options) printReport(rep *SkewReport) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, rep)
	}
	return printReportTable(o.Out, rep, o.Print.TableOptions(), o.colorizer())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printReportTable(w io.Writer, rep *SkewReport, opts cli.TableOptions, c cli.Colorizer) error {
	// Two provider versions (v1.30.9-eks-3025e55) leave a message no room
	// in 120 columns: AGAINST moves to -o wide (SKEW and the message say
	// what a row is measured against), instance names give way before the
	// message goes under 30 columns.
	t := cli.Table{Columns: []cli.Column{
		{Name: "COMPONENT"}, {Name: "INSTANCE", Shrink: true, Min: 12, Elide: cli.ElideMiddle}, {Name: "VERSION"}, {Name: "AGAINST", Wide: true}, {Name: "SKEW"},
		{Name: "STATUS"}, {Name: "RULE", Wide: true}, {Name: "MESSAGE", Shrink: true, Min: 30},
	}}
	for _, it := range rep.Items {
		if it.Rule == pkgskew.RuleSupport && rep.Support != nil {
			// Dates and days, not minors: its own section below.
			continue
		}
		ver := it.Version
		if ver == "" && it.Rule == pkgskew.RuleInventory {
			ver = "not visible"
		}
		skew := "-"
		if it.Against != "" {
			skew = strconv.Itoa(it.Skew)
		}
		t.AddRow(it.Component, dash(it.Instance), dash(ver), dash(it.Against), skew, c.Status(it.Status.Word()), it.Rule, it.Message)
	}
	if err := t.Print(w, opts); err != nil {
		return err
	}
	if rep.Support != nil {
		fmt.Fprintln(w)
		if err := printSupportTable(w, rep.Support, opts, c); err != nil {
			return err
		}
	}
	if opts.NoHeaders {
		return nil
	}
	_, err := fmt.Fprintln(w, "\n"+summaryLine(rep.Summary))
	return err
}

// printSupportTable prints the support window of the oldest apiserver:
// dates and days in their own cells.
func printSupportTable(w io.Writer, s *pkgskew.Support, opts cli.TableOptions, c cli.Colorizer) error {
	t := cli.Table{Columns: []cli.Column{
		{Name: "SUPPORT"}, {Name: "PROVIDER"}, {Name: "WINDOW"}, {Name: "ENDS"}, {Name: "DAYS-LEFT"}, {Name: "UPSTREAM-EOL"},
		{Name: "STATUS"}, {Name: "SOURCE", Wide: true}, {Name: "MESSAGE", Shrink: true, Min: 30},
	}}
	days := "-"
	if s.DaysToSupportEnd != nil {
		days = strconv.Itoa(*s.DaysToSupportEnd)
	}
	msg := s.Message
	if s.Note != "" {
		msg += "; " + s.Note
	}
	t.AddRow(s.Minor, dash(s.Provider), dash(s.Window), dash(s.SupportEnds), days, dash(s.EndOfLife), c.Status(s.Status.Word()), dash(s.Source), msg)
	return t.Print(w, opts)
}

// supportPhrase names the support window in a few words for the summary.
func supportPhrase(s pkgskew.Support) string {
	switch {
	case s.Status == pkgskew.StatusUnknown:
		return s.Minor + " support window unknown"
	case s.Window == pkgskew.WindowExtended && s.Status != pkgskew.StatusViolation:
		return fmt.Sprintf("%s in %s extended support until %s", s.Minor, pkgskew.Provider(s.Provider).Title(), s.SupportEnds)
	case s.Status == pkgskew.StatusViolation && s.SupportEnds == "":
		// A minor older than the calendar's first row: its end is not
		// in the data, only that it has passed.
		return s.Minor + " out of support"
	case s.Status == pkgskew.StatusViolation:
		return fmt.Sprintf("%s out of support since %s", s.Minor, s.SupportEnds)
	default:
		return fmt.Sprintf("%s supported until %s", s.Minor, s.SupportEnds)
	}
}

// summaryLine totals a report: the skew counts, then the support window
// and the fleet policy, so that every exit 1 is named.
func summaryLine(s Summary) string {
	line := fmt.Sprintf("max skew %s; %s, %d at the edge, %d unknown", pkgskew.Minors(s.MaxSkew), cli.Plural(s.Violations, "violation"), s.Edge, s.Unknown)
	switch {
	case s.OutOfSupport > 0:
		line += fmt.Sprintf("; %d out of support (%s)", s.OutOfSupport, s.SupportWindow)
	case s.SupportAtEdge > 0:
		line += fmt.Sprintf("; support at the edge (%s)", s.SupportWindow)
	case s.SupportUnknown > 0:
		line += fmt.Sprintf("; support unknown (%s)", s.SupportWindow)
	case s.SupportWindow != "":
		line += "; " + s.SupportWindow
	}
	if s.PolicyViolations > 0 {
		line += fmt.Sprintf("; %d fleet policy violation", s.PolicyViolations)
	}
	line += fmt.Sprintf("; apiserver %s, kubelets %s..%s on %s", dash(s.APIServerNewest), dash(s.KubeletMin), dash(s.KubeletMax), pkgskew.Nodes(s.Nodes))
	if len(s.PoolsAtEdge) > 0 {
		line += "; pools at the edge: " + strings.Join(s.PoolsAtEdge, ", ")
	}
	return line
}

func printPlanTable(w io.Writer, rep *PlanReport, opts cli.TableOptions, c cli.Colorizer) error {
	t := cli.Table{Columns: []cli.Column{
		{Name: "STEP"}, {Name: "CONTROL-PLANE"}, {Name: "PHASE"}, {Name: "ACTION", Shrink: true, Min: 30}, {Name: "STATUS"}, {Name: "NOTE", Wide: true},
	}}
	for _, s := range rep.Steps {
		t.AddRow(strconv.Itoa(s.Number), s.ControlPlane, s.Phase, s.Action, c.Status(s.Status.Word()), dash(s.Note))
	}
	if err := t.Print(w, opts); err != nil {
		return err
	}
	if len(rep.Pools) > 0 {
		fmt.Fprintln(w)
		pt := cli.Table{Columns: []cli.Column{
			{Name: "POOL"}, {Name: "NODES"}, {Name: "KUBELET"}, {Name: "LIMIT"}, {Name: "UPGRADE-BEFORE"}, {Name: "UPGRADES", Shrink: true, Min: 10},
			{Name: "EVERY-HOP"}, {Name: "DRAINS-SAVED"}, {Name: "STATUS"}, {Name: "NOTE", Wide: true},
		}}
		for _, p := range rep.Pools {
			var ups []string
			for _, u := range p.Upgrades {
				ups = append(ups, u.From+"->"+u.To)
			}
			pt.AddRow(p.Name, strconv.Itoa(p.Nodes), dash(p.Kubelet), strconv.Itoa(p.Limit), dash(p.MustUpgradeBefore),
				dash(strings.Join(ups, " ")), strconv.Itoa(p.UpgradesEveryHop), strconv.Itoa(p.NodeDisruptionsSaved), c.Status(p.Status.Word()), dash(p.Note))
		}
		if err := pt.Print(w, opts); err != nil {
			return err
		}
	}
	if opts.Wide {
		printPlanCommands(w, rep)
	}
	if opts.NoHeaders {
		return nil
	}
	s := rep.Summary
	hops := "hops"
	if s.Hops == 1 {
		hops = "hop"
	}
	fmt.Fprintf(w, "\n%s -> %s: %d control-plane %s; %d pool upgrades (%d node drains) instead of %d (%d) when nodes follow every hop: %d node drains saved\n",
		s.From, s.Target, s.Hops, hops, s.PoolUpgrades, s.NodeDisruptions, s.PoolUpgradesEveryHop, s.NodeDisruptionsEveryHop, s.NodeDisruptionsSaved)
	for _, wn := range rep.Warnings {
		fmt.Fprintf(w, "%s: %s\n", c.Status("WARNING"), wn)
	}
	return nil
}
