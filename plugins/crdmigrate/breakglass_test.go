package crdmigrate

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

func asUser(cg *cli.TestClientGetter, user string) {
	cg.KubeClient.(*kubefake.Clientset).PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: user}}}, nil
	})
}

func annotation(t *testing.T, cg *cli.TestClientGetter, crd string) (string, bool) {
	t.Helper()
	got, err := cg.ExtClient.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crd, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := got.Annotations[crdmigrate.AnnotationBreakGlass]
	return v, ok
}

// TestRun_ForceRecordsBreakGlass: --force rewrites every object and the
// storedVersions of a CRD that asks for nothing; the CRD keeps who did it
// and when, in gpufleet.dev/break-glass, and the run says so.
func TestRun_ForceRecordsBreakGlass(t *testing.T) {
	cg := fixture()
	asUser(cg, "alice@example.com")
	before := time.Now().Add(-time.Second)
	_, errOut, code := run(t, cg, "run", "queues.example.dev", "--method", "client", "--force")
	after := time.Now().Add(time.Second)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	v, ok := annotation(t, cg, "queues.example.dev")
	if !ok {
		t.Fatalf("no %s annotation after --force\n%s", crdmigrate.AnnotationBreakGlass, errOut)
	}
	const prefix = "crd-migrate run --force by alice@example.com at "
	if !strings.HasPrefix(v, prefix) {
		t.Fatalf("annotation %q, want prefix %q", v, prefix)
	}
	at, err := time.Parse(time.RFC3339, strings.TrimPrefix(v, prefix))
	if err != nil || at.Before(before.Truncate(time.Second)) || at.After(after) {
		t.Errorf("annotation time %q: %v (run between %s and %s)", v, err, before, after)
	}
	if !strings.Contains(errOut, "--force is break-glass; recorded "+crdmigrate.AnnotationBreakGlass) {
		t.Errorf("the run does not say what it recorded:\n%s", errOut)
	}

	// Without --force nothing is recorded.
	cg = fixture()
	asUser(cg, "alice@example.com")
	if _, errOut, code := run(t, cg, "run", "queues.example.dev", "--method", "client"); code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if v, ok := annotation(t, cg, "queues.example.dev"); ok {
		t.Errorf("a run without --force recorded %q", v)
	}
}

// TestRun_ForceWithoutRecordRefuses: when the break-glass record cannot be
// written (no patch permission), the forced run does not start: exit 3,
// no object rewritten, storedVersions unchanged.
func TestRun_ForceWithoutRecordRefuses(t *testing.T) {
	cg := fixture()
	asUser(cg, "bob")
	cg.ExtClient.(*apiextfake.Clientset).PrependReactor("patch", "customresourcedefinitions", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "queues.example.dev", nil)
	})
	var writes int
	cg.DynamicClient.(*dynamicfake.FakeDynamicClient).PrependReactor("update", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateActionImpl); ok && len(u.UpdateOptions.DryRun) > 0 {
			return false, nil, nil // the pre-flight's server-side dry run
		}
		writes++
		return false, nil, nil
	})
	_, errOut, code := run(t, cg, "run", "queues.example.dev", "--method", "client", "--force")
	if code != cli.ExitUnavailable || !strings.Contains(errOut, crdmigrate.AnnotationBreakGlass) {
		t.Fatalf("want exit 3 naming the record, got %d\n%s", code, errOut)
	}
	if writes != 0 {
		t.Errorf("%d objects rewritten without the record", writes)
	}
	got, _ := cg.ExtClient.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "queues.example.dev", metav1.GetOptions{})
	if len(got.Status.StoredVersions) != 2 {
		t.Errorf("storedVersions trimmed without the record: %v", got.Status.StoredVersions)
	}
}
