package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// admissionGate proves, by server-side dry-run creates, which admission
// controls deny what: Pod Security in every namespace that enforces it,
// every webhook safe to call on a dry run, every ValidatingAdmissionPolicy
// binding that denies, and the user's probe files. Preflight records the
// probes that were denied, by their control or first by another, and the
// controls that denied each object; verify (Policy.Baseline set) sends
// exactly those again, and Verify reports each that is admitted now or
// denied only by a control that did not deny it at the baseline.
func (r *Runner) admissionGate(ctx context.Context) (Gate, admissionRead) {
	var ps probeSet
	if base := r.Policy.Baseline; base != nil {
		for _, p := range base.Probes {
			if !replayed(p) {
				continue
			}
			if p.Expect == "" {
				p.Expect = p.DeniedBy // a probe file: whoever denied it
			}
			p.Result, p.DeniedBy, p.Message = "", "", ""
			ps.probes = append(ps.probes, p)
		}
		// RuntimeClasses new since the baseline: Pod Security may exempt them.
		if nss, err := r.namespaces(ctx); err == nil {
			seen := map[string]bool{}
			for _, p := range base.Probes {
				seen[p.ID] = true
			}
			r.runtimeClassProbes(ctx, nss, &ps, seen)
		}
	} else {
		ps = r.deriveProbes(ctx)
		ps.probes = append(ps.probes, r.fileProbes(ctx)...)
	}
	var read admissionRead
	cfg, err := r.admissionConfig(ctx)
	if err != nil {
		read.configErr = unknown("read the admission configuration", err).Message
	} else {
		read.config = cfg
	}
	r.runProbes(ctx, ps.probes)
	if r.Policy.Baseline == nil {
		if nss, err := r.namespaces(ctx); err == nil {
			more := ps.spreadProbes(nss)
			r.runProbes(ctx, more)
			ps.probes = append(ps.probes, more...)
		}
	}
	if err := ctx.Err(); err != nil {
		return unknown("send the admission probes", err), read
	}
	if r.Policy.Baseline == nil {
		acceptSameObject(ps.probes)
	}
	for i := range ps.probes {
		if !replayed(ps.probes[i]) {
			// Only what a control denied is replayed: keep the rest small.
			ps.probes[i].Object = nil
		}
	}
	sort.Slice(ps.probes, func(i, j int) bool { return ps.probes[i].ID < ps.probes[j].ID })
	read.probes = ps.probes
	if read.configErr != "" {
		ps.unread = append(ps.unread, read.configErr+" (verify cannot diff it)")
	}
	return r.admissionVerdict(ps), read
}

// admissionRead is what the admission gate records.
type admissionRead struct {
	probes    []Probe
	config    *AdmissionConfig
	configErr string
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
	var unknowns, warns, lines []string
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
		if strings.HasPrefix(p.ID, idUnlabelled) && p.Result == ProbeAdmitted {
			lines = append(lines, fmt.Sprintf("%s: admitted a privileged pod, so no cluster default level is enforced (nothing to record)", p.Control))
			c.psa = false
			continue
		}
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
			lines = append(lines, fmt.Sprintf("%s: admitted every probe sent (%s), so verify cannot prove it; add a --probe-file it denies", c.control, cli.Plural(c.sent, "probe")))
		case c.masked > 0 && c.psa:
			lines = append(lines, fmt.Sprintf("%s: %d of %d probes denied first by another control, so Pod Security is not proven there (not recorded)", c.control, c.masked, c.sent))
		case c.masked > 0:
			lines = append(lines, fmt.Sprintf("%s: %d of %d probes denied first by another control (recorded: verify accepts a denial by any control that denied the same object), %d admitted", c.control, c.masked, c.sent, c.admitted))
		}
	}
	for _, e := range r.Policy.ProbeErrors {
		unknowns = append(unknowns, "UNKNOWN "+e)
	}
	for _, u := range ps.unread {
		unknowns = append(unknowns, "UNKNOWN "+u)
	}
	ev := capLines(append(append(append(unknowns, warns...), lines...), ps.notes...))
	sent := cli.Plural(len(ps.probes), "probe")
	if r.Policy.Baseline != nil {
		sent = cli.Plural(len(ps.probes), "baseline probe") + " replayed"
	}
	msg := fmt.Sprintf("%s on %s (dry run): %d denied by their control, %d admitted, %d denied first by another, %d unknown",
		sent, cli.Plural(len(order), "control"), count[ProbeDenied], count[ProbeAdmitted], count[ProbeMasked], len(ps.probes)-count[ProbeDenied]-count[ProbeAdmitted]-count[ProbeMasked]-count[ProbeGone])
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
		g.Message = fmt.Sprintf("no probe sent: %s not probed or not denying (evidence); give a --probe-file for each that guards security", cli.PluralOf(len(ps.notes), "webhook or policy binding", "webhooks or policy bindings"))
	}
	return g
}

// replayed reports a probe verify sends again: one denied, by its own
// control or first by another, with the object that was sent.
// A probe of Pod Security's own exemptions or default that another
// control denied proves nothing of Pod Security and is not kept.
func replayed(p Probe) bool {
	return (p.Result == ProbeDenied || p.Result == ProbeMasked && p.Expect != DeniedByPodSecurity) && p.Object != nil
}

