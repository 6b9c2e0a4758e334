package gpucheck

import (
	"sort"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Level grades a finding.
type Level string

// Levels, least to most severe.
const (
	LevelInfo    Level = "info"
	LevelWarning Level = "warning"
	LevelFail    Level = "fail"
)

// Checks that produce findings.
const (
	CheckReady    = "ready"
	CheckVersion  = "kubelet-version"
	CheckGPUCount = "gpu-count"
	CheckConfig   = "kubelet-config"
	CheckXid      = "xid"
	CheckDCGM     = "dcgm"
	CheckNCCL     = "nccl"
)

// Finding is one observation about a node.
type Finding struct {
	Check   string `json:"check"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
}

// Status is a node's overall verdict.
type Status string

// Statuses.
const (
	StatusPass Status = "PASS"
	StatusWarn Status = "WARN"
	StatusFail Status = "FAIL"
)

// Word is the status's word in a table's STATUS column: OK for PASS, so
// that every plugin's tables say OK for a clean check. JSON keeps the
// Status itself.
func (s Status) Word() cli.Status {
	if s == StatusPass {
		return cli.StatusOK
	}
	return cli.Status(s)
}

// Words are the status words Word returns, for a command's legend.
var Words = []cli.Status{cli.StatusOK, cli.StatusWarn, cli.StatusFail}

// StatusOf is FAIL when any finding fails, WARN when any warns, else PASS.
func StatusOf(fs []Finding) Status {
	s := StatusPass
	for _, f := range fs {
		switch f.Level {
		case LevelFail:
			return StatusFail
		case LevelWarning:
			s = StatusWarn
		}
	}
	return s
}

func rank(l Level) int {
	switch l {
	case LevelFail:
		return 0
	case LevelWarning:
		return 1
	}
	return 2
}

// SortFindings orders findings worst first, then by check, keeping the
// order of equal ones.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if rank(fs[i].Level) != rank(fs[j].Level) {
			return rank(fs[i].Level) < rank(fs[j].Level)
		}
		return fs[i].Check < fs[j].Check
	})
}
