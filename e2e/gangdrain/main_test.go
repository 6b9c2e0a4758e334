//go:build e2e

// Package gangdraine2e runs `kubectl gang-drain` against a real control
// plane with the real Kueue and JobSet controllers: the checkpoint-and-yield
// flow, interruption and resume, the --on-timeout policies, and gangs
// stopped as units without Kueue.
package gangdraine2e

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the gang-drain e2e tests (E2E_QUEUEING=0)")
		os.Exit(0)
	}
	opts := harness.Options{Kueue: true, JobSet: true}
	// E2E_SCALE_KCM_QPS raises the controller manager's request rate (its
	// default, 20 QPS, makes the Job controller take about 50 s to delete
	// and unfinalize 512 pods, which bounds TestGangDrainCellScale's stop
	// latency whatever the drain does).
	if q, err := strconv.Atoi(os.Getenv("E2E_SCALE_KCM_QPS")); err == nil && q > 0 {
		opts.ControllerManagerArgs = []string{"--kube-api-qps=" + strconv.Itoa(q), "--kube-api-burst=" + strconv.Itoa(2*q)}
	}
	harness.Main(m, opts)
}
