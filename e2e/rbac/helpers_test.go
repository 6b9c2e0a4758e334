//go:build e2e

package rbace2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// roleSet is what one deploy/rbac/<plugin>.yaml holds: a ClusterRole and
// the namespaced Roles next to it.
type roleSet struct {
	cluster *rbacv1.ClusterRole
	roles   []*rbacv1.Role
}

// loadRoles parses the shipped file itself, so the test checks what users apply.
func loadRoles(t *testing.T, plugin string) roleSet {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", plugin+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rs roleSet
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		if tm.APIVersion != rbacv1.SchemeGroupVersion.String() {
			t.Fatalf("%s.yaml: unexpected apiVersion %q", plugin, tm.APIVersion)
		}
		switch tm.Kind {
		case "ClusterRole":
			if rs.cluster != nil {
				t.Fatalf("%s.yaml: more than one ClusterRole", plugin)
			}
			rs.cluster = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc, rs.cluster); err != nil {
				t.Fatal(err)
			}
		case "Role":
			r := &rbacv1.Role{}
			if err := yaml.UnmarshalStrict(doc, r); err != nil {
				t.Fatal(err)
			}
			rs.roles = append(rs.roles, r)
		case "":
		default:
			t.Fatalf("%s.yaml: unexpected kind %q", plugin, tm.Kind)
		}
	}
	if rs.cluster == nil && len(rs.roles) > 0 {
		// Namespaced only (the checkpoint agent): an empty ClusterRole
		// keeps grant and without uniform.
		rs.cluster = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gpufleet-" + plugin}}
	}
	if rs.cluster == nil || rs.cluster.Name != "gpufleet-"+plugin {
		t.Fatalf("%s.yaml: want a ClusterRole named gpufleet-%s", plugin, plugin)
	}
	for _, r := range rs.roles {
		if r.Name != "gpufleet-"+plugin {
			t.Fatalf("%s.yaml: Role %s: want the name gpufleet-%s", plugin, r.Name, plugin)
		}
	}
	return rs
}

// rules flattens the rules: the ClusterRole's first, then each Role's.
func (rs roleSet) rules() []rbacv1.PolicyRule {
	out := append([]rbacv1.PolicyRule(nil), rs.cluster.Rules...)
	for _, r := range rs.roles {
		out = append(out, r.Rules...)
	}
	return out
}

// without returns a deep copy with the i-th rule of rules() removed.
func (rs roleSet) without(i int) roleSet {
	out := roleSet{cluster: rs.cluster.DeepCopy()}
	out.cluster.Rules = nil
	n := 0
	keep := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		var k []rbacv1.PolicyRule
		for _, r := range rules {
			if n != i {
				k = append(k, *r.DeepCopy())
			}
			n++
		}
		return k
	}
	out.cluster.Rules = keep(rs.cluster.Rules)
	for _, r := range rs.roles {
		c := r.DeepCopy()
		c.Rules = keep(r.Rules)
		out.roles = append(out.roles, c)
	}
	return out
}

func describe(r rbacv1.PolicyRule) string {
	if len(r.NonResourceURLs) > 0 {
		return fmt.Sprintf("%v %v", r.Verbs, r.NonResourceURLs)
	}
	res := r.Resources
	if len(res) > 3 {
		res = append(res[:3:3], fmt.Sprintf("...%d more", len(r.Resources)-3))
	}
	return fmt.Sprintf("%v %v %v", r.Verbs, r.APIGroups, res)
}

