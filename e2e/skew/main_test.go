//go:build e2e

// Package skewe2e runs kubectl-skew against a real control plane
// (kube-apiserver v1.37.2) with KWOK nodes at several kubelet versions.
package skewe2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	// Pod Security exempts one RuntimeClass of its own (testdata): the
	// admission probes must show an exemption the API does not.
	cfg, err := filepath.Abs(filepath.Join("testdata", "admission-config.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	harness.Main(m, harness.Options{APIServerArgs: []string{"--admission-control-config-file=" + cfg}})
}
