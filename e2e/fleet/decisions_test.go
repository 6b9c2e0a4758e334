//go:build e2e

package fleete2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// approverGroup is the group of the people who decide on runs, bound to
// deploy/rbac/fleet-approver.yaml in the engine's namespace.
const approverGroup = "fleet-approvers"

// userKubeconfig is a kubeconfig of the management cluster that
// authenticates as user, a member of approverGroup, with a client
// certificate; the first call binds the approvers' role.
func (e *fleetEnv) userKubeconfig(t *testing.T, user string) string {
	t.Helper()
	e.usersMu.Lock()
	defer e.usersMu.Unlock()
	if kc, ok := e.users[user]; ok {
		return kc
	}
	if e.users == nil {
		e.grantApprovers(t)
		e.users = map[string]string{}
	}
	kc, err := e.mgmt.UserKubeconfig(user, approverGroup)
	if err != nil {
		t.Fatal(err)
	}
	e.users[user] = kc
	return kc
}

// grantApprovers creates deploy/rbac/fleet-approver.yaml's ClusterRole
// and binds it in the engine's namespace to approverGroup, as its comment
// says, and waits until the authorizer allows it.
func (e *fleetEnv) grantApprovers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", "fleet-approver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &cr); err != nil {
		t.Fatal(err)
	}
	rbac := e.mgmt.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name, Namespace: argoNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: approverGroup}}}
	if _, err := rbac.RoleBindings(argoNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "probe", Groups: []string{approverGroup},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: argoNS, Verb: "update", Group: "argoproj.io", Resource: "workflows"}}}
	if err := harness.Eventually(ctx, "RBAC for "+approverGroup, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := e.mgmt.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// runAs runs a command of the suite as user, with the user's own
// kubeconfig of the management cluster.
func (e *fleetEnv) runAs(t *testing.T, user, name string, args ...string) plugintest.Result {
	t.Helper()
	kc := e.userKubeconfig(t, user)
	return plugintest.RunCmd(t, filepath.Join(plugintest.BinDir(t), name), plugintest.Cmd{Args: append(args, "--kubeconfig", kc), Env: e.env, Timeout: 5 * time.Minute})
}

// skewAs runs kubectl-skew as user and fails unless it exits 0.
func (e *fleetEnv) skewAs(t *testing.T, user string, args ...string) string {
	t.Helper()
	r := e.runAs(t, user, "kubectl-skew", args...)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl skew %s (as %s): %s", strings.Join(args, " "), user, r)
	}
	return r.Stdout + r.Stderr
}

