package runbooke2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeFiles takes and copies a snapshot as the kubeadm backup does:
// etcdctl snapshot save in the pod writes the node's file, ssh cat,
// sha256sum -c and rm handle it on the node; other commands over ssh are
// refused.
func TestNodeFiles(t *testing.T) {
	dir := t.TempDir()
	shims, nodes := filepath.Join(dir, "shims"), filepath.Join(dir, "nodes")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeNodeSSH(shims, nodes); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shims, "etcdctl"), []byte(fakeEtcdctl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := seedEtcdDB(filepath.Join(nodes, "cp-0")); err != nil {
		t.Fatal(err)
	}
	script := `set -e
RUNBOOK_NODE_ROOT="$N/cp-0" RUNBOOK_NODE=cp-0 etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/x snapshot save /var/lib/etcd/s.db
ssh cp-0 sudo cat /var/lib/etcd/s.db > "$B/s.db"
ssh cp-0 sudo sha256sum /var/lib/etcd/s.db | awk -v f="$B/s.db" '{print $1 "  " f}' | sha256sum -c -
ssh cp-0 sudo rm /var/lib/etcd/s.db
test ! -e "$N/cp-0/var/lib/etcd/s.db"
test "$(ssh cp-0 uname -m)" = x86_64
test "$(ssh cp-0 sudo stat -c %s /var/lib/etcd/member/snap/db)" = 4194304
test "$(ssh cp-0 sudo df -Pk /var/lib/etcd | awk 'NR == 2 {print $4}')" = 94371840
grep -q cp-0 "$B/s.db"
`
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+shims+":"+os.Getenv("PATH"), "N="+nodes, "B="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("backup over the node files: %v\n%s", err, out)
	}
	for _, bad := range []string{"ssh cp-0 sudo systemctl restart kubelet", "ssh cp-0 sudo cat relative.db", "ssh cp-0 sudo cat /var/lib/etcd/missing.db", "ssh cp-0 sudo df -Pk /var/lib/missing", "ssh cp-0 sudo stat -c %s /var/lib/etcd/missing.db"} {
		cmd := exec.Command("bash", "-c", bad)
		cmd.Env = append(os.Environ(), "PATH="+shims+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("%s: succeeded: %s", bad, out)
		} else if strings.TrimSpace(string(out)) == "" {
			t.Errorf("%s: failed without saying why", bad)
		}
	}
}

// TestK3sBackupOverSSH takes and copies a k3s etcd snapshot as the k3s
// backup does over ssh (etcd-snapshot save, ls -t, cat, sha256sum -c,
// the token), and the SQLite copy of a server without embedded etcd; it
// refuses etcd-snapshot where k3s would: no embedded etcd, an agent, a
// node without the binary, a save without --name.
func TestK3sBackupOverSSH(t *testing.T) {
	dir := t.TempDir()
	shims, nodes := filepath.Join(dir, "shims"), filepath.Join(dir, "nodes")
	if err := os.MkdirAll(shims, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeNodeSSH(shims, nodes); err != nil {
		t.Fatal(err)
	}
	run := func(w *World, script string) (string, error) {
		if err := writeNodeFiles(nodes, w); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+shims+":"+os.Getenv("PATH"), "B="+dir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	etcd := NewWorld("k3s", "skip-level")
	backup := `set -e
SNAP=$(ssh root@cp-0 sudo k3s etcd-snapshot save --name pre-1.36 >&2 && ssh cp-0 sudo ls -t /var/lib/rancher/k3s/server/db/snapshots | grep -m1 '^pre-1\.36-')
case "$SNAP" in pre-1.36-cp-0-[0-9]*) ;; *) echo "snapshot named $SNAP" >&2; exit 1;; esac
ssh cp-0 sudo cat "/var/lib/rancher/k3s/server/db/snapshots/$SNAP" > "$B/$SNAP"
ssh cp-0 sudo sha256sum "/var/lib/rancher/k3s/server/db/snapshots/$SNAP" | awk -v f="$B/$SNAP" '{print $1 "  " f}' | sha256sum -c -
ssh cp-0 sudo cat /var/lib/rancher/k3s/server/token > "$B/token"
grep -q '^K10[0-9a-f]*::server:' "$B/token"
`
	if out, err := run(etcd, backup); err != nil {
		t.Fatalf("k3s etcd backup over ssh: %v\n%s", err, out)
	}
	sqlite := NewWorld("k3s", "unknown-os")
	if out, err := run(sqlite, `set -e
ssh cp-0 sudo tar -C /var/lib/rancher/k3s/server -czf - db token > "$B/db.tgz"
tar -tzf "$B/db.tgz" | grep -qx db/state.db
`); err != nil {
		t.Fatalf("k3s SQLite backup over ssh: %v\n%s", err, out)
	}
	for _, c := range []struct {
		w    *World
		cmd  string
		want string
	}{
		{sqlite, "ssh cp-0 sudo k3s etcd-snapshot save --name pre-1.37", "etcd datastore disabled"},
		{etcd, "ssh gpu-0 sudo k3s etcd-snapshot save --name pre-1.36", "not a k3s server"},
		{etcd, "ssh cp-0 sudo rke2 etcd-snapshot save --name pre-1.36", "rke2: command not found"},
		{etcd, "ssh cp-0 sudo k3s etcd-snapshot save", "want k3s etcd-snapshot save --name NAME"},
		{etcd, "ssh cp-0 sudo ls -t var/lib", "not an absolute path"},
		{NewWorld("kubeadm", "skip-level"), "ssh cp-0 sudo k3s etcd-snapshot save --name pre-1.36", "k3s: command not found"},
	} {
		out, err := run(c.w, c.cmd)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s on %s/%s: err %v, output %q; want a failure saying %q", c.cmd, c.w.Provider, c.w.Pools[0].Name, err, out, c.want)
		}
	}
	rke2 := NewWorld("rke2", "mixed-pools")
	if out, err := run(rke2, `set -e
ssh cp-1 sudo rke2 etcd-snapshot save --name pre-1.38 2>&1 | grep -q 'Saving etcd snapshot to /var/lib/rancher/rke2/server/db/snapshots/pre-1.38-cp-1-'
ssh cp-1 sudo ls -t /var/lib/rancher/rke2/server/db/snapshots | grep -q '^pre-1\.38-cp-1-'
`); err != nil {
		t.Fatalf("rke2 etcd backup over ssh: %v\n%s", err, out)
	}
}
