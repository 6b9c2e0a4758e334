package skew

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// PhaseControlPlane is the one step of a hop on a control plane the
// provider upgrades itself (EKS, GKE, AKS, Cluster API): it replaces
// apiservers and controllers, so the plan has no apiservers or controllers
// step of its own there (and no etcd-snapshot step, except on Cluster API,
// which takes no etcd backup).
const PhaseControlPlane = "control-plane"

// PhaseHold is the step before a control-plane hop that keeps the
// provider from rolling node pools when the control plane moves, so that
// each pool moves at its own step, gang-aware: a Cluster API defer-upgrade
// annotation, a pinned AMI id for Karpenter, a GKE maintenance exclusion,
// an EKS Auto Mode NodePool disruption budget. Each pool's step undoes it.
const PhaseHold = "hold-rollouts"

// Placeholders the commands use where the cluster does not show a name.
// They are quoted (sq) wherever they stand in a command, so that a pasted
// placeholder reaches the tool and fails with its own message instead of
// the shell reading <...> as a redirection.
const (
	phCluster       = "<cluster-name>"
	phRegion        = "<region>"
	phLocation      = "<location>"
	phResourceGroup = "<resource-group>"
	phPatch         = "<patch>"
	phVPCCNIRelease = "<vpc-cni-release>"
	phSelector      = "<pool-selector>"
	phNode          = "<node-name>"
	phMgmt          = "<management-context>"
	phNamespace     = "<namespace>"
)

// selfDrainTimeout is the time limit the runbook gives the drains it runs
// itself (kubectl drain --timeout, gang-drain run --timeout) and so the
// --drain-timeout of pdb-blockers before them. It is this runbook's
// choice, not a provider's.
const selfDrainTimeout = "1h"

// shellSafe matches the words a shell passes through as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9._/:=@%+,-]+$`)

