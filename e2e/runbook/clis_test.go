//go:build e2e

package runbooke2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestREADMENamesTheLaneCLIs holds README.md's e2e/runbook section to the
// CLIs this lane pastes into, as the tools report their own versions: a
// CLI upgraded on the machine without the README following fails here.
// az is read when an AKS scenario runs (see needAz).
func TestREADMENamesTheLaneCLIs(t *testing.T) {
	clis, err := ReadCLIs(context.Background(), needAz())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the lane pastes into %s", strings.Join(clis.Names(), ", "))
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "`e2e/runbook`")
	if i < 0 {
		t.Fatal("README.md has no e2e/runbook section")
	}
	section := readme[i:]
	if j := strings.Index(section[1:], "\n#"); j >= 0 {
		section = section[:j+1]
	}
	section = strings.Join(strings.Fields(section), " ")
	for _, n := range clis.Names() {
		if !strings.Contains(section, n) {
			t.Errorf("README.md's e2e/runbook section does not name %s, the version installed here", n)
		}
	}
}
