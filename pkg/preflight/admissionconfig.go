package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AdmissionConfig is what decides which requests the admission webhooks
// and ValidatingAdmissionPolicies see and what they do when they fail:
// preflight records it, verify diffs it. A probe proves a control denies
// one object in one namespace; the configuration shows every way it can
// be switched off elsewhere (failurePolicy Ignore, narrowed rules,
// selectors and matchConditions, a binding that no longer denies).
type AdmissionConfig struct {
	Webhooks []WebhookConfig       `json:"webhooks,omitempty"`
	Policies []PolicyConfig        `json:"policies,omitempty"`
	Bindings []PolicyBindingConfig `json:"bindings,omitempty"`
	// Namespaces are every namespace's labels: the namespace selectors
	// are judged on them.
	Namespaces []NamespaceLabels `json:"namespaces,omitempty"`
}

// NamespaceLabels is a namespace and its labels.
type NamespaceLabels struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// WebhookConfig is one admission webhook's matching and failure policy.
type WebhookConfig struct {
	// Kind is validating or mutating.
	Kind          string `json:"kind"`
	Configuration string `json:"configuration"`
	Name          string `json:"name"`
	// FailurePolicy as served (the v1 default is Fail).
	FailurePolicy     string                           `json:"failurePolicy"`
	MatchPolicy       string                           `json:"matchPolicy,omitempty"`
	Rules             []admissionv1.RuleWithOperations `json:"rules,omitempty"`
	NamespaceSelector *metav1.LabelSelector            `json:"namespaceSelector,omitempty"`
	ObjectSelector    *metav1.LabelSelector            `json:"objectSelector,omitempty"`
	MatchConditions   []admissionv1.MatchCondition     `json:"matchConditions,omitempty"`
}

// PolicyConfig is one ValidatingAdmissionPolicy.
type PolicyConfig struct {
	Name             string                       `json:"name"`
	FailurePolicy    string                       `json:"failurePolicy"`
	MatchConstraints *admissionv1.MatchResources  `json:"matchConstraints,omitempty"`
	MatchConditions  []admissionv1.MatchCondition `json:"matchConditions,omitempty"`
	Validations      []admissionv1.Validation     `json:"validations,omitempty"`
	ParamKind        *admissionv1.ParamKind       `json:"paramKind,omitempty"`
}

// PolicyBindingConfig is one ValidatingAdmissionPolicyBinding.
type PolicyBindingConfig struct {
	Name              string                      `json:"name"`
	PolicyName        string                      `json:"policyName"`
	ValidationActions []string                    `json:"validationActions,omitempty"`
	MatchResources    *admissionv1.MatchResources `json:"matchResources,omitempty"`
	ParamRef          *admissionv1.ParamRef       `json:"paramRef,omitempty"`
}

func (b PolicyBindingConfig) denies() bool {
	for _, a := range b.ValidationActions {
		if a == string(admissionv1.Deny) {
			return true
		}
	}
	return false
}

func (w WebhookConfig) key() string { return w.Kind + "/" + w.Configuration + "/" + w.Name }

func (w WebhookConfig) ref() string { return w.Kind + "webhookconfiguration/" + w.Configuration }

func (w WebhookConfig) control() string {
	return fmt.Sprintf("%s webhook %s (%swebhookconfiguration %s)", w.Kind, w.Name, w.Kind, w.Configuration)
}

func failurePolicy(p *admissionv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionv1.Fail) // admissionregistration.k8s.io/v1 defaults it to Fail
	}
	return string(*p)
}

func matchPolicy(p *admissionv1.MatchPolicyType) string {
	if p == nil {
		return string(admissionv1.Equivalent)
	}
	return string(*p)
}

// vaps lists the ValidatingAdmissionPolicies and their bindings once;
// served is false when the apiserver does not serve them.
func (r *Runner) vaps(ctx context.Context) (pols []admissionv1.ValidatingAdmissionPolicy, bindings []admissionv1.ValidatingAdmissionPolicyBinding, served bool, err error) {
	r.vapOnce.Do(func() {
		api := r.Kube.AdmissionregistrationV1()
		bl, err := api.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		r.vapServed = true
		if err != nil {
			r.vapWhat, r.vapErr = "list validatingadmissionpolicybindings", err
			return
		}
		pl, err := api.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		if err != nil {
			r.vapWhat, r.vapErr = "list validatingadmissionpolicies", err
			return
		}
		r.vapBindings, r.vapPolicies = bl.Items, pl.Items
		sort.Slice(r.vapBindings, func(i, j int) bool { return r.vapBindings[i].Name < r.vapBindings[j].Name })
		sort.Slice(r.vapPolicies, func(i, j int) bool { return r.vapPolicies[i].Name < r.vapPolicies[j].Name })
	})
	return r.vapPolicies, r.vapBindings, r.vapServed, r.vapErr
}

