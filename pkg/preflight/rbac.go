package preflight

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// RBACEvidence is every role and binding of the cluster.
type RBACEvidence struct {
	Roles    []RoleFact    `json:"roles"`
	Bindings []BindingFact `json:"bindings"`
}

// RoleFact is a ClusterRole or Role.
type RoleFact struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Default marks the release's own roles (kubernetes.io/bootstrapping:
	// rbac-defaults, https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings).
	Default bool `json:"default,omitempty"`
	// Labels of a ClusterRole (an aggregated one picks roles by them).
	Labels map[string]string `json:"labels,omitempty"`
	// Aggregation is an aggregated ClusterRole's selectors; its rules
	// are filled in by the controller
	// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#aggregated-clusterroles).
	Aggregation []metav1.LabelSelector `json:"aggregation,omitempty"`
	Rules       []rbacv1.PolicyRule    `json:"rules,omitempty"`
}

// BindingFact is a ClusterRoleBinding or RoleBinding.
type BindingFact struct {
	Kind      string           `json:"kind"`
	Namespace string           `json:"namespace,omitempty"`
	Name      string           `json:"name"`
	RoleKind  string           `json:"roleKind"`
	RoleName  string           `json:"roleName"`
	Subjects  []rbacv1.Subject `json:"subjects,omitempty"`
	// Default marks the release's own bindings (as RoleFact.Default).
	Default bool `json:"default,omitempty"`
}

const bootstrapLabel, bootstrapDefaults = "kubernetes.io/bootstrapping", "rbac-defaults"

// readRBAC lists every ClusterRole, Role and binding.
func (r *Runner) readRBAC(ctx context.Context) (*RBACEvidence, Gate, bool) {
	api := r.Kube.RbacV1()
	ev := &RBACEvidence{}
	crs, err := listAll[*rbacv1.ClusterRole](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return api.ClusterRoles().List(ctx, o)
	})
	if err != nil {
		return nil, unknown("list clusterroles", err), false
	}
	for _, c := range crs {
		f := RoleFact{Kind: "ClusterRole", Name: c.Name, Default: c.Labels[bootstrapLabel] == bootstrapDefaults, Labels: c.Labels, Rules: c.Rules}
		if c.AggregationRule != nil {
			f.Aggregation = c.AggregationRule.ClusterRoleSelectors
		}
		ev.Roles = append(ev.Roles, f)
	}
	rs, err := listAll[*rbacv1.Role](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return api.Roles("").List(ctx, o)
	})
	if err != nil {
		return nil, unknown("list roles", err), false
	}
	for _, x := range rs {
		ev.Roles = append(ev.Roles, RoleFact{Kind: "Role", Namespace: x.Namespace, Name: x.Name, Default: x.Labels[bootstrapLabel] == bootstrapDefaults, Rules: x.Rules})
	}
	crbs, err := listAll[*rbacv1.ClusterRoleBinding](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return api.ClusterRoleBindings().List(ctx, o)
	})
	if err != nil {
		return nil, unknown("list clusterrolebindings", err), false
	}
	for _, b := range crbs {
		ev.Bindings = append(ev.Bindings, BindingFact{Kind: "ClusterRoleBinding", Name: b.Name, RoleKind: b.RoleRef.Kind, RoleName: b.RoleRef.Name, Subjects: b.Subjects,
			Default: b.Labels[bootstrapLabel] == bootstrapDefaults})
	}
	rbs, err := listAll[*rbacv1.RoleBinding](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return api.RoleBindings("").List(ctx, o)
	})
	if err != nil {
		return nil, unknown("list rolebindings", err), false
	}
	for _, b := range rbs {
		ev.Bindings = append(ev.Bindings, BindingFact{Kind: "RoleBinding", Namespace: b.Namespace, Name: b.Name, RoleKind: b.RoleRef.Kind, RoleName: b.RoleRef.Name, Subjects: b.Subjects,
			Default: b.Labels[bootstrapLabel] == bootstrapDefaults})
	}
	return ev, Gate{}, true
}

