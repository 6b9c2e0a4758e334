//go:build e2e

// Package demoe2e runs the demo's runbook (`democluster runbook`, what
// `make demo` shows) end to end against its own control plane with the real
// Kueue and JobSet managers, on the scenario of testdata/demo, so the demo
// cannot rot: each step's exit code and the cluster's final state.
package demoe2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the demo e2e test (E2E_QUEUEING=0)")
		os.Exit(0)
	}
	harness.Main(m, harness.Options{Kueue: true, JobSet: true})
}