// admissionConfig reads the configuration verify diffs; the error names
// what could not be read.
func (r *Runner) admissionConfig(ctx context.Context) (*AdmissionConfig, error) {
	cfg := &AdmissionConfig{}
	nss, err := r.namespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss {
		cfg.Namespaces = append(cfg.Namespaces, NamespaceLabels{Name: ns.Name, Labels: ns.Labels})
	}
	hooks, err := r.webhooks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list validatingwebhookconfigurations and mutatingwebhookconfigurations: %w", err)
	}
	for _, c := range hooks.Validating {
		for _, w := range c.Webhooks {
			cfg.Webhooks = append(cfg.Webhooks, WebhookConfig{Kind: "validating", Configuration: c.Name, Name: w.Name, FailurePolicy: failurePolicy(w.FailurePolicy),
				MatchPolicy: matchPolicy(w.MatchPolicy), Rules: w.Rules, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector, MatchConditions: w.MatchConditions})
		}
	}
	for _, c := range hooks.Mutating {
		for _, w := range c.Webhooks {
			cfg.Webhooks = append(cfg.Webhooks, WebhookConfig{Kind: "mutating", Configuration: c.Name, Name: w.Name, FailurePolicy: failurePolicy(w.FailurePolicy),
				MatchPolicy: matchPolicy(w.MatchPolicy), Rules: w.Rules, NamespaceSelector: w.NamespaceSelector, ObjectSelector: w.ObjectSelector, MatchConditions: w.MatchConditions})
		}
	}
	sort.Slice(cfg.Webhooks, func(i, j int) bool { return cfg.Webhooks[i].key() < cfg.Webhooks[j].key() })
	pols, bindings, _, err := r.vaps(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.vapWhat, err)
	}
	for _, p := range pols {
		cfg.Policies = append(cfg.Policies, PolicyConfig{Name: p.Name, FailurePolicy: failurePolicy(p.Spec.FailurePolicy), MatchConstraints: p.Spec.MatchConstraints,
			MatchConditions: p.Spec.MatchConditions, Validations: p.Spec.Validations, ParamKind: p.Spec.ParamKind})
	}
	for _, b := range bindings {
		bc := PolicyBindingConfig{Name: b.Name, PolicyName: b.Spec.PolicyName, MatchResources: b.Spec.MatchResources, ParamRef: b.Spec.ParamRef}
		for _, a := range b.Spec.ValidationActions {
			bc.ValidationActions = append(bc.ValidationActions, string(a))
		}
		cfg.Bindings = append(cfg.Bindings, bc)
	}
	return cfg, nil
}

// configChange is one way a control is weaker than at the baseline.
type configChange struct {
	status Status
	what   string
}

