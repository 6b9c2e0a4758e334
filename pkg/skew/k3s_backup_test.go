package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The k3s and RKE2 etcd backup asks the binary the server's unit runs
// (here /opt/bin/k3s, not on PATH), checks that the server has not moved before
// it takes a snapshot, and a paste again (to retry the release fetch after
// it) keeps the hop's snapshot rather than taking a new one, which the
// rollback would then restore as the newest.
func TestRunbookK3sSnapshotOnce(t *testing.T) {
	for _, v := range []string{"k3s-etcd", "rke2"} {
		backup, _ := restoreStep(t, v)
		wantInOrder(t, v+" backup", cmds(backup), "--version | awk 'NR == 1 {print $3}')", "not v1.37", "etcd-snapshot save", "curl -fsSL -o")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	dir := t.TempDir()
	bin, snaps, backupDir, log := filepath.Join(dir, "bin"), filepath.Join(dir, "snaps"), filepath.Join(dir, "backup"), filepath.Join(dir, "log")
	for _, d := range []string{bin, snaps, backupDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ssh := `#!/bin/bash
shift
[ "$1" = sudo ] && shift
set -- "${@//\/var\/lib\/rancher\/k3s\/server\/db\/snapshots/$SNAPS}"
if [ "$1" = systemctl ]; then echo '{ path=/opt/bin/k3s ; argv[]=/opt/bin/k3s server ; ignore_errors=no }'; exit; fi
if [ "$1 $2 $3" = "test -x /opt/bin/k3s" ]; then exit; fi
# the unit runs /opt/bin/k3s: a k3s found through PATH is not the server's
if [ "$1" = k3s ]; then echo "k3s: command not found" >&2; exit 127; fi
if [ "$1" = /opt/bin/k3s ]; then shift; set -- k3s "$@"; fi
if [ "$1" = k3s ] && [ "$2" = --version ]; then cat "$VER"; exit; fi
if [ "$1" = k3s ]; then echo SAVE >> "$LOG"; n=$(date +%s%N); echo "state $n" > "$SNAPS/pre-1.38-srv-0-$n"; exit; fi
exec "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(ssh), 0o755); err != nil {
		t.Fatal(err)
	}
	ver := filepath.Join(dir, "version")
	script := strings.Join(chain(append(append(releaseCheck("k3s", Step{To: "1.38"}), k3sSnapshot("k3s", Step{To: "1.38"})...), `echo "SNAP=$SNAP"`)...), "\n")
	run := func(version string) (string, error) {
		if err := os.WriteFile(ver, []byte(version+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SNAPS="+snaps, "LOG="+log, "VER="+ver, "BACKUP_DIR="+backupDir, "SERVER=srv-0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	saves := func() int { b, _ := os.ReadFile(log); return strings.Count(string(b), "SAVE") }
	// A copy that failed half way is no backup: the paste takes one.
	if err := os.WriteFile(filepath.Join(backupDir, "pre-1.38-srv-0-1.partial"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := run("k3s version v1.37.3+k3s1 (1a2b3c4d)")
	if err != nil || saves() != 1 {
		t.Fatalf("first paste: %d snapshots, %v\n%s\n%s", saves(), err, script, out)
	}
	first := strings.TrimSpace(out[strings.LastIndex(out, "SNAP=")+5:])
	if b, err := os.ReadFile(filepath.Join(backupDir, first)); err != nil || !strings.HasPrefix(string(b), "state ") {
		t.Fatalf("copy %q: %q %v\n%s", first, b, err, out)
	}
	out, err = run("k3s version v1.37.3+k3s1 (1a2b3c4d)")
	if err != nil || saves() != 1 || !strings.Contains(out, "SNAP="+first) || !strings.Contains(out, "there already, kept") {
		t.Errorf("second paste took a snapshot or lost the first: %d snapshots, %v\n%s", saves(), err, out)
	}
	out, err = run("k3s version v1.38.1+k3s1 (1a2b3c4d)")
	if err == nil || saves() != 1 || !strings.Contains(out, "the hop has begun") {
		t.Errorf("paste on a moved server: %d snapshots, %v\n%s", saves(), err, out)
	}
	if m, _ := filepath.Glob(filepath.Join(backupDir, "pre-1.38-*")); len(m) != 2 {
		t.Errorf("backup dir holds %v, want the first snapshot and the stale .partial", m)
	}
}

// A k3s cluster of several servers and no etcd nodes has an external
// datastore: its token and release are kept into a backup directory that
// is this cluster's own, made with umask 077, like every other backup.
func TestRunbookK3sExternalBackupDirOwned(t *testing.T) {
	inv := variantInventory(t, "k3s-sqlite")
	inv.Platform.ServerNodes = 2
	p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var backup Step
	for _, s := range p.Steps {
		if s.Phase == PhaseEtcd {
			backup = s
			break
		}
	}
	text := cmds(backup)
	wantIn(t, "backup", text, "the datastore is external")
	wantInOrder(t, "backup", text, "umask 077 && \\", `mkdir -p "$BACKUP_DIR" && \`, `grep -qx "$CLUSTER_UID" "$BACKUP_DIR/cluster-uid"`, `sudo cat /var/lib/rancher/k3s/server/token > "$BACKUP_DIR/k3s-token-pre-1.38" && \`, "REL=$(ssh")
}
