package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// GateNetworkPolicy records the network policies and the CNI that enforces
// them; verify diffs both against the baseline.
const GateNetworkPolicy = "network-policy"

// RegNetworkPolicy is its regression kind in verify.
const RegNetworkPolicy = "network-policy"

// NetworkPolicyEvidence is what the network-policy gate read.
type NetworkPolicyEvidence struct {
	// Policies are every policy of the kinds read.
	Policies []health.PolicyFact `json:"policies,omitempty"`
	// Kinds are the kinds read (a kind whose CRD is not served is not).
	Kinds []string `json:"kinds,omitempty"`
	// Unread are the kinds that are served and could not be listed.
	Unread map[string]string `json:"unread,omitempty"`
	// CNIs are the enforcing CNIs' DaemonSets found.
	CNIs []health.CNIFact `json:"cnis,omitempty"`
	// CNIUnread says why the DaemonSets could not be read.
	CNIUnread string `json:"cniUnread,omitempty"`
	// Probe is what the active check (--probe-network) found (nil when it
	// did not run); ProbeOptions how it ran, for verify to run it again.
	Probe        *health.NetworkProbeResult  `json:"probe,omitempty"`
	ProbeOptions *health.NetworkProbeOptions `json:"probeOptions,omitempty"`
}

// withProbe runs the network probe when asked and folds its verdict into
// the gate: FAIL is FAIL, UNKNOWN (no node runs pods, a verb refused) is
// UNKNOWN rather than a pass, a dry run is WARN, anything left behind is
// WARN.
func (r *Runner) withProbe(ctx context.Context, g Gate, ev *NetworkPolicyEvidence) Gate {
	if !r.Health.ProbeNetwork || ev == nil {
		return g
	}
	o := r.Health.NetworkProbe
	res := health.RunNetworkProbe(ctx, r.Kube, o)
	ev.Probe, ev.ProbeOptions = &res, &o
	g.Evidence = append(g.Evidence, "probe: "+res.Message)
	g.Evidence = append(g.Evidence, res.Evidence...)
	g.Evidence = append(g.Evidence, res.LeftBehind...)
	st := StatusPass
	switch res.Verdict {
	case health.ProbeAppFail:
		st = StatusFail
	case health.ProbeAppUnknown:
		st = StatusUnknown
	case health.ProbeAppDryRun:
		st = StatusWarn
	}
	if len(res.LeftBehind) > 0 {
		st = Worse(st, StatusWarn)
	}
	if Worse(g.Status, st) != g.Status {
		g.Status = st
		g.Message = "network probe: " + res.Message + "; " + g.Message
		g.Command = health.NetworkProbeCommand()
		if len(res.LeftBehind) > 0 {
			g.Command = health.NetworkProbeCleanupCommand()
		}
	} else {
		g.Message += "; network probe: " + res.Message
	}
	return g
}

// servedCRDs are the names of the CRDs with a served version.
func (r *Runner) servedCRDs(ctx context.Context) (map[string]bool, error) {
	if r.Ext == nil {
		return nil, fmt.Errorf("no apiextensions client")
	}
	crds, err := r.crds(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Served {
				out[c.Name] = true
			}
		}
	}
	return out, nil
}