// verifyAdmissionConfig diffs the admission configuration with the
// baseline's: every webhook, every policy that a denying binding used and
// every binding that denied. A control gone, failurePolicy Fail turned
// Ignore, an operation, resource or kind it no longer intercepts, a
// selector that no longer selects a namespace it selected (its own change
// or the namespace's labels), an object selector or matchCondition added
// or changed, a validation dropped or changed, a binding that no longer
// denies: FAIL, naming the control. It also returns the references
// (kind/name, as probes carry them) of the controls whose configuration
// is exactly as it was.
func verifyAdmissionConfig(base, now *AdmissionConfig) ([]Regression, map[string]bool) {
	unchanged := map[string]bool{}
	var out []Regression
	add := func(ref, control, check string, cs []configChange) {
		if len(cs) == 0 {
			return
		}
		st, what := StatusWarn, make([]string, 0, len(cs))
		for _, c := range cs {
			st = Worse(st, c.status)
			what = append(what, c.what)
		}
		out = append(out, Regression{Kind: RegAdmissionConfig, Status: st, Object: ref, Message: control + ": " + strings.Join(what, "; "), Command: check})
	}
	nsBase, nsNow := nsLabels(base.Namespaces), nsLabels(now.Namespaces)

	hooks := map[string]WebhookConfig{}
	for _, w := range now.Webhooks {
		hooks[w.key()] = w
	}
	changedRefs := map[string]bool{}
	for _, b := range base.Webhooks {
		check := fmt.Sprintf("kubectl get %swebhookconfiguration %s -o yaml", b.Kind, b.Configuration)
		n, ok := hooks[b.key()]
		if !ok {
			changedRefs[b.ref()] = true
			add(b.ref(), b.control(), check, []configChange{{StatusFail, "gone since the baseline"}})
			continue
		}
		var cs []configChange
		if b.FailurePolicy == string(admissionv1.Fail) && n.FailurePolicy != string(admissionv1.Fail) {
			cs = append(cs, configChange{StatusFail, fmt.Sprintf("failurePolicy %s, was Fail: requests go through when it cannot be reached", n.FailurePolicy)})
		}
		if b.MatchPolicy == string(admissionv1.Equivalent) && n.MatchPolicy != b.MatchPolicy {
			cs = append(cs, configChange{StatusFail, fmt.Sprintf("matchPolicy %s, was Equivalent: it no longer sees requests to other versions of its resources", n.MatchPolicy)})
		}
		cs = append(cs, rulesLost(named(b.Rules), named(n.Rules), "", n.MatchPolicy == string(admissionv1.Equivalent))...)
		cs = append(cs, selectorNarrowed("namespaceSelector", b.NamespaceSelector, n.NamespaceSelector, nsBase, nsNow)...)
		cs = append(cs, selectorNarrowed("objectSelector", b.ObjectSelector, n.ObjectSelector, nil, nil)...)
		cs = append(cs, conditionsAdded(b.MatchConditions, n.MatchConditions)...)
		if len(cs) > 0 {
			changedRefs[b.ref()] = true
		}
		add(b.ref(), b.control(), check, cs)
	}
	for _, b := range base.Webhooks {
		if !changedRefs[b.ref()] {
			unchanged[b.ref()] = true
		}
	}

	pols := map[string]PolicyConfig{}
	for _, p := range now.Policies {
		pols[p.Name] = p
	}
	bindings := map[string]PolicyBindingConfig{}
	for _, b := range now.Bindings {
		bindings[b.Name] = b
	}
	denied := map[string]bool{} // policies a binding denied with at the baseline
	for _, b := range base.Bindings {
		if !b.denies() {
			continue
		}
		denied[b.PolicyName] = true
		ref := "validatingadmissionpolicy/" + b.PolicyName
		control := fmt.Sprintf("ValidatingAdmissionPolicy %s (binding %s)", b.PolicyName, b.Name)
		check := fmt.Sprintf("kubectl get validatingadmissionpolicybinding %s -o yaml", b.Name)
		n, ok := bindings[b.Name]
		var cs []configChange
		switch {
		case !ok:
			cs = append(cs, configChange{StatusFail, "the binding is gone since the baseline"})
		case n.PolicyName != b.PolicyName:
			cs = append(cs, configChange{StatusFail, fmt.Sprintf("the binding now binds policy %s", n.PolicyName)})
		case !n.denies():
			cs = append(cs, configChange{StatusFail, fmt.Sprintf("validationActions %v, was %v: it no longer denies", n.ValidationActions, b.ValidationActions)})
		default:
			// A binding without matchResources matched every request its
			// policy matches (the apiserver does not default it,
			// k8s.io/kubernetes@v1.37.2 pkg/apis/admissionregistration/v1/defaults.go):
			// one added since narrows from there.
			was := b.MatchResources
			if was == nil {
				was = &admissionv1.MatchResources{}
			}
			if len(was.ResourceRules) == 0 {
				for _, p := range base.Policies {
					if p.Name == b.PolicyName && p.MatchConstraints != nil {
						was = was.DeepCopy()
						was.ResourceRules = p.MatchConstraints.ResourceRules
					}
				}
			}
			cs = append(cs, matchResourcesNarrowed(was, n.MatchResources, nsBase, nsNow, "the binding's matchResources")...)
			if !equalJSON(b.ParamRef, n.ParamRef) {
				cs = append(cs, configChange{StatusWarn, "its paramRef changed: the parameters the policy judges with may differ"})
			}
		}
		if len(cs) > 0 {
			changedRefs[ref] = true
		}
		add(ref, control, check, cs)
	}
	for _, b := range base.Policies {
		if !denied[b.Name] {
			continue
		}
		ref := "validatingadmissionpolicy/" + b.Name
		control := "ValidatingAdmissionPolicy " + b.Name
		check := fmt.Sprintf("kubectl get validatingadmissionpolicy %s -o yaml", b.Name)
		n, ok := pols[b.Name]
		var cs []configChange
		if !ok {
			cs = append(cs, configChange{StatusFail, "the policy is gone since the baseline"})
		} else {
			if b.FailurePolicy == string(admissionv1.Fail) && n.FailurePolicy != string(admissionv1.Fail) {
				cs = append(cs, configChange{StatusFail, fmt.Sprintf("failurePolicy %s, was Fail: requests go through when it cannot be evaluated", n.FailurePolicy)})
			}
			cs = append(cs, matchResourcesNarrowed(b.MatchConstraints, n.MatchConstraints, nsBase, nsNow, "matchConstraints")...)
			cs = append(cs, conditionsAdded(b.MatchConditions, n.MatchConditions)...)
			cs = append(cs, validationsLost(b.Validations, n.Validations)...)
			if !equalJSON(b.ParamKind, n.ParamKind) {
				cs = append(cs, configChange{StatusWarn, "its paramKind changed"})
			}
		}
		if len(cs) > 0 {
			changedRefs[ref] = true
		}
		add(ref, control, check, cs)
	}
	for p := range denied {
		if ref := "validatingadmissionpolicy/" + p; !changedRefs[ref] {
			unchanged[ref] = true
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Object < out[j].Object })
	return out, unchanged
}

