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
	t := cli.Table{Columns: []cli.Column{
		{Name: "COMPONENT"}, {Name: "INSTANCE"}, {Name: "VERSION"}, {Name: "AGAINST"}, {Name: "SKEW"},
		{Name: "STATUS"}, {Name: "RULE", Wide: true}, {Name: "MESSAGE"},
	}}
	for _, it := range rep.Items {
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
	if opts.NoHeaders {
		return nil
	}
	s := rep.Summary
	line := fmt.Sprintf("\nmax skew %s; %d violations, %d at the edge, %d unknown; apiserver %s, kubelets %s..%s on %s",
		pkgskew.Minors(s.MaxSkew), s.Violations, s.Edge, s.Unknown, dash(s.APIServerNewest), dash(s.KubeletMin), dash(s.KubeletMax), pkgskew.Nodes(s.Nodes))
	if len(s.PoolsAtEdge) > 0 {
		line += "; pools at the edge: " + strings.Join(s.PoolsAtEdge, ", ")
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

func printPlanTable(w io.Writer, rep *PlanReport, opts cli.TableOptions, c cli.Colorizer) error {
	t := cli.Table{Columns: []cli.Column{
		{Name: "STEP"}, {Name: "CONTROL-PLANE"}, {Name: "PHASE"}, {Name: "ACTION"}, {Name: "STATUS"}, {Name: "NOTE", Wide: true},
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
			{Name: "POOL"}, {Name: "NODES"}, {Name: "KUBELET"}, {Name: "LIMIT"}, {Name: "UPGRADE-BEFORE"}, {Name: "UPGRADES"},
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