// rbacGate records every role and binding for verify, and lists the
// subjects outside system: that hold a privilege escalation path
// (sensitive) through bindings other than the release's own (its
// controllers' service accounts hold them by design); it warns when a
// group every user or service account belongs to, or the anonymous user,
// holds one.
func (r *Runner) rbacGate(ctx context.Context) (Gate, *RBACEvidence) {
	ev, g, ok := r.readRBAC(ctx)
	if !ok {
		return g, nil
	}
	var lines, broad []string
	for _, gr := range ev.grants() {
		if gr.role == nil || systemSubject(gr.subject) || releaseGrant(gr) {
			continue
		}
		var risky []rbacv1.PolicyRule
		for _, rule := range gr.role.Rules {
			for _, a := range validation.BreakdownRule(rule) {
				if len(sensitive(a)) > 0 {
					risky = append(risky, a)
				}
			}
		}
		if len(risky) == 0 {
			continue
		}
		line := fmt.Sprintf("%s holds %s %s via %s", subjectString(gr.subject), describeAtoms(risky), gr.scopeString(), gr.via())
		if untrusted(gr.subject) {
			broad = append(broad, line)
		} else {
			lines = append(lines, line)
		}
	}
	sort.Strings(broad)
	sort.Strings(lines)
	roles, bindings := len(ev.Roles), len(ev.Bindings)
	if len(broad) > 0 {
		return Gate{Status: StatusWarn, Message: fmt.Sprintf("%s of a privilege escalation path to every user, anonymous requests or every service account (recorded %s, %s for verify)", cli.Plural(len(broad), "grant"), cli.Plural(roles, "role"), cli.Plural(bindings, "binding")),
			Evidence: capLines(append(broad, lines...)), Command: "kubectl get clusterrolebindings,rolebindings -A -o wide | grep -E 'system:(authenticated|unauthenticated|serviceaccounts|anonymous)'"}, ev
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("recorded %s and %s for verify; %s of a privilege escalation path to subjects outside system:", cli.Plural(roles, "role"), cli.Plural(bindings, "binding"), cli.Plural(len(lines), "grant")),
		Evidence: capLines(lines), Command: "kubectl get clusterrolebindings,rolebindings -A -o wide"}, ev
}

// grant is one subject of one binding with the role it binds.
type grant struct {
	binding *BindingFact
	subject rbacv1.Subject
	role    *RoleFact
}

func (g grant) scope() string {
	if g.binding.Kind == "RoleBinding" {
		return g.binding.Namespace
	}
	return ""
}

func (g grant) scopeString() string {
	if s := g.scope(); s != "" {
		return "in namespace " + s
	}
	return "cluster-wide"
}

func (g grant) via() string {
	role := g.binding.RoleKind + " " + g.binding.RoleName
	if g.role != nil && g.role.Default {
		role += " (a default role of the release)"
	}
	return fmt.Sprintf("%s %s (%s)", g.binding.Kind, bindingName(*g.binding), role)
}

func bindingName(b BindingFact) string {
	if b.Namespace != "" {
		return b.Namespace + "/" + b.Name
	}
	return b.Name
}

func bindingRef(b BindingFact) string {
	return strings.ToLower(b.Kind) + "/" + bindingName(b)
}

func roleKey(kind, ns, name string) string {
	if kind == "ClusterRole" {
		return "ClusterRole/" + name
	}
	return "Role/" + ns + "/" + name
}

// grants pairs every binding's subjects with the role it binds (nil
// when the role does not exist: it grants nothing).
func (ev *RBACEvidence) grants() []grant {
	roles := map[string]*RoleFact{}
	for i := range ev.Roles {
		f := &ev.Roles[i]
		roles[roleKey(f.Kind, f.Namespace, f.Name)] = f
	}
	var out []grant
	for i := range ev.Bindings {
		b := &ev.Bindings[i]
		role := roles[roleKey(b.RoleKind, b.Namespace, b.RoleName)]
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == "" {
				s.Namespace = b.Namespace
			}
			out = append(out, grant{binding: b, subject: s, role: role})
		}
	}
	return out
}

func subjectKey(s rbacv1.Subject) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		return s.Kind + ":" + s.Namespace + "/" + s.Name
	}
	return s.Kind + ":" + s.Name
}

func subjectString(s rbacv1.Subject) string {
	if s.Kind == rbacv1.ServiceAccountKind {
		return "ServiceAccount " + s.Namespace + "/" + s.Name
	}
	return s.Kind + " " + s.Name
}

