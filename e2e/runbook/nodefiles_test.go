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
