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
// lane's nodes have 100 GiB with 90 free, in df -P's columns), ls -t of a
// directory, uname -m (the lane's nodes are amd64, as their
// kubernetes.io/arch label says), and the k3s and RKE2
// backups: DIST etcd-snapshot save --name NAME on a server of embedded
// etcd writes ${data-dir}/server/db/snapshots/NAME-NODE-UNIXTIME, as
// k3s names an on-demand snapshot (k3s-io/k3s pkg/etcd/snapshot.go,
// Snapshot: fmt.Sprintf("%%s-%%s-%%d", EtcdSnapshotName, nodeName,
// now.Unix()), logging "Saving etcd snapshot to PATH";
// https://docs.k3s.io/cli/etcd-snapshot and
// https://docs.rke2.io/datastore/backup_restore, read 2026-12-07); on
// a server without embedded etcd it fails as k3s does there
// ("etcd datastore disabled"), and where the node has no such binary as
// sudo does. tar -C DIR -czf - PATHS archives the node's files (the
// SQLite backup of a k3s server).
const nodeSSH = `#!/bin/bash
# ssh stand-in of the runbook lane: the backup's file commands on a node
nodes=%q
host=$1; shift
host=${host#*@}
root="$nodes/$host"
[ "$1" = sudo ] && shift
# The binary a unit's ExecStart names, as the backup finds it.
case "$1" in /usr/local/bin/k3s|/usr/local/bin/rke2) set -- "${1##*/}" "${@:2}";; esac
abs() { case "$1" in /*) return 0;; esac; echo "runbook lane: ssh $host $2 $1: not an absolute path" >&2; exit 1; }
case "$1" in
hostname) [ $# -eq 1 ] && { echo "$host"; exit 0; };;
uname) [ "$2" = -m ] && [ $# -eq 2 ] && { echo x86_64; exit 0; };;
stat) [ "$2" = -c ] && [ "$3" = %%s ] && [ $# -eq 4 ] && case "$4" in /*) stat -c %%s "$root$4"; exit $?;; esac;;
df) [ "$2" = -Pk ] && [ $# -eq 3 ] && case "$3" in /*) [ -d "$root$3" ] || { echo "df: $3: No such file or directory" >&2; exit 1; }; printf 'Filesystem     1024-blocks     Used Available Capacity Mounted on\n/dev/root        104857600 10485760  94371840      10%%%% /\n'; exit 0;; esac;;
ls)
  if [ "$2" = -t ] && [ $# -eq 3 ]; then
    abs "$3" ls
    [ -d "$root$3" ] || { echo "ls: cannot access '$3': No such file or directory" >&2; exit 2; }
    ls -t "$root$3"; exit $?
  fi;;
tar)
  if [ "$2" = -C ] && [ "$4" = -czf ] && [ "$5" = - ] && [ $# -ge 6 ]; then
    abs "$3" tar
    dir=$3; shift 5
    tar -C "$root$dir" -czf - "$@"; exit $?
  fi;;
systemctl)
  if [ "$2" = show ] && [ "$3" = -p ] && [ "$4" = ExecStart ] && [ "$5" = --value ] && [ $# -eq 6 ]; then
    case "$6" in k3s|k3s-agent) d=k3s;; rke2-server|rke2-agent) d=rke2;; *) d=;; esac
    # systemd v255 prints an unknown unit's ExecStart as nothing
    [ -n "$d" ] && [ -x "$root/usr/local/bin/$d" ] && echo "{ path=/usr/local/bin/$d ; argv[]=/usr/local/bin/$d ${6#*-} ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
    exit 0
  fi;;
test)
  if [ "$2" = -x ] && [ $# -eq 3 ]; then abs "$3" test; [ -x "$root$3" ]; exit $?; fi;;
rpm)
  # the lane's k3s and RKE2 nodes are tarball installs
  if [ "$2" = -q ]; then for a in "$@"; do :; done; echo "package $a is not installed"; exit 1; fi;;
k3s|rke2)
  dist=$1
  if [ ! -x "$root/usr/local/bin/$dist" ]; then echo "sudo: $dist: command not found" >&2; exit 1; fi
  if [ "$2" = --version ] && [ $# -eq 2 ]; then
    # as k3s and RKE2 print it (pkg/cli/cmds/root.go): NAME version VERSION (COMMIT)
    echo "$dist version $(cat "$root/.lane-version") (1a2b3c4d)"; echo "go version go1.25.4"; exit 0
  fi
  if [ "$2" = etcd-snapshot ] && [ "$3" = save ]; then
    if [ $# -ne 5 ] || [ "$4" != --name ]; then echo "runbook lane: ssh $host $*: want $dist etcd-snapshot save --name NAME" >&2; exit 1; fi
    data="/var/lib/rancher/$dist/server"
    if [ ! -e "$root$data/token" ]; then echo "runbook lane: $host is not a $dist server: etcd-snapshot save reaches no server there" >&2; exit 1; fi
    if [ ! -d "$root$data/db/etcd" ]; then echo 'level=fatal msg="Error: see server log for details: etcd datastore disabled"' >&2; exit 1; fi
    snap="$data/db/snapshots/$5-$host-$(date +%%s)"
    mkdir -p "$root$data/db/snapshots" && printf 'etcd snapshot %%s of %%s\n' "$5" "$host" > "$root$snap" || exit 1
    echo "level=info msg=\"Saving etcd snapshot to $snap\"" >&2
    exit 0
  fi;;
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

// laneVersion is the file under a k3s or RKE2 node's files holding the
// release its binary reports; activate rewrites it as the node moves.
const laneVersion = ".lane-version"

// writeNodeSSH writes the ssh shim over the host-command one.
func writeNodeSSH(shims, nodes string) error {
	if err := os.MkdirAll(nodes, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(shims, "ssh"), []byte(fmt.Sprintf(nodeSSH, nodes)), 0o755)
}

// k3sToken is a server token in the secure format k3s writes to
// ${data-dir}/server/token: K10, the hash of the cluster CA, "::server:"
// and the secret (https://docs.k3s.io/cli/token#token-format, read
// 2026-12-07). RKE2 writes the same format.
const k3sToken = "K10" + "5e1a9d4c0b7f2e3a6d8c1f4b9e2a7d3c5f8b1e4a7d0c3f6b9e2a5d8c1f4b7e0a" + "::server:" + "3f9c2b7e1d4a8f6c"

// writeNodeFiles resets the files the lane keeps of each node of w and
// writes those the backup reads over ssh: etcd's db on a kubeadm or
// Cluster API control-plane node, and what a k3s or RKE2 node holds:
// the binary (/usr/local/bin, where the installers put it on a system
// without RPMs), and on a server the token and the datastore (db/etcd of
// an embedded etcd, db/state.db of SQLite) under /var/lib/rancher/DIST/server
// (https://docs.k3s.io/datastore/backup-restore,
// https://docs.rke2.io/install/methods, read 2026-12-07).
func writeNodeFiles(nodes string, w *World) error {
	for _, p := range w.Pools {
		for _, n := range p.Nodes {
			root := filepath.Join(nodes, n.Name)
			if err := os.RemoveAll(root); err != nil {
				return err
			}
			if w.Provider != "k3s" && w.Provider != "rke2" {
				// etcd's db of a kubeadm or Cluster API control-plane
				// node, whose size the backup checks the node's room
				// against before its snapshot.
				if p.ControlPlane {
					if err := seedEtcdDB(root); err != nil {
						return err
					}
				}
				continue
			}
			files := map[string]string{"usr/local/bin/" + w.Provider: "#!/bin/sh\n# " + w.Provider + " on " + n.Name + " (the runbook lane's node files)\n",
				// the release the binary reports (--version over ssh)
				laneVersion: kubeletVersion(w.Provider, n.Kubelet) + "\n"}
			data := "var/lib/rancher/" + w.Provider + "/server/"
			if p.ControlPlane {
				files[data+"token"] = k3sToken + "\n"
				if p.Etcd {
					files[data+"db/etcd/member/snap/db"] = "etcd data of " + n.Name + "\n"
				} else {
					files[data+"db/state.db"] = "SQLite datastore of " + n.Name + "\n"
				}
			}
			for f, body := range files {
				path := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
