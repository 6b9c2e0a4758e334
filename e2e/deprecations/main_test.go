//go:build e2e

// Package deprecationse2e runs `kubectl deprecations` against a real
// control plane: a client calling a deprecated API is found through the
// apiserver metric and the audit log, a field manager writing through a
// deprecated version through managedFields, a Helm release record and a
// CRD with an old stored version.
package deprecationse2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	// resource.k8s.io/v1beta1 is deprecated in 1.35 and removed in 1.38:
	// served here so a client can call it.
	harness.Main(m, harness.Options{RuntimeConfig: []string{"resource.k8s.io/v1beta1=true"}})
}
