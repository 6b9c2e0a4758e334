//go:build e2e

// Package demoe2e runs `make demo` (hack/demo.sh with the plugins already
// built) twice in a row, as a user who follows README does, against the
// demo's own control plane with the real Kueue and JobSet managers on the
// scenario of testdata/demo: each run's runbook, step by step with its exit
// code, the training gang included both times, the cluster's final state,
// and a `demo down` that returns only once every process has exited and
// freed its ports.
package demoe2e

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the demo e2e test (E2E_QUEUEING=0)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
