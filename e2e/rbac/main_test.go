//go:build e2e

// Package rbace2e proves that the roles shipped in deploy/rbac/ are enough
// for each plugin's main flows, and that each of their rules is needed:
// with one rule removed, the plugin names the verb and resource it lacks
// and exits 3, or degrades as its help and the README say.
package rbace2e

import (
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Options{Kueue: true, JobSet: true})
}