// equalJSON compares two values by their JSON (nil and empty alike).
func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	norm := func(j []byte) string {
		if s := string(j); s != "null" && s != "{}" {
			return s
		}
		return ""
	}
	return norm(ja) == norm(jb)
}

func nsLabels(nss []NamespaceLabels) map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, n := range nss {
		m[n.Name] = n.Labels
	}
	return m
}

func named(rules []admissionv1.RuleWithOperations) []admissionv1.NamedRuleWithOperations {
	out := make([]admissionv1.NamedRuleWithOperations, len(rules))
	for i, r := range rules {
		out[i] = admissionv1.NamedRuleWithOperations{RuleWithOperations: r}
	}
	return out
}

// ruleAtom is one operation on one resource of one group and version.
type ruleAtom struct {
	op, group, version, resource, scope string
	names                               string
}

func (a ruleAtom) String() string {
	res := a.resource
	if a.group != "" {
		res += "." + a.group
	}
	s := fmt.Sprintf("%s %s/%s", a.op, res, a.version)
	if a.scope != "" && a.scope != string(admissionv1.AllScopes) {
		s += " (" + a.scope + " scope)"
	}
	if a.names != "" {
		s += " named " + a.names
	}
	return s
}

func atoms(rules []admissionv1.NamedRuleWithOperations) []ruleAtom {
	var out []ruleAtom
	for _, r := range rules {
		scope := string(admissionv1.AllScopes)
		if r.Scope != nil {
			scope = string(*r.Scope)
		}
		names := strings.Join(r.ResourceNames, ",")
		for _, op := range r.Operations {
			for _, g := range r.APIGroups {
				for _, v := range r.APIVersions {
					for _, res := range r.Resources {
						out = append(out, ruleAtom{op: string(op), group: g, version: v, resource: res, scope: scope, names: names})
					}
				}
			}
		}
	}
	return out
}

// covers reports whether a rule matches every request an atom stands for.
func covers(r admissionv1.NamedRuleWithOperations, a ruleAtom) bool {
	in := func(list []string, v string) bool {
		for _, x := range list {
			if x == "*" || x == v {
				return true
			}
		}
		return false
	}
	ops := make([]string, len(r.Operations))
	for i, o := range r.Operations {
		ops[i] = string(o)
	}
	resOK := false
	for _, x := range r.Resources {
		resOK = resOK || resourceCovers(x, a.resource)
	}
	scope := string(admissionv1.AllScopes)
	if r.Scope != nil {
		scope = string(*r.Scope)
	}
	namesOK := len(r.ResourceNames) == 0 || (a.names != "" && strings.Join(r.ResourceNames, ",") == a.names)
	return (in(ops, a.op) || in(ops, string(admissionv1.OperationAll))) && in(r.APIGroups, a.group) && in(r.APIVersions, a.version) && resOK &&
		(scope == string(admissionv1.AllScopes) || scope == a.scope) && namesOK
}

