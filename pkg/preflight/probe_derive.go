package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	psaapi "k8s.io/pod-security-admission/api"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// The probes are built from what the cluster declares: a namespace's Pod
// Security enforce level, a webhook's or a policy's rules and selectors.
// Facts they rest on (Kubernetes v1.37):
//   - server-side dry run runs admission, mutating then validating, and
//     stores nothing (https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run);
//   - a webhook whose sideEffects is not None or NoneOnDryRun makes a dry
//     run fail, so it is never probed
//     (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#side-effects);
//   - Pod Security enforces on pods only; on workloads it only warns and
//     audits (https://kubernetes.io/docs/concepts/security/pod-security-admission/#workload-resources-and-pod-templates);
//   - a ValidatingAdmissionPolicy denies only through a binding whose
//     validationActions hold Deny (k8s.io/api@v0.37.2
//     admissionregistration/v1/types.go, ValidatingAdmissionPolicyBindingSpec:
//     "Deny specifies that a validation failure results in a denied request");
//   - the validating plugins run PodSecurity, then ValidatingAdmissionPolicy,
//     then the validating webhooks, the first denial ending the request
//     (k8s.io/kubernetes@v1.37.2 pkg/kubeapiserver/options/plugins.go,
//     AllOrderedPlugins), so a probe meant for a webhook is sent where no
//     Pod Security level is enforced when it can be.

// probeSet collects derived probes and what could not be probed.
type probeSet struct {
	probes []Probe
	// spread are, per control (its probes' ID prefix), the namespace
	// selectors of a webhook or policy binding: what it denied in its
	// first namespace is sent in the others it selects too (spreadProbes).
	spread map[string][]*metav1.LabelSelector
	// notes are controls not probed, and why (one line each).
	notes []string
	// unread are reads that failed (one line each): the gate is UNKNOWN.
	unread []string
}

// deriveProbes builds the probes of every Pod Security namespace, webhook
// and ValidatingAdmissionPolicy binding in the cluster.
func (r *Runner) deriveProbes(ctx context.Context) probeSet {
	var ps probeSet
	nss, err := r.namespaces(ctx)
	if err != nil {
		ps.unread = append(ps.unread, unknown("list namespaces", err).Message)
		return ps
	}
	ps.podSecurityProbes(nss)
	ps.unlabelledProbe(nss)
	r.runtimeClassProbes(ctx, nss, &ps, nil)
	hooks, err := r.webhooks(ctx)
	if err != nil {
		ps.unread = append(ps.unread, unknown("list validatingwebhookconfigurations and mutatingwebhookconfigurations", err).Message)
	} else {
		for _, c := range hooks.Validating {
			for _, w := range c.Webhooks {
				ps.webhookProbes(nss, hookDecl{kind: "validating", config: c.Name, name: w.Name, rules: w.Rules, sideEffects: w.SideEffects,
					matchPolicy: w.MatchPolicy, nsSel: w.NamespaceSelector, objSel: w.ObjectSelector, conditions: len(w.MatchConditions)})
			}
		}
		for _, c := range hooks.Mutating {
			for _, w := range c.Webhooks {
				ps.webhookProbes(nss, hookDecl{kind: "mutating", config: c.Name, name: w.Name, rules: w.Rules, sideEffects: w.SideEffects,
					matchPolicy: w.MatchPolicy, nsSel: w.NamespaceSelector, objSel: w.ObjectSelector, conditions: len(w.MatchConditions)})
			}
		}
	}
	r.policyProbes(ctx, nss, &ps)
	return ps
}

// podSecurityProbes: every namespace that enforces baseline gets a
// privileged pod; one that enforces restricted also gets a pod with no
// security context, which baseline admits and restricted forbids.
func (ps *probeSet) podSecurityProbes(nss []corev1.Namespace) {
	for _, ns := range nss {
		level, ok := ns.Labels[psaapi.EnforceLevelLabel]
		if !ok || ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		lv, _ := psaapi.ParseLevel(level) // an invalid level is enforced as restricted
		if lv == psaapi.LevelPrivileged {
			continue
		}
		ver := ns.Labels[psaapi.EnforceVersionLabel]
		if ver == "" {
			ver = psaapi.VersionLatest
		}
		control := fmt.Sprintf("namespace %s (Pod Security enforce=%s, version %s)", ns.Name, level, ver)
		check := "kubectl get ns " + ns.Name + " -L " + psaapi.EnforceLevelLabel + "," + psaapi.EnforceVersionLabel
		variants := []string{VariantPrivileged}
		if lv == psaapi.LevelRestricted {
			variants = append(variants, VariantUnhardened)
		}
		for _, v := range variants {
			obj, err := podsKind.object(ns.Name, nil, v)
			if err != nil {
				ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: %v", control, err))
				continue
			}
			ps.probes = append(ps.probes, Probe{ID: fmt.Sprintf("psa/%s/%s", ns.Name, v), Control: control, Ref: "namespace/" + ns.Name, Check: check,
				Expect: DeniedByPodSecurity, Resource: podsKind.gvr.Resource, Namespace: ns.Name, Variant: v, Object: obj})
		}
	}
}

