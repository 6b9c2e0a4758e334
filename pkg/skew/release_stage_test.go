package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The rollback copies the release a server ran before to that server
// through a directory mktemp -d makes there, not through a fixed /tmp path
// another user could have made first. Run in bash with ssh and scp
// standing in for a server whose temporary files are under $REMOTE_TMP
// (where a directory of the old fixed name already stands, made by
// someone else): the release reaches the server's keep directory through
// a new directory, which is gone afterwards, and nothing touches the one
// that stood there.
func TestRunbookServerReleaseStagedInMktemp(t *testing.T) {
	for _, bin := range []string{"bash", "mktemp"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skip(bin + " is not installed")
		}
	}
	for _, tc := range []struct{ dist string }{{"k3s"}, {"rke2"}} {
		t.Run(tc.dist, func(t *testing.T) {
			var b blocks
			releaseToServers(&b, tc.dist, "1.38", "1.37")
			var lines []string
			for _, l := range FlattenBlocks(b.done()) {
				if strings.HasPrefix(l, "NODE_SSH=") || strings.HasPrefix(l, "BACKUP_DIR=") {
					continue // set below
				}
				lines = append(lines, l)
			}
			text := strings.Join(lines, "\n")
			wantNotIn(t, "copy to the server", text, "/tmp/")
			wantIn(t, "copy to the server", text, `STAGE=$(ssh "$NODE_SSH" mktemp -d) && test -n "$STAGE" && \`)

			dir := t.TempDir()
			remoteTmp, bin, backup := filepath.Join(dir, "remote-tmp"), filepath.Join(dir, "bin"), filepath.Join(dir, "backup")
			keep := filepath.Join(backup, tc.dist+"-release-pre-1.38", "srv-0")
			squat := filepath.Join(remoteTmp, tc.dist+"-release-pre-1.38")
			for _, d := range []string{remoteTmp, bin, keep, squat} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for name, body := range map[string]string{
				filepath.Join(keep, "release"):  "v1.37.3\n",
				filepath.Join(keep, tc.dist):    "binary\n",
				filepath.Join(squat, "planted"): "not ours\n",
			} {
				if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// ssh: hostname, mktemp -d in $REMOTE_TMP, rm -rf of what is
			// under it; every sudo command is logged, and its cp -r source
			// must hold the release. scp -r copies only to a path under
			// $REMOTE_TMP, as /tmp stands for it here.
			for name, body := range map[string]string{
				"ssh": `#!/bin/bash
shift
case "$1" in
hostname) echo srv-0;;
mktemp) [ "$2" = -d ] && exec mktemp -d -p "$REMOTE_TMP";;
rm) case "$3" in "$REMOTE_TMP"/?*) rm -rf "$3";; *) echo "rm outside the server's tmp: $*" >&2; exit 1;; esac;;
sudo) echo "sudo ${*:2}" >> "$LOG"
  if [ "$2" = cp ]; then [ -s "$4/release" ] || { echo "cp from $4: no release there" >&2; exit 1; }; echo "$4" > "$LOG.cp"; fi;;
*) echo "ssh: $*" >&2; exit 127;;
esac
`,
				"scp": `#!/bin/bash
[ "$1" = -r ] || exit 2
dst=${3#*:}
case "$dst" in "$REMOTE_TMP"/?*) cp -r "$2" "$dst";; *) echo "scp to $dst: outside the server's tmp" >&2; exit 1;; esac
`,
			} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			log := filepath.Join(dir, "log")
			cmd := exec.Command("bash", "-c", text)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+log, "REMOTE_TMP="+remoteTmp,
				"BACKUP_DIR="+backup, "NODE_SSH=srv-0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s\n%s", err, text, out)
			}
			src, err := os.ReadFile(log + ".cp")
			if err != nil {
				t.Fatalf("the release was not copied into place: %v", err)
			}
			stage := filepath.Dir(strings.TrimSpace(string(src)))
			if filepath.Dir(stage) != remoteTmp || stage == squat {
				t.Errorf("staged in %s, want a new directory of its own under %s", stage, remoteTmp)
			}
			if _, err := os.Stat(stage); err == nil {
				t.Errorf("the staging directory %s is left on the server", stage)
			}
			if got, err := os.ReadFile(filepath.Join(squat, "planted")); err != nil || string(got) != "not ours\n" {
				t.Errorf("the directory that stood at the old fixed path was touched: %q %v", got, err)
			}
			calls, _ := os.ReadFile(log)
			wantIn(t, "sudo on the server", string(calls), "rm -rf /root/"+tc.dist+"-release-pre-1.38", "chmod -R go= /root/"+tc.dist+"-release-pre-1.38")
		})
	}
}
