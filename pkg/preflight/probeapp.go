package preflight

import (
	"context"
	"fmt"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// GateProbeApp is the synthetic-app gate: deploy, expose, call and delete
// a probe app (pkg/health.RunProbeApp).
const GateProbeApp = "synthetic-app"

// RegProbeApp is its regression kind in verify.
const RegProbeApp = "synthetic-app"

// probeAppGate runs the probe app: it answered through the apiserver's
// service proxy is PASS; a pod that ran and did not answer (or ended, or
// never got Ready on a node) is FAIL; no node that can run it, a pod
// Pending past the timeout, a refused verb: UNKNOWN with the reason. A
// dry run is WARN: it proves admission and RBAC, not the app.
func (r *Runner) probeAppGate(ctx context.Context) (Gate, *health.ProbeAppResult) {
	o := r.Health.ProbeApp
	res := health.RunProbeApp(ctx, r.Kube, o)
	g := Gate{Message: res.Message, Evidence: append(append([]string{}, res.Evidence...), res.LeftBehind...), Command: health.ProbeAppCommand(o)}
	switch res.Verdict {
	case health.ProbeAppPass:
		g.Status = StatusPass
	case health.ProbeAppFail:
		g.Status = StatusFail
	case health.ProbeAppDryRun:
		g.Status = StatusWarn
	default:
		g.Status = StatusUnknown
	}
	if len(res.LeftBehind) > 0 {
		g.Status = Worse(g.Status, StatusWarn)
		g.Message += fmt.Sprintf("; %s left behind", cli.Plural(len(res.LeftBehind), "object"))
		g.Command = health.ProbeAppCleanupCommand(o.Namespace)
	}
	return g, &res
}

// verifyProbeApp: the probe app failing now is a FAIL; UNKNOWN now is
// UNKNOWN unless it was UNKNOWN at the baseline too (a cluster whose nodes
// never ran it); a dry run is listed as WARN.
func verifyProbeApp(b, n *HealthEvidence) []Regression {
	if n.ProbeApp == nil {
		return nil
	}
	res := *n.ProbeApp
	cmd := ""
	if n.ProbeAppOptions != nil {
		cmd = health.ProbeAppCommand(*n.ProbeAppOptions)
	}
	obj := "probe-app"
	if res.Node != "" {
		obj = "node/" + res.Node
	}
	var out []Regression
	switch res.Verdict {
	case health.ProbeAppFail:
		out = append(out, Regression{Kind: RegProbeApp, Status: StatusFail, Object: obj, Message: res.Message, Command: cmd})
	case health.ProbeAppUnknown:
		if b == nil || b.ProbeApp == nil || b.ProbeApp.Verdict != health.ProbeAppUnknown {
			out = append(out, Regression{Kind: RegProbeApp, Status: StatusUnknown, Object: obj, Message: res.Message, Command: cmd})
		}
	case health.ProbeAppDryRun:
		out = append(out, Regression{Kind: RegProbeApp, Status: StatusWarn, Object: obj, Message: res.Message, Command: cmd})
	}
	for _, l := range res.LeftBehind {
		ns := ""
		if n.ProbeAppOptions != nil {
			ns = n.ProbeAppOptions.Namespace
		}
		out = append(out, Regression{Kind: RegProbeApp, Status: StatusWarn, Object: obj, Message: "left behind: " + l, Command: health.ProbeAppCleanupCommand(ns)})
	}
	return out
}
