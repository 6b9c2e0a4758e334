package skew

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rollback puts the kept release over the binary the server's unit
// runs, wherever the install script put it (/opt/rke2/bin where
// /usr/local is read-only), not over the one PATH finds, and stops before
// anything is stopped where the unit names no executable.
func TestRunbookServerBinaryFromUnit(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	for _, tc := range []struct {
		name string
		exec bool
	}{{"binary under /opt", true}, {"no such binary", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, opt := filepath.Join(dir, "bin"), filepath.Join(dir, "opt", "rke2", "bin")
			for _, d := range []string{bin, opt} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			server := filepath.Join(opt, "rke2")
			if tc.exec {
				if err := os.WriteFile(server, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// systemctl show -p ExecStart --value as systemd prints it.
			systemctl := fmt.Sprintf("#!/bin/sh\n[ \"$1 $2 $3 $4 $5\" = 'show -p ExecStart --value rke2-server' ] || exit 1\necho '{ path=%s ; argv[]=%s server ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }'\n", server, server)
			if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(systemctl), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", strings.Join(chain(append(unitBinary("", "rke2-server"), `echo "BIN=$BIN"`)...), "\n"))
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if tc.exec {
				if err != nil || !strings.Contains(string(out), "BIN="+server+"\n") {
					t.Errorf("want BIN=%s: %v\n%s", server, err, out)
				}
				return
			}
			if err == nil || strings.Contains(string(out), "BIN=") || !strings.Contains(string(out), "systemctl cat rke2-server") {
				t.Errorf("want a stop that says where to look: %v\n%s", err, out)
			}
		})
	}
}

// The RKE2 rollback does not claim that nothing is downloaded: the binary
// kept is not its images, which RKE2 pulls unless the node has them.
func TestRunbookRKE2RollbackImages(t *testing.T) {
	_, restore := restoreStep(t, "rke2")
	text := rollbackText(restore)
	wantIn(t, "rke2 restore", text, "/var/lib/rancher/rke2/agent/images")
	wantNotIn(t, "rke2 restore", text, "so that nothing is downloaded")
}
