//go:build e2e

// Package pdbblockerse2e runs `kubectl pdb-blockers` against a real control
// plane (PodDisruptionBudget status from the real disruption controller,
// pods run by KWOK) and checks every verdict it predicts against what a
// real eviction of that pod then returns.
package pdbblockerse2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}