// Probe ID prefixes of the Pod Security probes that are not of a
// namespace's own level.
const (
	idRuntimeClass = "psa-runtimeclass/"
	idUnlabelled   = "psa-default/"
)

// unlabelledProbe sends a privileged pod to a namespace without a Pod
// Security enforce label (default when it has none): denied there, Pod
// Security enforces a cluster-wide default (the defaults of the
// apiserver's PodSecurity admission configuration,
// https://kubernetes.io/docs/tasks/configure-pod-container/enforce-standards-admission-controller/),
// which verify proves still holds. Admitted, there is no such default.
func (ps *probeSet) unlabelledProbe(nss []corev1.Namespace) {
	var pick string
	for _, ns := range nss {
		if _, ok := ns.Labels[psaapi.EnforceLevelLabel]; ok || ns.Status.Phase == corev1.NamespaceTerminating || strings.HasPrefix(ns.Name, "kube-") {
			continue
		}
		if pick == "" || ns.Name == metav1.NamespaceDefault {
			pick = ns.Name
		}
	}
	if pick == "" {
		return // no namespace without an enforce label: the default applies nowhere
	}
	obj, err := podsKind.object(pick, nil, VariantPrivileged)
	if err != nil {
		return
	}
	ps.probes = append(ps.probes, Probe{ID: idUnlabelled + pick, Control: fmt.Sprintf("Pod Security's cluster default (namespace %s has no enforce label)", pick),
		Ref: "podsecurity/defaults", Check: "kubectl get ns " + pick + " --show-labels; the apiserver's --admission-control-config-file (PodSecurity defaults.enforce)",
		Expect: DeniedByPodSecurity, Resource: podsKind.gvr.Resource, Namespace: pick, Variant: VariantPrivileged, Object: obj})
}

// runtimeClassProbes sends, for every RuntimeClass, a privileged pod of
// that class to a namespace that enforces Pod Security: Pod Security lets
// every pod of a RuntimeClass the apiserver's configuration exempts
// through (exemptions.runtimeClasses; k8s.io/pod-security-admission@v0.37.2
// admission/admission.go, EvaluatePod), so adding the GPU Operator's
// "nvidia" RuntimeClass to an exempt list exempts every GPU pod. skip
// names the RuntimeClasses probed already (verify probes the new ones).
func (r *Runner) runtimeClassProbes(ctx context.Context, nss []corev1.Namespace, ps *probeSet, skip map[string]bool) {
	var pick string
	for _, ns := range nss {
		level, ok := ns.Labels[psaapi.EnforceLevelLabel]
		if !ok || ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		if lv, _ := psaapi.ParseLevel(level); lv != psaapi.LevelPrivileged {
			pick = ns.Name
			break
		}
	}
	rcs, err := r.Kube.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		ps.unread = append(ps.unread, unknown("list runtimeclasses", err).Message)
		return
	}
	if pick == "" {
		if len(rcs.Items) > 0 {
			ps.notes = append(ps.notes, cli.PluralOf(len(rcs.Items), "RuntimeClass", "RuntimeClasses")+" not probed for Pod Security exemptions: no namespace enforces a level")
		}
		return
	}
	sort.Slice(rcs.Items, func(i, j int) bool { return rcs.Items[i].Name < rcs.Items[j].Name })
	for _, rc := range rcs.Items {
		if skip[idRuntimeClass+rc.Name] {
			continue
		}
		obj, err := podsKind.object(pick, nil, VariantPrivileged)
		if err != nil {
			continue
		}
		obj["spec"].(map[string]any)["runtimeClassName"] = rc.Name
		ps.probes = append(ps.probes, Probe{ID: idRuntimeClass + rc.Name, Control: fmt.Sprintf("Pod Security for pods of RuntimeClass %s (in namespace %s)", rc.Name, pick),
			Ref: "runtimeclass/" + rc.Name, Check: "kubectl get runtimeclass " + rc.Name + "; the apiserver's --admission-control-config-file (PodSecurity exemptions.runtimeClasses)",
			Expect: DeniedByPodSecurity, Resource: podsKind.gvr.Resource, Namespace: pick, Variant: VariantPrivileged, Object: obj})
	}
}

