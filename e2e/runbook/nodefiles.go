package runbooke2e

import (
	"fmt"
	"os"
	"path/filepath"
)

// The kubeadm backup takes etcd's snapshot inside the etcd pod (kubectl
// exec etcdctl snapshot save into etcd's data directory, which kubeadm
// mounts from the node) and copies it off the node over ssh (sudo cat,
// sudo sha256sum, sudo rm, uname -m). The lane keeps those files of each
// node under DIR/nodes/NODE: the etcd pods' kubectl exec runs fakeEtcdctl
// there (a KWOK ClusterExec, CheckPods), and ssh NODE runs the few
// file commands of the backup there. Any other command over ssh is
// refused as the host command it is.

// fakeEtcdctl answers what the runbook runs in the etcd pod: snapshot
// save FILE writes a snapshot to the node's FILE, member list -w simple
// names the one member (etcdctl v3.6's simple format: ID, status, name,
// peer URLs, client URLs, is learner).
const fakeEtcdctl = `#!/bin/sh
# etcdctl stand-in of the runbook lane, run in an etcd pod by kubectl exec
for a in "$@"; do shift; case "$a" in --*) ;; *) set -- "$@" "$a";; esac; done
case "$1 $2" in
"snapshot save")
  f="$RUNBOOK_NODE_ROOT$3"
  mkdir -p "$(dirname "$f")" && printf 'etcd snapshot of %s\n' "$RUNBOOK_NODE" > "$f" || exit 1
  echo "Snapshot saved at $3"; exit 0;;
"member list")
  echo "8e9e05c52164694d, started, $RUNBOOK_NODE, https://10.0.0.10:2380, https://10.0.0.10:2379, false"; exit 0;;
esac
echo "runbook lane: etcdctl $* is not simulated" >&2
exit 1
`

// etcdDB is the size of the etcd db the lane's control-plane nodes hold.
const etcdDB = 4 << 20

// seedEtcdDB writes the etcd db of a node whose files are under root:
// member/snap/db under the etcd pods' --data-dir (etcdCommand).
func seedEtcdDB(root string) error {
	dir := filepath.Join(root, "var", "lib", "etcd", "member", "snap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "db"), make([]byte, etcdDB), 0o600)
}

// nodeSSH is ssh NODE COMMAND on the node's files: sudo cat, sha256sum
// and rm of a file, stat -c %s of a file, df -Pk of a directory (the
// lane's nodes have 100 GiB with 90 free, in df -P's columns), and uname
// -m (the lane's nodes are amd64, as their kubernetes.io/arch label says).
const nodeSSH = `#!/bin/bash
# ssh stand-in of the runbook lane: the backup's file commands on a node
nodes=%q
host=$1; shift
host=${host#*@}
root="$nodes/$host"
[ "$1" = sudo ] && shift
case "$1" in
uname) [ "$2" = -m ] && [ $# -eq 2 ] && { echo x86_64; exit 0; };;
stat) [ "$2" = -c ] && [ "$3" = %%s ] && [ $# -eq 4 ] && case "$4" in /*) stat -c %%s "$root$4"; exit $?;; esac;;
df) [ "$2" = -Pk ] && [ $# -eq 3 ] && case "$3" in /*) [ -d "$root$3" ] || { echo "df: $3: No such file or directory" >&2; exit 1; }; printf 'Filesystem     1024-blocks     Used Available Capacity Mounted on\n/dev/root        104857600 10485760  94371840      10%%%% /\n'; exit 0;; esac;;
cat|sha256sum|rm)
  if [ $# -ge 2 ]; then
    cmd=$1; shift
    for f in "$@"; do case "$f" in /*) ;; *) echo "runbook lane: ssh $host $cmd $f: not an absolute path" >&2; exit 1;; esac; done
    case "$cmd" in
    cat) for f in "$@"; do cat "$root$f" || exit 1; done; exit 0;;
    rm) for f in "$@"; do rm "$root$f" || exit 1; done; exit 0;;
    sha256sum) for f in "$@"; do h=$(sha256sum < "$root$f") || exit 1; echo "${h%%%% *}  $f"; done; exit 0;;
    esac
  fi;;
esac
echo "runbook lane: ssh $host $*: a host command the lane does not run over ssh" >&2
exit 127
`

// writeNodeSSH writes the ssh shim over the host-command one.
func writeNodeSSH(shims, nodes string) error {
	if err := os.MkdirAll(nodes, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(shims, "ssh"), []byte(fmt.Sprintf(nodeSSH, nodes)), 0o755)
}