// acceptSameObject records, on every probe denied at the baseline, the
// other controls that denied the very same object (same resource,
// namespace and content) or whose own probe of it was denied first by
// another: the apiserver may name any of them next time (Probe.Accept).
// A generic denial ("another admission plugin") is never accepted.
func acceptSameObject(probes []Probe) {
	groups := map[string][]int{}
	for i, p := range probes {
		if !replayed(p) {
			continue
		}
		b, err := json.Marshal(p.Object) // map keys sorted: the same object, the same text
		if err != nil {
			continue
		}
		k := p.Resource + "\x00" + p.Namespace + "\x00" + string(b)
		groups[k] = append(groups[k], i)
	}
	for _, idx := range groups {
		var deniers []string
		for _, i := range idx {
			for _, d := range []string{probes[i].DeniedBy, probes[i].Expect} {
				if d != "" && d != deniedByOther {
					deniers = append(deniers, d)
				}
			}
		}
		deniers = dedupe(deniers)
		for _, i := range idx {
			own := probes[i].Expect
			if own == "" {
				own = probes[i].DeniedBy
			}
			var acc []string
			for _, d := range deniers {
				if d != own {
					acc = append(acc, d)
				}
			}
			probes[i].Accept = acc
		}
	}
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

// verifyProbes reports every probe denied at the baseline (by its control,
// or first by another) that is not denied now: admitted is a FAIL; denied
// only by a control that did not deny that object at the baseline is
// UNKNOWN, unless unchanged says the probe's own control is configured as
// at the baseline (then WARN: the object is still denied, and the control
// that denied it then is still there as it was).
func verifyProbes(base, now *PolicyEvidence, unchanged func(ref string) bool) []Regression {
	cur := map[string]Probe{}
	for _, p := range now.Probes {
		cur[p.ID] = p
	}
	var out []Regression
	for _, b := range base.Probes {
		if b.Result != ProbeDenied && b.Result != ProbeMasked {
			continue
		}
		what := fmt.Sprintf("%s denied a %s probe", b.Control, b.Resource)
		if b.Variant != "" && b.Variant != VariantPlain {
			what = fmt.Sprintf("%s denied a %s probe (%s)", b.Control, b.Resource, b.Variant)
		}
		if b.Result == ProbeMasked {
			what = fmt.Sprintf("a %s probe of %s", b.Resource, b.Control)
			if b.Variant != "" && b.Variant != VariantPlain {
				what = fmt.Sprintf("a %s probe (%s) of %s", b.Resource, b.Variant, b.Control)
			}
			what += fmt.Sprintf(" was denied (first by %s)", b.DeniedBy)
		}
		if b.Namespace != "" {
			what += " in namespace " + b.Namespace
		}
		reg := Regression{Kind: RegAdmission, Object: b.Ref, Command: b.Check}
		n, ok := cur[b.ID]
		switch {
		case !ok:
			if b.Object == nil || now.Unread[GateAdmission] == "" {
				continue
			}
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; not proven now: %s", what, now.Unread[GateAdmission])
		case n.Result == ProbeDenied:
			continue
		case n.Result == ProbeAdmitted:
			reg.Status, reg.Message = StatusFail, what+" at the baseline and admits it now"
		case n.Result == ProbeMasked && b.Result == ProbeMasked:
			continue // still denied; its own control was never proven
		case n.Result == ProbeMasked && unchanged != nil && unchanged(b.Ref):
			reg.Status, reg.Message = StatusWarn, fmt.Sprintf("%s at the baseline; now %s, which did not deny it then, denies it first; %s is configured as at the baseline", what, n.DeniedBy, b.Control)
		case n.Result == ProbeMasked:
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; now %s, which did not deny it then, denies it first, so %s is not proven: %s", what, n.DeniedBy, n.Expect, n.Message)
		case n.Result == ProbeGone:
			reg.Status, reg.Message = StatusWarn, fmt.Sprintf("%s at the baseline; namespace %s is gone", what, b.Namespace)
		default:
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s at the baseline; not proven now: %s", what, n.Message)
			reg.Command = probeCommand(n)
		}
		out = append(out, reg)
	}
	base0 := map[string]bool{}
	for _, b := range base.Probes {
		base0[b.ID] = true
	}
	for _, n := range now.Probes {
		if base0[n.ID] || !strings.HasPrefix(n.ID, idRuntimeClass) {
			continue
		}
		reg := Regression{Kind: RegAdmission, Object: n.Ref, Command: n.Check}
		switch n.Result {
		case ProbeDenied, ProbeMasked:
			continue
		case ProbeAdmitted:
			reg.Status, reg.Message = StatusFail, fmt.Sprintf("%s: a privileged pod of RuntimeClass %s, new since the baseline, is admitted where Pod Security enforces a level: the apiserver's PodSecurity configuration exempts it (exemptions.runtimeClasses)", n.Control, strings.TrimPrefix(n.ID, idRuntimeClass))
		default:
			reg.Status, reg.Message = StatusUnknown, fmt.Sprintf("%s, new since the baseline: not proven: %s", n.Control, n.Message)
			reg.Command = probeCommand(n)
		}
		out = append(out, reg)
	}
	return out
}
