package preflight

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"
)

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func grantRule(groups, resources, verbs string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: strings.Split(groups, ","), Resources: strings.Split(resources, ","), Verbs: strings.Split(verbs, ",")}
}

func crb(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role, APIGroup: rbacv1.GroupName}, Subjects: subjects}
}

func rb(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: kind, Name: role, APIGroup: rbacv1.GroupName}, Subjects: subjects}
}

func user(n string) rbacv1.Subject  { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: n} }
func group(n string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: n} }
func sa(ns, n string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: n}
}

var defaults = map[string]string{bootstrapLabel: bootstrapDefaults}

func defaultBinding(b *rbacv1.ClusterRoleBinding) *rbacv1.ClusterRoleBinding {
	b.Labels = defaults
	return b
}

func baseRBAC() []runtime.Object {
	view := clusterRole("view", defaults, grantRule("", "pods,configmaps", "get,list,watch"))
	view.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}}
	return []runtime.Object{
		clusterRole("cluster-admin", defaults, grantRule("*", "*", "*")),
		view,
		clusterRole("system:controller:foo", defaults, grantRule("apps", "deployments", "get")),
		clusterRole("reader", nil, grantRule("", "pods", "get")),
		crb("cluster-admin", "cluster-admin", group("system:masters")),
		crb("system:controller:foo", "system:controller:foo", sa("kube-system", "foo")),
		rb("ml", "viewers", "ClusterRole", "view", user("alice")),
		crb("readers", "reader", user("bob")),
	}
}

// readEvidence reads RBAC like the gate and round-trips it through YAML
// as the saved baseline does.
func readEvidence(t *testing.T, objs ...runtime.Object) *RBACEvidence {
	t.Helper()
	g, ev := (&Runner{Kube: fake.NewClientset(objs...)}).rbacGate(context.Background())
	if ev == nil {
		t.Fatalf("rbac gate: %s %s", g.Status, g.Message)
	}
	b, err := yaml.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out RBACEvidence
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestVerifyRBAC(t *testing.T) {
	base := readEvidence(t, baseRBAC()...)
	if regs := verifyRBAC(base, readEvidence(t, baseRBAC()...), nil); len(regs) != 0 {
		t.Fatalf("unchanged RBAC: %+v", regs)
	}
	secretsToView := clusterRole("leaky", map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}, grantRule("", "secrets", "get,list"))
	after := baseRBAC()
	// The aggregation controller copies the new rules into view.
	after[1].(*rbacv1.ClusterRole).Rules = append(after[1].(*rbacv1.ClusterRole).Rules, grantRule("", "secrets", "get,list"))
	after = append(after, secretsToView,
		crb("impersonators", "impersonator", group("oncall")),
		clusterRole("impersonator", nil, grantRule("", "users", "impersonate")),
		crb("carol-reads", "reader", user("carol")),
		crb("bob-more", "more", user("bob")),
		clusterRole("more", nil, grantRule("", "pods", "get,list"), grantRule("", "services", "list")),
		// The release adds a controller role granting secrets.
		clusterRole("system:controller:bar", defaults, grantRule("", "secrets", "get")),
		crb("system:controller:bar", "system:controller:bar", sa("kube-system", "bar")),
		// The new release's own binding of its own role: not listed, even
		// with secrets.
		defaultBinding(crb("system:controller:baz", "system:controller:baz", sa("kube-system", "baz"))),
		clusterRole("system:controller:baz", defaults, grantRule("", "secrets", "get,list,watch")),
		// A system: user gains a plain read through a role of the cluster's.
		crb("scheduler-extra", "reader", user("system:kube-scheduler")),
		// cluster-admin to another group of masters: covered? No: new subject.
		crb("ops-admin", "cluster-admin", group("system:masters")),
	)
	regs := verifyRBAC(base, readEvidence(t, after...), []string{"system:controller:*"})
	got := map[string]Regression{}
	for _, r := range regs {
		got[r.Object] = r
	}
	for obj, want := range map[string]struct {
		st  Status
		sub string
	}{
		"clusterrole/view":                         {StatusFail, "aggregated ClusterRole view newly grants [secrets: get, list] from ClusterRole leaky"},
		"rolebinding/ml/viewers":                   {StatusFail, "User alice newly granted [secrets: get, list] in namespace ml via RoleBinding ml/viewers (ClusterRole view (a default role of the release)): new secrets access"},
		"clusterrolebinding/impersonators":         {StatusFail, "Group oncall newly granted [users: impersonate] cluster-wide"},
		"clusterrolebinding/carol-reads":           {StatusWarn, "User carol newly granted [pods: get]"},
		"clusterrolebinding/bob-more":              {StatusWarn, "User bob newly granted [pods: list; services: list]"},
		"clusterrolebinding/system:controller:bar": {StatusWarn, "allowed by --allow-grant system:controller:*"},
	} {
		r, ok := got[obj]
		if !ok {
			t.Errorf("no regression for %s in %+v", obj, regs)
			continue
		}
		if r.Status != want.st || !strings.Contains(r.Message, want.sub) || r.Kind != RegRBAC || r.Command == "" {
			t.Errorf("%s: %s %q, want %s %q", obj, r.Status, r.Message, want.st, want.sub)
		}
	}
	for _, quiet := range []string{"clusterrolebinding/system:controller:baz", "clusterrolebinding/scheduler-extra", "clusterrolebinding/ops-admin", "clusterrolebinding/readers"} {
		if r, ok := got[quiet]; ok {
			t.Errorf("%s listed: %+v", quiet, r)
		}
	}
}

