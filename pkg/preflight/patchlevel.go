package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// GatePatch is the patch-level gate's name.
const GatePatch = "patch-level"

// DefaultPatchMaxDays is the patch SLO the patch-level gate warns past:
// "regular patch releases within 30 days" (the design document's patch
// SLOs; --patch-max-days).
const DefaultPatchMaxDays = 30

// PatchFact is the cluster's patch level as the gate judged it.
type PatchFact struct {
	// Version is the apiserver's (/version).
	Version string `json:"version"`
	// Lag is pkg/skew's judgement against the patch data.
	Lag skew.PatchLag `json:"lag"`
	// Support is the support window of the cluster's minor.
	Support skew.Status `json:"support"`
	// MaxDays is the threshold used.
	MaxDays int `json:"maxDays"`
}

func (r *Runner) patchMaxDays() int {
	if r.Policy.PatchMaxDays > 0 {
		return r.Policy.PatchMaxDays
	}
	return DefaultPatchMaxDays
}

// patchGate judges the cluster's own version (not the target's): days
// behind the newest patch of its minor (the release calendar's patch
// data, shared with the fleet report) past --patch-max-days warn, a minor
// out of support fails.
func (r *Runner) patchGate(ctx context.Context) (Gate, *PatchFact) {
	info, err := r.Kube.Discovery().ServerVersion()
	if err != nil {
		return unknown("get /version", err), nil
	}
	v, err := skew.ParseVersion(info.GitVersion)
	if err != nil {
		return Gate{Status: StatusUnknown, Message: fmt.Sprintf("the apiserver's version %q does not parse: %v", info.GitVersion, err)}, nil
	}
	now := r.now()
	lag := r.Calendar.PatchLag(v, now)
	sup := r.Calendar.Support(v.MinorOnly(), now)
	f := &PatchFact{Version: info.GitVersion, Lag: lag, Support: sup.Status, MaxDays: r.patchMaxDays()}
	src, _, _ := strings.Cut(r.Calendar.Patches.Source, ". ")
	ev := []string{fmt.Sprintf("patch data of %s (%s; --patches overrides it)", lag.DataDate, src),
		fmt.Sprintf("support of %s: %s", v.MinorString(), sup.Message)}
	g := Gate{Message: fmt.Sprintf("apiserver %s: %s", info.GitVersion, lag.Message), Evidence: ev,
		Command: fmt.Sprintf("kubectl skew plan --target v%s", v.MinorString())}
	switch lag.Status {
	case skew.StatusOK:
		g.Status = StatusPass
	case skew.StatusInfo:
		g.Status = StatusPass
		if lag.DaysBehind > f.MaxDays {
			g.Status = StatusWarn
			g.Message += fmt.Sprintf("; past the %d-day patch SLO (--patch-max-days)", f.MaxDays)
		}
	default:
		g.Status = StatusUnknown
	}
	if sup.Status == skew.StatusViolation {
		g.Status = StatusFail
		g.Message = fmt.Sprintf("%s is out of support: %s", v.MinorString(), sup.Message)
	}
	return g, f
}

// verifyPatch reports a cluster now out of support, or now past the patch
// SLO, that was not at the baseline.
func verifyPatch(base, now *PolicyEvidence) []Regression {
	n := now.Patch
	if n == nil {
		return nil
	}
	b := base.Patch
	var out []Regression
	if n.Support == skew.StatusViolation && (b == nil || b.Support != skew.StatusViolation) {
		out = append(out, Regression{Kind: RegPatch, Status: StatusFail, Object: "apiserver/" + n.Version, Message: fmt.Sprintf("apiserver %s: its minor is out of support", n.Version)})
	}
	past := func(f *PatchFact) bool { return f.Lag.Status == skew.StatusInfo && f.Lag.DaysBehind > f.MaxDays }
	if past(n) && (b == nil || !past(b)) {
		out = append(out, Regression{Kind: RegPatch, Status: StatusWarn, Object: "apiserver/" + n.Version,
			Message: fmt.Sprintf("apiserver %s: %s; past the %d-day patch SLO", n.Version, n.Lag.Message, n.MaxDays)})
	}
	return out
}
