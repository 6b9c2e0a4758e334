package skew

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Report kinds.
const (
	KindSkewReport     = "SkewReport"
	KindSkewReportList = "SkewReportList"
	KindPlanReport     = "SkewPlanReport"
)

// Item is one finding of the check with its severity.
type Item struct {
	pkgskew.Finding
	// Severity is blocking for violations, warning for edge and unknown,
	// info for inventory-only rows, none when fine.
	Severity cli.Severity `json:"severity"`
}

// Summary totals a SkewReport.
type Summary struct {
	pkgskew.CheckSummary
	// DaysToEndOfLife of the oldest apiserver's minor, when the calendar
	// knows it.
	DaysToEndOfLife *int `json:"daysToEndOfLife,omitempty"`
	// MinorsBehindNewest is how many minors the oldest apiserver is behind
	// the newest released minor.
	MinorsBehindNewest int `json:"minorsBehindNewest"`
	// DaysToSupportEnd is how far the end of the support window that
	// applies (the provider's where it publishes one) is.
	DaysToSupportEnd *int `json:"daysToSupportEnd,omitempty"`
	// OutOfSupport, SupportAtEdge and SupportUnknown count the support
	// window finding (0 or 1 each): past its end; near its end or in the
	// provider's extended support; not in the calendar. The skew counts
	// (violations, edge, unknown) leave it out.
	OutOfSupport   int `json:"outOfSupport"`
	SupportAtEdge  int `json:"supportAtEdge"`
	SupportUnknown int `json:"supportUnknown"`
	// SupportWindow says in a few words which window the oldest
	// apiserver is in ("extended support until 2026-07-23").
	SupportWindow string `json:"supportWindow,omitempty"`
	// PolicyViolations counts the fleet policy finding (--policy).
	PolicyViolations int `json:"policyViolations"`
	// Findings counts items at or above --fail-on.
	Findings int `json:"findings"`
}

// SkewReport is the output of `kubectl skew` for one context. Saved with
// -o yaml, it is the input of `kubectl skew plan --from-file`.
type SkewReport struct {
	cli.Header
	// Inventory is every version read from the cluster.
	Inventory pkgskew.Inventory `json:"inventory"`
	// Items are the findings, sorted.
	Items []Item `json:"items"`
	// Support is the support window of the oldest apiserver's minor.
	Support *pkgskew.Support `json:"support,omitempty"`
	// Patches says how many patch releases each component is behind
	// (--check-registry).
	Patches []pkgskew.PatchReport `json:"patches,omitempty"`
	// Summary totals the report.
	Summary Summary `json:"summary"`
}

// PlanReport is the output of `kubectl skew plan`.
type PlanReport struct {
	cli.Header
	// Target is the minor the plan reaches.
	Target string `json:"target"`
	// Provider is who the steps' commands are written for, and why.
	Provider pkgskew.Detection `json:"provider"`
	// Steps in the order to run them, each with its commands.
	Steps []pkgskew.Step `json:"steps"`
	// Pools says what the plan does to each node pool.
	Pools []pkgskew.PoolPlan `json:"pools"`
	// Warnings are the caveats of the plan.
	Warnings []string `json:"warnings,omitempty"`
	// Summary totals the plan.
	Summary pkgskew.PlanSummary `json:"summary"`
}

// gotKind says what a file that is not the report wanted holds: its kind
// and apiVersion, or that it has neither.
func gotKind(kind, apiVersion string) string {
	if kind == "" && apiVersion == "" {
		return "and it has no kind or apiVersion"
	}
	return fmt.Sprintf("got kind %q apiVersion %q", kind, apiVersion)
}

// SeverityOf maps a status to the severity --fail-on compares.
func SeverityOf(s pkgskew.Status) cli.Severity {
	switch s {
	case pkgskew.StatusViolation:
		return cli.SeverityBlocking
	case pkgskew.StatusEdge, pkgskew.StatusUnknown:
		return cli.SeverityWarning
	case pkgskew.StatusInfo:
		return cli.SeverityInfo
	}
	return cli.SeverityNone
}

// readSaved reads a SkewReport saved with -o yaml or -o json ("-" is
// stdin, given as in). A file that cannot be read, is empty or holds no
// SkewReport is refused as input (exit 3), naming -f and the file.
func readSaved(path string, stdin func() ([]byte, error)) (*SkewReport, error) {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		if data, err = stdin(); err != nil {
			return nil, cli.InputFileErr("-f", path, err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, cli.InputFileErr("-f", path, cli.ErrEmptyInput)
		}
	} else if data, err = cli.ReadInputFile("-f", path); err != nil {
		return nil, err
	}
	var rep SkewReport
	if err := yaml.Unmarshal(data, &rep); err != nil {
		return nil, cli.InputFileErr("-f", path, fmt.Errorf("not a %s: %w", KindSkewReport, err))
	}
	if rep.Kind != KindSkewReport || !strings.HasPrefix(rep.APIVersion, cli.Group+"/") {
		return nil, cli.InputFileErr("-f", path, fmt.Errorf("want a %s (%s), %s: save one with kubectl skew -o yaml > FILE", KindSkewReport, cli.ReportAPIVersion(KindSkewReport), gotKind(rep.Kind, rep.APIVersion)))
	}
	// A report without an apiserver version still holds pools and
	// components worth judging; only one without any of them is no
	// inventory at all.
	if inv := rep.Inventory; inv.Server.GitVersion == "" && len(inv.Pools) == 0 && len(inv.Components) == 0 {
		return nil, cli.InputFileErr("-f", path, errNoInventory)
	}
	return &rep, nil
}