// systemSubject: a user or group of the control plane (system:...). The
// groups every user or service account belongs to are not, nor is the
// anonymous user, nor are service accounts, which run workloads.
func systemSubject(s rbacv1.Subject) bool {
	return s.Kind != rbacv1.ServiceAccountKind && strings.HasPrefix(s.Name, "system:") && !untrusted(s)
}

// broadGroup: a group every user, every anonymous request or every
// service account (of a namespace) belongs to
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects).
func broadGroup(s rbacv1.Subject) bool {
	return s.Kind == rbacv1.GroupKind && (s.Name == "system:authenticated" || s.Name == "system:unauthenticated" ||
		s.Name == "system:serviceaccounts" || strings.HasPrefix(s.Name, "system:serviceaccounts:"))
}

// anyone: the subjects of a request nobody authenticated, which anyone
// who can reach the apiserver makes (User system:anonymous, Group
// system:unauthenticated;
// https://kubernetes.io/docs/reference/access-authn-authz/authentication/#anonymous-requests).
func anyone(s rbacv1.Subject) bool {
	return (s.Kind == rbacv1.UserKind && s.Name == "system:anonymous") || (s.Kind == rbacv1.GroupKind && s.Name == "system:unauthenticated")
}

// untrusted: a subject no grant to is the release's or the control
// plane's own business: a broad group or the anonymous user.
func untrusted(s rbacv1.Subject) bool { return broadGroup(s) || anyone(s) }

// The privilege escalation paths of
// https://kubernetes.io/docs/concepts/security/rbac-good-practices/#privilege-escalation-risks
// (kubernetes/website content/en/docs/concepts/security/rbac-good-practices.md,
// read 2026-12-06): listing secrets, workload creation, persistent volume
// creation, the proxy subresource of nodes, the escalate, bind and
// impersonate verbs, CSRs and certificate issuing, token request, control
// of admission webhooks (and, as the same control, admission policies and
// their bindings) and namespace modification (a namespace's Pod Security
// labels).
const (
	pathSecrets     = "secrets"
	pathEscalate    = "escalate"
	pathBind        = "bind"
	pathImpersonate = "impersonate"
	pathWorkloads   = "workload creation"
	pathPV          = "persistent volume creation"
	pathNodeProxy   = "nodes/proxy"
	pathToken       = "token request"
	pathCSR         = "certificate signing"
	pathAdmission   = "admission control"
	pathNamespace   = "namespace modification"
)

// sensitive names the escalation paths an atomic rule (one verb, group
// and resource) opens. In RBAC "*" matches every group, resource
// (subresources included) and verb.
func sensitive(a rbacv1.PolicyRule) []string {
	if len(a.Verbs) != 1 || len(a.APIGroups) != 1 || len(a.Resources) != 1 {
		return nil
	}
	verb, group, resource := a.Verbs[0], a.APIGroups[0], a.Resources[0]
	res, sub, _ := strings.Cut(resource, "/")
	in := func(v string, set ...string) bool {
		for _, s := range set {
			if v == s || v == "*" {
				return true
			}
		}
		return false
	}
	// is: the rule covers resource r (with subresource sb, "" for none)
	// of group g.
	is := func(g, r, sb string) bool {
		if !in(group, g) {
			return false
		}
		if resource == "*" {
			return true
		}
		return res == r && (sub == sb || sb != "" && sub == "*")
	}
	write := []string{"create", "update", "patch", "delete", "deletecollection"}
	var out []string
	add := func(ok bool, path string) {
		if ok {
			out = append(out, path)
		}
	}
	add(is("rbac.authorization.k8s.io", "roles", "") && in(verb, "escalate") || is("rbac.authorization.k8s.io", "clusterroles", "") && in(verb, "escalate"), pathEscalate)
	add((is("rbac.authorization.k8s.io", "roles", "") || is("rbac.authorization.k8s.io", "clusterroles", "")) && in(verb, "bind"), pathBind)
	add(in(verb, "impersonate") && (is("", "users", "") || is("", "groups", "") || is("", "serviceaccounts", "") ||
		in(group, "authentication.k8s.io") && (resource == "*" || res == "uids" || res == "userextras")), pathImpersonate)
	add(is("", "secrets", ""), pathSecrets)
	workload := is("", "pods", "") || is("", "replicationcontrollers", "") || is("", "podtemplates", "") ||
		is("apps", "deployments", "") || is("apps", "daemonsets", "") || is("apps", "statefulsets", "") || is("apps", "replicasets", "") ||
		is("batch", "jobs", "") || is("batch", "cronjobs", "")
	// Running a command in a pod (exec, attach, an ephemeral container)
	// is that pod's access too.
	add(workload && in(verb, "create") || (is("", "pods", "exec") || is("", "pods", "attach")) && in(verb, "create", "get") ||
		is("", "pods", "ephemeralcontainers") && in(verb, "update", "patch"), pathWorkloads)
	add(is("", "persistentvolumes", "") && in(verb, "create"), pathPV)
	add(is("", "nodes", "proxy"), pathNodeProxy)
	add(is("", "serviceaccounts", "token") && in(verb, "create"), pathToken)
	add(is("certificates.k8s.io", "certificatesigningrequests", "approval") && in(verb, "update", "patch") ||
		is("certificates.k8s.io", "signers", "") && in(verb, "approve", "sign"), pathCSR)
	admission := false
	for _, r := range []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations", "validatingadmissionpolicies",
		"validatingadmissionpolicybindings", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"} {
		admission = admission || is("admissionregistration.k8s.io", r, "")
	}
	add(admission && in(verb, write...), pathAdmission)
	add(is("", "namespaces", "") && in(verb, "patch", "update"), pathNamespace)
	return out
}

