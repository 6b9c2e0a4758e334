package skew

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// runFleet checks several contexts and prints one row per cluster, worst
// first. One failing context does not stop the others; the exit code is
// the worst over them.
func (o *Options) runFleet(ctx context.Context) error {
	names, err := o.Contexts.Resolve(o.cg)
	if err != nil {
		return err
	}
	results := cli.FanOutReachable(ctx, o.cg, names, o.Contexts.Parallel, func(ctx context.Context, name string) (*SkewReport, error) {
		return o.checkContext(ctx, o.cg.ForContext(name))
	})
	items := make([]cli.ContextReport, 0, len(results))
	codes := make([]int, 0, len(results))
	findings := 0
	for _, r := range results {
		cr := cli.ContextReport{Context: r.Context}
		if r.Err != nil {
			cr.Error = r.Err.Error()
			cr.ExitCode = cli.ExitCode(r.Err)
		} else {
			cr.Report = r.Value
			if r.Value.Summary.Findings > 0 {
				cr.ExitCode = cli.ExitFindings
				findings += r.Value.Summary.Findings
			}
		}
		codes = append(codes, cr.ExitCode)
		items = append(items, cr)
	}
	sort.SliceStable(items, func(i, j int) bool { return fleetLess(items[i], items[j]) })
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !o.Print.Quiet {
		for _, it := range items {
			if it.Error != "" {
				o.ErrOut.Write([]byte("error: context " + it.Context + ": " + it.Error + "\n"))
			}
		}
		if o.Print.Structured() {
			list := cli.ReportList{APIVersion: cli.ReportAPIVersion(KindSkewReportList), Kind: KindSkewReportList, Items: items}
			if err := cli.PrintStructured(o.Out, o.Print.Output, list); err != nil {
				return err
			}
		} else if err := o.printFleetTable(items); err != nil {
			return err
		}
	}
	worst := cli.Worst(codes...)
	switch worst {
	case cli.ExitOK:
		return nil
	case cli.ExitFindings:
		return cli.Findings(findings)
	}
	// The per-context errors are already on stderr.
	return &cli.ExitError{Code: worst, Err: errors.New("some contexts could not be checked")}
}

func reportOf(cr cli.ContextReport) *SkewReport {
	r, _ := cr.Report.(*SkewReport)
	return r
}

// fleetLess orders clusters worst first: unreachable, then by status,
// max skew, days to end of life, and name.
func fleetLess(a, b cli.ContextReport) bool {
	ea, eb := a.Error != "", b.Error != ""
	if ea != eb {
		return ea
	}
	ra, rb := reportOf(a), reportOf(b)
	if ra != nil && rb != nil {
		if x, y := ra.Summary.Status.Rank(), rb.Summary.Status.Rank(); x != y {
			return x > y
		}
		if ra.Summary.MaxSkew != rb.Summary.MaxSkew {
			return ra.Summary.MaxSkew > rb.Summary.MaxSkew
		}
		da, db := eolDays(ra), eolDays(rb)
		if da != db {
			return da < db
		}
	}
	return a.Context < b.Context
}

func eolDays(r *SkewReport) int {
	if r.Summary.DaysToEndOfLife == nil {
		return 1 << 30
	}
	return *r.Summary.DaysToEndOfLife
}

func (o *Options) printFleetTable(items []cli.ContextReport) error {
	c := o.colorizer()
	t := cli.Table{Columns: []cli.Column{
		{Name: "CONTEXT"}, {Name: "APISERVER"}, {Name: "KUBELET-MIN"}, {Name: "KUBELET-MAX", Drop: true}, {Name: "MAX-SKEW"},
		{Name: "POOLS-AT-EDGE", Shrink: true, Drop: true}, {Name: "EOL-DAYS", Drop: true}, {Name: "STATUS"}, {Name: "NODES", Wide: true}, {Name: "SERVER", Wide: true},
	}}
	for _, it := range items {
		r := reportOf(it)
		if r == nil {
			t.AddRow(it.Context, "-", "-", "-", "-", "-", "-", c.Status("ERROR"), "-", "-")
			continue
		}
		s := r.Summary
		eol := "-"
		if s.DaysToEndOfLife != nil {
			eol = strconv.Itoa(*s.DaysToEndOfLife)
		}
		edge := "-"
		if len(s.PoolsAtEdge) > 0 {
			edge = strings.Join(s.PoolsAtEdge, ",")
		}
		status := s.Status
		if status == "" {
			status = pkgskew.StatusOK
		}
		apis := dash(s.APIServerNewest)
		if s.APIServerOldest != "" && s.APIServerOldest != s.APIServerNewest {
			apis = s.APIServerOldest + ".." + s.APIServerNewest
		}
		t.AddRow(it.Context, apis, dash(s.KubeletMin), dash(s.KubeletMax), strconv.Itoa(s.MaxSkew), edge, eol,
			c.Status(status.Word()), strconv.Itoa(s.Nodes), dash(r.Metadata.Server))
	}
	return t.Print(o.Out, o.Print.TableOptions())
}
