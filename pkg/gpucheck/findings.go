package gpucheck

import (
	"fmt"
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
// that every plugin's tables say OK for a clean check. JSON writes the
// same word in lower case (MarshalText).
func (s Status) Word() cli.Status {
	if s == StatusPass {
		return cli.StatusOK
	}
	return cli.Status(s)
}

// MarshalText writes the status as every report's JSON and YAML do: its
// table word in lower case ("ok", "warn", "fail").
func (s Status) MarshalText() ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	return []byte(s.Word().JSONWord()), nil
}

// UnmarshalText reads a status as MarshalText writes it, or as reports of
// gpufleet.dev/v1alpha1 did ("PASS", "WARN", "FAIL").
func (s *Status) UnmarshalText(b []byte) error {
	w := string(b)
	for _, st := range []Status{StatusPass, StatusWarn, StatusFail} {
		if w == string(st) || w == st.Word().JSONWord() {
			*s = st
			return nil
		}
	}
	if w == "" {
		*s = ""
		return nil
	}
	return fmt.Errorf("status %q is not one of ok, warn, fail", w)
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
