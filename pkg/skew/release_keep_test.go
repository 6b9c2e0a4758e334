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

// The k3s and RKE2 rollback puts back the server binary the backup kept
// beside the snapshot: nothing of it is downloaded while the control plane
// is down, and the binary reaches each server before any is stopped.
func TestRunbookServerRollbackNeedsNoDownload(t *testing.T) {
	for _, tc := range []struct {
		variant, dist, unit string
	}{
		{"k3s-etcd", "k3s", "k3s"},
		{"k3s-sqlite", "k3s", "k3s"},
		{"rke2", "rke2", "rke2-server"},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			backup, restore := restoreStep(t, tc.variant)
			text := rollbackText(restore)
			wantNotIn(t, "restore", text, "curl ", "wget ", "get.k3s.io", "get.rke2.io", "INSTALL_")
			onNode := "/root/" + tc.dist + "-release-pre-1.38"
			wantInOrder(t, "restore", text,
				"# here, for each server node: the "+tc.dist+" release of v1.37",
				`NODE_ID=$(ssh "$NODE_SSH" hostname) && test -n "$NODE_ID" && \`,
				`KEEP="$BACKUP_DIR/`+tc.dist+`-release-pre-1.38/$NODE_ID" && \`,
				`scp -r "$KEEP" "$NODE_SSH":"$STAGE/release" && \`,
				"systemctl show -p ExecStart --value "+tc.unit,
				"sudo systemctl stop "+tc.unit+" && \\",
				`sudo sh -c 'cd `+onNode+` && sha256sum -c `+tc.dist+`.sha256'`,
				`sudo install -m 0755 `+onNode+`/`+tc.dist+` "$BIN.rollback"`,
				`sudo mv -f "$BIN.rollback" "$BIN"`,
				`"$BIN" --version | grep -F " $PREV "`,
				"sudo systemctl start "+tc.unit)
			wantNotIn(t, "restore", text, `sudo cp `+onNode+` "$BIN"`)
			wantInOrder(t, "backup", cmds(backup),
				"# here, for each server node, every one of them: its own "+tc.dist+" release",
				`REL=$(ssh "$NODE_SSH" "$BIN" --version | awk 'NR == 1 {print $3}') && \`,
				`KEEP="$BACKUP_DIR/`+tc.dist+`-release-pre-1.38/$NODE_ID" && \`,
				`curl -fsSL -o "$KEEP/`+tc.dist+`.partial"`,
				`| sha256sum -c - && `,
				`echo "$SUM  `+tc.dist+`" > "$KEEP/`+tc.dist+`.sha256"`,
				`mv "$KEEP/`+tc.dist+`.partial" "$KEEP/`+tc.dist+`"`)
		})
	}
}

// The backup's release lines, run in bash with ssh and curl standing in
// (curl serves release assets from a directory by the URL's last two
// segments, tag and file): the binary kept is the asset of the server's
// architecture, of the tag the server runs, checked against the release's
// sha256sum file; a server already on the next minor, a binary that does
// not match its checksum, or a release with no asset for the architecture
// keeps nothing.
func TestRunbookServerReleaseKept(t *testing.T) {
	for _, bin := range []string{"bash", "sha256sum", "awk"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " is not installed")
		}
	}
	for _, tc := range []struct {
		name, dist, version, arch string
		corrupt                   bool
		asset                     string // the asset kept; "" when nothing is
		err                       string
	}{
		{name: "k3s amd64", dist: "k3s", version: "k3s version v1.37.3+k3s1 (1a2b3c4d)", arch: "x86_64", asset: "k3s"},
		{name: "k3s arm64", dist: "k3s", version: "k3s version v1.37.3+k3s1 (1a2b3c4d)", arch: "aarch64", asset: "k3s-arm64"},
		{name: "k3s armv7", dist: "k3s", version: "k3s version v1.37.3+k3s1 (1a2b3c4d)", arch: "armv7l", asset: "k3s-armhf"},
		{name: "rke2 armv7", dist: "rke2", version: "rke2 version v1.37.2+rke2r1 (5e6f7a8b)", arch: "armv7l", err: "404"},
		{name: "rke2 amd64", dist: "rke2", version: "rke2 version v1.37.2+rke2r1 (5e6f7a8b)", arch: "x86_64", asset: "rke2.linux-amd64"},
		{name: "rke2 arm64", dist: "rke2", version: "rke2 version v1.37.2+rke2r1 (5e6f7a8b)", arch: "aarch64", asset: "rke2.linux-arm64"},
		{name: "server already moved", dist: "k3s", version: "k3s version v1.38.0+k3s1 (1a2b3c4d)", arch: "x86_64", err: "not v1.37"},
		{name: "checksum mismatch", dist: "rke2", version: "rke2 version v1.37.2+rke2r1 (5e6f7a8b)", arch: "x86_64", corrupt: true, err: "FAILED"},
		{name: "no asset for the architecture", dist: "k3s", version: "k3s version v1.37.3+k3s1 (1a2b3c4d)", arch: "ppc64le", err: "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			assets, bin, backupDir := filepath.Join(dir, "assets"), filepath.Join(dir, "bin"), filepath.Join(dir, "backup")
			tag := strings.Fields(tc.version)[2]
			for _, d := range []string{filepath.Join(assets, tag), bin, backupDir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			// The release as it is published: one binary per
			// architecture and one sha256sum file per architecture,
			// listing that architecture's assets.
			files := map[string]map[string]string{"k3s": {"amd64": "k3s", "arm64": "k3s-arm64", "arm": "k3s-armhf"}, "rke2": {"amd64": "rke2.linux-amd64", "arm64": "rke2.linux-arm64"}}[tc.dist]
			for arch, name := range files {
				body := "binary " + tag + " " + arch
				if err := os.WriteFile(filepath.Join(assets, tag, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte(body))
				if tc.corrupt {
					sum = sha256.Sum256([]byte("another build"))
				}
				list := fmt.Sprintf("%x  %s\n%x  %s-images.%s.tar.zst\n", sum, name, sha256.Sum256([]byte("images")), tc.dist, arch)
				if err := os.WriteFile(filepath.Join(assets, tag, "sha256sum-"+arch+".txt"), []byte(list), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stubs := map[string]string{
				"ssh": "#!/bin/sh\ncase \"$2\" in uname) echo " + tc.arch + ";; hostname) echo srv-0;; systemctl) echo '{ path=/usr/local/bin/" + tc.dist + " ; argv[]=/usr/local/bin/" + tc.dist + " server ; ignore_errors=no }';; test) [ \"$4\" = /usr/local/bin/" + tc.dist + " ];; /usr/local/bin/" + tc.dist + ") echo '" + tc.version + "'; echo 'go version go1.25.1';; rpm) exit 1;; *) exit 127;; esac\n",
				"curl": `#!/bin/sh
out=
while [ $# -gt 1 ]; do case "$1" in -o) out=$2; shift 2;; *) shift;; esac; done
echo "curl $1" >> "$LOG"
f="$ASSETS/$(basename "$(dirname "$1")")/${1##*/}"
[ -f "$f" ] || { echo "curl: (22) 404 $1" >&2; exit 22; }
if [ -n "$out" ]; then cp "$f" "$out"; else cat "$f"; fi
`,
			}
			for name, body := range stubs {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			log := filepath.Join(dir, "log")
			script := strings.Join(chain(releaseKeep(tc.dist, Step{To: "1.38"})...), "\n")
			cmd := exec.Command("bash", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log, "ASSETS="+assets,
				"BACKUP_DIR="+backupDir, "NODE_SSH=srv-0")
			out, err := cmd.CombinedOutput()
			arch := map[string]string{"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}[tc.arch]
			keep := filepath.Join(backupDir, tc.dist+"-release-pre-1.38", "srv-0")
			kept := filepath.Join(keep, tc.dist)
			if tc.err != "" {
				if err == nil || !strings.Contains(string(out), tc.err) {
					t.Errorf("want a failure saying %q: %v\n%s", tc.err, err, out)
				}
				for _, f := range []string{kept, filepath.Join(keep, "release")} {
					if _, err := os.Stat(f); err == nil {
						t.Errorf("kept %s after a failure", f)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\n%s\n%s", err, script, out)
			}
			got, err := os.ReadFile(kept)
			if err != nil || string(got) != "binary "+tag+" "+arch {
				t.Errorf("kept %q (%v), want the %s binary of %s", got, err, arch, tag)
			}
			calls, _ := os.ReadFile(log)
			for _, u := range []string{"/" + tag + "/" + tc.asset, "/" + tag + "/sha256sum-" + arch + ".txt"} {
				if !strings.Contains(string(calls), u) {
					t.Errorf("did not fetch %s:\n%s", u, calls)
				}
			}
			if _, err := os.Stat(kept + ".partial"); err == nil {
				t.Error("the .partial copy was left behind")
			}
			// The sha256 recorded beside it checks it where it lands.
			check := exec.Command("sha256sum", "-c", tc.dist+".sha256")
			check.Dir = keep
			if out, err := check.CombinedOutput(); err != nil {
				t.Errorf("the recorded sha256 does not check the kept binary: %v\n%s", err, out)
			}
			if rel, _ := os.ReadFile(filepath.Join(keep, "release")); strings.TrimSpace(string(rel)) != tag {
				t.Errorf("release kept %q, want %s", rel, tag)
			}
		})
	}
}