// sq quotes a word for the shell when it needs it: placeholders, and names
// with characters the shell would read.
func sq(v string) string {
	if shellSafe.MatchString(v) {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}

// forProvider rewrites a plan for its provider: on a managed control plane
// one step per hop replaces the apiservers and controllers steps (and the
// etcd-snapshot step, except on Cluster API); a hold-rollouts step goes
// before each control-plane step whose hop the provider would follow with
// node pools on its own; and every step gets its commands.
func forProvider(p *Plan, inv Inventory, prov Provider, asgs map[string]string) {
	r := newRenderer(inv, prov)
	r.asgs = asgs
	if prov.Managed() {
		var steps []Step
		for _, s := range p.Steps {
			switch s.Phase {
			case PhaseEtcd:
				if prov != ProviderCAPI {
					continue
				}
				s.Note = "Cluster API's KubeadmControlPlane takes no etcd backup (its API has no such field): take one from a control-plane machine of the workload cluster"
			case PhaseControllers:
				continue
			case PhaseAPIServers:
				s.Phase = PhaseControlPlane
				s.Action = fmt.Sprintf("%s upgrades the control plane to %s: the apiserver instances one at a time and the controllers are the provider's own steps", prov.Title(), s.To)
				s.Note = fmt.Sprintf("apiservers may be mixed while it runs, so hold back manifests that use APIs new in %s until it finishes", s.To)
				if prov != ProviderCAPI {
					s.Note = fmt.Sprintf("no etcd snapshot or per-apiserver step here: %s does them; ", prov.Title()) + s.Note
				}
			}
			steps = append(steps, s)
		}
		renumber(p, steps)
	}
	if prov == ProviderK3s || prov == ProviderRKE2 {
		for i := range p.Steps {
			if p.Steps[i].Phase == PhaseEtcd {
				p.Steps[i].Action = fmt.Sprintf("back up the datastore and the server token before the hop to %s", p.Steps[i].To)
			}
		}
	}
	r.target = p.Summary.Target
	r.insertHolds(p)
	r.plan = p
	for i := range p.Steps {
		p.Steps[i].Blocks = r.commands(p.Steps[i]).done()
		p.Steps[i].Commands = FlattenBlocks(p.Steps[i].Blocks)
		p.Steps[i].Rollback = r.rollback(p.Steps[i])
	}
	p.Warnings = append(p.Warnings, r.warnings()...)
}

// renumber numbers steps from 1 and points the pools' upgrades at the new
// numbers; a step numbered 0 is new.
func renumber(p *Plan, steps []Step) {
	old := map[int]int{}
	for i := range steps {
		if steps[i].Number != 0 {
			old[steps[i].Number] = i + 1
		}
		steps[i].Number = i + 1
	}
	p.Steps = steps
	for i := range p.Pools {
		for j := range p.Pools[i].Upgrades {
			p.Pools[i].Upgrades[j].Step = old[p.Pools[i].Upgrades[j].Step]
		}
	}
}

// renderer writes the commands of one plan's steps.
type renderer struct {
	prov     Provider
	inv      Inventory
	pf       Platform
	cluster  string
	region   string
	cpNodes  []string          // control-plane nodes, from the apiserver pods
	cpOn     map[string]string // node -> apiserver version
	pools    map[string]Pool
	capiName string
	capiNS   string
	capiAPI  string
	target   string
	plan     *Plan
	// held are the pools a hold-rollouts step holds now; gkeHeld is the
	// cluster-wide GKE maintenance exclusion.
	held    map[string]bool
	gkeHeld bool
	// capiHeld is set while the Cluster's MachineDeployment topologies are
	// deferred.
	capiHeld bool
	// asgs are the pools an EC2 Auto Scaling group makes (pool -> group).
	asgs map[string]string
	// saved is the evidence file of the last pre-flight step so far.
	saved string
}

func newRenderer(inv Inventory, prov Provider) *renderer {
	r := &renderer{prov: prov, inv: inv, pools: map[string]Pool{}, cpOn: map[string]string{}, held: map[string]bool{}}
	if inv.Platform != nil {
		r.pf = *inv.Platform
	}
	r.cluster = orPlaceholder(r.pf.ClusterName, phCluster)
	r.region = orPlaceholder(r.pf.Region, phRegion)
	for _, c := range inv.Components {
		if c.Name == KindAPIServer && c.State == StateVisible && c.Instance != "" {
			node := strings.TrimPrefix(c.Instance, KindAPIServer+"-")
			r.cpNodes = append(r.cpNodes, node)
			r.cpOn[node] = c.Version
		}
	}
	sort.Strings(r.cpNodes)
	for _, pl := range inv.Pools {
		r.pools[pl.Name] = pl
	}
	if c, ok := capiCluster(&r.pf); ok {
		r.capiName, r.capiNS = c.Name, c.Namespace
		r.cluster = c.Name
	} else {
		r.capiName, r.capiNS = orPlaceholder(r.pf.ClusterAPIName, phCluster), orPlaceholder(r.pf.ClusterAPINamespace, phNamespace)
	}
	r.capiAPI = orPlaceholder(r.pf.ClusterAPIVersion, "v1beta1")
	if prov == ProviderAKS && r.pf.ClusterName == "" {
		// The node resource group is MC_<resource-group>_<cluster>_<region>
		// (https://learn.microsoft.com/azure/aks/faq, "Why are two
		// resource groups created with AKS?"); split it only when the
		// names hold no underscore of their own.
		if parts := strings.Split(r.pf.ResourceGroup, "_"); len(parts) == 4 && strings.EqualFold(parts[0], "MC") {
			r.cluster = parts[2]
			r.pf.ResourceGroup = parts[1]
		} else {
			r.pf.ResourceGroup = ""
		}
	}
	return r
}

func orPlaceholder(v, ph string) string {
	if v == "" {
		return ph
	}
	return v
}

// commands returns the blocks of one step.
func (r *renderer) commands(s Step) blocks {
	var b blocks
	switch s.Phase {
	case PhasePreflight:
		b.add(r.preflight(s)...)
	case PhaseEtcd:
		b.add(r.etcd(s)...)
		if dist := k3sDist(r.prov); dist != "" {
			b.cut()
			b.add(releaseKeepBlock(dist, s)...)
		}
	case PhaseHold:
		b.add(r.holdCommands(s)...)
	case PhaseAPIServers:
		b = r.apiservers(s)
	case PhaseControllers:
		b.add(r.controllers(s)...)
	case PhaseControlPlane:
		b.add(r.controlPlane(s)...)
	case PhaseAddons:
		b = r.addons(s)
	case PhaseNodePool:
		b = r.nodePool(s)
	}
	return b
}

func baseline(minor string) string { return "preflight-" + minor + ".yaml" }

// kubectlMgmt is kubectl against Cluster API's management cluster, where
// the Cluster, MachineDeployment and Machine objects live.
func (r *renderer) kubectlMgmt() string {
	return "kubectl --context " + sq(phMgmt)
}

func (r *renderer) preflight(s Step) []string {
	r.saved = baseline(s.To)
	out := []string{
		fmt.Sprintf("kubectl skew preflight --target v%s --save %s%s", s.To, baseline(s.To), r.poolLabelFlag()),
		fmt.Sprintf("kubectl deprecations --target v%s", s.To),
		"kubectl crd-migrate status",
	}
	switch r.prov {
	case ProviderEKS:
		// EKS upgrade insights: list-insights filtered on the category
		// UPGRADE_READINESS, the target version and the statuses that need
		// action; the filter in the CLI's shorthand for InsightsFilter
		// (categories, kubernetesVersions, statuses:
		// https://docs.aws.amazon.com/eks/latest/APIReference/API_InsightsFilter.html,
		// https://docs.aws.amazon.com/cli/latest/reference/eks/list-insights.html).
		out = append(out, fmt.Sprintf("aws eks list-insights --region %s --cluster-name %s --filter 'categories=UPGRADE_READINESS,kubernetesVersions=%s,statuses=ERROR,WARNING,UNKNOWN'", sq(r.region), sq(r.cluster), s.To))
	case ProviderGKE:
		out = append(out, fmt.Sprintf("gcloud container get-server-config --location=%s%s --format='yaml(validMasterVersions)'", sq(phLocation), r.project()))
	case ProviderAKS:
		out = append(out, fmt.Sprintf("az aks get-upgrades --resource-group %s --name %s --output table", sq(r.resourceGroup()), sq(r.cluster)))
	case ProviderCAPI:
		out = append(out, fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s   # on the management cluster", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	case ProviderKubeadm:
		// kubeadm upgrade plan lists what the installed kubeadm can reach,
		// not the target's patch releases; dl.k8s.io/release/stable-X.Y.txt
		// names the newest patch of a minor (the version label kubeadm
		// itself resolves: kubernetes cmd/kubeadm/app/util/version.go).
		out = append(out, fmt.Sprintf("curl -fsSL https://dl.k8s.io/release/stable-%s.txt   # the newest v%s patch: the <patch> of the steps below", s.To, s.To))
	}
	return out
}

// etcdctl runs etcdctl with kubeadm's etcd certificates
// (https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#snapshot-using-etcdctl-options)
// inside the etcd static pod of node: kubeadm installs no etcdctl on the
// host, and the registry.k8s.io/etcd image carries etcd and etcdctl
// (kubernetes cluster/images/etcd/Makefile installs those two from each
// etcd release, at kubernetes/kubernetes 003187fd5a08; Dockerfile: COPY
// etcd* etcdctl* /usr/local/bin/, at 147581efd2a5), on
// gcr.io/distroless/static with no cat, tar or sha256sum: the snapshot
// leaves the node over ssh, and etcdutl checks it off the node.
func etcdctl(node, args string) string {
	return fmt.Sprintf("kubectl -n kube-system exec etcd-%s -- etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key %s", sq(node), args)
}

// EtcdctlCommand is the etcdctl command line for a kubeadm control plane,
// run in the etcd static pod of node, for pre-flight's etcd gate.
func EtcdctlCommand(node, args string) string { return etcdctl(node, args) }

// Placeholders of the backup steps.
const (
	phBackupDir = "<backup-dir>"
	phServer    = "<server-node>"
)

// backupDir names the operator's destination of a backup: off the cluster,
// encrypted at rest, since a snapshot and the server token open every
// Secret.
func backupDir() string {
	return "BACKUP_DIR=" + sq(phBackupDir) + "   # this cluster's own directory, off the cluster (an encrypted volume here, a mounted backup share): the backup holds every Secret"
}

// sshTo names how ssh reaches a node.
func sshTo(v, node, what string) string {
	return fmt.Sprintf("%s=%s   # how ssh reaches %s (user@address where the name does not resolve); sudo there without a password", v, sq(node), what)
}

// etcd takes the snapshot of a hop, copies it off the node, checks the
// copy byte for byte against the node's file and then with etcdutl of the
// cluster's etcd release on the operator's machine: on Cluster API the
// KubeadmControlPlane rollout that follows replaces the control-plane
// machines (rolloutStrategy maxSurge "Defaults to 1",
// api/controlplane/kubeadm/v1beta2/kubeadm_control_plane_types.go,
// kubernetes-sigs/cluster-api v1.14.0), and on kubeadm the node is the one
// upgraded next, so a copy left on it is no backup. The snapshot leaves
// etcd's data directory once copied. etcdctl has no snapshot status since
// etcd v3.6 (etcdctl/ctlv3/command/snapshot_command.go has save alone at
// etcd-io/etcd v3.6.0 and v3.7.1; v3.5.0 marked status "[deprecated]");
// etcdutl snapshot status is the check (etcdutl/etcdutl/snapshot_command.go,
// v3.7.1), and the etcd image has no etcdutl.
func (r *renderer) etcd(s Step) []string {
	file := etcdSnapshotFile(s.To)
	switch r.prov {
	case ProviderK3s:
		return r.k3sBackup("k3s", s)
	case ProviderRKE2:
		return r.k3sBackup("rke2", s)
	}
	node := r.firstCP()
	onNode := `"$ETCD_DATA/` + file + `"`
	var out []string
	switch r.prov {
	case ProviderCAPI:
		out = append(out, "# against the workload cluster: KubeadmControlPlane runs etcd as a static pod on each control-plane machine and replaces the machines at the next step, so the copy must be off the machine first (ssh as the KubeadmControlPlane's users or the infrastructure provider's bastion allow)")
	case ProviderUnknown:
		out = append(out, "# where etcd runs as kubeadm's static pod; otherwise take the snapshot with etcdctl on an etcd member, with its own certificates")
	}
	out = append(out, "# the snapshot, taken in the etcd pod into etcd's data directory (its --data-dir, which kubeadm mounts at the same path on the node; the etcd pod mounts no other writable directory) once the node's filesystem there has room for it and a defragmentation's copy of etcd's db beside it, then copied here, the copy checked byte for byte against the node's file, and taken out of etcd's data directory; the members kept beside it for a restore, when the apiserver may not answer. The directory is this cluster's alone (it keeps the kube-system namespace's UID and refuses another's), and files are made readable by you alone:",
		backupDir(), sshTo("NODE_SSH", node, node))
	backup := append(backupDirOwned(),
		noBackupYet(file),
		memberList(node),
		`test -n "$INITIAL"`,
		fmt.Sprintf(`echo "$INITIAL" > "$BACKUP_DIR/%s"`, etcdMembersFile(s.To)),
		etcdDataDirOfPod(node))
	out = append(out, chain(append(append(backup, etcdRoom()...),
		etcdctl(node, "snapshot save "+onNode),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo cat %s > "$BACKUP_DIR/%s.partial"`, onNode, file),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo sha256sum %s | awk -v f="$BACKUP_DIR/%s.partial" '{print $1 "  " f}' | sha256sum -c -`, onNode, file),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo rm %s`, onNode),
		fmt.Sprintf(`mv "$BACKUP_DIR/%s.partial" "$BACKUP_DIR/%s"`, file, file))...)...)
	out = append(out, fmt.Sprintf("# here: etcdutl of the release the etcd pod runs (its image tag), for this machine's OS and architecture, checks the copy; the etcd image carries no etcdutl, and etcdctl has no snapshot status since etcd v3.6. Then etcdutl for the restore, Linux on the node's architecture, is kept beside the snapshot as %s: a restore runs while the control plane is down, when a node without internet access could not download it:", nodeEtcdutl(s.To, "$NODE_ARCH")))
	lines := []string{
		fmt.Sprintf(`ETCD_VER=$(kubectl -n kube-system get pod etcd-%s -o jsonpath='{.spec.containers[0].image}' | sed 's/.*://; s/^v//; s/-.*//')`, sq(node)),
		`ETCDUTL_DIR="$BACKUP_DIR/etcd-v$ETCD_VER"`,
		`mkdir -p "$ETCDUTL_DIR"`,
	}
	lines = append(lines, etcdutlFetch("ETCDUTL_DIR")...)
	lines = append(lines, fmt.Sprintf(`"$ETCDUTL_DIR/etcdutl" snapshot status "$BACKUP_DIR/%s" -w table`, file))
	lines = append(lines, nodeEtcdutlFetch(s.To)...)
	return append(out, chain(lines...)...)
}

// backupDirOwned makes $BACKUP_DIR this cluster's own, so that a shared
// backup location never mixes two clusters' snapshots (a restore installs
// whatever snapshot of the hop it finds, and etcdutl cannot tell which
// cluster one came from): the first backup records the kube-system
// namespace's UID in an empty directory, and a directory that holds
// another cluster's UID, or files and no UID, is refused. umask 077 keeps
// the snapshot and token, which hold every Secret, from other users of
// this machine; it stays set in the pasting shell.
func backupDirOwned() []string {
	return []string{
		"umask 077",
		`CLUSTER_UID=$(kubectl get namespace kube-system -o jsonpath='{.metadata.uid}')`,
		`test -n "$CLUSTER_UID"`,
		`mkdir -p "$BACKUP_DIR"`,
		`{ test -e "$BACKUP_DIR/cluster-uid" || { test -z "$(ls -A "$BACKUP_DIR")" && echo "$CLUSTER_UID" > "$BACKUP_DIR/cluster-uid"; } || { echo "$BACKUP_DIR holds files of no recorded cluster: choose an empty directory for this cluster" >&2; false; }; }`,
		`{ grep -qx "$CLUSTER_UID" "$BACKUP_DIR/cluster-uid" || { echo "$BACKUP_DIR keeps the backups of another cluster: choose a directory of this cluster's own" >&2; false; }; }`,
	}
}

// noBackupYet stops a backup chain, loudly, where the hop's backup is
// there already: pasted again after the hop began, a new snapshot would
// hold the upgraded state and the one a rollback needs would be lost. A
// copy is written as <file>.partial and renamed once checked, so a failed
// copy never passes for a backup.
func noBackupYet(file string) string {
	f := `"$BACKUP_DIR/` + file + `"`
	return fmt.Sprintf(`{ test ! -e %s || { ls -l %s >&2; echo "the backup of this hop is there already: keep it once the hop has begun; before that, move it away to take a new one" >&2; false; }; }`, f, f)
}

// etcdMembersFile is the file under $BACKUP_DIR that keeps the etcd
// members (name=peer URL, comma-separated: --initial-cluster) the backup
// of the hop to minor read.
func etcdMembersFile(minor string) string { return "etcd-members-pre-" + minor }

// etcdDataDirOfPod reads the data directory of node's etcd static pod
// from its --data-dir flag (kubeadm writes it from etcd.local.dataDir,
// default /var/lib/etcd, and mounts the host directory at the same path:
// GetEtcdPodSpec and getEtcdCommand in cmd/kubeadm/app/phases/etcd/local.go,
// kubernetes v1.37.2), so that a cluster with another data directory
// snapshots into it.
func etcdDataDirOfPod(node string) string {
	return fmt.Sprintf(`ETCD_DATA=$(kubectl -n kube-system get pod etcd-%s -o jsonpath='{range .spec.containers[0].command[*]}{@}{"\n"}{end}' | sed -n 's/^--data-dir=//p') && test -n "$ETCD_DATA"`, sq(node))
}

// etcdRoom stops the backup, loudly, unless the filesystem of $ETCD_DATA
// on $NODE_SSH has more room than twice etcd's db file: the snapshot
// written there is as large as the db (backend.Snapshot writes tx.Size()
// bytes, the size of the bbolt file, server/storage/backend/backend.go),
// and a defragmentation, which etcd or an operator may start while the
// snapshot sits there, writes a copy of the db as db.tmp.* in the same
// directory (backend.defrag, same file), both at etcd-io/etcd v3.7.1. A
// full disk under etcd's data directory stops etcd's WAL writes, which is
// the outage the backup is there to undo; etcd's db is member/snap/db
// under the data directory (ServerConfig.BackendPath,
// datadir.ToBackendFileName in server/storage/datadir/datadir.go, same
// version). The etcd image has no df: the check runs over ssh.
func etcdRoom() []string {
	return []string{
		`DB_BYTES=$(ssh "$NODE_SSH" sudo stat -c %s "$ETCD_DATA/member/snap/db")`,
		`AVAIL_KB=$(ssh "$NODE_SSH" sudo df -Pk "$ETCD_DATA" | awk 'NR == 2 {print $4}')`,
		`{ test -n "$AVAIL_KB" || { echo "df of $ETCD_DATA over ssh to $NODE_SSH said nothing: ssh or df failed (see above); the room for the snapshot is unknown" >&2; false; }; }`,
		`{ [ "$((AVAIL_KB * 1024))" -gt "$((2 * DB_BYTES))" ] || { echo "$ETCD_DATA on $NODE_SSH has $AVAIL_KB KiB free, not more than twice etcd's db ($DB_BYTES bytes): the snapshot written there could fill etcd's disk; free room there first" >&2; false; }; }`,
	}
}

// etcdRelease is where etcd publishes a release's binaries
// (https://github.com/etcd-io/etcd/releases/download/v<version>/, the URL
// kubernetes cluster/images/etcd/Makefile fetches): for Linux on amd64,
// arm64, ppc64le and s390x etcd-v<version>-linux-<arch>.tar.gz, for macOS
// on amd64 and arm64 etcd-v<version>-darwin-<arch>.zip, each holding
// etcd-v<version>-<os>-<arch>/{etcd,etcdctl,etcdutl} (scripts/build-binary.sh
// at etcd-io/etcd v3.7.1: tar cfz for linux, zip -qr otherwise; the
// release's own check is "etcdutl version: <version>", scripts/release.sh).
const etcdRelease = "https://github.com/etcd-io/etcd/releases/download/v$ETCD_VER/etcd-v$ETCD_VER"

// unameArch maps uname -m to the architecture of etcd's asset names: Linux
// says x86_64 and aarch64, macOS x86_64 and arm64.
const unameArch = `sed 's/^x86_64$/amd64/; s/^aarch64$/arm64/'`

// etcdutlFetch puts etcdutl of etcd release $ETCD_VER for the machine it
// runs on (Linux or macOS, by uname -s and uname -m) into the directory
// $dirVar names, and checks the binary's version.
func etcdutlFetch(dirVar string) []string {
	dir := `"$` + dirVar + `"`
	zip := `"$` + dirVar + `/etcd.zip"`
	return []string{
		`ETCD_OS=$(uname -s | tr '[:upper:]' '[:lower:]')`,
		`ETCD_ARCH=$(uname -m | ` + unameArch + `)`,
		`case "$ETCD_OS" in ` +
			`linux) curl -fsSL "` + etcdRelease + `-linux-$ETCD_ARCH.tar.gz" | tar -xzf - -C ` + dir + ` --strip-components=1 "etcd-v$ETCD_VER-linux-$ETCD_ARCH/etcdutl";; ` +
			`darwin) curl -fsSL -o ` + zip + ` "` + etcdRelease + `-darwin-$ETCD_ARCH.zip" && unzip -q -o -j ` + zip + ` "etcd-v$ETCD_VER-darwin-$ETCD_ARCH/etcdutl" -d ` + dir + ` && rm ` + zip + `;; ` +
			`*) echo "etcd publishes no etcdutl for $ETCD_OS" >&2; false;; esac`,
		fmt.Sprintf(`"$%s/etcdutl" version | grep -F "etcdutl version: $ETCD_VER"`, dirVar),
	}
}

// nodeEtcdutl is the file under $BACKUP_DIR that keeps etcdutl for the
// restore of the hop to minor, Linux on arch (a shell word).
func nodeEtcdutl(minor, arch string) string {
	return fmt.Sprintf(`$BACKUP_DIR/etcdutl-pre-%s-linux-%s`, minor, arch)
}

// nodeEtcdutlFetch keeps etcdutl of release $ETCD_VER, Linux on the
// architecture of the node $NODE_SSH reaches, beside the snapshot of the
// hop to minor: the restore copies it to each member, so that it needs no
// download while the control plane is down.
func nodeEtcdutlFetch(minor string) []string {
	return []string{
		`NODE_ARCH=$(ssh "$NODE_SSH" uname -m | ` + unameArch + `)`,
		`mkdir -p "$ETCDUTL_DIR/linux-$NODE_ARCH"`,
		`curl -fsSL "` + etcdRelease + `-linux-$NODE_ARCH.tar.gz" | tar -xzf - -C "$ETCDUTL_DIR/linux-$NODE_ARCH" --strip-components=1 "etcd-v$ETCD_VER-linux-$NODE_ARCH/etcdutl"`,
		fmt.Sprintf(`cp "$ETCDUTL_DIR/linux-$NODE_ARCH/etcdutl" "%s"`, nodeEtcdutl(minor, "$NODE_ARCH")),
	}
}

// etcdutlCheckRelease is the etcd release whose etcdutl checks a k3s or
// RKE2 snapshot off the node, where no manifest names the embedded etcd's
// release: snapshot status opens the file read-only with bbolt, checks its
// integrity and hashes its buckets, reading the storage version only where
// the file has one (v3Manager.Status, etcdutl/snapshot/v3_snapshot.go,
// etcd-io/etcd v3.7.1), so it reads a snapshot of an older v3 member.
const etcdutlCheckRelease = "3.7.1"

// k3sBackup backs up a k3s or RKE2 datastore and its server token, without
// which a snapshot cannot be restored, and copies both off the node:
// embedded etcd takes an etcd-snapshot (into ${data-dir}/server/db/snapshots,
// named <name>-<node>-<timestamp>), SQLite is a copy of the db directory,
// an external datastore is backed up with its own tools
// (https://docs.k3s.io/datastore/backup-restore, https://docs.k3s.io/cli/etcd-snapshot,
// https://docs.rke2.io/datastore/backup_restore, read 2026-12-06). The
// copy of an etcd snapshot is checked against the server's file and with
// etcdutl of etcdutlCheckRelease here: neither k3s nor RKE2 ships etcdutl
// on the node.
func (r *renderer) k3sBackup(dist string, s Step) []string {
	data := "/var/lib/rancher/" + dist + "/server"
	keepNote := fmt.Sprintf("# the server must still run v%s: the release each server runs is kept in the next block", prevMinor(s.To))
	token := fmt.Sprintf(`ssh "$SERVER" sudo cat %s/token > "$BACKUP_DIR/%s-token-pre-%s"   # the server token: a restore needs it`, data, dist, s.To)
	head := []string{"# here, over ssh to a server node; the backup and the server token go off the node:", sshTo("SERVER", phServer, "a server node"), backupDir()}
	if dist == "rke2" || r.pf.EtcdNodes > 0 {
		lines := append(append(backupDirOwned(), releaseCheck(dist, s)...), k3sSnapshot(dist, s)...)
		lines = append(lines,
			token,
			"ETCD_VER="+etcdutlCheckRelease,
			`ETCDUTL_DIR="$BACKUP_DIR/etcd-v$ETCD_VER"`,
			`mkdir -p "$ETCDUTL_DIR"`,
		)
		lines = append(lines, etcdutlFetch("ETCDUTL_DIR")...)
		lines = append(lines, `"$ETCDUTL_DIR/etcdutl" snapshot status "$BACKUP_DIR/$SNAP" -w table`)
		lines = append(lines, `echo "SNAP=$SNAP"`)
		return append(append(head, fmt.Sprintf("# the snapshot, copied here and checked byte for byte against the server's file, then by etcdutl of etcd v%s (neither k3s nor RKE2 ships etcdutl on the node):", etcdutlCheckRelease), keepNote), chain(lines...)...)
	}
	if r.pf.ServerNodes > 1 {
		return append(append([]string{
			fmt.Sprintf("# %d server nodes and none labelled node-role.kubernetes.io/etcd: the datastore is external (SQLite serves one server only); back it up with the database's own tools, and the server token:", r.pf.ServerNodes),
		}, append(head[1:], keepNote)...), chain(append(append(backupDirOwned(), token), releaseCheck(dist, s)...)...)...)
	}
	tgz := fmt.Sprintf("k3s-server-db-pre-%s.tgz", s.To)
	lines := append(append(backupDirOwned(), releaseCheck(dist, s)...),
		noBackupYet(tgz),
		fmt.Sprintf(`ssh "$SERVER" sudo tar -C %s -czf - db token > "$BACKUP_DIR/%s.partial"`, data, tgz),
		fmt.Sprintf(`tar -tzf "$BACKUP_DIR/%s.partial" | grep -qx db/state.db`, tgz),
		fmt.Sprintf(`mv "$BACKUP_DIR/%s.partial" "$BACKUP_DIR/%s"`, tgz, tgz))
	return append(append(head, "# no node labelled node-role.kubernetes.io/etcd: the datastore is SQLite (k3s etcd-snapshot is for embedded etcd only), backed up as a copy of server/db with the token (an external datastore instead: back it up with the database's own tools):", keepNote), chain(lines...)...)
}

// Where k3s and RKE2 publish a release's server binary, for Linux on
// each architecture, beside a sha256sum file per architecture:
//   - k3s: <tag>/k3s on amd64, k3s-<arch> elsewhere (k3s-arm64, k3s-s390x),
//     checked against the line " k3s<suffix>" of <tag>/sha256sum-<arch>.txt
//     (install.sh setup_verify_arch, download_hash and download_binary,
//     k3s-io/k3s at 0136cf258954a458da1404858396342724b93d24);
//   - RKE2: <tag>/rke2.linux-<arch>, the binary bin/rke2 of the release
//     (scripts/package-binary copies bin/${PROG} to ${PROG}.${GOOS}-${GOARCH}),
//     listed in <tag>/sha256sum-<arch>.txt with every asset of that
//     architecture (scripts/checksum), rancher/rke2 at
//     0b500c665d037573ffedb0f924c61e0beb128bdb and 658a1a07516e.
//
// Both binaries say "<program> version <tag> (<commit>)" first on
// --version, the tag being the release's name on GitHub.
var releaseRepo = map[string]string{"k3s": "https://github.com/k3s-io/k3s/releases/download", "rke2": "https://github.com/rancher/rke2/releases/download"}

// releaseAsset sets $ASSET, the release asset of the server binary for
// Linux on $NODE_ARCH.
var releaseAsset = map[string]string{
	"k3s":  `case "$NODE_ARCH" in amd64) ASSET=k3s;; arm) ASSET=k3s-armhf;; *) ASSET="k3s-$NODE_ARCH";; esac`,
	"rke2": `ASSET="rke2.linux-$NODE_ARCH"`,
}

// serverArch maps uname -m to the architecture of k3s's and RKE2's asset
// and sha256sum file names: unameArch, and any 32-bit ARM (armv7l, armv6l)
// to arm, whose k3s binary is k3s-armhf (install.sh setup_verify_arch,
// k3s-io/k3s at 0136cf258954a458da1404858396342724b93d24). RKE2 publishes
// no arm build: its fetch stops there on a 404.
const serverArch = `sed 's/^x86_64$/amd64/; s/^aarch64$/arm64/; s/^armv[0-9].*$/arm/'`

// k3sDist is the distribution whose servers keep their own release for
// the rollback: "k3s", "rke2", or "" for the other providers.
func k3sDist(p Provider) string {
	switch p {
	case ProviderK3s:
		return "k3s"
	case ProviderRKE2:
		return "rke2"
	}
	return ""
}

// serverUnit is the systemd unit of a k3s or RKE2 server.
func serverUnit(dist string) string {
	return map[string]string{"k3s": "k3s", "rke2": "rke2-server"}[dist]
}

// releaseKeptDir is the directory under $BACKUP_DIR that keeps, for the
// server whose hostname is $NODE_ID, what it ran before the hop to minor
// (a shell word): each server its own, so that a server of another
// architecture or patch gets back its own release, not another's.
func releaseKeptDir(dist, minor string) string {
	return fmt.Sprintf(`$BACKUP_DIR/%s-release-pre-%s/$NODE_ID`, dist, minor)
}

// releaseOnNode is where a server keeps that directory for the rollback.
func releaseOnNode(dist, minor string) string {
	return fmt.Sprintf("/root/%s-release-pre-%s", dist, minor)
}

// nodeID sets $NODE_ID, the hostname of the server $NODE_SSH reaches,
// under which the backup keeps that server's release.
const nodeID = `NODE_ID=$(ssh "$NODE_SSH" hostname) && test -n "$NODE_ID"`

// rke2RPM asks the node run (sudo, or ssh to it) whether RKE2 came from
// its RPM packages: the install script's RPM method installs
// rke2-common and rke2-<type> from rpm.rancher.io, its tarball method
// refuses a node with the RPMs (check_method_conflict, install.sh,
// rancher/rke2 at 6ce1a8019e9d0b81eb7a715edbc2b8ac12d26da0).
func rke2RPM(run string) string {
	return strings.TrimSpace(run+" rpm -q rke2-server") + " >/dev/null 2>&1"
}

// rke2Repo is the repository file the RKE2 install script writes for the
// minor it installs (do_install_rpm, install.sh, rancher/rke2 at
// 6ce1a8019e9d0b81eb7a715edbc2b8ac12d26da0: rancher-rke2.repo, one
// common and one per-minor repository, in /etc/yum.repos.d).
const rke2Repo = "/etc/yum.repos.d/rancher-rke2.repo"

// releaseKeepBlock keeps, beside the backup of the hop to s.To, what each
// server ran before it, pasted once per server: its release (the
// --version of the binary its unit runs, which must be of the minor
// before the hop) and, for a binary install, that release's server binary
// for the server's own architecture, checked against the release's
// sha256sum file, with its sha256 recorded for the rollback to check
// again before it installs it. An RKE2 server installed from RPMs keeps
// its rke2-server and rke2-common package versions and the repository
// file of their minor instead: its rollback goes through the package
// manager, so that the RPM database holds the release that runs and a
// later update does not put the newer one back. The binary is the
// server's whole release: k3s and RKE2 upgrade "manually using the
// binary" by putting the release's binary in place of the old one and
// restarting the service (https://docs.k3s.io/upgrades/manual,
// https://docs.rke2.io/upgrades/manual, read 2026-12-07), which leaves
// the service unit and its env file as they are.
func releaseKeepBlock(dist string, s Step) []string {
	prev := prevMinor(s.To)
	note := fmt.Sprintf("# here, for each server node, every one of them: its own %s release (v%s), kept with the backup under its hostname, for its own architecture and patch: the rollback puts it back with no download", dist, prev)
	if dist == "rke2" {
		note += "; a server installed from RPMs keeps its package versions and repository file instead, and goes back through the package manager"
	}
	return append([]string{note, sshTo("NODE_SSH", phServer, "the server node"), backupDir()},
		chain(releaseKeep(dist, s)...)...)
}

// releaseKeep are the commands of releaseKeepBlock, for the server
// $NODE_SSH.
func releaseKeep(dist string, s Step) []string {
	keep := releaseKeptDir(dist, s.To)
	lines := append([]string{"umask 077"}, releaseCheckOn(dist, s, "NODE_SSH")...)
	lines = append(lines, nodeID, fmt.Sprintf(`KEEP="%s"`, keep), `mkdir -p "$KEEP"`)
	fetch := releaseFetch(dist)
	if dist == "rke2" {
		rpm := strings.Join([]string{
			`ssh "$NODE_SSH" "rpm -q --qf '%{VERSION}-%{RELEASE}' rke2-server" > "$KEEP/rpm-server.partial"`,
			`ssh "$NODE_SSH" "rpm -q --qf '%{VERSION}-%{RELEASE}' rke2-common" > "$KEEP/rpm-common.partial"`,
			// RKE2's installer writes its RPM repository for dnf and yum
			// only; on SUSE it is a zypper repository (install.sh at
			// 6ce1a80, /etc/zypp/repos.d), which this backup does not
			// keep: it says so rather than failing on a bare cat.
			`{ ssh "$NODE_SSH" test -f ` + rke2Repo + ` || { echo "no ` + rke2Repo + ` on $NODE_SSH (a SUSE node's RKE2 repository is zypper's): keep its rke2-server and rke2-common package versions by hand (rpm -q rke2-server rke2-common), to roll back with zypper --non-interactive install --oldpackage" >&2; false; }; }`,
			`ssh "$NODE_SSH" cat ` + rke2Repo + ` > "$KEEP/rancher-rke2.repo.partial"`,
			`mv "$KEEP/rancher-rke2.repo.partial" "$KEEP/rancher-rke2.repo"`,
			`mv "$KEEP/rpm-common.partial" "$KEEP/rpm-common"`,
			`mv "$KEEP/rpm-server.partial" "$KEEP/rpm-server"`,
		}, " && ")
		lines = append(lines, fmt.Sprintf(`if %s; then %s; else %s; fi`, rke2RPM(`ssh "$NODE_SSH"`), rpm, strings.Join(fetch, " && ")))
	} else {
		lines = append(lines, fetch...)
	}
	return append(lines, `echo "$REL" > "$KEEP/release"`, `echo "kept $REL of $NODE_ID in $KEEP"`)
}

// releaseCheck sets $REL, the release the server $SERVER runs, and stops
// the backup, loudly, unless it is of the minor before the hop: a server
// already moved means the hop has begun, and neither its release nor a
// snapshot taken now is the one to roll back to.
func releaseCheck(dist string, s Step) []string {
	return releaseCheckOn(dist, s, "SERVER")
}

// releaseCheckOn is releaseCheck on the server the shell variable host
// names, asking the binary its unit runs (unitBinary), not the one PATH
// finds.
func releaseCheckOn(dist string, s Step, host string) []string {
	prev := prevMinor(s.To)
	return append(unitBinary(fmt.Sprintf(`ssh "$%s"`, host), serverUnit(dist)),
		fmt.Sprintf(`REL=$(ssh "$%s" "$BIN" --version | awk 'NR == 1 {print $3}')`, host),
		fmt.Sprintf(`{ case "$REL" in v%s.*) ;; *) echo "$%s runs %s '$REL', not v%s: the hop has begun; keep the backup taken before it, take none now" >&2; false;; esac; }`, prev, host, dist, prev),
	)
}

// k3sSnapshot takes the etcd snapshot of the hop to s.To on $SERVER, with
// the binary its unit runs ($BIN, releaseCheck), and
// copies it to $BACKUP_DIR, as <name>.partial renamed once it matches the
// server's file byte for byte, and sets $SNAP to its name. Where this
// hop's snapshot is there already (a paste again, to retry what failed
// after it), it is kept and no new one is taken: the rollback restores the
// newest of the hop's snapshots, which must be the one taken before it.
func k3sSnapshot(dist string, s Step) []string {
	data := "/var/lib/rancher/" + dist + "/server"
	name := "pre-" + s.To
	re := strings.ReplaceAll(name, ".", `\.`)
	return []string{
		fmt.Sprintf(`SNAP=$(ls "$BACKUP_DIR" | grep '^%s-' | grep -v -m1 '\.partial$'; true)`, re),
		`{ test -z "$SNAP" || echo "the snapshot of this hop is there already, kept: $BACKUP_DIR/$SNAP" >&2; }`,
		`{ test -n "$SNAP" || { ` + strings.Join([]string{
			fmt.Sprintf(`SNAP=$(ssh "$SERVER" sudo "$BIN" etcd-snapshot save --name %s >&2 && ssh "$SERVER" sudo ls -t %s/db/snapshots | grep -m1 '^%s-')`, name, data, re),
			fmt.Sprintf(`ssh "$SERVER" sudo cat "%s/db/snapshots/$SNAP" > "$BACKUP_DIR/$SNAP.partial"`, data),
			fmt.Sprintf(`ssh "$SERVER" sudo sha256sum "%s/db/snapshots/$SNAP" | awk -v f="$BACKUP_DIR/$SNAP.partial" '{print $1 "  " f}' | sha256sum -c -`, data),
			`mv "$BACKUP_DIR/$SNAP.partial" "$BACKUP_DIR/$SNAP"`,
		}, " && ") + `; }; }`,
	}
}

// releaseFetch keeps in $KEEP the server binary of release $REL for the
// architecture of $NODE_SSH, checked against the release's sha256sum
// file, with that sha256 recorded beside it (<dist>.sha256, for
// sha256sum -c in $KEEP).
func releaseFetch(dist string) []string {
	return []string{
		`NODE_ARCH=$(ssh "$NODE_SSH" uname -m | ` + serverArch + `)`,
		releaseAsset[dist],
		fmt.Sprintf(`SUM=$(curl -fsSL "%s/$REL/sha256sum-$NODE_ARCH.txt" | awk -v a="$ASSET" '$2 == a {print $1}')`, releaseRepo[dist]),
		fmt.Sprintf(`{ test -n "$SUM" || { echo "the sha256sum file of $REL lists no $ASSET" >&2; false; }; }`),
		fmt.Sprintf(`curl -fsSL -o "$KEEP/%s.partial" "%s/$REL/$ASSET"`, dist, releaseRepo[dist]),
		fmt.Sprintf(`echo "$SUM  $KEEP/%s.partial" | sha256sum -c -`, dist),
		fmt.Sprintf(`echo "$SUM  %s" > "$KEEP/%s.sha256"`, dist, dist),
		fmt.Sprintf(`mv "$KEEP/%s.partial" "$KEEP/%s"`, dist, dist),
	}
}

// releaseToServers copies what releaseKeep kept for a server to that
// server, for the rollback's on-node blocks. The copy is staged in a
// directory mktemp -d makes on the server (a new one, private to the ssh
// user: mktemp(1), GNU coreutils), not at a fixed /tmp path another user
// could have made first or a link could stand in for.
func releaseToServers(b *blocks, dist, minor, prev string) {
	tmp := `"$STAGE/release"`
	note := "so that nothing is downloaded while the control plane is down"
	if dist == "rke2" {
		// RKE2 runs its runtime and control plane from images, which it
		// loads from the tarballs in agent/images or else pulls from the
		// registry ("Content Bootstrap", https://docs.rke2.io/architecture,
		// read 2026-12-07): the binary alone is not the whole release.
		note = "so that the release is not downloaded while the control plane is down (its v" + prev + " images are not in it: RKE2 pulls them unless the node's image store has them or /var/lib/rancher/rke2/agent/images holds their tarball; keep the registry reachable or the tarball there; a server installed from RPMs downloads its previous packages from the repository kept with them)"
	}
	b.add(fmt.Sprintf("# here, for each server node: the %s release of v%s it ran before, kept with the backup under its hostname, %s:", dist, prev, note),
		sshTo("NODE_SSH", phServer, "the server node"), backupDir())
	b.add(chain(
		nodeID,
		fmt.Sprintf(`KEEP="%s"`, releaseKeptDir(dist, minor)),
		`{ test -s "$KEEP/release" || { echo "nothing kept for $NODE_ID in $KEEP: the backup keeps each server's release under its hostname" >&2; false; }; }`,
		`STAGE=$(ssh "$NODE_SSH" mktemp -d) && test -n "$STAGE"`,
		fmt.Sprintf(`scp -r "$KEEP" "$NODE_SSH":%s`, tmp),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo rm -rf %s`, releaseOnNode(dist, minor)),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo cp -r %s %s`, tmp, releaseOnNode(dist, minor)),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo chmod -R go= %s`, releaseOnNode(dist, minor)),
		`ssh "$NODE_SSH" rm -rf "$STAGE"`)...)
}

func (r *renderer) firstCP() string {
	if len(r.cpNodes) > 0 {
		return r.cpNodes[0]
	}
	return "<first-control-plane-node>"
}

func prevMinor(to string) string {
	v, err := ParseVersion(to)
	if err != nil {
		return "<from>"
	}
	return v.AddMinors(-1).MinorString()
}

func (r *renderer) apiservers(s Step) blocks {
	var b blocks
	switch r.prov {
	case ProviderKubeadm:
		return r.kubeadmControlPlane(s)
	case ProviderK3s, ProviderRKE2:
		b.add(r.serverNodes(s)...)
		return b
	}
	b.add(
		"# the control-plane hosts strictly one at a time; on each, with the installer that made the cluster:",
		fmt.Sprintf("# upgrade kube-apiserver to v%s.%s, then drain the host if it runs a kubelet and upgrade that too", s.To, phPatch),
		"kubectl version")
	return b
}

// kubeadmControlPlane upgrades the control-plane nodes strictly one at a
// time (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/):
// kubeadm, then kubeadm upgrade apply on the first and kubeadm upgrade
// node on the others, then the node is drained for its kubelet and
// uncordoned before the next one starts.
func (r *renderer) kubeadmControlPlane(s Step) blocks {
	var todo []string
	for _, n := range r.cpNodes {
		if v, err := ParseVersion(r.cpOn[n]); err == nil && v.MinorString() == s.To {
			continue
		}
		todo = append(todo, n)
	}
	applied := len(todo) < len(r.cpNodes)
	if len(r.cpNodes) == 0 {
		todo = []string{"<first-control-plane-node>", "<other-control-plane-node>"}
	}
	pm := packageManager(r.controlPlaneOS())
	from := prevMinor(s.To)
	var b blocks
	for i, n := range todo {
		first := i == 0 && !applied
		switch {
		case first:
			b.add(fmt.Sprintf("# %s, the first control-plane node; the control-plane nodes strictly one at a time:", n))
		default:
			b.add(fmt.Sprintf("# then %s, once the one before is Ready and uncordoned:", n))
		}
		b.add("# on " + n + ":")
		// kubeadm upgrade apply asks for confirmation unless --yes
		// ("Perform the upgrade and do not prompt for confirmation",
		// cmd/kubeadm/app/cmd/upgrade/apply.go, kubernetes v1.37.2).
		upgrade := []string{"sudo kubeadm upgrade node"}
		if first {
			upgrade = []string{"sudo kubeadm upgrade plan", "sudo kubeadm upgrade apply " + sq("v"+s.To+"."+phPatch) + " --yes"}
		}
		// The node's manifests as they are, for the rollback: copied once,
		// whole or not at all, so a re-run after a partial upgrade keeps the
		// first copy (not cp -n, which fails when it skips in coreutils
		// 9.2 to 9.4, as on Ubuntu 24.04).
		pre := preUpgradeManifests(s.To)
		save := fmt.Sprintf("if ! sudo test -d %s; then sudo rm -rf %s.tmp && sudo cp -a /etc/kubernetes/manifests %s.tmp && sudo mv %s.tmp %s; fi", pre, pre, pre, pre, pre)
		byManager(&b, pm, func(pm string) []string {
			return chain(append(append(append([]string{save}, repoSwitch(pm, from, s.To)...), install(pm, s.To, true, "kubeadm")...), upgrade...)...)
		})
		b.cut()
		b.add("# here:", fmt.Sprintf("kubectl drain %s --ignore-daemonsets --delete-emptydir-data --timeout=%s", sq(n), selfDrainTimeout))
		b.cut()
		b.add("# on " + n + ":")
		byManager(&b, pm, func(pm string) []string {
			return chain(append(install(pm, s.To, true, "kubelet", "kubectl"), "sudo systemctl daemon-reload", "sudo systemctl restart kubelet")...)
		})
		b.cut()
		b.add("# here:", "kubectl uncordon "+sq(n))
		b.cut()
	}
	b.add("kubectl -n kube-system get pods -l component=kube-apiserver -o wide")
	return b
}

// controlPlaneOS are the OS images of the control-plane nodes.
func (r *renderer) controlPlaneOS() []string {
	for _, pl := range r.pools {
		for _, l := range controlPlaneRoles {
			if pl.Label == l {
				return pl.OSImages
			}
		}
	}
	return nil
}

// serverNodes upgrades k3s or RKE2 servers strictly one at a time, each
// drained first: a minor kubelet upgrade in place needs a drained node
// (https://kubernetes.io/releases/version-skew-policy/#kubelet-1), and the
// server binary carries the kubelet (https://docs.k3s.io/upgrades/manual,
// https://docs.rke2.io/upgrades/manual_upgrade).
func (r *renderer) serverNodes(s Step) []string {
	nodes := r.cpNodes
	var out []string
	if len(nodes) == 0 {
		out = append(out, "# the server nodes strictly one at a time; for each of them (kubectl get nodes -l node-role.kubernetes.io/control-plane -o name):",
			"NODE="+sq(phNode))
		nodes = []string{`"$NODE"`}
	} else {
		out = append(out, "# the server nodes strictly one at a time, each Ready and uncordoned before the next:")
	}
	for _, n := range nodes {
		name := n
		if n != `"$NODE"` {
			name = sq(n)
		}
		out = append(out, fmt.Sprintf("kubectl drain %s --ignore-daemonsets --delete-emptydir-data --timeout=%s", name, selfDrainTimeout),
			"# on "+strings.Trim(name, `"`)+":")
		if r.prov == ProviderK3s {
			out = append(out, k3sInstall("server", s.To)...)
		} else {
			out = append(out, rke2Install("server", s.To)...)
		}
		out = append(out, "# here:", "kubectl uncordon "+name)
	}
	return append(out, "kubectl get nodes -l node-role.kubernetes.io/control-plane -o wide")
}

func (r *renderer) controllers(s Step) []string {
	var out []string
	switch r.prov {
	case ProviderKubeadm:
		out = []string{"# kubeadm upgrade apply and kubeadm upgrade node upgraded kube-controller-manager and kube-scheduler with each apiserver; check:",
			"kubectl -n kube-system get pods -l tier=control-plane -o custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image"}
	case ProviderK3s, ProviderRKE2:
		out = []string{"# the " + r.prov.Title() + " server binary carries the controllers: upgraded with the servers; check:"}
	default:
		out = []string{fmt.Sprintf("# upgrade kube-controller-manager and kube-scheduler to v%s.%s on each control-plane host", s.To, phPatch)}
	}
	if r.prov != ProviderK3s && r.prov != ProviderRKE2 {
		// An out-of-tree cloud-controller-manager is an addon of its own:
		// kubeadm does not upgrade it.
		ccm := "# an out-of-tree cloud-controller-manager, if the cluster runs one, is not upgraded by kubeadm: move it to its release for v" + s.To + " with the manifest or chart that installed it"
		var check string
		for _, c := range r.inv.Components {
			if c.Name == KindCloudControllerManager && c.State == StateVisible {
				ccm = fmt.Sprintf("# cloud-controller-manager (%s, %s) is not upgraded by kubeadm: move it to its release for v%s with the manifest or chart that installed it, then check:", c.Instance, c.Version, s.To)
				if c.Instance != "" {
					check = fmt.Sprintf("kubectl -n kube-system get %s -o wide", sq(c.Instance))
				}
			}
		}
		out = append(out, ccm)
		if check != "" {
			out = append(out, check)
		}
	}
	return append(out, "kubectl skew")
}

func (r *renderer) controlPlane(s Step) []string {
	var out []string
	switch r.prov {
	case ProviderEKS:
		// update-cluster-version returns an update; wait on that update,
		// not on the cluster's status: describe-update reports
		// InProgress, Failed, Cancelled or Successful
		// (https://docs.aws.amazon.com/eks/latest/APIReference/API_Update.html,
		// https://docs.aws.amazon.com/cli/latest/reference/eks/describe-update.html),
		// while the cluster can still read ACTIVE right after the call.
		upd := fmt.Sprintf("aws eks describe-update --region %s --name %s --update-id \"$UPDATE_ID\"", sq(r.region), sq(r.cluster))
		out = []string{
			fmt.Sprintf("UPDATE_ID=$(aws eks update-cluster-version --region %s --name %s --kubernetes-version %s --query update.id --output text)", sq(r.region), sq(r.cluster), s.To),
			fmt.Sprintf("while [ \"$(%s --query update.status --output text)\" = InProgress ]; do sleep 30; done", upd),
		}
		out = append(out, chain(upd+" --query 'update.{status:status,errors:errors}'", updateSucceeded(upd), "kubectl skew")...)
		return out
	case ProviderGKE:
		// https://cloud.google.com/kubernetes-engine/docs/how-to/upgrading-a-cluster
		out = []string{fmt.Sprintf("gcloud container clusters upgrade %s --master --cluster-version=%s --location=%s%s --quiet", sq(r.cluster), s.To, sq(phLocation), r.project())}
	case ProviderAKS:
		// https://learn.microsoft.com/azure/aks/upgrade-aks-cluster
		out = []string{fmt.Sprintf("az aks upgrade --resource-group %s --name %s --kubernetes-version %s --control-plane-only --yes", sq(r.resourceGroup()), sq(r.cluster), sq(s.To+"."+phPatch))}
	case ProviderCAPI:
		// A ClusterClass cluster upgrades by its topology version
		// (https://cluster-api.sigs.k8s.io/tasks/experimental-features/cluster-class/operate-cluster#upgrade-a-cluster),
		// set on the management cluster.
		patch := fmt.Sprintf(`%s patch cluster.cluster.x-k8s.io %s -n %s --type merge -p '{"spec":{"topology":{"version":"v%s.%s"}}}'`, r.kubectlMgmt(), sq(r.capiName), sq(r.capiNS), s.To, phPatch)
		// An add-on hold a rollback of an earlier hop left is released
		// first, so that KubeadmControlPlane moves kube-proxy and CoreDNS
		// with this hop (capiAddonsHold; a release with no hold changes
		// nothing).
		out = []string{"# on the management cluster, which holds the Cluster:", r.capiAddonsHold(false)}
		if r.capiHeld {
			// The hold step's check again, so that the version moves
			// only while every topology is deferred.
			out = append(out, chain(r.capiDeferCheck(), patch)...)
		} else {
			out = append(out, patch)
		}
		out = append(out, fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	}
	if r.prov == ProviderGKE || r.prov == ProviderAKS {
		// The upgrade waits for its operation: the check runs only after
		// it succeeded.
		return chain(out[0], "kubectl skew")
	}
	return append(out, "kubectl skew")
}

func (r *renderer) addons(s Step) blocks {
	var b blocks
	switch r.prov {
	case ProviderKubeadm:
		// Since v1.28 kubeadm upgrades CoreDNS and kube-proxy after every
		// control-plane instance is upgraded: in HA with the last kubeadm
		// upgrade node, not with kubeadm upgrade apply (kubernetes
		// CHANGELOG-1.28, #117660; the UpgradeAddonsBeforeControlPlane gate
		// that restored the old order was removed in v1.31).
		b.add("# kubeadm upgraded CoreDNS and kube-proxy with the last control-plane node's kubeadm upgrade (apply on a single node, the last kubeadm upgrade node in HA); check them and the other addons:")
		b.add(r.kubeadmAddons(func(w string) string { return "kubectl -n kube-system get " + w + " -o wide" }, true)...)
		b.add(fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	case ProviderEKS:
		return r.eksAddons(s)
	case ProviderGKE:
		// GKE Standard runs kube-dns, not CoreDNS, and upgrades it with
		// the control plane
		// (https://cloud.google.com/kubernetes-engine/docs/how-to/kube-dns,
		// which finds its pods by k8s-app=kube-dns); a cluster on Cloud DNS
		// (Autopilot's default, a Standard option: "About Cloud DNS for
		// GKE") runs none, so the check selects by label and lists
		// nothing there rather than failing on a name.
		b.add("# GKE upgrades kube-dns (GKE runs kube-dns, not CoreDNS; a cluster on Cloud DNS runs none) with the control plane, and kube-proxy with each node pool; check them and the other addons:",
			"kubectl -n kube-system get deployment -l k8s-app=kube-dns -o wide",
			"kubectl skew", fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	case ProviderAKS:
		b.add(fmt.Sprintf("# %s upgrades kube-proxy and CoreDNS with the control plane; check them and the other addons:", r.prov.Title()),
			"kubectl skew", fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	case ProviderK3s, ProviderRKE2:
		b.add(fmt.Sprintf("# %s", addonsOfK3s(r.prov)),
			"kubectl skew", fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	case ProviderCAPI:
		// KubeadmControlPlane skips an addon the workload cluster does
		// not run, as kubeadm does (capiAddonSkip): the check follows
		// what the inventory saw.
		b.add("# KubeadmControlPlane upgrades CoreDNS and kube-proxy with the control plane, where the workload cluster runs them; check them and the other addons:")
		b.add(r.kubeadmAddons(func(w string) string { return "kubectl -n kube-system get " + w + " -o wide" }, true)...)
		b.add(fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	default:
		b.add("kubectl -n kube-system get daemonset/kube-proxy deployment/coredns -o wide", fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	}
	return b
}

// kubeadmAddonWorkloads are the addons kubeadm upgrades, the kube-system
// ConfigMap without which its upgrade skips each, and the workload it
// deploys.
var kubeadmAddonWorkloads = []struct{ name, configMap, workload string }{
	{KindKubeProxy, "kube-proxy", "daemonset/kube-proxy"},
	{KindCoreDNS, "coredns", "deployment/coredns"},
}

// capiAddonSkip is the kube-system object without which a
// KubeadmControlPlane skips each addon, and what it asks: kube-proxy's
// DaemonSet ("if kube-proxy is missing, return without errors",
// Workload.UpdateKubeProxyImageInfo) and CoreDNS's ConfigMap and
// Deployment (a not-found error from getCoreDNSInfo returns early,
// Workload.UpdateCoreDNS), controlplane/kubeadm/internal/workload_cluster.go
// and workload_cluster_coredns.go, kubernetes-sigs/cluster-api v1.14.0.
// The skip annotations (controlplane.cluster.x-k8s.io/skip-kube-proxy,
// skip-coredns) go with a missing addon: a cluster that set them runs
// its own.
var capiAddonSkip = map[string]struct{ probe, missing string }{
	KindKubeProxy: {"daemonset/kube-proxy", "no kube-system DaemonSet kube-proxy"},
	KindCoreDNS:   {"configmap/coredns deployment/coredns", "no kube-system ConfigMap and Deployment coredns"},
}

// kubeadmAddons runs cmd on each addon workload kubeadm upgrades that the
// cluster has. kubeadm's upgrade skips kube-proxy when the kube-system
// ConfigMap kube-proxy is missing, and CoreDNS when coredns is ("if the
// kube-proxy ConfigMap is missing, assume that kube-proxy should not be
// upgraded. Same applies to a missing kube-dns/coredns ConfigMap",
// kubernetes CHANGELOG-1.19, #89593; runKubeProxyAddon in
// cmd/kubeadm/app/cmd/phases/upgrade/apply/addons.go): a cluster whose CNI
// replaces kube-proxy (Cilium's kube-proxy replacement) has neither that
// ConfigMap nor the DaemonSet. Where the inventory read kube-system's
// workloads, the commands follow what it saw (a visible workload by the
// name it was seen under); where it could not, each asks the ConfigMap
// first and says so when kubeadm skipped the addon. several: cmd takes
// several workloads at once.
func (r *renderer) kubeadmAddons(cmd func(workload string) string, several bool) []string {
	var present, out []string
	for _, a := range kubeadmAddonWorkloads {
		switch w, seen := r.addonWorkload(a.name); {
		case w != "":
			present = append(present, w)
		case seen && r.prov == ProviderCAPI:
			out = append(out, fmt.Sprintf("# the inventory saw no %s in kube-system: KubeadmControlPlane skips it (%s), nothing to do for it here", a.name, capiAddonSkip[a.name].missing))
		case seen:
			out = append(out, fmt.Sprintf("# the inventory saw no %s in kube-system: kubeadm's upgrade skips it (no %s ConfigMap), nothing to do for it here", a.name, a.configMap))
		case r.prov == ProviderCAPI:
			// Every object of the probe must be there: get with
			// --ignore-not-found prints one name per object found. The
			// names are counted outside the assignment, so that a get
			// that fails (forbidden, unreachable) stops the chain rather
			// than counting as none found.
			c := capiAddonSkip[a.name]
			n := len(strings.Fields(c.probe))
			out = append(out, fmt.Sprintf(`FOUND=$(kubectl -n kube-system get %s -o name --ignore-not-found) && if [ "$(printf '%%s\n' "$FOUND" | grep -c .)" -eq %d ]; then %s; else echo "%s: KubeadmControlPlane skips %s, nothing to do for it"; fi`, c.probe, n, cmd(a.workload), c.missing, a.name))
		default:
			out = append(out, fmt.Sprintf(`CM=$(kubectl -n kube-system get configmap %s -o name --ignore-not-found) && if [ -n "$CM" ]; then %s; else echo "no kube-system ConfigMap %s: kubeadm's upgrade skips %s, nothing to do for it"; fi`, a.configMap, cmd(a.workload), a.configMap, a.name))
		}
	}
	if len(present) == 0 {
		return out
	}
	// One command for the workloads seen, where it takes several.
	if several {
		return append([]string{cmd(strings.Join(present, " "))}, out...)
	}
	var each []string
	for _, w := range present {
		each = append(each, cmd(w))
	}
	return append(each, out...)
}

// addonWorkload is the kube-system workload the inventory saw the addon
// name in ("daemonset/kube-proxy"), and whether it read the workloads at
// all: "", true when it listed them and found none of the addon.
func (r *renderer) addonWorkload(name string) (string, bool) {
	for _, c := range r.inv.Components {
		if c.Name != name {
			continue
		}
		switch {
		case c.State == StateVisible && strings.Contains(c.Instance, "/"):
			return c.Instance, true
		case c.State == StateNotVisible && strings.HasPrefix(c.Source, "no "):
			return "", true
		}
	}
	return "", false
}

// addonsOfK3s says where k3s and RKE2 run kube-proxy and CoreDNS: kube-proxy
// inside each node's own k3s process (https://docs.k3s.io/architecture:
// the agent runs the kubelet, kube-proxy, flannel and containerd) or as a
// static pod each RKE2 node writes (https://docs.rke2.io/architecture),
// so it moves with each node's upgrade, servers first, agents at their
// pool's step; CoreDNS is a packaged component the servers deploy.
func addonsOfK3s(p Provider) string {
	return fmt.Sprintf("%s runs kube-proxy on each node with that node's %s, so it moved with the servers here and moves with each agent at its pool's step; the servers deployed CoreDNS and the packaged components; check them and the other addons:", p.Title(), strings.ToLower(p.Title()))
}

// eksAddons upgrades the EKS add-ons after the control plane
// (https://docs.aws.amazon.com/eks/latest/userguide/updating-an-add-on.html).
// update-addon works only for an add-on EKS manages; describe-addon fails
// with ResourceNotFoundException for a self-managed one
// (https://docs.aws.amazon.com/eks/latest/APIReference/API_DescribeAddon.html),
// which is updated as its own page says
// (https://docs.aws.amazon.com/eks/latest/userguide/vpc-add-on-self-managed-update.html,
// read 2026-09-20; likewise kube-proxy-add-on-self-managed-update.html and
// coredns-add-on-self-managed-update.html). The VPC CNI moves one minor
// version at a time ("You can only update one minor version at a time":
// https://docs.aws.amazon.com/eks/latest/userguide/add-ons-vpc-cni.html,
// read 2026-09-20). Where the cluster does not show who manages an add-on,
// the two ways are alternatives of their own, never one block.
func (r *renderer) eksAddons(s Step) blocks {
	var b blocks
	if r.autoModeOnly() {
		// EKS Auto Mode runs the VPC CNI, CoreDNS and kube-proxy as part
		// of the service (https://docs.aws.amazon.com/eks/latest/userguide/auto-upgrade.html).
		b.add("# EKS Auto Mode runs the VPC CNI, CoreDNS and kube-proxy itself: only EKS add-ons you installed and self-managed controllers are yours to move:",
			fmt.Sprintf("aws eks list-addons --region %s --cluster-name %s", sq(r.region), sq(r.cluster)),
			fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
		return b
	}
	for _, a := range []string{"vpc-cni", "kube-proxy", "coredns"} {
		managed, seen := r.pf.EKSAddons[a]
		eks := []string{fmt.Sprintf("aws eks describe-addon-versions --region %s --kubernetes-version %s --addon-name %s --query 'addons[].addonVersions[].addonVersion' --output text", sq(r.region), s.To, a)}
		update := fmt.Sprintf("aws eks update-addon --region %s --cluster-name %s --addon-name %s --addon-version %s --resolve-conflicts PRESERVE", sq(r.region), sq(r.cluster), a, sq("<"+a+"-version>"))
		if a == "vpc-cni" {
			update += "   # one minor at a time: repeat for each minor up to the one for " + s.To
		}
		eks = append(eks, chain(update, fmt.Sprintf("aws eks wait addon-active --region %s --cluster-name %s --addon-name %s", sq(r.region), sq(r.cluster), a))...)
		self := selfManagedAddon(a, s.To)
		switch {
		case seen && managed:
			b.add("# " + a + " is an EKS add-on (its fields are managed by eks):")
			b.add(eks...)
		case seen && !managed:
			b.add("# " + a + " is self-managed (no EKS manager on its fields): update-addon does not apply;")
			b.add(self...)
		default:
			b.add(fmt.Sprintf("aws eks describe-addon --region %s --cluster-name %s --addon-name %s --query addon.addonVersion --output text   # a version: an EKS add-on; ResourceNotFoundException: self-managed", sq(r.region), sq(r.cluster), a))
			choice := "who manages " + a
			b.alt(choice, "describe-addon printed a version: "+a+" is an EKS add-on", eks...)
			b.alt(choice, "describe-addon failed with ResourceNotFoundException: "+a+" is self-managed", self...)
		}
	}
	b.add(fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	return b
}

// ecrAccept are the manifest media types a registry may answer a tag
// with (OCI image index and manifest, Docker manifest list and manifest).
const ecrAccept = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json"

// selfManagedAddon is the update of a self-managed EKS add-on. The image of
// kube-proxy and CoreDNS keeps the registry and repository the cluster
// runs now (its account and region: the EKS image registries differ by
// region) and takes only the new tag, which the registry must know before
// the image changes: the Kubernetes API accepts any image string, so an
// unpullable one would roll the DaemonSet to pods that cannot start. The
// tag is asked of the registry itself, over the registry HTTP API, with the
// ECR authorization token for user AWS
// (https://docs.aws.amazon.com/AmazonECR/latest/userguide/registry_auth.html);
// the rollout is waited on.
func selfManagedAddon(a, to string) []string {
	switch a {
	case "vpc-cni":
		return chain(
			"kubectl get daemonset aws-node -n kube-system -o yaml > aws-k8s-cni-old.yaml   # keep your settings",
			// The manifest is at a GitHub release tag of
			// aws/amazon-vpc-cni-k8s, vMAJOR.MINOR.PATCH: "The build
			// versions listed in the table aren't specified in the
			// self-managed versions listed on GitHub" (Update the Amazon
			// VPC CNI (self-managed add-on),
			// https://docs.aws.amazon.com/eks/latest/userguide/vpc-add-on-self-managed-update.html,
			// which applies .../v1.20.0/config/master/aws-k8s-cni.yaml),
			// so the table's v1.20.0-eksbuild.1 is v1.20.0 here.
			fmt.Sprintf("kubectl apply -f %s   # %s: the GitHub release tag of the VPC CNI version for %s from the versions table, without its -eksbuild.N (v1.20.0 for v1.20.0-eksbuild.1), one minor at a time", sq("https://raw.githubusercontent.com/aws/amazon-vpc-cni-k8s/"+phVPCCNIRelease+"/config/master/aws-k8s-cni.yaml"), phVPCCNIRelease, to),
			"kubectl -n kube-system rollout status daemonset/aws-node --timeout=10m")
	case "kube-proxy":
		return selfManagedImage("daemonset", "kube-proxy", "kube-proxy", "TAG="+sq("<kube-proxy-tag>")+"   # the kube-proxy image tag for "+to+" from the EKS kube-proxy table (kube-proxy-add-on-self-managed-update.html)")
	default:
		return selfManagedImage("deployment", "coredns", "coredns", "TAG="+sq("<coredns-tag>")+"   # the CoreDNS image tag for "+to+" from the EKS CoreDNS table (coredns-add-on-self-managed-update.html)")
	}
}

func selfManagedImage(kind, name, container, tag string) []string {
	return append([]string{tag}, chain(
		fmt.Sprintf(`IMAGE=$(kubectl -n kube-system get %s %s -o jsonpath='{.spec.template.spec.containers[?(@.name=="%s")].image}')`, kind, name, container),
		`REGISTRY=${IMAGE%%/*} && REPO=${IMAGE#*/} && REPO=${REPO%%[:@]*}`,
		fmt.Sprintf(`curl -fsSI -o /dev/null -u "AWS:$(aws ecr get-login-password --region "$(echo "$REGISTRY" | cut -d. -f4)")" -H 'Accept: %s' "https://$REGISTRY/v2/$REPO/manifests/$TAG"   # the registry has the tag`, ecrAccept),
		fmt.Sprintf(`kubectl -n kube-system set image %s.apps/%s %s="$REGISTRY/$REPO:$TAG"`, kind, name, container),
		fmt.Sprintf("kubectl -n kube-system rollout status %s/%s --timeout=10m", kind, name))...)
}

// autoModeOnly reports whether every pool of the cluster is EKS Auto Mode.
func (r *renderer) autoModeOnly() bool {
	n := 0
	for _, pl := range r.pools {
		if pl.AutoModeNodes == 0 {
			return false
		}
		n++
	}
	return n > 0
}

// warnings are the provider's caveats the runbook states up front.
func (r *renderer) warnings() []string {
	var out []string
	if r.prov == ProviderCAPI {
		out = append(out, "Cluster API commands that change the Cluster, MachineDeployments or Machines run against the management cluster: they carry kubectl's --context '<management-context>' (clusterctl's --kubeconfig-context)")
	}
	if w := r.asgWarning(); w != "" {
		out = append(out, w)
	}
	if r.plan != nil {
		for _, pp := range r.plan.Pools {
			if cost := r.wholePoolCost(pp.Name); cost != "" && len(pp.Upgrades) > 0 {
				out = append(out, fmt.Sprintf("pool %s: %s", pp.Name, cost))
			}
			if len(pp.Upgrades) > 0 && r.inferencePool(pp.Name) {
				out = append(out, inferenceRefusals(pp.Name, r.pools[pp.Name].Inference)...)
			}
		}
	}
	return out
}

// inferenceRefusals are why the inference drain's gate (gang-drain plan
// --inference) would refuse the pool as read, each with its fix, for
// "Before you start"; a missing hydrate bandwidth is left out: the drain's
// BW line asks for it.
func inferenceRefusals(pool string, ip *InferencePool) []string {
	var out []string
	for _, why := range ip.Refusals {
		// pkg/inference's words for a source with no --hydrate-bandwidth.
		if strings.HasPrefix(why, "no hydrate bandwidth for source ") {
			continue
		}
		out = append(out, fmt.Sprintf("pool %s: its inference drain (gang-drain plan --inference) refuses as read: %s", pool, why))
	}
	return out
}

// wholePoolCost says what a provider-rolled GPU pool's default path costs,
// or "": the provider replaces the nodes in an order it picks, so the
// pool's gangs stop unit by unit and none restarts until every node is
// replaced and validated.
func (r *renderer) wholePoolCost(pool string) string {
	switch r.replacer(pool) {
	case replaceEKSNodegroup, replaceGKE, replaceAKS, replaceCAPI:
	default:
		return ""
	}
	if !r.gpuPool(pool) || r.controlPlanePool(pool) {
		return ""
	}
	if r.rolls(pool) == rollCAPI {
		// The held topology's rollout follows the units (capiUnits).
		return fmt.Sprintf("Cluster API's rollout is ordered by the runbook: a pre-drain hook on every old Machine keeps Cluster API's own drain off them, and each unit's Machines are marked %s once gang-drain has emptied it, so the pool moves one fabric unit at a time; its cost: the rollout replaces the Machines strictly one after another, so a drained unit of k Machines sits cordoned for k replacement cycles, and its gangs stay stopped until the last unit is replaced and the new nodes pass gpu-validate: the earliest-drained gangs stay stopped for the pool's whole serial time (%d Machines, one cycle each), while the units not yet drained keep training", capiDeleteFirst, r.pools[pool].Nodes)
	}
	return fmt.Sprintf("%s replaces the nodes itself in an order it picks, so the pool cannot move one fabric unit at a time: all %s leave training from the first unit's drain until the last replaced node passes gpu-validate, which is the default path's cost; to keep capacity, create a pool at the target version beside it and move the units across (gang-drain one unit, scale the new pool up by a unit, scale the old one down), then delete the old pool", r.prov.Title(), Nodes(r.pools[pool].Nodes))
}

// behindAtHop reports whether a pool is left behind the control plane
// through a control-plane step.
func (r *renderer) behindAtHop(pool string) bool {
	steps := r.poolSteps(pool)
	for _, s := range r.plan.Steps {
		if s.Phase == PhaseControlPlane && len(steps) > 0 && steps[len(steps)-1] > s.Number {
			return true
		}
	}
	return false
}

// poolSteps are the numbers of a pool's node-pool steps.
func (r *renderer) poolSteps(pool string) []int {
	var out []int
	for _, pp := range r.plan.Pools {
		if pp.Name == pool {
			for _, u := range pp.Upgrades {
				out = append(out, u.Step)
			}
		}
	}
	return out
}

func (r *renderer) project() string {
	if r.pf.Project == "" {
		return ""
	}
	return " --project=" + sq(r.pf.Project)
}

func (r *renderer) resourceGroup() string {
	return orPlaceholder(r.pf.ResourceGroup, phResourceGroup)
}

// k3sInstall re-runs the k3s install script on a node for the channel of
// minor to, keeping the node's settings. The script writes the systemd
// unit and its env file from what it is given this time (install.sh,
// systemd_disable then create_env_file and create_systemd_service_file,
// k3s-io/k3s at 0136cf2): "If you set configuration when originally
// running the install script, but do not set it again when re-running the
// install script, the original values will be lost"
// (https://docs.k3s.io/upgrades/manual, read 2026-12-06). So the unit and
// the env file are kept first, the script runs with
// INSTALL_K3S_SKIP_START=true (it installs and enables, but does not
// restart), and both are put back before the restart: the server keeps
// --cluster-init, --datastore-endpoint, --disable and the rest of its
// ExecStart, an agent its K3S_URL and K3S_TOKEN. /etc/rancher/k3s/config.yaml
// is not the script's and stays as it is. The version check stops the
// chain where the script installed nothing (curl | sh succeeds on an empty
// download).
func k3sInstall(role, to string) []string {
	note, lines := k3sSteps(role, to)
	return append([]string{note}, chain(lines...)...)
}

// k3sSteps are the commands of k3sInstall, and its note.
func k3sSteps(role, to string) (string, []string) {
	unit := "k3s"
	if role == "agent" {
		unit = "k3s-agent"
	}
	keep := "/root/" + unit + "-pre-" + to
	files := fmt.Sprintf("/etc/systemd/system/%s.service /etc/systemd/system/%s.service.env", unit, unit)
	lines := []string{
		"sudo mkdir -p " + keep,
		fmt.Sprintf("sudo cp -p %s %s/", files, keep),
		fmt.Sprintf("curl -sfL https://get.k3s.io | INSTALL_K3S_CHANNEL=v%s INSTALL_K3S_SKIP_START=true sh -s - %s", to, role),
		fmt.Sprintf("sudo cp -p %s/%s.service %s/%s.service.env /etc/systemd/system/", keep, unit, keep, unit),
		"sudo systemctl daemon-reload",
		"sudo systemctl restart " + unit,
		fmt.Sprintf("k3s --version | grep -F ' v%s.'", to),
	}
	return fmt.Sprintf("# keep the %s unit and its env file (its flags, K3S_URL, K3S_TOKEN): the install script rewrites both from what it is given (systemd; on OpenRC /etc/init.d/%s and /etc/rancher/k3s/%s.env)", unit, unit, unit), lines
}

// rke2Install re-runs the RKE2 install script for the channel of minor to
// and restarts the service. The script runs as root (its setup_env stops
// with "You need to be root to perform this install", rancher/rke2
// install.sh), so sudo carries the channel to it. RKE2 reads its settings from
// /etc/rancher/rke2/config.yaml, which the script does not write
// (https://docs.rke2.io/upgrades/manual_upgrade, read 2026-12-06).
func rke2Install(role, to string) []string {
	typ := ""
	if role == "agent" {
		typ = " INSTALL_RKE2_TYPE=agent"
	}
	return chain(
		fmt.Sprintf("curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_CHANNEL=v%s%s sh -", to, typ),
		"sudo systemctl restart rke2-"+role,
		fmt.Sprintf("rke2 --version | grep -F ' v%s.'", to))
}

// rke2Pinned re-runs the RKE2 install script for the exact release rel
// (v1.37.3+rke2r1), not for a channel's newest patch: the way back of a
// node that ran rel before the step. RKE2's rollback installs "the RKE2
// binary [of] the previous version" with INSTALL_RKE2_VERSION
// (docs/upgrades/roll-back.md, rancher/rke2-docs at
// f06f555ce158da4a510cf93eb4ecb904845c1aac); on the RPM install path the
// script writes the repository of rel's minor and installs
// rke2-<type>-<rel as an RPM version> (do_install_rpm, install.sh,
// rancher/rke2 at 6ce1a8019e9d0b81eb7a715edbc2b8ac12d26da0), which the
// package manager takes as a downgrade of the newer package, so that its
// database holds rel and a later update stays within rel's minor. rel may
// be a placeholder the block checks before it installs anything. The
// release is checked on the binary the unit's ExecStart runs (unitBinary),
// not on whichever rke2 PATH finds first: the tarball install puts it in
// /usr/local/bin, the RPM one in /usr/bin, and a node may have both.
func rke2Pinned(role, rel, minor string) []string {
	typ := ""
	if role == "agent" {
		typ = " INSTALL_RKE2_TYPE=agent"
	}
	return append([]string{"PREV_RKE2=" + sq(rel) + "   # the exact RKE2 release the node ran before the step (kubectl get node NODE -o jsonpath='{.status.nodeInfo.kubeletVersion}' showed it)"},
		chain(
			fmt.Sprintf(`{ case "$PREV_RKE2" in v%s.*+rke2r*) ;; *) echo "PREV_RKE2 is '$PREV_RKE2', not a v%s RKE2 release (v%s.N+rke2rM): set it to the release the node ran before the step and paste this again" >&2; false;; esac; }`, minor, minor, minor),
			fmt.Sprintf(`curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_VERSION="$PREV_RKE2"%s sh -`, typ),
			"sudo systemctl restart rke2-"+role,
			unitBinary("", "rke2-"+role)[0],
			unitBinary("", "rke2-"+role)[1],
			`"$BIN" --version | grep -F " $PREV_RKE2 "`)...)
}

// updateSucceeded is the gate on an EKS update: it fails unless
// describe-update reports Successful.
func updateSucceeded(upd string) string {
	return fmt.Sprintf(`[ "$(%s --query update.status --output text)" = Successful ]`, upd)
}
