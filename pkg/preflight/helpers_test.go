package preflight

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func apierrorsForbidden(res, verb string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: res}, "", errors.New(`User "alice" cannot `+verb+` resource "`+res+`" in API group "" at the cluster scope`))
}
