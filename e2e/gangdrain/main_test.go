//go:build e2e

// Package gangdraine2e runs `kubectl gang-drain` against a real control
// plane with the real Kueue and JobSet controllers: the checkpoint-and-yield
// flow, interruption and resume, the --on-timeout policies, and gangs
// stopped as units without Kueue.
package gangdraine2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the gang-drain e2e tests (E2E_QUEUEING=0)")
		os.Exit(0)
	}
	harness.Main(m, harness.Options{Kueue: true, JobSet: true})
}
