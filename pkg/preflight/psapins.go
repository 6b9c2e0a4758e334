package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// NamespacePodSecurity is a namespace's Pod Security enforce labels.
type NamespacePodSecurity struct {
	Namespace string `json:"namespace"`
	// Enforce is the enforce level label (empty when only a version is set).
	Enforce string `json:"enforce,omitempty"`
	// EnforceVersion is the enforce-version label (empty: latest).
	EnforceVersion string `json:"enforceVersion,omitempty"`
}

// pinnedMinor returns the minor an enforce-version label pins, false for
// latest, an empty or an invalid label (which Pod Security reads as latest:
// k8s.io/pod-security-admission@v0.37.2 api/helpers.go, ParseVersion).
func (p NamespacePodSecurity) pinnedMinor() (skew.Version, bool) {
	v, err := psaapi.ParseVersion(p.EnforceVersion)
	if err != nil || v.Latest() {
		return skew.Version{}, false
	}
	return skew.Version{Major: v.Major(), Minor: v.Minor()}, true
}

// enforces reports whether the namespace enforces a level that forbids pods.
func (p NamespacePodSecurity) enforces() bool {
	if p.Enforce == "" {
		return false
	}
	l, _ := psaapi.ParseLevel(p.Enforce) // an invalid level enforces restricted
	return l != psaapi.LevelPrivileged
}

// checksSince names the Pod Security checks of a level that a pin at
// minor `pinned` does not apply and minor `to` does: the checks first
// introduced in between (one that takes over another check's rule is not
// new), from the checks Pod Security itself runs
// (k8s.io/pod-security-admission policy.DefaultChecks, each with the
// minimum version of every revision). A check's later revisions relax it
// (the Windows exemptions of 1.25, the sysctls Pod Security allows from
// 1.27, 1.29, 1.32 and 1.37, the SELinux types of 1.31, the user-namespace
// relaxations of 1.35; TestPodSecurityRevisionsAreRelaxations keeps the
// list): an older pin enforces more of them, not less, and they are not
// named.
func checksSince(level psaapi.Level, pinned, to skew.Version) []string {
	var out []string
	for _, c := range psapolicy.DefaultChecks() {
		if level == psaapi.LevelBaseline && c.Level != psaapi.LevelBaseline || len(c.Versions) == 0 {
			continue
		}
		if len(c.Versions[0].OverrideCheckIDs) > 0 {
			// It keeps, at this level, a rule another check had (1.35's
			// procMount_restricted keeps procMount's unconditional block
			// while baseline relaxes it): nothing new.
			continue
		}
		v := c.Versions[0].MinimumVersion
		mv := skew.Version{Major: v.Major(), Minor: v.Minor()}
		if mv.MinorsAfter(pinned) > 0 && mv.MinorsAfter(to) <= 0 {
			out = append(out, fmt.Sprintf("%s (%s, v%s)", c.ID, c.Level, mv.MinorString()))
		}
	}
	sort.Strings(out)
	return out
}

// podSecurityPinsGate records every namespace's Pod Security enforce labels
// (verify compares their pins with the cluster's minor then) and warns about
// enforce-version pins more than one minor behind the target: Pod Security
// judges pods there by that older minor's checks, so what the upgrade
// tightens never applies (the namespaces pinned to latest are the
// pod-security-latest gate's).
func (r *Runner) podSecurityPinsGate(ctx context.Context) (Gate, []NamespacePodSecurity) {
	nss, err := r.namespaces(ctx)
	if err != nil {
		return unknown("list namespaces", err), nil
	}
	var pins []NamespacePodSecurity
	var behind []string
	first := ""
	for _, ns := range nss {
		level, hasLevel := ns.Labels[psaapi.EnforceLevelLabel]
		ver, hasVer := ns.Labels[psaapi.EnforceVersionLabel]
		if !hasLevel && !hasVer {
			continue
		}
		p := NamespacePodSecurity{Namespace: ns.Name, Enforce: level, EnforceVersion: ver}
		pins = append(pins, p)
		if line, ok := pinBehind(p, r.Target); ok {
			behind = append(behind, line)
			if first == "" {
				first = ns.Name
			}
		}
	}
	cmd := "kubectl get ns -L " + psaapi.EnforceLevelLabel + "," + psaapi.EnforceVersionLabel
	if len(behind) > 0 {
		return Gate{Status: StatusWarn, Message: fmt.Sprintf("%s Pod Security more than one minor behind %s", cli.Plural(len(behind), "namespace")+cli.Agree(len(behind), " pins", " pin"), r.Target.MinorString()),
			Evidence: capLines(behind), Command: pinCommand(first, r.Target)}, pins
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("no Pod Security pin more than one minor behind %s (%s with enforce labels)", r.Target.MinorString(), cli.Plural(len(pins), "namespace")),
		Command: cmd}, pins
}

// pinBehind says how far a namespace's enforce-version pin lags minor to,
// when it lags more than one minor.
func pinBehind(p NamespacePodSecurity, to skew.Version) (string, bool) {
	pin, ok := p.pinnedMinor()
	if !ok || to.IsZero() || to.MinorsAfter(pin) <= 1 {
		return "", false
	}
	line := fmt.Sprintf("namespace %s: enforce=%s pinned to %s, %s behind %s", p.Namespace, orUnset(p.Enforce), p.EnforceVersion, skew.Minors(to.MinorsAfter(pin)), to.MinorString())
	level, _ := psaapi.ParseLevel(p.Enforce)
	if cs := checksSince(level, pin, to); len(cs) > 0 && p.enforces() {
		line += "; not enforced there: " + strings.Join(cs, ", ")
	}
	return line, true
}

func pinCommand(ns string, to skew.Version) string {
	return fmt.Sprintf("kubectl label --dry-run=server --overwrite ns %s %s=v%s", ns, psaapi.EnforceVersionLabel, to.MinorString())
}

// verifyPodSecurityPins reports namespaces whose enforce-version pin is now
// more than one minor behind the apiserver and was not at the baseline
// (against the baseline's apiserver).
func verifyPodSecurityPins(base, now Evidence) []Regression {
	_, baseMinor, okB := base.Inventory.APIServerVersions()
	_, nowMinor, okN := now.Inventory.APIServerVersions()
	if !okN || now.Policy == nil {
		return nil
	}
	was := map[string]bool{}
	if base.Policy != nil && okB {
		for _, p := range base.Policy.PodSecurity {
			if _, behind := pinBehind(p, baseMinor.MinorOnly()); behind {
				was[p.Namespace] = true
			}
		}
	}
	var out []Regression
	for _, p := range now.Policy.PodSecurity {
		line, behind := pinBehind(p, nowMinor.MinorOnly())
		if !behind || was[p.Namespace] {
			continue
		}
		out = append(out, Regression{Kind: RegPodSecurityPin, Status: StatusWarn, Object: "namespace/" + p.Namespace,
			Message: line, Command: pinCommand(p.Namespace, nowMinor)})
	}
	return out
}

// orUnset names an unset label value.
func orUnset(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
