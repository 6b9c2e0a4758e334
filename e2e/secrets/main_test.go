//go:build e2e

// Package secretse2e checks that no plugin prints what it must not: a
// canary planted in a Helm release record (Secret and ConfigMap), an
// ordinary Secret, a pod's environment and annotations and a node's
// annotations never reaches stdout or stderr, in any output format and at
// any -v, while the deprecations scan provably read the Helm record. It
// also checks the break-glass audit trail of gang-drain and crd-migrate,
// and that every plugin gives up on a server that never answers within
// --request-timeout.
package secretse2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m, harness.Options{}) }