// maxSpread bounds the namespaces a control's denied probes are spread to.
const maxSpread = 20

// spreadProbes sends what each webhook and policy binding denied in the
// namespace it was probed in to every other namespace it selects (up to
// maxSpread; the admission configuration's selectors cover the rest), so
// that an exception for one namespace (a parameter, a matchCondition on
// the namespace) shows.
func (ps *probeSet) spreadProbes(nss []corev1.Namespace) []Probe {
	var out []Probe
	for _, p := range ps.probes {
		if p.Result != ProbeDenied || p.Namespace == "" || p.Object == nil {
			continue
		}
		prefix, sels, ok := ps.spreadOf(p.ID)
		if !ok {
			continue
		}
		n := 0
		skipped := 0
		for _, ns := range nss {
			if ns.Name == p.Namespace || ns.Status.Phase == corev1.NamespaceTerminating {
				continue
			}
			all := true
			for _, s := range sels {
				all = all && selects(s, ns.Labels)
			}
			if !all {
				continue
			}
			if n >= maxSpread {
				skipped++
				continue
			}
			n++
			q := p
			q.ID = fmt.Sprintf("%sns/%s/%s/%s", prefix, ns.Name, p.Resource, p.Variant)
			q.Namespace, q.Object = ns.Name, withNamespace(p.Object, ns.Name)
			q.Result, q.DeniedBy, q.Message = "", "", ""
			out = append(out, q)
		}
		if skipped > 0 {
			ps.notes = append(ps.notes, fmt.Sprintf("%s: its %s probe (%s) sent to %s more it selects, not to %s (its configuration is diffed for all)", p.Control, p.Resource, p.Variant, cli.Plural(n, "namespace"), cli.PluralOf(skipped, "other", "others")))
		}
	}
	return out
}

// spreadOf finds the control of a probe ID among those to spread.
func (ps *probeSet) spreadOf(id string) (string, []*metav1.LabelSelector, bool) {
	for prefix, sels := range ps.spread {
		if strings.HasPrefix(id, prefix) && !strings.HasPrefix(id, prefix+"ns/") {
			return prefix, sels, true
		}
	}
	return "", nil, false
}

// hookDecl is what the probes need of one admission webhook.
type hookDecl struct {
	kind, config, name string
	rules              []admissionv1.RuleWithOperations
	sideEffects        *admissionv1.SideEffectClass
	matchPolicy        *admissionv1.MatchPolicyType
	nsSel, objSel      *metav1.LabelSelector
	conditions         int
}

func (ps *probeSet) webhookProbes(nss []corev1.Namespace, h hookDecl) {
	control := fmt.Sprintf("%s webhook %s (%swebhookconfiguration %s)", h.kind, h.name, h.kind, h.config)
	if h.sideEffects == nil || (*h.sideEffects != admissionv1.SideEffectClassNone && *h.sideEffects != admissionv1.SideEffectClassNoneOnDryRun) {
		se := "unset"
		if h.sideEffects != nil {
			se = string(*h.sideEffects)
		}
		ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: sideEffects %s, so the apiserver refuses a dry run it matches", control, se))
		return
	}
	named := make([]admissionv1.NamedRuleWithOperations, len(h.rules))
	for i, rule := range h.rules {
		named[i] = admissionv1.NamedRuleWithOperations{RuleWithOperations: rule}
	}
	m := matchDecl{rules: named, equivalent: h.matchPolicy == nil || *h.matchPolicy == admissionv1.Equivalent,
		nsSels: []*metav1.LabelSelector{h.nsSel}, objSels: []*metav1.LabelSelector{h.objSel}}
	ps.build(nss, m, Probe{Control: control, Ref: h.kind + "webhookconfiguration/" + h.config,
		Check: fmt.Sprintf("kubectl get %swebhookconfiguration %s -o yaml", h.kind, h.config), Expect: WebhookDenier(h.name)},
		fmt.Sprintf("webhook/%s/%s/%s", h.kind, h.config, h.name), h.conditions)
}

