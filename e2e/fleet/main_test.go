//go:build e2e

// Package fleete2e runs the fleet programme (`kubectl skew fleet`) on real
// parts: three control planes from the harness as clusters (canary; prod;
// a training cell with the real Kueue and JobSet controllers) and a fourth
// as the management cluster, the real Argo Workflows workflow-controller
// v3.7.15 on the management cluster, every rendered object checked by Argo's own
// validation package, and the store on an S3 server (versitygw, which checks conditional
// writes) or a directory. Workflow pods run on a harness ExecNode: it SIMULATES the
// kubelet as KWOK simulates nodes, running each pod's `kubectl skew fleet
// step` command with the suite's binaries and reporting its exit code. The
// provider's pool upgrade is the demo's simulated one behind the fleet
// file's command template.
package fleete2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

var (
	envOnce sync.Once
	envErr  error
	shared  *fleetEnv
)

func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the fleet e2e tests (E2E_QUEUEING=0: the training cell needs Kueue and JobSet)")
		os.Exit(0)
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
	}
	os.Exit(code)
}

// env starts the planes, the controller, the exec node and the S3 server
// once for the package (the first test pays for it).
func env(t *testing.T) *fleetEnv {
	t.Helper()
	envOnce.Do(func() {
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		shared, envErr = startFleetEnv(ctx, t)
		if envErr == nil {
			t.Logf("fleet environment up in %s: %s", time.Since(began).Round(time.Second), shared.timings())
		}
	})
	if envErr != nil {
		t.Fatalf("fleet environment: %v", envErr)
	}
	return shared
}

var _ = harness.ArgoVersion