// The release's label on a binding or role anyone may create is not
// enough to leave a grant out: it must be where and what the release's
// own are.
func TestVerifyRBACReleaseLabelNotEnough(t *testing.T) {
	base := readEvidence(t, baseRBAC()...)
	rbLabelled := func(b *rbacv1.RoleBinding) *rbacv1.RoleBinding { b.Labels = defaults; return b }
	after := append(baseRBAC(),
		// A chart's binding of cluster-admin to its own service account,
		// labelled as the release's.
		defaultBinding(crb("gpu-operator-admin", "cluster-admin", sa("gpu-operator", "gpu-operator"))),
		// A release-named binding of the release's role to a workload's
		// service account outside kube-system.
		defaultBinding(crb("system:controller:qux", "system:controller:foo", sa("ml", "ci"))),
		// A labelled RoleBinding in a user namespace.
		rbLabelled(rb("ml", "system:ml-admin", "ClusterRole", "view", user("mallory"))),
		// A labelled role that is not named as the release names them.
		clusterRole("secrets-reader", defaults, grantRule("", "secrets", "get")),
		defaultBinding(crb("system:secrets-reader", "secrets-reader", user("system:kube-scheduler"))),
	)
	got := map[string]Regression{}
	for _, r := range verifyRBAC(base, readEvidence(t, after...), nil) {
		got[r.Object] = r
	}
	for _, obj := range []string{"clusterrolebinding/gpu-operator-admin", "clusterrolebinding/system:controller:qux", "rolebinding/ml/system:ml-admin", "clusterrolebinding/system:secrets-reader"} {
		if _, ok := got[obj]; !ok {
			t.Errorf("%s not listed: %+v", obj, got)
		}
	}
	if r := got["clusterrolebinding/gpu-operator-admin"]; r.Status != StatusFail {
		t.Errorf("cluster-admin to a chart's service account: %+v", r)
	}
}

func TestRBACGate(t *testing.T) {
	gc := crb("system:controller:generic-garbage-collector", "cluster-admin", sa("kube-system", "generic-garbage-collector"))
	gc.Labels = defaults
	// A chart's binding labelled as the release's is listed all the same.
	chart := defaultBinding(crb("gpu-operator", "cluster-admin", sa("gpu-operator", "gpu-operator")))
	objs := append(baseRBAC(), crb("oops", "cluster-admin", group("system:authenticated")), rb("ml", "edit", "ClusterRole", "cluster-admin", sa("ml", "runner")), gc, chart)
	g, ev := (&Runner{Kube: fake.NewClientset(objs...)}).rbacGate(context.Background())
	ev2 := strings.Join(g.Evidence, "\n")
	if g.Status != StatusWarn || !strings.Contains(ev2, "Group system:authenticated holds") || !strings.Contains(ev2, "ServiceAccount ml/runner holds") ||
		!strings.Contains(ev2, "ServiceAccount gpu-operator/gpu-operator holds") ||
		strings.Contains(ev2, "system:masters") || strings.Contains(ev2, "garbage-collector") || ev == nil || len(ev.Bindings) != 8 {
		t.Errorf("%s %s\n%s", g.Status, g.Message, ev2)
	}
	kc := fake.NewClientset()
	kc.PrependReactor("list", "roles", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrorsForbidden("roles", "list")
	})
	if g, ev := (&Runner{Kube: kc}).rbacGate(context.Background()); g.Status != StatusUnknown || ev != nil || !strings.Contains(g.Message, "cannot list roles") {
		t.Errorf("forbidden: %s %s", g.Status, g.Message)
	}
}