// resourceCovers reports whether a rule's resource x matches every
// request resource a stands for: "*" is every resource but no
// subresource, "*/*" everything, "pods/*" every subresource of pods,
// "*/scale" the scale subresource of every resource
// (k8s.io/api@v0.37.2 admissionregistration/v1 Rule.Resources).
func resourceCovers(x, a string) bool {
	if x == a || x == "*/*" {
		return true
	}
	am, as, aSub := strings.Cut(a, "/")
	xm, xs, xSub := strings.Cut(x, "/")
	switch {
	case !xSub:
		return x == "*" && !aSub
	case !aSub:
		return false
	}
	return (xm == "*" || xm == am) && (xs == "*" || xs == as)
}

// rulesLost names what the baseline's rules matched and the current ones
// do not, or what current exclusions newly leave out.
//
// Under matchPolicy Equivalent the apiserver sends a control the requests
// that modify a resource its rules list "via another API group or
// version" (k8s.io/api@v0.37.2 admissionregistration/v1 types.go,
// MatchPolicyType): rules that moved to another version of the same
// group's resource (an addon release that serves a new version of its
// CRD) still see the requests to the old one, and lose nothing.
func rulesLost(base, now []admissionv1.NamedRuleWithOperations, what string, equivalent bool) []configChange {
	if equivalent {
		anyVersion := make([]admissionv1.NamedRuleWithOperations, len(now))
		for i, r := range now {
			r.APIVersions = []string{"*"}
			anyVersion[i] = r
		}
		now = anyVersion
	}
	var lost []string
	for _, a := range atoms(base) {
		ok := false
		for _, r := range now {
			if covers(r, a) {
				ok = true
				break
			}
		}
		if !ok {
			lost = append(lost, a.String())
		}
	}
	if len(lost) == 0 {
		return nil
	}
	lost = dedupe(lost)
	if len(lost) > 5 {
		lost = append(lost[:5], fmt.Sprintf("and %d more", len(lost)-5))
	}
	if what == "" {
		what = "its rules"
	}
	return []configChange{{StatusFail, fmt.Sprintf("%s no longer match %s", what, strings.Join(lost, ", "))}}
}

// requirements returns a selector's requirements as strings (nil: none).
func requirements(s *metav1.LabelSelector) ([]string, bool) {
	if s == nil {
		return nil, true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, false
	}
	rs, _ := sel.Requirements()
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out, true
}

func selectorString(s *metav1.LabelSelector) string {
	if s == nil {
		return "(none)"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return "(invalid)"
	}
	if sel.Empty() {
		return "(everything)"
	}
	return sel.String()
}

// selectorNarrowed judges a namespace or object selector against the
// baseline's: every requirement of the new one already in the old one is
// no narrowing; otherwise, for a namespace selector, the namespaces (that
// still exist) the old selector selected on their baseline labels and the
// new one does not on their current labels are named (FAIL), and a
// changed selector that loses none is a WARN; a changed object selector is
// a FAIL (the objects it leaves out cannot be listed).
func selectorNarrowed(field string, base, now *metav1.LabelSelector, nsBase, nsNow map[string]map[string]string) []configChange {
	br, okB := requirements(base)
	nr, okN := requirements(now)
	wider := okB && okN
	if wider {
		have := map[string]bool{}
		for _, r := range br {
			have[r] = true
		}
		for _, r := range nr {
			wider = wider && have[r]
		}
	}
	if nsBase == nil {
		if wider {
			return nil
		}
		return []configChange{{StatusFail, fmt.Sprintf("%s %s, was %s: it may leave objects out it judged", field, selectorString(now), selectorString(base))}}
	}
	var lost []string
	for name, labelsNow := range nsNow {
		was, ok := nsBase[name]
		if !ok {
			continue
		}
		if selects(base, was) && !selects(now, labelsNow) {
			lost = append(lost, name)
		}
	}
	sort.Strings(lost)
	switch {
	case len(lost) > 0:
		shown := lost
		if len(shown) > 5 {
			shown = append(append([]string(nil), shown[:5]...), fmt.Sprintf("and %d more", len(lost)-5))
		}
		why := fmt.Sprintf("%s %s, was %s", field, selectorString(now), selectorString(base))
		if equalJSON(base, now) {
			why = fmt.Sprintf("%s %s unchanged, the namespaces' labels changed", field, selectorString(now))
		}
		return []configChange{{StatusFail, fmt.Sprintf("no longer selects namespace %s (%s)", strings.Join(shown, ", "), why)}}
	case !wider:
		return []configChange{{StatusWarn, fmt.Sprintf("%s %s, was %s: it selects every namespace it did, but may leave out new ones", field, selectorString(now), selectorString(base))}}
	}
	return nil
}

