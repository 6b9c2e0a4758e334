package cli

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Identity is who the API server says the caller is: its user name, UID
// and groups, as authentication.k8s.io/v1 UserInfo carries them. With
// impersonation (kubectl --as, --as-group, --as-uid) it is the impersonated
// user, since the server answers for the user it authorises.
type Identity struct {
	User   string   `json:"user"`
	UID    string   `json:"uid,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// WhoAmIAction is the request WhoAmI makes, as RBAC names it: the verb and
// the resource a refusal is about.
const WhoAmIAction = "create selfsubjectreviews.authentication.k8s.io"

// WhoAmI asks the cluster who the caller is with a SelfSubjectReview
// (authentication.k8s.io/v1, served since Kubernetes 1.28: k8s.io/api
// v0.37.2 as pkg/apilifecycle lists it). RBAC's default ClusterRole
// system:basic-user lets every authenticated user create one. An error
// names the request and is exit 3: the server could not be reached or
// refused it.
func WhoAmI(ctx context.Context, kube kubernetes.Interface) (Identity, error) {
	ssr, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err == nil && (ssr == nil || ssr.Status.UserInfo.Username == "") {
		err = errors.New("the server named no user")
	}
	if err != nil {
		return Identity{}, ClusterErr(fmt.Errorf("cannot tell who you are: %s: %w", WhoAmIAction, err))
	}
	u := ssr.Status.UserInfo
	return Identity{User: u.Username, UID: u.UID, Groups: u.Groups}, nil
}
