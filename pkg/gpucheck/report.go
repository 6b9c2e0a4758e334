package gpucheck

import (
	"fmt"

	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Report is the result of one wave.
type Report struct {
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
	Name           string       `json:"name"`
	Pool           string       `json:"pool,omitempty"`
	KubeletVersion string       `json:"kubeletVersion"`
	Ready          bool         `json:"ready"`
	Status         Status       `json:"status"`
	GPUs           *GPUCount    `json:"gpus,omitempty"`
	ConfigBaseline string       `json:"configBaseline,omitempty"`
	ConfigDiffs    []ConfigDiff `json:"configDiffs,omitempty"`
	Xids           []XidEvent   `json:"xids,omitempty"`
	DCGM           *DCGMResult  `json:"dcgm,omitempty"`
	Findings       []Finding    `json:"findings"`
}

func (n *NodeReport) add(check string, l Level, msg string) {
	n.Findings = append(n.Findings, Finding{Check: check, Level: l, Message: msg})
}

// NCCLRun is one all-reduce test over a pool's nodes.
type NCCLRun struct {
	Pool     string   `json:"pool"`
	Nodes    []string `json:"nodes"`
	Launcher string   `json:"launcher"`
	Fabric   string   `json:"fabric"`
	// FabricFrom says why the fabric was chosen.
	FabricFrom    string          `json:"fabricFrom,omitempty"`
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
		case StatusPass:
			s.Passed++
		case StatusWarn:
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
