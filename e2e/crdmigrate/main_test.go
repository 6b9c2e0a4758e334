//go:build e2e

// Package crdmigratee2e runs the built kubectl-crd_migrate against a real
// control plane and proves its results through etcd itself.
package crdmigratee2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestMain starts one control plane for the package. StorageVersionMigrator
// is GA and on by default in 1.37 (storagemigration.k8s.io/v1 served, and
// the controller runs in kube-controller-manager with --controllers=*); it
// is set explicitly so the in-tree test keeps meaning the same on a release
// where the default differs.
func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{FeatureGates: map[string]bool{"StorageVersionMigrator": true}})
}
