package skew

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The kubeadm and Cluster API backup writes the snapshot into etcd's data
// directory, the only one the etcd pod can write to, and only once the
// node has room there for it and a defragmentation's copy of the db; the
// check runs before the snapshot.
func TestRunbookEtcdBackupRoom(t *testing.T) {
	for _, variant := range []string{"kubeadm-ha", "kubeadm-apt", "capi"} {
		backup, _ := restoreStep(t, variant)
		wantInOrder(t, variant+" backup", cmds(backup), "ETCD_DATA=$(kubectl -n kube-system get pod etcd-", `DB_BYTES=$(ssh "$NODE_SSH" sudo stat -c %s "$ETCD_DATA/member/snap/db")`, "snapshot save")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	const gib = 1 << 30
	for _, tc := range []struct {
		name              string
		dbBytes, availKiB int64
		sshFails, dfFails bool
		ok                bool
	}{
		{name: "room", dbBytes: 2 * gib, availKiB: 40 * gib / 1024, ok: true},
		{name: "room for one copy only", dbBytes: 2 * gib, availKiB: 3 * gib / 1024},
		{name: "exactly twice", dbBytes: 2 * gib, availKiB: 4 * gib / 1024},
		{name: "ssh fails", dbBytes: 2 * gib, availKiB: 40 * gib / 1024, sshFails: true},
		{name: "df fails", dbBytes: 2 * gib, availKiB: 40 * gib / 1024, dfFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			ssh := fmt.Sprintf("#!/bin/sh\ncase \"$3\" in stat) echo %d;; df) printf 'Filesystem 1024-blocks Used Available Capacity Mounted on\\n/dev/nvme1n1 104857600 1000 %d 1%%%% /var/lib/etcd\\n';; esac\n", tc.dbBytes, tc.availKiB)
			if tc.sshFails {
				ssh = "#!/bin/sh\necho 'ssh: connect to host cp-0 port 22: Connection refused' >&2\nexit 255\n"
			}
			if tc.dfFails {
				ssh = fmt.Sprintf("#!/bin/sh\ncase \"$3\" in stat) echo %d;; df) echo 'ssh: connect to host cp-0 port 22: Connection reset' >&2; exit 255;; esac\n", tc.dbBytes)
			}
			if err := os.WriteFile(filepath.Join(bin, "ssh"), []byte(ssh), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", strings.Join(chain(append(etcdRoom(), "echo ROOM")...), "\n"))
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "NODE_SSH=cp-0", "ETCD_DATA=/var/lib/etcd")
			out, err := cmd.CombinedOutput()
			if got := err == nil && strings.Contains(string(out), "ROOM"); got != tc.ok {
				t.Errorf("passed %v, want %v: %v\n%s", got, tc.ok, err, out)
			}
			if tc.dfFails && !strings.Contains(string(out), "ssh or df failed") {
				t.Errorf("no reason given:\n%s", out)
			}
			if !tc.ok && !tc.sshFails && !tc.dfFails && !strings.Contains(string(out), "could fill etcd's disk") {
				t.Errorf("no reason given:\n%s", out)
			}
		})
	}
}
