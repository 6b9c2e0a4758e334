package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// admissionGate proves, by server-side dry-run creates, which admission
// controls deny what: Pod Security in every namespace that enforces it,
// every webhook safe to call on a dry run, every ValidatingAdmissionPolicy
// binding that denies, and the user's probe files. Preflight records the
// probes each control denied; verify (Policy.Baseline set) sends exactly
// those again and Verify reports each that is no longer denied by it.
func (r *Runner) admissionGate(ctx context.Context) (Gate, []Probe) {
	var ps probeSet
	if base := r.Policy.Baseline; base != nil {
		for _, p := range base.Probes {
			if p.Result != ProbeDenied || p.Object == nil {
				continue
			}
			p.Expect = p.DeniedBy
			p.Result, p.DeniedBy, p.Message = "", "", ""
			ps.probes = append(ps.probes, p)
		}
	} else {
		ps = r.deriveProbes(ctx)
		ps.probes = append(ps.probes, r.fileProbes(ctx)...)
	}
	r.runProbes(ctx, ps.probes)
	if err := ctx.Err(); err != nil {
		return unknown("send the admission probes", err), nil
	}
	for i := range ps.probes {
		if ps.probes[i].Result != ProbeDenied {
			// Only what a control denied is replayed: keep the rest small.
			ps.probes[i].Object = nil
		}
	}
	sort.Slice(ps.probes, func(i, j int) bool { return ps.probes[i].ID < ps.probes[j].ID })
	return r.admissionVerdict(ps), ps.probes
}

// admissionVerdict sums the probes up per control.
func (r *Runner) admissionVerdict(ps probeSet) Gate {
	type ctl struct {
		ref, control, check      string
		denied, admitted, masked int
		sent                     int
		psa                      bool
	}
	var order []string
	ctls := map[string]*ctl{}
	var unknowns, warns []string
	count := map[ProbeResult]int{}
	cmd := ""
	for _, p := range ps.probes {
		c := ctls[p.Control]
		if c == nil {
			c = &ctl{ref: p.Ref, control: p.Control, check: p.Check, psa: p.Expect == DeniedByPodSecurity}
			ctls[p.Control] = c
			order = append(order, p.Control)
		}
		c.sent++
		count[p.Result]++
		switch p.Result {
		case ProbeDenied:
			c.denied++
		case ProbeAdmitted:
			c.admitted++
		case ProbeMasked:
			c.masked++
		case ProbeGone:
			warns = append(warns, fmt.Sprintf("%s: %s probe not sent: namespace %s is gone", p.Control, p.Resource, p.Namespace))
		default:
			unknowns = append(unknowns, fmt.Sprintf("UNKNOWN %s: %s probe (%s): %s", p.Control, p.Resource, orNone(p.Variant), p.Message))
			if cmd == "" {
				cmd = probeCommand(p)
			}
		}
	}
	var lines []string
	for _, name := range order {
		c := ctls[name]
		switch {
		case c.denied > 0:
			lines = append(lines, fmt.Sprintf("%s: denied %d of %d probes (recorded for verify)", c.control, c.denied, c.sent))
		case c.psa && c.admitted > 0:
			warns = append(warns, fmt.Sprintf("%s admitted a pod its level forbids: exempt in the apiserver's PodSecurity configuration?", c.control))
			if cmd == "" {
				cmd = c.check
			}
		case c.admitted > 0 && c.masked == 0 && c.admitted == c.sent:
			lines = append(lines, fmt.Sprintf("%s: admitted all %d probes, so verify cannot prove it; add a --probe-file it denies", c.control, c.sent))
		case c.masked > 0:
			lines = append(lines, fmt.Sprintf("%s: %d of %d probes denied first by another control, %d admitted", c.control, c.masked, c.sent, c.admitted))
		}
	}
	for _, e := range r.Policy.ProbeErrors {
		unknowns = append(unknowns, "UNKNOWN "+e)
	}
	for _, u := range ps.unread {
		unknowns = append(unknowns, "UNKNOWN "+u)
	}
	ev := capLines(append(append(append(unknowns, warns...), lines...), ps.notes...))
	verb := "probes"
	if r.Policy.Baseline != nil {
		verb = "baseline probes replayed"
	}
	msg := fmt.Sprintf("%d %s on %d controls (dry run): %d denied by their control, %d admitted, %d denied first by another, %d unknown",
		len(ps.probes), verb, len(order), count[ProbeDenied], count[ProbeAdmitted], count[ProbeMasked], len(ps.probes)-count[ProbeDenied]-count[ProbeAdmitted]-count[ProbeMasked]-count[ProbeGone])
	if cmd == "" {
		cmd = "kubectl get validatingadmissionpolicybindings,validatingwebhookconfigurations,mutatingwebhookconfigurations; kubectl get ns -L pod-security.kubernetes.io/enforce"
	}
	g := Gate{Status: StatusPass, Message: msg, Evidence: ev, Command: cmd}
	switch {
	case len(unknowns) > 0:
		g.Status = StatusUnknown
	case len(warns) > 0:
		g.Status = StatusWarn
	case len(ps.probes) == 0 && len(ps.notes) == 0:
		g.Message = "no admission control to probe: no Pod Security enforced, no webhook or policy binding, no --probe-file"
	case len(ps.probes) == 0:
		g.Message = fmt.Sprintf("no probe sent: %d webhooks or policy bindings not probed or not denying (evidence); give a --probe-file for each that guards security", len(ps.notes))
	}
	return g
}

// probeCommand is the command that investigates an UNKNOWN probe.
func probeCommand(p Probe) string {
	if strings.Contains(p.Message, "forbidden: cannot create") {
		ns := ""
		if p.Namespace != "" {
			ns = " --namespace " + p.Namespace
		}
		return fmt.Sprintf("kubectl auth can-i create %s%s", p.Resource, ns)
	}
	return p.Check
}

// verifyProbes reports every probe its control denied at the baseline and
// that it does not deny now.
func verifyProbes(base, now *PolicyEvidence) []Regression {
	cur := map[string]Probe{}
	for _, p := range now.Probes {
		cur[p.ID] = p
	}
	var out []Regression
	for _, b := range base.Probes {
		if b.Result != ProbeDenied {
			continue
		}
		what := fmt.Sprintf("%s denied a %s probe", b.Control, b.Resource)
		if b.Variant != "" && b.Variant != VariantPlain {
			what = fmt.Sprintf("%s denied a %s probe (%s)", b.Control, b.Resource, b.Variant)
		}
		if b.Namespace != "" {
			what += " in namespace " + b.Namespace
		}
		reg := Regression{Kind: RegAdmission, Object: b.Ref, Command: b.Check}
		n, ok := cur[b.ID]
		switch {
		case !ok:
			if now.Unread[GateAdmission] == "" {
				continue
			}
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; not proven now: %s", what, now.Unread[GateAdmission])
		case n.Result == ProbeDenied:
			continue
		case n.Result == ProbeAdmitted:
			reg.Status, reg.Message = StatusFail, what+" at the baseline and admits it now"
		case n.Result == ProbeMasked:
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; now %s denies it first, so %s is not proven: %s", what, n.DeniedBy, n.Expect, n.Message)
		case n.Result == ProbeGone:
			reg.Status, reg.Message = StatusWarn, fmt.Sprintf("%s at the baseline; namespace %s is gone", what, b.Namespace)
		default:
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; not proven now: %s", what, n.Message)
			reg.Command = probeCommand(n)
		}
		out = append(out, reg)
	}
	return out
}
