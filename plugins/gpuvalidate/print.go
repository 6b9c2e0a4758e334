package gpuvalidate

import (
	"fmt"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
)

// Report is the result of one wave (kind GPUValidateReport): the header
// and gpucheck's report.
type Report struct {
	cli.Header
	*gpucheck.Report
}

func checkStatus(it *gpucheck.NodeReport, check string) string {
	var fs []gpucheck.Finding
	for _, f := range it.Findings {
		if f.Check == check {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return "-"
	}
	return gpucheck.StatusOf(fs).Word().String()
}

func reasons(it *gpucheck.NodeReport) string {
	var out []string
	for _, f := range it.Findings {
		if f.Level != gpucheck.LevelInfo {
			out = append(out, f.Message)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

func (o *Options) print(r *Report) error {
	if o.Print.Quiet {
		return nil
	}
	if o.Print.Structured() {
		return cli.PrintStructured(o.Out, o.Print.Output, r)
	}
	t := o.table(false)
	o.addRows(&t, r, "")
	if err := t.Print(o.Out, o.Print.TableOptions()); err != nil {
		return err
	}
	if o.Print.NoHeaders {
		return nil
	}
	s := r.Summary
	gpus := ""
	if s.GPUsExpected > 0 || s.GPUsFound > 0 {
		gpus = fmt.Sprintf("; GPUs %d found of %d expected", s.GPUsFound, s.GPUsExpected)
	}
	fmt.Fprintf(o.Out, "\n%s: %d passed, %d warned, %d failed%s\n", cli.Plural(s.Nodes, "node"), s.Passed, s.Warned, s.Failed, gpus)
	for _, l := range s.BusBW {
		fmt.Fprintln(o.Out, "NCCL "+l)
	}
	return nil
}

// table returns the report table, with a CONTEXT column for several
// contexts.
func (o *Options) table(withContext bool) cli.Table {
	t := cli.Table{Columns: []cli.Column{{Name: "NODE"}, {Name: "POOL", Drop: true}, {Name: "KUBELET", Drop: true}, {Name: "GPUS", Drop: true}, {Name: cli.StatusColumn},
		{Name: "CONFIG", Wide: true}, {Name: "XID", Wide: true}, {Name: "DCGM", Wide: true}, {Name: "NCCL", Wide: true}, {Name: "REASONS", Shrink: true, Min: 20}}}
	if withContext {
		t.Columns = append([]cli.Column{{Name: "CONTEXT"}}, t.Columns...)
	}
	return t
}

// addRows adds a report's nodes; context is "" for a single context.
func (o *Options) addRows(t *cli.Table, r *Report, context string) {
	c := o.Print.Colorizer(o.Out)
	for _, it := range r.Items {
		gpus := "-"
		if it.GPUs != nil {
			gpus = fmt.Sprintf("%d/%d", it.GPUs.Found, it.GPUs.Expected)
			if it.GPUs.State == gpucheck.CountMIG {
				gpus = "MIG"
			}
		}
		pool := it.Pool
		if pool == "" {
			pool = "-"
		}
		row := []string{it.Name, pool, it.KubeletVersion, gpus, c.Status(it.Status.Word().String()),
			checkStatus(it, gpucheck.CheckConfig), checkStatus(it, gpucheck.CheckXid), checkStatus(it, gpucheck.CheckDCGM), checkStatus(it, gpucheck.CheckNCCL),
			reasons(it)}
		if context != "" {
			row = append([]string{context}, row...)
		}
		t.AddRow(row...)
	}
}