// networkPolicyGate lists every NetworkPolicy, and the Cilium and Calico
// policy kinds where their CRDs are served, and finds the enforcing CNI's
// DaemonSet. Policies with no enforcing CNI found is WARN (they may be
// enforced by something this gate does not know, or not at all); a CNI
// DaemonSet with pods not ready on Ready, uncordoned nodes is FAIL; a
// kind not readable is UNKNOWN.
func (r *Runner) networkPolicyGate(ctx context.Context) (Gate, *NetworkPolicyEvidence) {
	ev := &NetworkPolicyEvidence{}
	cmd := "kubectl get networkpolicies -A"
	if r.Dynamic == nil {
		return Gate{Status: StatusUnknown, Message: "no dynamic client to list network policies", Command: cmd}, nil
	}
	served, crdErr := r.servedCRDs(ctx)
	var notes []string
	for _, k := range health.PolicyKinds {
		if k.CRD != "" {
			if crdErr != nil {
				ev.unread(k.Kind, fmt.Sprintf("cannot tell whether its CRD is served: %v", crdErr))
				continue
			}
			if !served[k.CRD] {
				continue
			}
		}
		l, err := r.Dynamic.Resource(k.GVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			ev.unread(k.Kind, unknown("list "+k.GVR.Resource+"."+k.GVR.Group, err).Message)
			continue
		}
		ev.Kinds = append(ev.Kinds, k.Kind)
		for _, it := range l.Items {
			ev.Policies = append(ev.Policies, health.PolicyFact{Kind: k.Kind, Namespace: it.GetNamespace(), Name: it.GetName(), Digest: health.SpecDigest(it.Object["spec"]),
				UID: string(it.GetUID()), Generation: it.GetGeneration()})
		}
		if k.CRD != "" {
			cmd += fmt.Sprintf("; kubectl get %s.%s -A", k.GVR.Resource, k.GVR.Group)
		}
	}
	sort.Slice(ev.Policies, func(i, j int) bool { return ev.Policies[i].ID() < ev.Policies[j].ID() })
	dss, err := r.daemonSets(ctx)
	if err != nil {
		ev.CNIUnread = unknown("list daemonsets", err).Message
	} else {
		ev.CNIs = health.FindEnforcingCNIs(dss)
		for i := range ev.CNIs {
			c := &ev.CNIs[i]
			if c.OK() {
				continue
			}
			// Not read (RBAC): every pod not ready counts, as before.
			if n, err := r.downNodePods(ctx, c.Namespace, c.Name); err == nil {
				c.Excused = n
			}
		}
	}
	var lines []string
	for _, c := range ev.CNIs {
		lines = append(lines, c.String())
	}
	counts := map[string]int{}
	for _, p := range ev.Policies {
		counts[p.Kind]++
	}
	for _, k := range ev.Kinds {
		lines = append(lines, fmt.Sprintf("%d %s", counts[k], k))
	}
	for k, why := range ev.Unread {
		notes = append(notes, fmt.Sprintf("%s not read: %s", k, why))
	}
	sort.Strings(notes)
	lines = append(lines, notes...)
	g := Gate{Evidence: capLines(lines), Command: cmd}
	var notReady []string
	for _, c := range ev.CNIs {
		if !c.OK() {
			notReady = append(notReady, c.String())
		}
	}
	switch {
	case len(notReady) > 0:
		g.Status, g.Message = StatusFail, "the CNI that enforces network policy is not ready: "+strings.Join(notReady, "; ")
		g.Command = fmt.Sprintf("kubectl -n %s get daemonset %s; kubectl -n %s get pods -o wide", ev.CNIs[0].Namespace, ev.CNIs[0].Name, ev.CNIs[0].Namespace)
	case len(ev.Unread) > 0 || ev.CNIUnread != "":
		why := notes
		if ev.CNIUnread != "" {
			why = append(why, "CNI DaemonSets not read: "+ev.CNIUnread)
		}
		g.Status, g.Message = StatusUnknown, fmt.Sprintf("%s recorded; %s", cli.PluralOf(len(ev.Policies), "network policy", "network policies"), strings.Join(why, "; "))
	case len(ev.Policies) > 0 && len(ev.CNIs) == 0:
		g.Status, g.Message = StatusWarn, fmt.Sprintf("%s recorded and no known enforcing CNI DaemonSet found (Cilium, Calico, Antrea, ...): nothing may enforce them", cli.PluralOf(len(ev.Policies), "network policy", "network policies"))
	default:
		cni := "no enforcing CNI found"
		if len(ev.CNIs) > 0 {
			cni = "enforced by " + ev.CNIs[0].CNI + ", all agent pods ready"
		}
		g.Status, g.Message = StatusPass, fmt.Sprintf("%s of %s recorded; %s", cli.PluralOf(len(ev.Policies), "network policy", "network policies"), strings.Join(ev.Kinds, ", "), cni)
	}
	return g, ev
}

func (e *NetworkPolicyEvidence) unread(kind, why string) {
	if e.Unread == nil {
		e.Unread = map[string]string{}
	}
	e.Unread[kind] = why
}