// policyProbes builds the probes of every ValidatingAdmissionPolicy
// binding that denies.
func (r *Runner) policyProbes(ctx context.Context, nss []corev1.Namespace, ps *probeSet) {
	pols, bindings, served, err := r.vaps(ctx)
	if !served {
		return // not served: no policy to probe
	}
	if err != nil {
		ps.unread = append(ps.unread, unknown(r.vapWhat, err).Message)
		return
	}
	byName := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for i := range pols {
		byName[pols[i].Name] = &pols[i]
	}
	for _, b := range bindings {
		control := fmt.Sprintf("ValidatingAdmissionPolicy %s (binding %s)", b.Spec.PolicyName, b.Name)
		pol := byName[b.Spec.PolicyName]
		if pol == nil {
			ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: the policy does not exist", control))
			continue
		}
		deny := false
		for _, a := range b.Spec.ValidationActions {
			deny = deny || a == admissionv1.Deny
		}
		if !deny {
			ps.notes = append(ps.notes, fmt.Sprintf("%s does not deny: validationActions %v", control, b.Spec.ValidationActions))
			continue
		}
		m := matchDecl{equivalent: true}
		for _, mr := range []*admissionv1.MatchResources{pol.Spec.MatchConstraints, b.Spec.MatchResources} {
			if mr == nil {
				continue
			}
			if len(mr.ResourceRules) > 0 {
				if m.rules != nil {
					m.also = mr.ResourceRules
				} else {
					m.rules = mr.ResourceRules
				}
			}
			m.exclude = append(m.exclude, mr.ExcludeResourceRules...)
			m.nsSels = append(m.nsSels, mr.NamespaceSelector)
			m.objSels = append(m.objSels, mr.ObjectSelector)
			if mr.MatchPolicy != nil && *mr.MatchPolicy == admissionv1.Exact {
				m.equivalent = false
			}
		}
		ps.build(nss, m, Probe{Control: control, Ref: "validatingadmissionpolicy/" + pol.Name,
			Check:  fmt.Sprintf("kubectl get validatingadmissionpolicy %s -o yaml; kubectl get validatingadmissionpolicybinding %s -o yaml", pol.Name, b.Name),
			Expect: PolicyDenier(pol.Name)}, fmt.Sprintf("policy/%s/%s", pol.Name, b.Name), len(pol.Spec.MatchConditions))
	}
}

// matchDecl is what selects the requests a webhook or policy sees.
type matchDecl struct {
	rules []admissionv1.NamedRuleWithOperations
	// also must match too (a binding's rules within its policy's).
	also       []admissionv1.NamedRuleWithOperations
	exclude    []admissionv1.NamedRuleWithOperations
	equivalent bool
	// Every selector must select the namespace and the object (nil ones
	// select everything).
	nsSels, objSels []*metav1.LabelSelector
}

// build adds the probes of one control: the first probe kind its rules
// match, in a namespace its selectors select, with labels its object
// selectors select.
func (ps *probeSet) build(nss []corev1.Namespace, m matchDecl, base Probe, idPrefix string, conditions int) {
	var kind *probeKind
	var resourceName string
	for i := range probeKinds {
		k := &probeKinds[i]
		n, ok := ruleMatches(m.rules, *k, m.equivalent)
		if !ok {
			continue
		}
		if _, ok := ruleMatches(m.also, *k, m.equivalent); m.also != nil && !ok {
			continue
		}
		if _, excluded := ruleMatches(m.exclude, *k, m.equivalent); excluded {
			continue
		}
		kind, resourceName = k, n
		break
	}
	if kind == nil {
		ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: no built-in probe for %s; add a --probe-file it denies", base.Control, describeRules(m.rules)))
		return
	}
	objSels := m.objSels
	ns := ""
	if kind.namespaced {
		var ok bool
		if ns, ok = pickNamespace(nss, m.nsSels); !ok {
			ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: no namespace matches its namespace selector", base.Control))
			return
		}
	} else if kind.gvr.Resource == "namespaces" {
		// A namespace is matched by the namespace selector itself.
		objSels = append(append([]*metav1.LabelSelector(nil), objSels...), m.nsSels...)
	}
	lbl, ok := satisfy(objSels)
	if !ok {
		ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: its object selectors cannot be met by one set of labels", base.Control))
		return
	}
	if conditions > 0 {
		ps.notes = append(ps.notes, fmt.Sprintf("%s has %s, which the probes do not try to meet", base.Control, cli.Plural(conditions, "matchCondition")))
	}
	if kind.namespaced {
		if ps.spread == nil {
			ps.spread = map[string][]*metav1.LabelSelector{}
		}
		ps.spread[idPrefix+"/"] = m.nsSels
	}
	for _, v := range kind.variants() {
		obj, err := kind.object(ns, lbl, v)
		if err != nil {
			ps.notes = append(ps.notes, fmt.Sprintf("%s not probed: %v", base.Control, err))
			return
		}
		if resourceName != "" {
			obj["metadata"].(map[string]any)["name"] = resourceName
		}
		p := base
		p.ID = fmt.Sprintf("%s/%s/%s", idPrefix, kind.gvr.Resource, v)
		p.Resource, p.Namespace, p.Variant, p.Object = kind.gvr.Resource, ns, v, obj
		ps.probes = append(ps.probes, p)
	}
}

