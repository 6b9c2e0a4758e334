package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The RKE2 node-pool rollback installs the exact release the pool ran
// before the step (INSTALL_RKE2_VERSION), not the newest patch of the
// previous minor's channel; where the inventory did not see it, the block
// stops on the placeholder before anything is installed.
func TestRunbookRKE2PoolBackPinned(t *testing.T) {
	p := variantPlan(t, "rke2")
	back := rollbackText(stepOf(t, p, PhaseNodePool, "gpu-l40s"))
	wantIn(t, "pool back", back, "PREV_RKE2=v1.37.3+rke2r1",
		`curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_VERSION="$PREV_RKE2" INSTALL_RKE2_TYPE=agent sh -`,
		`rke2 --version | grep -F " $PREV_RKE2 "`)
	wantNotIn(t, "pool back", back, "INSTALL_RKE2_CHANNEL")

	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	for _, tc := range []struct {
		rel    string
		curled bool
	}{{"v1.37.3+rke2r1", true}, {"<v1.37.N+rke2rM>", false}, {"v1.38.0+rke2r1", false}} {
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		for name, body := range map[string]string{
			"curl":      "#!/bin/sh\necho \"curl $*\" >> \"$LOG\"\necho 'echo installed'\n",
			"sudo":      "#!/bin/sh\necho \"sudo $*\" >> \"$LOG\"\n[ \"$1\" = systemctl ] || exec env \"$@\"\n",
			"rke2":      "#!/bin/sh\necho \"rke2 version $REL (1a2b3c4d)\"\n",
			"systemctl": "#!/bin/sh\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		lines := rke2Pinned("agent", tc.rel, "1.37")
		cmd := exec.Command("bash", "-c", strings.Join(lines, "\n"))
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "LOG="+log, "REL="+tc.rel)
		out, err := cmd.CombinedOutput()
		calls, _ := os.ReadFile(log)
		if got := strings.Contains(string(calls), "curl "); got != tc.curled || (err == nil) != tc.curled {
			t.Errorf("%s: curl ran %v, err %v, want %v\n%s\n%s", tc.rel, got, err, tc.curled, out, calls)
		}
		if tc.curled && !strings.Contains(string(calls), "sudo INSTALL_RKE2_VERSION="+tc.rel+" INSTALL_RKE2_TYPE=agent sh -") {
			t.Errorf("%s: the install script did not get the exact release:\n%s", tc.rel, calls)
		}
	}
}