// TestFleetDecisions: decisions are bound to the user the management
// cluster authenticates, on the real apiserver: alice and bob with client
// certificates of their own, RBAC from deploy/rbac/fleet-approver.yaml
// and nothing for the SelfSubjectReview (system:basic-user allows it).
// alice approving twice is one approver; bob completes the two; alice
// naming bob with --approver is refused (exit 2); alice impersonating bob
// without the grant is refused by the apiserver (exit 3); a change-ticket
// bot granted impersonation of carol halts as carol. What is recorded is
// what kubectl auth whoami shows.
func TestFleetDecisions(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	rings := `  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}, approval: {approvers: 2}}
  - {name: prod, selector: {matchExpressions: [{key: gpufleet.dev/ring, operator: In, values: [prod, training]}]}}`
	s := e.newScenario(t, "decide", "file://"+filepath.Join(t.TempDir(), "store"), rings, "")
	e.skew(t, "fleet", "plan", "-f", s.file, "--run", s.run)
	st := s.openStore(t)
	decisions := func() []fleetrun.Decision {
		t.Helper()
		ds, err := fleetrun.ReadDecisions(ctx, st, s.run)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	approve := func(user string, extra ...string) plugintest.Result {
		t.Helper()
		return e.runAs(t, user, "kubectl-skew", append([]string{"fleet", "approve", "--store", s.store, "--run", s.run, "--ring", canary, "--reason", "CHG-9"}, extra...)...)
	}

	r := approve("alice")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "approve of ring canary recorded: by alice") || !strings.Contains(r.Stdout, "ring canary: 1 of 2 approvals (alice)") {
		t.Fatalf("alice approves: %s", r)
	}
	// The approvers' role lets the command read the Workflow: there is
	// none (the run is not rendered), which is not a refusal.
	if !strings.Contains(r.Stderr, "no Argo Workflow argo/") {
		t.Errorf("alice's approve did not read the Workflow:\n%s", r.Stderr)
	}
	if r = approve("alice", "--approver", "alice"); r.ExitCode != 0 || !strings.Contains(r.Stdout, "ring canary: 1 of 2 approvals (alice)") {
		t.Errorf("alice again counts once: %s", r)
	}
	r = approve("alice", "--approver", "bob")
	// A usage error: one error line, then the suite's hint line.
	if r.ExitCode != cli.ExitUsage || strings.Count(r.Stderr, "error: ") != 1 || !strings.HasPrefix(r.Stderr, "error: ") || !strings.Contains(r.Stderr, "authenticates (alice)") || !strings.Contains(r.Stderr, "--as bob") {
		t.Errorf("--approver bob as alice: want exit 2 and one error line: %s", r)
	}
	r = approve("alice", "--as", "bob")
	if r.ExitCode != cli.ExitUnavailable || !strings.Contains(r.Stderr, "create selfsubjectreviews.authentication.k8s.io") || !strings.Contains(r.Stderr, "cannot impersonate") {
		t.Errorf("alice impersonating bob without the grant: want exit 3: %s", r)
	}
	if ds := decisions(); len(ds) != 2 {
		t.Fatalf("refused decisions were recorded: %+v", ds)
	}
	if r = approve("bob"); r.ExitCode != 0 || !strings.Contains(r.Stdout, "ring canary: 2 of 2 approvals (alice, bob)") {
		t.Errorf("bob completes the ring's approvals: %s", r)
	}

	// What is recorded is who kubectl auth whoami says the caller is.
	var who struct {
		Status struct {
			UserInfo struct {
				Username string   `json:"username"`
				Groups   []string `json:"groups"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	w := plugintest.RunCmd(t, e.kubectl, plugintest.Cmd{Args: []string{"auth", "whoami", "-o", "json", "--kubeconfig", e.userKubeconfig(t, "alice")}})
	if err := json.Unmarshal([]byte(w.Stdout), &who); err != nil || w.ExitCode != 0 {
		t.Fatalf("kubectl auth whoami: %v\n%s", err, w)
	}
	ds := decisions()
	if len(ds) != 3 {
		t.Fatalf("%d decisions, want 3: %+v", len(ds), ds)
	}
	for i, want := range []string{"alice", "alice", "bob"} {
		id := ds[i].Identity
		if id == nil || id.User != want || ds[i].By != want || !slices.Contains(id.Groups, approverGroup) || !slices.Contains(id.Groups, "system:authenticated") {
			t.Errorf("decision %d: by %q, identity %+v; want %s in %s and system:authenticated", i, ds[i].By, id, want, approverGroup)
		}
	}
	if who.Status.UserInfo.Username != "alice" || !slices.Equal(who.Status.UserInfo.Groups, ds[0].Identity.Groups) {
		t.Errorf("kubectl auth whoami says %+v, the decision recorded %+v", who.Status.UserInfo, ds[0].Identity)
	}

	// A change-ticket bot granted impersonation of carol alone decides as
	// carol, and cannot as anyone else.
	imp := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-decide-as-carol"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"carol"}}}}
	rbac := e.mgmt.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, imp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: imp.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: imp.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "change-bot"}}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rbac.ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(context.Background(), imp.Name, metav1.DeleteOptions{})
	})
	halt := func(as string) plugintest.Result {
		return e.runAs(t, "change-bot", "kubectl-skew", "fleet", "halt", "--store", s.store, "--run", s.run, "--ring", "prod", "--reason", "CHG-10: hold for the change board", "--as", as)
	}
	if err := harness.Eventually(ctx, "change-bot may impersonate carol", 30*time.Second, func(context.Context) (bool, error) {
		r = halt("carol")
		return r.ExitCode == 0, nil
	}); err != nil {
		t.Fatalf("change-bot --as carol: %v\n%s", err, r)
	}
	if !strings.Contains(r.Stdout, "halt of ring prod recorded: by carol") {
		t.Errorf("the halt is not carol's: %s", r)
	}
	if r = halt("bob"); r.ExitCode != cli.ExitUnavailable || !strings.Contains(r.Stderr, "cannot impersonate") {
		t.Errorf("change-bot --as bob: want exit 3: %s", r)
	}
	ds = decisions()
	if len(ds) != 4 || ds[3].Decision != fleetrun.DecisionHalt || ds[3].Identity == nil || ds[3].Identity.User != "carol" || !strings.HasPrefix(ds[3].Key, "runs/"+s.run+"/decisions/") {
		t.Errorf("decisions after the bot's halt: %+v", ds)
	}
}