// ruleMatches reports whether a CREATE of kind k matches one of the rules,
// and the resource name it must carry when that rule names some.
func ruleMatches(rules []admissionv1.NamedRuleWithOperations, k probeKind, equivalent bool) (string, bool) {
	has := func(list []string, v string) bool {
		for _, x := range list {
			if x == "*" || x == v {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		ops := make([]string, len(r.Operations))
		for i, o := range r.Operations {
			ops[i] = string(o)
		}
		if !has(ops, string(admissionv1.Create)) || !has(r.APIGroups, k.gvr.Group) {
			continue
		}
		// Equivalent matching (the default) sends a request at any
		// version of a resource the rule names at one version.
		if !equivalent && !has(r.APIVersions, k.gvr.Version) {
			continue
		}
		if !has(r.Resources, k.gvr.Resource) && !has(r.Resources, "*/*") {
			continue
		}
		scope := admissionv1.AllScopes
		if r.Scope != nil {
			scope = *r.Scope
		}
		if (scope == admissionv1.NamespacedScope && !k.namespaced) || (scope == admissionv1.ClusterScope && k.namespaced) {
			continue
		}
		if len(r.ResourceNames) > 0 {
			return r.ResourceNames[0], true
		}
		return "", true
	}
	return "", false
}

func describeRules(rules []admissionv1.NamedRuleWithOperations) string {
	var out []string
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%v %s in groups %s", r.Operations, strings.Join(r.Resources, ","), strings.Join(quoteEmpty(r.APIGroups), ",")))
	}
	if len(out) == 0 {
		return "its rules (none)"
	}
	return strings.Join(out, "; ")
}

func quoteEmpty(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		if s == "" {
			s = `""`
		}
		out[i] = s
	}
	return out
}

// pickNamespace returns a namespace every selector selects: default when
// it does, else the first that enforces no Pod Security level (a probe
// for a webhook must reach it), else the first that is not kube-*.
func pickNamespace(nss []corev1.Namespace, sels []*metav1.LabelSelector) (string, bool) {
	var ok []corev1.Namespace
	for _, ns := range nss {
		if ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		all := true
		for _, s := range sels {
			all = all && selects(s, ns.Labels)
		}
		if all {
			ok = append(ok, ns)
		}
	}
	if len(ok) == 0 {
		return "", false
	}
	rank := func(ns corev1.Namespace) int {
		_, psa := ns.Labels[psaapi.EnforceLevelLabel]
		switch {
		case ns.Name == metav1.NamespaceDefault:
			return 0
		case !psa && !strings.HasPrefix(ns.Name, "kube-"):
			return 1
		case !strings.HasPrefix(ns.Name, "kube-"):
			return 2
		}
		return 3
	}
	sort.SliceStable(ok, func(i, j int) bool { return rank(ok[i]) < rank(ok[j]) })
	return ok[0].Name, true
}

// selects reports whether a label selector (nil: everything) selects a
// set of labels.
func selects(s *metav1.LabelSelector, lbl map[string]string) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(lbl))
}

// satisfy returns labels every selector selects, false when it finds none.
func satisfy(sels []*metav1.LabelSelector) (map[string]string, bool) {
	lbl := map[string]string{}
	for _, s := range sels {
		if s == nil {
			continue
		}
		for k, v := range s.MatchLabels {
			lbl[k] = v
		}
		for _, e := range s.MatchExpressions {
			switch e.Operator {
			case metav1.LabelSelectorOpIn:
				if _, set := lbl[e.Key]; !set && len(e.Values) > 0 {
					lbl[e.Key] = e.Values[0]
				}
			case metav1.LabelSelectorOpExists:
				if _, set := lbl[e.Key]; !set {
					lbl[e.Key] = "true"
				}
			}
		}
	}
	for _, s := range sels {
		if !selects(s, lbl) {
			return nil, false
		}
	}
	if len(lbl) == 0 {
		return nil, true
	}
	return lbl, true
}