// grant creates the role set under names suffixed with variant, binds it
// to a user of its own, and waits until the authorizer allows the user
// the first rule of the set (and, when gone is set, denies that rule).
// Roles without a namespace go to ns.
func grant(t *testing.T, cp *harness.ControlPlane, plugin, variant string, rs roleSet, ns string, gone *rbacv1.PolicyRule) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	user := "gpufleet-rbac-" + plugin + "-" + variant
	name := rs.cluster.Name
	if variant != "full" {
		name += "-" + variant
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	rbac := cp.Client.RbacV1()
	cr := rs.cluster.DeepCopy()
	cr.Name = name
	if _, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: subjects}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	var probes []*authorizationv1.SubjectAccessReview
	sar := func(r rbacv1.PolicyRule, ns string) *authorizationv1.SubjectAccessReview {
		s := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user}}
		if len(r.NonResourceURLs) > 0 {
			s.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: r.NonResourceURLs[0], Verb: r.Verbs[0]}
			return s
		}
		res, sub, _ := strings.Cut(r.Resources[0], "/")
		if res == "*" {
			res = "anything"
		}
		s.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: res, Subresource: sub}
		return s
	}
	if len(cr.Rules) > 0 {
		probes = append(probes, sar(cr.Rules[0], ""))
	}
	for _, r := range rs.roles {
		role := r.DeepCopy()
		if role.Namespace == "" {
			role.Namespace = ns
		}
		role.Name = name
		if _, err := rbac.Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: role.Namespace},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects}
		if _, err := rbac.RoleBindings(role.Namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rns := role.Namespace
		t.Cleanup(func() {
			_ = rbac.RoleBindings(rns).Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = rbac.Roles(rns).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		if len(role.Rules) > 0 {
			probes = append(probes, sar(role.Rules[0], rns))
		}
	}
	err := harness.Eventually(ctx, "RBAC for "+user, 30*time.Second, func(ctx context.Context) (bool, error) {
		for _, p := range probes {
			got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, p, metav1.CreateOptions{})
			if err != nil || !got.Status.Allowed {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if gone != nil {
		// Roles may grant a namespaced rule cluster-wide; probe in ns.
		got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar(*gone, ns), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed {
			t.Fatalf("%s is still allowed %s without the rule", user, describe(*gone))
		}
	}
	return user
}

// run runs a plugin binary as user (impersonated by the admin kubeconfig).
func run(t *testing.T, cp *harness.ControlPlane, bin, user string, args ...string) plugintest.Result {
	t.Helper()
	full := append([]string{"--kubeconfig", cp.Kubeconfig}, args...)
	if user != "" {
		full = append(full, "--as", user)
	}
	r := plugintest.RunCmd(t, plugintest.Binary(t, bin), plugintest.Cmd{Args: full, Timeout: 2 * time.Minute})
	t.Logf("$ %s %s --as %s -> exit %d (%s)\n%s", bin, strings.Join(args, " "), user, r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	return r
}

// denied is how the apiserver's refusal names a verb on a resource.
func denied(verb, resource string) string {
	return fmt.Sprintf("cannot %s resource %q", verb, resource)
}

// deniedPath is how the apiserver's refusal names a verb on a URL path.
func deniedPath(verb, path string) string {
	return fmt.Sprintf("cannot %s path %q", verb, path)
}

// errorLine reports whether stderr has exactly one "error: " line and it
// contains sub.
func errorLine(stderr, sub string) bool {
	var errs []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "error: ") {
			errs = append(errs, l)
		}
	}
	return len(errs) == 1 && strings.Contains(errs[0], sub)
}

// removal is what one rule's absence must produce.
type removal struct {
	// flow names the invocation to rerun (a key of the test's flows).
	flow string
	// code is the expected exit code.
	code int
	// line must appear on the one "error: " line of stderr (when set).
	line string
	// also must appear somewhere in stdout or stderr.
	also []string
	// unused, when set, says why no flow can need this rule here; check
	// then verifies the reason still holds.
	unused string
	check  func(t *testing.T)
}

// flow is one plugin invocation; before, when set, prepares the fixture
// and after restores it.
type flow struct {
	args   []string
	code   int
	before func(t *testing.T)
	after  func(t *testing.T)
}

// checkRemovals removes each rule in turn and checks what the plugin does.
func checkRemovals(t *testing.T, cp *harness.ControlPlane, plugin, bin, ns string, rs roleSet, flows map[string]flow, cases []removal) {
	t.Helper()
	rules := rs.rules()
	if len(cases) != len(rules) {
		t.Fatalf("%d rules in deploy/rbac/%s.yaml but %d removal cases: every rule needs one", len(rules), plugin, len(cases))
	}
	for i, c := range cases {
		rule := rules[i]
		t.Run(fmt.Sprintf("without-%d %s", i, describe(rule)), func(t *testing.T) {
			if c.unused != "" {
				t.Logf("not exercisable here: %s", c.unused)
				c.check(t)
				return
			}
			f, ok := flows[c.flow]
			if !ok {
				t.Fatalf("no flow %q", c.flow)
			}
			user := grant(t, cp, plugin, fmt.Sprintf("no-%d", i), rs.without(i), ns, &rule)
			if f.before != nil {
				f.before(t)
			}
			r := run(t, cp, bin, user, f.args...)
			if f.after != nil {
				defer f.after(t)
			}
			if r.ExitCode != c.code {
				t.Errorf("exit %d, want %d\n%s", r.ExitCode, c.code, r)
			}
			if c.line != "" && !errorLine(r.Stderr, c.line) {
				t.Errorf("want one error line naming %q\n%s", c.line, r)
			}
			for _, s := range c.also {
				if !strings.Contains(r.Stdout+r.Stderr, s) {
					t.Errorf("want %q in the output\n%s", s, r)
				}
			}
		})
	}
}

// checkFlows runs every flow under the full role: the exit code is the
// expected one and nothing is forbidden.
func checkFlows(t *testing.T, cp *harness.ControlPlane, bin, user string, order []string, flows map[string]flow) {
	t.Helper()
	for _, name := range order {
		f := flows[name]
		if f.before != nil {
			f.before(t)
		}
		r := run(t, cp, bin, user, f.args...)
		if r.ExitCode != f.code {
			t.Errorf("flow %s: exit %d, want %d\n%s", name, r.ExitCode, f.code, r)
		}
		if strings.Contains(r.Stdout+r.Stderr, "forbidden") {
			t.Errorf("flow %s: forbidden under the full role\n%s", name, r)
		}
		if f.after != nil {
			f.after(t)
		}
	}
}
