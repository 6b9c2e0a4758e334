package preflight

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
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
	// Support is the support window of the cluster's minor, on its
	// provider's calendar where the provider publishes one.
	Support skew.Status `json:"support"`
	// Provider and Window say whose support window applies (pkg/skew's
	// Calendar.SupportOn, as the skew summary judges it).
	Provider string `json:"provider,omitempty"`
	Window   string `json:"window,omitempty"`
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
// data, shared with the fleet report) past --patch-max-days warn. The
// minor's support is judged as the skew summary judges it: on the
// provider's own calendar where it has one (an EKS minor in extended
// support is supported), else upstream (pkg/skew's Calendar.SupportOn). A
// minor out of support warns and points at the plan: the upgrade this
// pre-flight is for is what fixes it, so it must not block it.
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
	prov := r.provider()
	sup := r.Calendar.SupportOn(v.MinorOnly(), prov, now)
	f := &PatchFact{Version: info.GitVersion, Lag: lag, Support: sup.Status, MaxDays: r.patchMaxDays(), Provider: sup.Provider, Window: sup.Window}
	src, _, _ := strings.Cut(r.Calendar.Patches.Source, ". ")
	ev := []string{fmt.Sprintf("patch data of %s (%s; --patches overrides it)", lag.DataDate, src),
		fmt.Sprintf("support of %s (%s, %s window): %s", v.MinorString(), sup.Provider, sup.Window, sup.Message)}
	if sup.Note != "" {
		ev = append(ev, sup.Note)
	}
	g := Gate{Message: fmt.Sprintf("apiserver %s: %s", info.GitVersion, lag.Message), Evidence: ev,
		Command: fmt.Sprintf("kubectl skew plan --target v%s", v.MinorString())}
	// The lag's days are exact, or a lower bound (AtLeast): a lower bound
	// past the SLO is past it; one within it proves nothing.
	exactDays := lag.PatchesBehind == 1
	switch {
	case lag.Status == skew.StatusOK:
		g.Status = StatusPass
	case lag.Status == skew.StatusInfo && lag.DaysBehind > f.MaxDays:
		g.Status = StatusWarn
		g.Message += fmt.Sprintf("; past the %d-day patch SLO (--patch-max-days)", f.MaxDays)
	case lag.Status == skew.StatusInfo && exactDays:
		g.Status = StatusPass
	case lag.Status == skew.StatusUnknown && onPatch(lag.Latest, v) && lag.AsOf != "":
		// On the newest patch the data knows, which is older than today:
		// a newer patch, if any, is at most as old as the data.
		if asOf, err := time.Parse("2006-01-02", lag.AsOf); err == nil && int(now.Sub(asOf).Hours()/24) <= f.MaxDays {
			g.Status = StatusPass
			g.Message += fmt.Sprintf("; any newer patch is at most %s old, within the %d-day patch SLO", cli.Plural(int(now.Sub(asOf).Hours()/24), "day"), f.MaxDays)
		} else {
			g.Status = StatusUnknown
		}
	default:
		g.Status = StatusUnknown
	}
	if sup.Status == skew.StatusViolation {
		g.Status = StatusWarn
		g.Message = fmt.Sprintf("%s is out of support: %s; the upgrade fixes it, follow the plan", v.MinorString(), sup.Message)
		if !r.Target.IsZero() {
			g.Command = fmt.Sprintf("kubectl skew plan --target v%s", r.Target.MinorString())
		}
	}
	return g, f
}

// verifyPatch reports a cluster now out of support, or now past the patch
// SLO, that was not at the baseline: both WARN (an upgrade under way is
// what fixes them).
func verifyPatch(base, now *PolicyEvidence, target string) []Regression {
	n := now.Patch
	if n == nil {
		return nil
	}
	b := base.Patch
	var out []Regression
	if n.Support == skew.StatusViolation && (b == nil || b.Support != skew.StatusViolation) {
		win := ""
		if n.Provider != "" && n.Window != "" {
			win = fmt.Sprintf(" (%s, %s window)", n.Provider, n.Window)
		}
		out = append(out, Regression{Kind: RegPatch, Status: StatusWarn, Object: "apiserver/" + n.Version, Message: fmt.Sprintf("apiserver %s: its minor is out of support%s; finish the upgrade", n.Version, win),
			Command: planCommand(target)})
	}
	past := func(f *PatchFact) bool { return f.Lag.Status == skew.StatusInfo && f.Lag.DaysBehind > f.MaxDays }
	if past(n) && (b == nil || !past(b)) {
		out = append(out, Regression{Kind: RegPatch, Status: StatusWarn, Object: "apiserver/" + n.Version,
			Message: fmt.Sprintf("apiserver %s: %s; past the %d-day patch SLO", n.Version, n.Lag.Message, n.MaxDays)})
	}
	return out
}

// onPatch reports whether v is on patch release latest (vendor suffixes
// such as -gke.100 aside).
func onPatch(latest string, v skew.Version) bool {
	l, err := skew.ParseVersion(latest)
	return err == nil && l.Major == v.Major && l.Minor == v.Minor && l.Patch == v.Patch
}

// planCommand is the command that shows the rest of the upgrade to the
// baseline's target ("kubectl skew plan" alone without one).
func planCommand(target string) string {
	if target == "" {
		return "kubectl skew plan --target vMAJOR.MINOR   # the version the upgrade goes to"
	}
	return "kubectl skew plan --target v" + strings.TrimPrefix(target, "v")
}
