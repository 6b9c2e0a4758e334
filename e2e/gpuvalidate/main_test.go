//go:build e2e

// Package gpuvalidatee2e runs kubectl-gpu_validate against a real control
// plane: KWOK nodes carry the GPU resources, a small HTTPS server stands in
// for kubelets' configz (the apiserver proxies nodes/NAME/proxy/configz to
// it), and a second KWOK process serves the check pods' logs from fixture
// files, so results are read through the real pods/log API.
package gpuvalidatee2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}
