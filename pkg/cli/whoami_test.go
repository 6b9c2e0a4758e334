package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestWhoAmI(t *testing.T) {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: "alice", UID: "u-1", Groups: []string{"fleet-approvers", "system:authenticated"}}}}, nil
	})
	got, err := WhoAmI(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{User: "alice", UID: "u-1", Groups: []string{"fleet-approvers", "system:authenticated"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("identity (-want +got):\n%s", d)
	}
}

// TestWhoAmIRefused: a refused review, or one that names nobody, is exit 3
// with the request named.
func TestWhoAmIRefused(t *testing.T) {
	forbidden := fake.NewClientset()
	forbidden.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"}, "", nil)
	})
	for name, kube := range map[string]*fake.Clientset{"forbidden": forbidden, "nobody": fake.NewClientset()} {
		t.Run(name, func(t *testing.T) {
			_, err := WhoAmI(context.Background(), kube)
			if code := ExitCode(err); code != ExitUnavailable {
				t.Errorf("exit %d, want %d: %v", code, ExitUnavailable, err)
			}
			if err == nil || !strings.Contains(err.Error(), "create selfsubjectreviews.authentication.k8s.io") {
				t.Errorf("the error does not name the request: %v", err)
			}
		})
	}
}
