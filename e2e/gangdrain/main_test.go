//go:build e2e

// Package gangdraine2e runs `kubectl gang-drain` against a real control
// plane with the real Kueue and JobSet controllers: the checkpoint-and-yield
// flow, interruption and resume, the --on-timeout policies, and gangs
// stopped as units without Kueue.
package gangdraine2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Kueue: true, JobSet: true})
}
