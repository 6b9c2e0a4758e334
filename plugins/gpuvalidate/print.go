package gpuvalidate

import (
	"fmt"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Report is the result of one wave (kind GPUValidateReport).
type Report struct {
	cli.Header
	Items   []*NodeReport `json:"items"`
	NCCL    []NCCLRun     `json:"nccl,omitempty"`
	Summary Summary       `json:"summary"`
	// Warnings say what could not be checked, such as DRA devices when
	// ResourceSlices cannot be read (a node with GPUs only through DRA
	// then shows none).
	Warnings []string `json:"warnings,omitempty"`
}

// NodeReport is one node's verdict and the evidence behind it.
type NodeReport struct {
	Name           string                `json:"name"`
	Pool           string                `json:"pool,omitempty"`
	KubeletVersion string                `json:"kubeletVersion"`
	Ready          bool                  `json:"ready"`
	Status         gpucheck.Status       `json:"status"`
	GPUs           *gpucheck.GPUCount    `json:"gpus,omitempty"`
	ConfigBaseline string                `json:"configBaseline,omitempty"`
	ConfigDiffs    []gpucheck.ConfigDiff `json:"configDiffs,omitempty"`
	Xids           []gpucheck.XidEvent   `json:"xids,omitempty"`
	DCGM           *gpucheck.DCGMResult  `json:"dcgm,omitempty"`
	Findings       []gpucheck.Finding    `json:"findings"`
}

func (n *NodeReport) add(check string, l gpucheck.Level, msg string) {
	n.Findings = append(n.Findings, gpucheck.Finding{Check: check, Level: l, Message: msg})
}

// NCCLRun is one all-reduce test over a pool's nodes.
type NCCLRun struct {
	Pool          string          `json:"pool"`
	Nodes         []string        `json:"nodes"`
	Launcher      string          `json:"launcher"`
	Fabric        string          `json:"fabric"`
	Image         string          `json:"image,omitempty"`
	Pod           string          `json:"pod,omitempty"`
	Gate          nccl.GateResult `json:"gate"`
	Baseline      *nccl.Baseline  `json:"baseline,omitempty"`
	BaselineSaved bool            `json:"baselineSaved,omitempty"`
	Error         string          `json:"error,omitempty"`
}

// Summary sums up the wave.
type Summary struct {
	Nodes        int `json:"nodes"`
	Passed       int `json:"passed"`
	Warned       int `json:"warned"`
	Failed       int `json:"failed"`
	GPUsExpected int `json:"gpusExpected"`
	GPUsFound    int `json:"gpusFound"`
	// BusBW is one line per NCCL run: busbw against the baseline.
	BusBW []string `json:"busBw,omitempty"`
}

func summarize(r *Report) Summary {
	s := Summary{Nodes: len(r.Items)}
	for _, it := range r.Items {
		switch it.Status {
		case gpucheck.StatusPass:
			s.Passed++
		case gpucheck.StatusWarn:
			s.Warned++
		default:
			s.Failed++
		}
		if it.GPUs != nil {
			s.GPUsExpected += it.GPUs.Expected
			s.GPUsFound += it.GPUs.Found
		}
	}
	for _, run := range r.NCCL {
		s.BusBW = append(s.BusBW, busBWLine(run))
	}
	return s
}

func busBWLine(run NCCLRun) string {
	pool := run.Pool
	if pool == "" {
		pool = "<no pool>"
	}
	if run.Error != "" {
		return fmt.Sprintf("pool %s: NCCL test did not finish: %s", pool, run.Error)
	}
	g := run.Gate
	base := "no baseline"
	if g.BaselineBusBW > 0 {
		base = fmt.Sprintf("baseline %.1f GB/s (min %.1f at %s tolerance)", g.BaselineBusBW, g.MinBusBW, nccl.FormatPercent(g.Tolerance))
	}
	saved := ""
	if run.BaselineSaved {
		saved = ", baseline saved"
	}
	return fmt.Sprintf("pool %s: busbw %.1f GB/s at %s on %d nodes vs %s: %s%s", pool, g.BusBW, nccl.FormatBytes(g.SizeBytes), len(run.Nodes), base, g.Verdict, saved)
}

func checkStatus(it *NodeReport, check string) string {
	var fs []gpucheck.Finding
	for _, f := range it.Findings {
		if f.Check == check {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return "-"
	}
	return string(gpucheck.StatusOf(fs))
}

func reasons(it *NodeReport) string {
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
	c := o.Print.Colorizer(o.Out)
	t := cli.Table{Columns: []cli.Column{{Name: "NODE"}, {Name: "POOL"}, {Name: "KUBELET"}, {Name: "GPUS"}, {Name: "STATUS"},
		{Name: "CONFIG", Wide: true}, {Name: "XID", Wide: true}, {Name: "DCGM", Wide: true}, {Name: "NCCL", Wide: true}, {Name: "REASONS"}}}
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
		t.AddRow(it.Name, pool, it.KubeletVersion, gpus, c.Status(string(it.Status)),
			checkStatus(it, gpucheck.CheckConfig), checkStatus(it, gpucheck.CheckXid), checkStatus(it, gpucheck.CheckDCGM), checkStatus(it, gpucheck.CheckNCCL),
			reasons(it))
	}
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
	fmt.Fprintf(o.Out, "\n%d node(s): %d passed, %d warned, %d failed%s\n", s.Nodes, s.Passed, s.Warned, s.Failed, gpus)
	for _, l := range s.BusBW {
		fmt.Fprintln(o.Out, "NCCL "+l)
	}
	return nil
}
