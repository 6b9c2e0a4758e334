package skew

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A backup directory is one cluster's: the first backup records the
// kube-system namespace's UID, a second cluster is refused, and a backup
// of a hop that is already there is never written over.
func TestBackupDirKeepsOneCluster(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	// kubectl get namespace kube-system -o jsonpath={.metadata.uid}
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte("#!/bin/sh\necho \"$FAKE_UID\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := append(backupDirOwned(), noBackupYet("etcd-pre-1.38.db"), `echo snapshot > "$BACKUP_DIR/etcd-pre-1.38.db"`)
	script := "BACKUP_DIR=" + dir + "/b\n" + strings.Join(chain(lines...), "\n")
	run := func(uid string) (string, error) {
		cmd := exec.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_UID="+uid)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("uid-a"); err != nil {
		t.Fatalf("first backup: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(dir, "b", "etcd-pre-1.38.db")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot %v %v: want mode 0600 (umask 077)", fi, err)
	}
	if out, err := run("uid-b"); err == nil || !strings.Contains(out, "keeps the backups of another cluster") {
		t.Errorf("another cluster's backup into the same directory: %v\n%s", err, out)
	}
	if out, err := run("uid-a"); err == nil || !strings.Contains(out, "the backup of this hop is there already") {
		t.Errorf("a second backup of the hop wrote over the first, or stopped silently: %v\n%s", err, out)
	}
	// A directory with files and no recorded cluster (another cluster's
	// backups from before the record) is refused.
	if err := os.MkdirAll(filepath.Join(dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old", "etcd-pre-1.38.db"), []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	oldScript := strings.Replace(script, "BACKUP_DIR="+dir+"/b\n", "BACKUP_DIR="+dir+"/old\n", 1)
	cmd := exec.Command("bash", "-c", oldScript)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_UID=uid-a")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "holds files of no recorded cluster") {
		t.Errorf("a directory of unknown files was taken: %v\n%s", err, out)
	}
	if out, err := run(""); err == nil {
		t.Errorf("an unread cluster UID passed\n%s", out)
	}
}

// The members for --initial-cluster come from etcdctl member list -w
// simple (the format of etcdctl/ctlv3/command/printer_simple.go); an
// empty answer or a member without a name fails the read.
func TestMemberListForInitialCluster(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte("#!/bin/sh\nprintf '%s' \"$FAKE_OUT\"\nexit ${FAKE_RC:-0}\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, out, rc, want string
		ok                  bool
	}{
		{"three members", "8e9e05c52164694d, started, cp-0, https://10.0.0.1:2380, https://10.0.0.1:2379, false\n91bc3c398fb3c146, started, cp-1, https://10.0.0.2:2380, https://10.0.0.2:2379, false\n", "0",
			"cp-0=https://10.0.0.1:2380,cp-1=https://10.0.0.2:2380", true},
		{"two peer URLs", "8e9e05c52164694d, started, cp-0, https://10.0.0.1:2380,https://[fd00::1]:2380, https://10.0.0.1:2379, false\n", "0",
			"cp-0=https://10.0.0.1:2380,cp-0=https://[fd00::1]:2380", true},
		{"unstarted member", "8e9e05c52164694d, started, cp-0, https://10.0.0.1:2380, https://10.0.0.1:2379, false\nfd422379fda50e48, unstarted, , https://10.0.0.3:2380, , false\n", "0", "", false},
		{"kubectl failed", "", "1", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", memberList("cp-0")+` && printf '%s' "$INITIAL"`)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_OUT="+tc.out, "FAKE_RC="+tc.rc)
			out, err := cmd.CombinedOutput()
			if (err == nil) != tc.ok || (tc.ok && string(out) != tc.want) {
				t.Errorf("got %q, %v; want %q, ok=%v", out, err, tc.want, tc.ok)
			}
		})
	}
}