// verifyNetworkPolicy: the network probe failing now is a FAIL, unable
// to prove anything now an UNKNOWN (every run, also where it never could:
// it was asked for); a baseline policy gone or changed is a FAIL naming
// it; a policy new since the baseline is a WARN naming it; the baseline's enforcing CNI DaemonSet gone or no longer ready is a
// FAIL; a kind read at the baseline and not now is UNKNOWN.
func verifyNetworkPolicy(b, n *NetworkPolicyEvidence) []Regression {
	if n == nil || b == nil {
		return nil
	}
	skip := map[string]bool{}
	var out []Regression
	read := map[string]bool{}
	for _, k := range n.Kinds {
		read[k] = true
	}
	for _, k := range b.Kinds {
		if !read[k] {
			skip[k] = true
			why := n.Unread[k]
			if why == "" {
				why = "its CRD is no longer served"
			}
			out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusUnknown, Object: k, Message: fmt.Sprintf("%s was read at the baseline and not now: %s", k, why)})
		}
	}
	for _, c := range health.DiffPolicies(b.Policies, n.Policies, skip) {
		p := c.Policy
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusFail, Object: p.ID(), Message: c.String(), Command: policyGetCommand(p)})
	}
	// A new policy narrows what may talk to what: listed as WARN, since an
	// upgrade that adds one (a chart's new default deny) can cut traffic.
	for _, p := range health.NewPolicies(b.Policies, n.Policies, b.Kinds) {
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusWarn, Object: p.ID(), Message: p.ID() + " is new since the baseline", Command: policyGetCommand(p)})
	}
	out = append(out, verifyNetworkProbe(n)...)
	if n.CNIUnread == "" {
		for _, m := range health.CNIRegressions(b.CNIs, n.CNIs) {
			out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusFail, Object: "cni", Message: m, Command: "kubectl get daemonsets -A"})
		}
	} else if b.CNIUnread == "" && len(b.CNIs) > 0 {
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusUnknown, Object: "cni", Message: "the enforcing CNI's DaemonSets cannot be read now: " + n.CNIUnread})
	}
	return out
}

func policyGetCommand(p health.PolicyFact) string {
	if p.Namespace != "" {
		return fmt.Sprintf("kubectl -n %s get %s %s -o yaml", p.Namespace, policyResource(p.Kind), p.Name)
	}
	return fmt.Sprintf("kubectl get %s %s -o yaml", policyResource(p.Kind), p.Name)
}

func policyResource(kind string) string {
	for _, k := range health.PolicyKinds {
		if k.Kind == kind {
			return k.GVR.Resource + "." + k.GVR.Group
		}
	}
	return "networkpolicies.networking.k8s.io"
}

func verifyNetworkProbe(n *NetworkPolicyEvidence) []Regression {
	if n.Probe == nil {
		return nil
	}
	res := n.Probe
	obj := "network-probe"
	if res.Namespace != "" {
		obj = "namespace/" + res.Namespace
	}
	var out []Regression
	switch res.Verdict {
	case health.ProbeAppFail:
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusFail, Object: obj, Message: "network probe: " + res.Message, Command: "kubectl get networkpolicies -A; kubectl get daemonsets -A"})
	case health.ProbeAppUnknown:
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusUnknown, Object: obj, Message: "network probe: " + res.Message, Command: health.NetworkProbeCommand()})
	case health.ProbeAppDryRun:
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusWarn, Object: obj, Message: "network probe: " + res.Message})
	}
	for _, l := range res.LeftBehind {
		out = append(out, Regression{Kind: RegNetworkPolicy, Status: StatusWarn, Object: obj, Message: "network probe left behind: " + l, Command: health.NetworkProbeCleanupCommand()})
	}
	return out
}

// downNodePods counts DaemonSet ns/name's pods that are not ready on
// nodes NotReady or cordoned (health.DownNodePods); read only when the
// DaemonSet is short of ready pods.
func (r *Runner) downNodePods(ctx context.Context, ns, name string) (int32, error) {
	excused, _, err := r.daemonPodsNotReady(ctx, ns, name)
	return excused, err
}

// daemonPodsNotReady reads DaemonSet ns/name's pods and the nodes, and
// sorts its pods that are not ready by their nodes
// (health.DaemonPodsNotReady): the count on nodes NotReady or cordoned,
// and the Ready, schedulable nodes named.
func (r *Runner) daemonPodsNotReady(ctx context.Context, ns, name string) (int32, []string, error) {
	pods, err := listAll[*corev1.Pod](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return r.Kube.CoreV1().Pods(ns).List(ctx, o)
	})
	if err != nil {
		return 0, nil, err
	}
	nodes, err := listAll[*corev1.Node](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return r.Kube.CoreV1().Nodes().List(ctx, o)
	})
	if err != nil {
		return 0, nil, err
	}
	excused, up := health.DaemonPodsNotReady(ns, name, pods, nodes)
	return excused, up, nil
}
