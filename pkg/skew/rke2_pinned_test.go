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
// stops on the placeholder before anything is installed. The release is
// checked on the binary the unit's ExecStart runs, not on the rke2 PATH
// finds first (a tarball install in /usr/local/bin beside an RPM one in
// /usr/bin).
func TestRunbookRKE2PoolBackPinned(t *testing.T) {
	p := variantPlan(t, "rke2")
	back := rollbackText(stepOf(t, p, PhaseNodePool, "gpu-l40s"))
	wantIn(t, "pool back", back, "PREV_RKE2=v1.37.3+rke2r1",
		`curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_VERSION="$PREV_RKE2" INSTALL_RKE2_TYPE=agent sh -`,
		"systemctl show -p ExecStart --value rke2-agent",
		`"$BIN" --version | grep -F " $PREV_RKE2 "`)
	wantNotIn(t, "pool back", back, "INSTALL_RKE2_CHANNEL", "\nrke2 --version", "\n   rke2 --version")

	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	for _, tc := range []struct {
		name    string
		rel     string
		unitRel string // what the unit's binary reports after the install
		pathRel string // what the rke2 PATH finds reports
		curled  bool
		ok      bool
	}{
		{"the release, an older rke2 first on PATH", "v1.37.3+rke2r1", "v1.37.3+rke2r1", "v1.36.9+rke2r1", true, true},
		{"the unit still runs another release", "v1.37.3+rke2r1", "v1.38.0+rke2r1", "v1.37.3+rke2r1", true, false},
		{"a placeholder", "<v1.37.N+rke2rM>", "", "", false, false},
		{"a release of the wrong minor", "v1.38.0+rke2r1", "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			unitDir := filepath.Join(dir, "unit")
			if err := os.MkdirAll(unitDir, 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "log")
			unitBin := filepath.Join(unitDir, "rke2")
			for name, body := range map[string]string{
				filepath.Join(dir, "curl"):      "#!/bin/sh\necho \"curl $*\" >> \"$LOG\"\necho 'echo installed'\n",
				filepath.Join(dir, "sudo"):      "#!/bin/sh\necho \"sudo $*\" >> \"$LOG\"\n[ \"$1\" = systemctl ] || exec env \"$@\"\n",
				filepath.Join(dir, "rke2"):      "#!/bin/sh\necho \"rke2 version $PATH_REL (1a2b3c4d)\"\n",
				filepath.Join(dir, "systemctl"): "#!/bin/sh\n[ \"$1 $2 $3 $4 $5\" = \"show -p ExecStart --value rke2-agent\" ] && echo \"{ path=$UNIT_BIN ; argv[]=$UNIT_BIN agent ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\"\nexit 0\n",
				unitBin:                         "#!/bin/sh\necho \"rke2 version $UNIT_REL (1a2b3c4d)\"\n",
			} {
				if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			lines := rke2Pinned("agent", tc.rel, "1.37")
			cmd := exec.Command("bash", "-c", strings.Join(lines, "\n"))
			cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "LOG="+log,
				"UNIT_BIN="+unitBin, "UNIT_REL="+tc.unitRel, "PATH_REL="+tc.pathRel)
			out, err := cmd.CombinedOutput()
			calls, _ := os.ReadFile(log)
			if got := strings.Contains(string(calls), "curl "); got != tc.curled {
				t.Errorf("curl ran %v, want %v\n%s\n%s", got, tc.curled, out, calls)
			}
			if (err == nil) != tc.ok {
				t.Errorf("the block's status: %v, want success %v\n%s\n%s", err, tc.ok, out, calls)
			}
			if tc.curled && !strings.Contains(string(calls), "sudo INSTALL_RKE2_VERSION="+tc.rel+" INSTALL_RKE2_TYPE=agent sh -") {
				t.Errorf("the install script did not get the exact release:\n%s", calls)
			}
		})
	}
}
