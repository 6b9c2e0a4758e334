//go:build e2e

// Package skewe2e runs kubectl-skew against a real control plane
// (kube-apiserver v1.37.2) with KWOK nodes at several kubelet versions.
package skewe2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}