// matchResourcesNarrowed judges a policy's matchConstraints or a binding's
// matchResources against the baseline's.
func matchResourcesNarrowed(base, now *admissionv1.MatchResources, nsBase, nsNow map[string]map[string]string, what string) []configChange {
	if base == nil {
		return nil
	}
	n := now
	if n == nil {
		n = &admissionv1.MatchResources{}
	}
	var cs []configChange
	// A binding without resourceRules matches everything its policy does.
	if len(base.ResourceRules) > 0 && !(len(n.ResourceRules) == 0 && what != "matchConstraints") {
		cs = append(cs, rulesLost(base.ResourceRules, n.ResourceRules, what+" resourceRules", matchPolicy(n.MatchPolicy) == string(admissionv1.Equivalent))...)
	}
	// An exclusion that did not exclude a request at the baseline and does now.
	var newly []admissionv1.NamedRuleWithOperations
	for _, r := range n.ExcludeResourceRules {
		covered := false
		for _, a := range atoms([]admissionv1.NamedRuleWithOperations{r}) {
			for _, b := range base.ExcludeResourceRules {
				covered = covered || covers(b, a)
			}
			if !covered {
				break
			}
		}
		if !covered {
			newly = append(newly, r)
		}
	}
	if len(newly) > 0 {
		var names []string
		for _, a := range atoms(newly) {
			names = append(names, a.String())
		}
		cs = append(cs, configChange{StatusFail, fmt.Sprintf("%s newly exclude %s", what, strings.Join(dedupe(names), ", "))})
	}
	cs = append(cs, selectorNarrowed(what+" namespaceSelector", base.NamespaceSelector, n.NamespaceSelector, nsBase, nsNow)...)
	cs = append(cs, selectorNarrowed(what+" objectSelector", base.ObjectSelector, n.ObjectSelector, nil, nil)...)
	if matchPolicy(base.MatchPolicy) == string(admissionv1.Equivalent) && matchPolicy(n.MatchPolicy) != string(admissionv1.Equivalent) {
		cs = append(cs, configChange{StatusFail, fmt.Sprintf("%s matchPolicy %s, was Equivalent", what, matchPolicy(n.MatchPolicy))})
	}
	return cs
}

// conditionsAdded names matchConditions that are new or changed: each
// one narrows what the control sees.
func conditionsAdded(base, now []admissionv1.MatchCondition) []configChange {
	had := map[string]string{}
	for _, c := range base {
		had[c.Name] = c.Expression
	}
	var added []string
	for _, c := range now {
		if e, ok := had[c.Name]; !ok || e != c.Expression {
			added = append(added, fmt.Sprintf("%s (%s)", c.Name, oneLine(c.Expression)))
		}
	}
	if len(added) == 0 {
		return nil
	}
	return []configChange{{StatusFail, "matchConditions added or changed, which narrow what it sees: " + strings.Join(added, ", ")}}
}

// validationsLost names the baseline's validations (by expression) that
// the policy no longer has.
func validationsLost(base, now []admissionv1.Validation) []configChange {
	has := map[string]bool{}
	for _, v := range now {
		has[v.Expression] = true
	}
	var lost []string
	for _, v := range base {
		if !has[v.Expression] {
			lost = append(lost, oneLine(v.Expression))
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return []configChange{{StatusFail, "validations removed or changed: " + strings.Join(lost, "; ")}}
}
