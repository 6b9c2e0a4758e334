package skew

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A server's rollback, run in bash with systemctl, rpm, dnf and sudo
// standing in (sudo runs the command with /root/ moved under the test's
// directory): a binary install gets the kept binary only when it matches
// the sha256 recorded when it was kept, through a temporary name renamed
// over the unit's binary; an RKE2 server installed from RPMs goes back
// through dnf downgrade to the exact package versions kept, and no binary
// is copied over the package's.
func TestRunbookServerBackInstall(t *testing.T) {
	for _, bin := range []string{"bash", "sha256sum", "install"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " is not installed")
		}
	}
	const prev = "v1.37.3+rke2r1"
	for _, tc := range []struct {
		name    string
		rpm     bool
		corrupt bool
		ok      bool
	}{
		{name: "tarball", ok: true},
		{name: "tarball, kept binary damaged", corrupt: true},
		{name: "rpm", rpm: true, ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stubs, root, opt := filepath.Join(dir, "stubs"), filepath.Join(dir, "root"), filepath.Join(dir, "opt")
			keep := filepath.Join(root, "rke2-release-pre-1.38")
			for _, d := range []string{stubs, keep, opt} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			unitBin := filepath.Join(opt, "rke2")
			newer := "#!/bin/sh\necho 'rke2 version v1.38.1+rke2r1 (9f9f9f9f)'\n"
			older := "#!/bin/sh\necho 'rke2 version " + prev + " (1a2b3c4d)'\n"
			write := func(path, body string, mode os.FileMode) {
				t.Helper()
				if err := os.WriteFile(path, []byte(body), mode); err != nil {
					t.Fatal(err)
				}
			}
			write(unitBin, newer, 0o755)
			write(filepath.Join(keep, "release"), prev+"\n", 0o600)
			write(filepath.Join(keep, "rke2"), older, 0o600)
			sum := sha256.Sum256([]byte(older))
			if tc.corrupt {
				sum = sha256.Sum256([]byte("another build"))
			}
			write(filepath.Join(keep, "rke2.sha256"), fmt.Sprintf("%x  rke2\n", sum), 0o600)
			write(filepath.Join(keep, "rpm-server"), "1.37.3~rke2r1-0.el9\n", 0o600)
			write(filepath.Join(keep, "rpm-common"), "1.37.3~rke2r1-0.el9\n", 0o600)
			write(filepath.Join(keep, "rancher-rke2.repo"), "[rancher-rke2-1.37-stable]\n", 0o600)
			rpmInstalled := "1"
			if tc.rpm {
				rpmInstalled = "0"
			}
			write(filepath.Join(stubs, "systemctl"), fmt.Sprintf("#!/bin/sh\n[ \"$1\" = show ] && echo '{ path=%s ; argv[]=%s server ; ignore_errors=no }'\nexit 0\n", unitBin, unitBin), 0o755)
			write(filepath.Join(stubs, "rpm"), "#!/bin/sh\n[ \"$2\" = rke2-server ] && exit "+rpmInstalled+"\nexit 1\n", 0o755)
			// dnf downgrade puts the older binary in place, as the package does.
			write(filepath.Join(dir, "older"), older, 0o755)
			write(filepath.Join(stubs, "dnf"), "#!/bin/sh\necho \"dnf $*\" >> \"$LOG\"\ncp \"$DIR/older\" "+unitBin+"\n", 0o755)
			write(filepath.Join(stubs, "sudo"), `#!/bin/bash
set -- "${@//\/root\//$ROOT/}"
set -- "${@//\/etc\/yum.repos.d\//$DIR/}"
echo "sudo $*" >> "$LOG"
[ "$1" = dnf ] && set -- "$(command -v dnf)" "${@:2}"
exec "$@"
`, 0o755)
			log := filepath.Join(dir, "log")
			script := strings.Join(chain(serverBack("rke2", "1.38")...), "\n")
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+stubs+":"+os.Getenv("PATH"), "ROOT="+root, "DIR="+dir, "LOG="+log)
			out, err := cmd.CombinedOutput()
			calls, _ := os.ReadFile(log)
			got, _ := os.ReadFile(unitBin)
			if !tc.ok {
				if err == nil || !strings.Contains(string(out), "FAILED") || string(got) != newer {
					t.Errorf("want a stop at the sha256 check with the unit's binary untouched: %v\n%s\n%s", err, out, calls)
				}
				if strings.Contains(string(calls), "install -m 0755") {
					t.Errorf("installed a binary that failed its check:\n%s", calls)
				}
				return
			}
			if err != nil || string(got) != older {
				t.Fatalf("want %s back: %v\n%s\n%s\n%s", prev, err, script, out, calls)
			}
			if tc.rpm {
				wantIn(t, "rpm", string(calls), "dnf downgrade -y rke2-server-1.37.3~rke2r1-0.el9 rke2-common-1.37.3~rke2r1-0.el9", "install -m 0644 "+keep+"/rancher-rke2.repo "+dir+"/rancher-rke2.repo")
				wantNotIn(t, "rpm", string(calls), "install -m 0755", "mv -f")
				return
			}
			wantInOrder(t, "tarball", string(calls), "sha256sum -c rke2.sha256", "install -m 0755 "+keep+"/rke2 "+unitBin+".rollback", "mv -f "+unitBin+".rollback "+unitBin)
			if _, err := os.Stat(unitBin + ".rollback"); err == nil {
				t.Error("the temporary binary was left behind")
			}
		})
	}
}