// describeAtoms says what atomic rules grant, grouped by resource:
// "secrets: get, list; clusterroles.rbac.authorization.k8s.io: escalate".
func describeAtoms(atoms []rbacv1.PolicyRule) string {
	verbs := map[string][]string{}
	var keys []string
	for _, a := range atoms {
		var key string
		switch {
		case len(a.NonResourceURLs) > 0:
			key = strings.Join(a.NonResourceURLs, ",")
		case len(a.Resources) > 0 && len(a.APIGroups) > 0:
			key = a.Resources[0]
			if g := a.APIGroups[0]; g != "" {
				key += "." + g
			}
			if len(a.ResourceNames) > 0 {
				key += "/" + a.ResourceNames[0]
			}
		default:
			continue
		}
		if _, ok := verbs[key]; !ok {
			keys = append(keys, key)
		}
		verbs[key] = append(verbs[key], a.Verbs...)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + strings.Join(dedupe(verbs[k]), ", ")
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// allowed reports whether a --allow-grant pattern names the subject, the
// role or the binding.
func allowed(patterns []string, g grant) (string, bool) {
	names := []string{g.subject.Name, g.binding.RoleName, g.binding.Name, bindingName(*g.binding)}
	if g.subject.Kind == rbacv1.ServiceAccountKind {
		names = append(names, g.subject.Namespace+"/"+g.subject.Name, "system:serviceaccount:"+g.subject.Namespace+":"+g.subject.Name)
	}
	for _, p := range patterns {
		for _, n := range names {
			if ok, _ := path.Match(p, n); ok {
				return p, true
			}
		}
	}
	return "", false
}

// verifyRBAC reports what the cluster grants now that it did not at the
// baseline: per subject and binding, the rules its baseline grants do not
// cover (the apiserver's own escalation check,
// k8s.io/component-helpers/auth/rbac/validation.Covers), and the new rules
// of aggregated ClusterRoles. The release's own grants (releaseGrant) are
// left out, as preflight's gate leaves them out. A privilege escalation
// path newly granted (sensitive), and any new grant to anonymous
// requests, is a FAIL unless --allow-grant names the subject, role or
// binding; other new grants are WARN for subjects outside system: and for
// the release's default roles, and not listed for system: users and groups.
func verifyRBAC(base, now *RBACEvidence, allow []string) []Regression {
	owned := map[string][]rbacv1.PolicyRule{} // subject key + "\x00" + scope
	// unchanged: binding, subject and the role's rules as at the baseline
	// (most grants: compared without breaking rules down).
	held := map[string]*RoleFact{} // binding ref + subject key
	for _, g := range base.grants() {
		if g.role == nil {
			continue
		}
		k := subjectKey(g.subject) + "\x00" + g.scope()
		owned[k] = append(owned[k], g.role.Rules...)
		held[bindingRef(*g.binding)+"\x00"+g.binding.RoleKind+"/"+g.binding.RoleName+"\x00"+subjectKey(g.subject)] = g.role
	}
	var out []Regression
	for _, g := range now.grants() {
		if g.role == nil || releaseGrant(g) {
			continue
		}
		if old := held[bindingRef(*g.binding)+"\x00"+g.binding.RoleKind+"/"+g.binding.RoleName+"\x00"+subjectKey(g.subject)]; old != nil && equality.Semantic.DeepEqual(old.Rules, g.role.Rules) {
			continue
		}
		key := subjectKey(g.subject)
		have := owned[key+"\x00"]
		if s := g.scope(); s != "" {
			have = append(append([]rbacv1.PolicyRule(nil), have...), owned[key+"\x00"+s]...)
		}
		covered, newRules := validation.Covers(have, g.role.Rules)
		if covered {
			continue
		}
		var risky []string
		for _, a := range newRules {
			risky = append(risky, sensitive(a)...)
		}
		risky = dedupe(risky)
		reg := Regression{Kind: RegRBAC, Object: bindingRef(*g.binding),
			Message: fmt.Sprintf("%s newly granted %s %s via %s", subjectString(g.subject), describeAtoms(newRules), g.scopeString(), g.via()),
			Command: fmt.Sprintf("kubectl get %s -o yaml; kubectl describe %s %s", bindingKindName(*g.binding), strings.ToLower(g.binding.RoleKind), g.binding.RoleName)}
		switch {
		case len(risky) > 0 || anyone(g.subject):
			reg.Status = StatusFail
			if len(risky) > 0 {
				reg.Message += fmt.Sprintf(": new %s access", strings.Join(risky, ", "))
			} else {
				reg.Message += ": anyone who can reach the apiserver gets it"
			}
			if p, ok := allowed(allow, g); ok {
				reg.Status = StatusWarn
				reg.Message += fmt.Sprintf(" (allowed by --allow-grant %s)", p)
			}
		case !systemSubject(g.subject) || g.role.Default:
			reg.Status = StatusWarn
		default:
			continue
		}
		out = append(out, reg)
	}
	return append(out, verifyAggregation(base, now, allow)...)
}

// releaseGrant: a grant the release makes itself, through one of its own
// bindings (kubernetes.io/bootstrapping=rbac-defaults) of one of its own
// roles, to a subject other than a group every user or service account
// belongs to: each new release adds and widens these for its controllers
// (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings),
// and preflight's gate leaves them out too.
// The label alone is not enough, as anyone who may create a binding may
// set it: the binding, role and subject must also be where and what the
// release's are (k8s.io/kubernetes@v1.37.2
// plugin/pkg/auth/authorizer/rbac/bootstrappolicy: policy.go,
// controller_policy.go and namespace_policy.go): a ClusterRoleBinding
// named cluster-admin or system:..., or a RoleBinding in kube-system or
// kube-public named system:...; a role named as the release names them;
// a system: user or group, or a service account of kube-system.
func releaseGrant(g grant) bool {
	if !g.binding.Default || g.role == nil || !g.role.Default || untrusted(g.subject) {
		return false
	}
	b := g.binding
	switch b.Kind {
	case "ClusterRoleBinding":
		if b.Name != "cluster-admin" && !strings.HasPrefix(b.Name, "system:") {
			return false
		}
	case "RoleBinding":
		if (b.Namespace != metav1.NamespaceSystem && b.Namespace != metav1.NamespacePublic) || !strings.HasPrefix(b.Name, "system:") {
			return false
		}
	default:
		return false
	}
	if !releaseRoleName(g.role.Kind, g.role.Name) {
		return false
	}
	switch g.subject.Kind {
	case rbacv1.ServiceAccountKind:
		return g.subject.Namespace == metav1.NamespaceSystem
	case rbacv1.UserKind, rbacv1.GroupKind:
		return strings.HasPrefix(g.subject.Name, "system:")
	}
	return false
}

// releaseRoleName: a name the release gives its own roles: the
// user-facing ClusterRoles, system:..., and kube-system's
// extension-apiserver-authentication-reader Role.
func releaseRoleName(kind, name string) bool {
	switch {
	case strings.HasPrefix(name, "system:"):
		return true
	case kind == "ClusterRole":
		return name == "cluster-admin" || name == "admin" || name == "edit" || name == "view"
	default:
		return name == "extension-apiserver-authentication-reader"
	}
}

func bindingKindName(b BindingFact) string {
	if b.Namespace != "" {
		return fmt.Sprintf("%s %s -n %s", strings.ToLower(b.Kind), b.Name, b.Namespace)
	}
	return strings.ToLower(b.Kind) + " " + b.Name
}

// verifyAggregation reports the new rules of every aggregated ClusterRole
// (admin, edit, view, and the cluster's own), naming the ClusterRoles that
// its selectors pick and that are new or changed since the baseline: any
// binding of it, now or later, grants them.
func verifyAggregation(base, now *RBACEvidence, allow []string) []Regression {
	before := map[string]*RoleFact{}
	for i := range base.Roles {
		if f := &base.Roles[i]; f.Kind == "ClusterRole" {
			before[f.Name] = f
		}
	}
	var out []Regression
	for i := range now.Roles {
		f := &now.Roles[i]
		b := before[f.Name]
		if f.Kind != "ClusterRole" || len(f.Aggregation) == 0 || b == nil {
			continue
		}
		covered, newRules := validation.Covers(b.Rules, f.Rules)
		if covered {
			continue
		}
		var sources []string
		for j := range now.Roles {
			src := &now.Roles[j]
			if src.Kind != "ClusterRole" || src.Name == f.Name {
				continue
			}
			picked := false
			for k := range f.Aggregation {
				picked = picked || selects(&f.Aggregation[k], src.Labels)
			}
			if old := before[src.Name]; picked && (old == nil || !sameRules(old.Rules, src.Rules)) {
				sources = append(sources, src.Name)
			}
		}
		release := f.Default && releaseRoleName(f.Kind, f.Name) && len(sources) > 0
		for _, src := range sources {
			for j := range now.Roles {
				if now.Roles[j].Kind == "ClusterRole" && now.Roles[j].Name == src {
					release = release && now.Roles[j].Default && strings.HasPrefix(src, "system:")
				}
			}
		}
		if release {
			continue // the release's own roles aggregated into its own role
		}
		var risky []string
		for _, a := range newRules {
			risky = append(risky, sensitive(a)...)
		}
		risky = dedupe(risky)
		from := ""
		if len(sources) > 0 {
			from = " from ClusterRole " + strings.Join(sources, ", ")
		}
		reg := Regression{Kind: RegRBAC, Object: "clusterrole/" + f.Name, Status: StatusWarn,
			Message: fmt.Sprintf("aggregated ClusterRole %s newly grants %s%s, to every binding of it", f.Name, describeAtoms(newRules), from),
			Command: fmt.Sprintf("kubectl get clusterroles -l %s -o name; kubectl describe clusterrole %s", aggregationLabels(f.Aggregation), f.Name)}
		if len(risky) > 0 {
			reg.Status = StatusFail
			reg.Message += fmt.Sprintf(": new %s access", strings.Join(risky, ", "))
			for _, p := range allow {
				names := append([]string{f.Name}, sources...)
				for _, n := range names {
					if ok, _ := path.Match(p, n); ok && reg.Status == StatusFail {
						reg.Status = StatusWarn
						reg.Message += fmt.Sprintf(" (allowed by --allow-grant %s)", p)
					}
				}
			}
		}
		out = append(out, reg)
	}
	return out
}

func aggregationLabels(sels []metav1.LabelSelector) string {
	var parts []string
	for _, s := range sels {
		if sel, err := metav1.LabelSelectorAsSelector(&s); err == nil && !sel.Empty() {
			parts = append(parts, sel.String())
		}
	}
	if len(parts) == 0 {
		return "''"
	}
	return "'" + parts[0] + "'"
}

func sameRules(a, b []rbacv1.PolicyRule) bool {
	okA, _ := validation.Covers(a, b)
	okB, _ := validation.Covers(b, a)
	return okA && okB
}