// Each privilege escalation path of the RBAC good practices page, and
// what only looks like one.
func TestSensitive(t *testing.T) {
	for _, tc := range []struct {
		rule string // group resource verb
		want string
	}{
		{"'' secrets list", pathSecrets},
		{"'' pods create", pathWorkloads},
		{"apps deployments create", pathWorkloads},
		{"batch cronjobs create", pathWorkloads},
		{"'' pods/exec create", pathWorkloads},
		{"'' persistentvolumes create", pathPV},
		{"'' nodes/proxy get", pathNodeProxy},
		{"rbac.authorization.k8s.io clusterroles escalate", pathEscalate},
		{"rbac.authorization.k8s.io roles bind", pathBind},
		{"'' users impersonate", pathImpersonate},
		{"authentication.k8s.io userextras/scopes impersonate", pathImpersonate},
		{"certificates.k8s.io certificatesigningrequests/approval update", pathCSR},
		{"certificates.k8s.io signers approve", pathCSR},
		{"'' serviceaccounts/token create", pathToken},
		{"admissionregistration.k8s.io validatingwebhookconfigurations patch", pathAdmission},
		{"admissionregistration.k8s.io validatingadmissionpolicybindings update", pathAdmission},
		{"'' namespaces patch", pathNamespace},
		{"* * *", pathNodeProxy},
		{"'' pods get", ""},
		{"apps deployments patch", ""},
		{"'' nodes get", ""},
		{"admissionregistration.k8s.io validatingwebhookconfigurations list", ""},
		{"'' namespaces get", ""},
		{"'' serviceaccounts create", ""},
		{"certificates.k8s.io certificatesigningrequests create", ""},
	} {
		f := strings.Fields(tc.rule)
		if f[0] == "''" {
			f[0] = ""
		}
		got := sensitive(rbacv1.PolicyRule{APIGroups: []string{f[0]}, Resources: []string{f[1]}, Verbs: []string{f[2]}})
		has := false
		for _, g := range got {
			has = has || g == tc.want
		}
		if tc.want == "" && len(got) > 0 || tc.want != "" && !has {
			t.Errorf("%s: %v, want %q", tc.rule, got, tc.want)
		}
	}
}

// A new grant of any escalation path fails verify; the anonymous user is
// no trusted system identity: any new grant to it fails, and is listed.
func TestVerifyRBACEscalationPaths(t *testing.T) {
	base := readEvidence(t, baseRBAC()...)
	after := append(baseRBAC(),
		clusterRole("relabel", nil, grantRule("", "namespaces", "patch")),
		rb("ml", "ns-admins", "ClusterRole", "relabel", user("dana")),
		clusterRole("hooks", nil, grantRule("admissionregistration.k8s.io", "validatingwebhookconfigurations,validatingadmissionpolicybindings", "update")),
		crb("hook-editors", "hooks", group("platform")),
		clusterRole("kubelet-api", nil, grantRule("", "nodes/proxy", "get")),
		crb("node-debuggers", "kubelet-api", user("erin")),
		clusterRole("tokens", nil, grantRule("", "serviceaccounts/token", "create")),
		rb("ml", "token-makers", "ClusterRole", "tokens", sa("ml", "ci")),
		clusterRole("csr-approver", nil, grantRule("certificates.k8s.io", "certificatesigningrequests/approval", "update"), grantRule("certificates.k8s.io", "signers", "approve")),
		crb("approvers", "csr-approver", user("frank")),
		clusterRole("runner", nil, grantRule("batch", "jobs", "create")),
		rb("ml", "runners", "ClusterRole", "runner", sa("ml", "ci")),
		clusterRole("pv-maker", nil, grantRule("", "persistentvolumes", "create")),
		crb("pv-makers", "pv-maker", user("gina")),
		crb("anon-read", "reader", user("system:anonymous")),
	)
	got := map[string]Regression{}
	for _, r := range verifyRBAC(base, readEvidence(t, after...), nil) {
		got[r.Object] = r
	}
	for obj, path := range map[string]string{
		"rolebinding/ml/ns-admins": pathNamespace, "clusterrolebinding/hook-editors": pathAdmission, "clusterrolebinding/node-debuggers": pathNodeProxy,
		"rolebinding/ml/token-makers": pathToken, "clusterrolebinding/approvers": pathCSR, "rolebinding/ml/runners": pathWorkloads,
		"clusterrolebinding/pv-makers": pathPV, "clusterrolebinding/anon-read": "anyone who can reach the apiserver",
	} {
		if r, ok := got[obj]; !ok || r.Status != StatusFail || !strings.Contains(r.Message, path) {
			t.Errorf("%s: %+v, want a FAIL naming %q", obj, r, path)
		}
	}
	// The release's own aggregation into its own role is not listed.
	view := clusterRole("view", defaults, grantRule("", "pods,configmaps", "get,list,watch"), grantRule("", "events", "list"))
	view.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}}}}
	rel := baseRBAC()
	rel[1] = view
	rel = append(rel, clusterRole("system:aggregate-to-view", map[string]string{bootstrapLabel: bootstrapDefaults, "rbac.authorization.k8s.io/aggregate-to-view": "true"}, grantRule("", "events", "list")))
	for _, r := range verifyRBAC(base, readEvidence(t, rel...), nil) {
		if r.Object == "clusterrole/view" || r.Status == StatusFail {
			t.Errorf("the release's own aggregation: %+v", r)
		}
	}
}
