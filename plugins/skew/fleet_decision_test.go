package skew

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// managementAs is a management cluster that authenticates the caller as
// user (SelfSubjectReview), or answers the review with fail.
func managementAs(user string, fail ...error) *cli.TestClientGetter {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		if len(fail) > 0 {
			return true, nil, fail[0]
		}
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: user, UID: "uid-" + user, Groups: []string{"fleet-approvers", "system:authenticated"}}}}, nil
	})
	return cli.NewTestClientGetter().WithKube(kube)
}

// TestFleetDecisionsAreIdentities: approve records the user the management
// cluster authenticates; the same user twice is one approver; --approver
// naming someone else is refused (exit 2) and a review the cluster refuses
// is exit 3, neither writing anything.
func TestFleetDecisionsAreIdentities(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "saved")
	store := filepath.Join(dir, "store")
	if err := os.MkdirAll(saved, 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, getter(cluster("v1.37.2")), "", "-o", "yaml")
	if err := os.WriteFile(filepath.Join(saved, "a.yaml"), []byte(r.Out), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "fleet.yaml")
	fleet := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: gpu}
spec:
  target: {version: v1.38}
  clusters:
  - {name: a, labels: {ring: one}}
  rings:
  - {name: one, selector: {matchLabels: {ring: one}}, approval: {approvers: 2}}
  upgrade:
    actions:
    - manual: {}
  credentials: {secretNamespace: fleet-secrets}
  store: {url: %q}
`, "file://"+store)
	if err := os.WriteFile(file, []byte(fleet), 0o600); err != nil {
		t.Fatal(err)
	}
	offline := &cli.TestClientGetter{Err: errors.New("must not touch a cluster")}
	if r := run(t, offline, "", "fleet", "plan", "-f", file, "--run", "r1", "--from-dir", saved); r.Code != 0 {
		t.Fatalf("plan: exit %d\n%s", r.Code, r.Err)
	}
	approve := func(cg cli.ClientGetter, extra ...string) result {
		return run(t, cg, "", append([]string{"fleet", "approve", "-f", file, "--run", "r1", "--ring", "one", "--reason", "ok", "--no-resume"}, extra...)...)
	}
	decisions := func() []fleetrun.Decision {
		st, err := fleetrun.OpenStore(context.Background(), "file://"+store)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ds, err := fleetrun.ReadDecisions(context.Background(), st, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}

	r = approve(managementAs("alice"))
	if r.Code != 0 || !strings.Contains(r.Out, "approve of ring one recorded: by alice") || !strings.Contains(r.Out, "ring one: 1 of 2 approvals (alice)") {
		t.Fatalf("alice approves: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	ds := decisions()
	if len(ds) != 1 || ds[0].Identity == nil || ds[0].Identity.User != "alice" || ds[0].Identity.UID != "uid-alice" ||
		strings.Join(ds[0].Identity.Groups, ",") != "fleet-approvers,system:authenticated" {
		t.Fatalf("recorded %+v", ds)
	}
	if r = approve(managementAs("alice"), "--approver", "alice"); r.Code != 0 || !strings.Contains(r.Out, "1 of 2 approvals (alice)") {
		t.Errorf("alice again: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}

	// --approver names someone else: refused, one line saying what to do.
	r = approve(managementAs("alice"), "--approver", "bob")
	if r.Code != cli.ExitUsage || strings.Count(r.Err, "\n") != 1 || !strings.Contains(r.Err, "authenticates (alice)") || !strings.Contains(r.Err, "--as bob") {
		t.Errorf("--approver bob as alice: exit %d, want 2\n%s", r.Code, r.Err)
	}
	// The cluster refuses the review: exit 3, the request named.
	r = approve(managementAs("", apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, "", errors.New("RBAC: access denied"))))
	if r.Code != cli.ExitUnavailable || !strings.Contains(r.Err, "approve not recorded: cannot tell who you are: create selfsubjectreviews.authentication.k8s.io") {
		t.Errorf("review refused: exit %d, want 3\n%s", r.Code, r.Err)
	}
	// The cluster cannot be reached at all: exit 3 too.
	refused := &url.Error{Op: "Post", URL: "https://mgmt.invalid/apis/authentication.k8s.io/v1/selfsubjectreviews", Err: syscall.ECONNREFUSED}
	if r = approve(managementAs("", refused)); r.Code != cli.ExitUnavailable || !strings.Contains(r.Err, "connection refused") {
		t.Errorf("unreachable: exit %d, want 3\n%s", r.Code, r.Err)
	}
	if ds := decisions(); len(ds) != 2 {
		t.Fatalf("refused decisions were recorded: %+v", ds)
	}
	// The test's clock stands still, so both approvals carry one time and
	// either may be listed first.
	if r = approve(managementAs("bob")); r.Code != 0 || !strings.Contains(r.Out, "2 of 2 approvals (alice, bob)") && !strings.Contains(r.Out, "2 of 2 approvals (bob, alice)") {
		t.Errorf("bob completes the ring's approvals: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
}
