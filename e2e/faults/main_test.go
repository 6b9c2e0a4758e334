//go:build e2e

// Package faultse2e runs the plugins through a fault-injecting proxy in
// front of a real kube-apiserver: throttling (429 with Retry-After), 5xx
// storms and a server that never answers. Each plugin must retry with the
// server's pacing, give up within bounds, and end with one error line and
// exit code 3.
package faultse2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{})
}
