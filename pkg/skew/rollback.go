package skew

import (
	"fmt"
	"strings"
)

// Rollback is what a step undoes, and when: the trigger is declared before
// the step runs, and the commands are the way back for the step's layer.
// Control plane: the etcd snapshot restored and the binaries downgraded
// (a managed control plane has no downgrade: said so); workers: the
// provider's way back (cancel an instance refresh and return to the
// previous launch template version, roll back a GKE node pool upgrade,
// put back a Karpenter NodeClass's AMI terms) or the previous kubelet
// reinstalled in place; addons: kubectl rollout undo, helm rollback, the
// previous EKS add-on version.
type Rollback struct {
	// Trigger is the observation that starts the rollback: a failed gate,
	// a timeout, a share of pods not Running.
	Trigger string `json:"trigger"`
	// Blocks are the commands of the way back.
	Blocks []Block `json:"blocks,omitempty"`
}

// podsTrigger is the workload trigger of a step that moves nodes.
const podsTrigger = "more than half of the pods on the step's nodes are not Running 10 minutes after they return (kubectl get pods -A -o wide --field-selector spec.nodeName=NODE)"

// rollback returns the rollback of a step, after its commands were
// written (it reads the renderer's state at that point).
func (r *renderer) rollback(s Step) *Rollback {
	var b blocks
	rb := &Rollback{}
	prev := prevMinor(s.To)
	switch s.Phase {
	case PhasePreflight:
		rb.Trigger = "a gate FAILs (kubectl skew preflight exits 1)"
		b.add("# nothing has changed yet: stop here, fix what the gate names, and run the step again")
	case PhaseEtcd:
		rb.Trigger = "the snapshot, or its copy off the node, fails its check"
		b.add("# nothing has changed yet: take the backup again; no hop starts without a checked copy off the node")
	case PhaseHold:
		rb.Trigger = "the hold's own check fails, or the plan is abandoned before the control plane moves"
		b.add(r.holdRelease(s)...)
	case PhaseAPIServers:
		rb.Trigger = "a node's upgrade command fails, or its kube-apiserver is not Ready 10 minutes after it (kubectl -n kube-system get pods -l component=kube-apiserver -o wide)"
		if r.prov == ProviderKubeadm {
			rb.Trigger = fmt.Sprintf("the control plane ran at v%s and must go back: a node's kubeadm upgrade succeeded and its kube-apiserver is not Ready 10 minutes after it (kubectl -n kube-system get pods -l component=kube-apiserver -o wide), or the cluster fails its checks at v%s. A kubeadm upgrade that failed and said it recovered the earlier state is no trigger (see below)", s.To, s.To)
		}
		b.join(r.controlPlaneBack(s, prev))
	case PhaseControllers:
		rb.Trigger = "a kube-controller-manager or kube-scheduler pod is not Running 10 minutes after the apiservers moved"
		b.add("# the controllers moved with the apiservers (kubeadm upgrade, the server binary): roll back the apiservers step")
	case PhaseControlPlane:
		rb.Trigger = "the provider's update does not succeed, or the apiserver does not answer kubectl version 30 minutes after it"
		if r.prov == ProviderCAPI {
			b.join(r.capiControlPlaneBack(s, prev))
		} else {
			b.add(r.managedBack(s)...)
		}
	case PhaseAddons:
		rb.Trigger = "an addon's rollout does not finish within 10 minutes, or more than half of its pods are not Running"
		b.join(r.addonsBack(s))
	case PhaseNodePool:
		rb.Trigger = "gpu-validate or skew verify fails, or " + podsTrigger
		b.join(r.poolBack(s, prev))
	default:
		return nil
	}
	rb.Blocks = b.done()
	return rb
}

// holdRelease undoes a hold step.
func (r *renderer) holdRelease(s Step) []string {
	switch r.prov {
	case ProviderCAPI:
		out := []string{fmt.Sprintf("for MD in %s; do %s; done", r.capiAllTopologies(), r.capiApplyDefer(false))}
		if r.holdBeforePools(s) {
			// The hold's pause, where its check stopped it before it let go.
			out = append(out, r.capiPause(false))
		}
		return out
	case ProviderGKE:
		return []string{fmt.Sprintf("gcloud container clusters update %s --location=%s%s --remove-maintenance-exclusion=%s --quiet", sq(r.cluster), sq(phLocation), r.project(), r.gkeExclusionName())}
	}
	var out []string
	for _, pool := range s.Holds {
		switch r.rolls(pool) {
		case rollKarpenter:
			out = append(out, r.karpenterUnpin(pool)...)
		case rollAutoMode:
			out = append(out, budgetRestore(pool)...)
		}
	}
	return out
}

// controlPlaneBack is the way back of a self-managed control plane: the
// etcd snapshot restored and the previous binaries put back.
//   - kubeadm keeps the static pod manifests an upgrade replaced under
//     /etc/kubernetes/tmp/kubeadm-backup-manifests-<date> ("Recovering from
//     a failure state",
//     https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/#recovering-from-a-failure-state);
//     a manifest kubeadm did not replace (etcd's, when etcd kept its
//     version) is not there, so the backups go over the stopped manifests.
//   - etcd: every member stops before any restores, each member restores
//     the same snapshot into a new data directory with its own --name and
//     --initial-advertise-peer-urls and the whole --initial-cluster
//     (https://etcd.io/docs/v3.6/op-guide/recovery/, and for kubeadm
//     https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#restoring-an-etcd-cluster).
//   - k3s and RKE2: every server stops, the first restores with
//     --cluster-reset --cluster-reset-restore-path, the others delete their
//     db directory and rejoin (https://docs.k3s.io/datastore/backup-restore,
//     https://docs.rke2.io/datastore/backup_restore); SQLite is its db
//     directory put back.
func (r *renderer) controlPlaneBack(s Step, prev string) blocks {
	var b blocks
	switch r.prov {
	case ProviderKubeadm:
		r.kubeadmBack(&b, s, prev)
	case ProviderK3s:
		r.k3sBack(&b, "k3s", s, prev)
	case ProviderRKE2:
		r.k3sBack(&b, "rke2", s, prev)
	default:
		b.add(fmt.Sprintf("# with the installer that made the cluster: restore the etcd snapshot into a fresh data directory and put kube-apiserver back to v%s", prev))
	}
	return b
}

// kubeadmBack restores a kubeadm control plane.
func (r *renderer) kubeadmBack(b *blocks, s Step, prev string) {
	b.add(fmt.Sprintf("# Do NOT restore etcd when a kubeadm upgrade command failed with %q: kubeadm put that node's previous static pod manifests back itself (and etcd's data from its own backup, where it had moved etcd), so etcd's data is unchanged and a restore would only lose the writes since the snapshot. Check that the node runs v%s again (sudo grep image: /etc/kubernetes/manifests/kube-apiserver.yaml), fix what kubeadm named, and run the step again.", kubeadmRecovered, prev),
		fmt.Sprintf("# Restore etcd only when the control plane ran at v%s and must go back (a kubeadm upgrade succeeded on at least one node, and the trigger above holds): then every control-plane node restores, in the blocks below.", s.To))
	b.cut()
	r.etcdRestoreIntro(b, s, "control-plane node", r.firstCP())
	b.add("# on each control-plane node, once every one has stopped its static pods: put the manifests kubeadm replaced back over the stopped ones, restore the snapshot into a fresh data directory as this member with the etcdutl the backup kept, then the previous packages:",
		"INITIAL='<the INITIAL printed above>'")
	byManager(b, packageManager(r.controlPlaneOS()), func(pm string) []string {
		// The copy the upgrade step took before kubeadm ran (a node it
		// never reached has none, and its stopped manifests are already
		// the previous ones): not kubeadm's newest kubeadm-backup-manifests-*
		// directory, which is empty after kubeadm rolled itself back or
		// re-ran, and is an earlier hop's on a node this hop never reached.
		pre := preUpgradeManifests(s.To)
		lines := append([]string{fmt.Sprintf("if sudo test -d %s; then sudo cp -a %s/. %s/; fi", pre, pre, stoppedManifests)},
			etcdRestoreLines(s)...)
		lines = append(lines, startManifests)
		lines = append(lines, repoSwitch(pm, s.To, prev)...)
		lines = append(lines, downgrade(pm, prev, "kubeadm", "kubelet", "kubectl")...)
		return chain(append(lines, "sudo systemctl daemon-reload", "sudo systemctl restart kubelet")...)
	})
	b.cut()
	b.add("# here, when every node has restored:", "kubectl -n kube-system get pods -l tier=control-plane -o wide")
	b.cut()
	workersRestart(b)
}

// kubeadmRecovered is what kubeadm upgrade apply and upgrade node say when
// an upgrade of the static pods failed and kubeadm moved the previous
// manifests back (and, where it had upgraded etcd, etcd's data from its
// backup): rollbackOldManifests and rollbackEtcdData in
// cmd/kubeadm/app/phases/upgrade/staticpods.go (the message unchanged from
// kubernetes v1.9 to v1.37).
const kubeadmRecovered = "couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state"

// workersRestart restarts the kubelet on the worker nodes after an etcd
// restore: "The Kubernetes project also recommends restarting Kubernetes
// components (kube-scheduler, kube-controller-manager, kubelet) to ensure
// that they don't rely on some stale data"
// (https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#restoring-an-etcd-cluster,
// the Caution there, read 2026-12-06);
// the control-plane components started again from their manifests.
func workersRestart(b *blocks) {
	b.add("# on each worker node, once the control plane answers again: restart the kubelet, so that it keeps nothing it read from the state the restore replaced (the control-plane components started afresh from their manifests):",
		"sudo systemctl restart kubelet")
}

// The static pod manifests a rollback stops and starts again. kubeadm
// creates its directories 0700 (cmd/kubeadm/app/constants/constants.go
// CreateTimestampDirForKubeadm, cmd/kubeadm/app/util/staticpod/utils.go
// WriteStaticPodToDisk, kubernetes v1.37.2), so a glob in them is expanded
// by a root shell, never by the operator's.
const (
	stoppedManifests = "/etc/kubernetes/manifests-stopped"
	startManifests   = `sudo sh -c 'mv ` + stoppedManifests + `/*.yaml /etc/kubernetes/manifests/'`
)

// preUpgradeManifests is where a kubeadm control-plane node's static pod
// manifests are copied before its kubeadm upgrade to minor, for the
// rollback to put back.
func preUpgradeManifests(minor string) string {
	return "/etc/kubernetes/manifests-pre-" + minor
}

// etcdSnapshotFile is the snapshot the etcd step of a hop to minor takes.
func etcdSnapshotFile(to string) string { return fmt.Sprintf("etcd-pre-%s.db", to) }

// etcdRestoreIntro writes what precedes the restore on each member of a
// kubeadm-made etcd (kubeadm, Cluster API's KubeadmControlPlane): the
// members read while etcd still answers, the checked copy taken back to
// each node, every member's static pods stopped before any restores.
func (r *renderer) etcdRestoreIntro(b *blocks, s Step, what, node string) {
	file := etcdSnapshotFile(s.To)
	if r.prov == ProviderCAPI {
		// The rollout replaced the machines the backup saw: the members
		// are the ones that run now, read while etcd still answers.
		b.add("# here, while etcd still answers: the members that run now (the rollout replaced the machines the backup saw), for each member's restore; writes since the snapshot are lost")
		b.add(chain(memberList(node), `test -n "$INITIAL"`, `echo "INITIAL='$INITIAL'"`)...)
	} else {
		b.add("# here: the members as the backup recorded them, for each member's restore (the apiserver need not answer); writes since the snapshot are lost",
			backupDir())
		b.add(chain(fmt.Sprintf(`INITIAL=$(cat "$BACKUP_DIR/%s")`, etcdMembersFile(s.To)), `test -n "$INITIAL"`,
			`echo "INITIAL='$INITIAL'"`)...)
	}
	b.cut()
	util := nodeEtcdutl(s.To, "$NODE_ARCH")
	b.add(fmt.Sprintf("# here, for each %s: the checked copy goes back to it, with the etcdutl the backup kept for the node's architecture (etcdutl is not downloaded while the control plane is down; the previous packages later come from the package repository, which a node without access needs staged first)", what),
		backupDir(),
		sshTo("NODE_SSH", "<"+strings.ReplaceAll(what, " ", "-")+">", "the "+what[strings.LastIndex(what, " ")+1:]))
	b.add(chain(
		`NODE_ARCH=$(ssh "$NODE_SSH" uname -m | `+unameArch+`)`,
		fmt.Sprintf(`scp "$BACKUP_DIR/%s" "%s" "$NODE_SSH":/tmp/`, file, util),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo install -m 0600 /tmp/%s /root/%s`, file, file),
		fmt.Sprintf(`ssh "$NODE_SSH" sudo install -m 0700 "/tmp/%s" %s`, util[len("$BACKUP_DIR/"):], restoreEtcdutl(s.To)),
		fmt.Sprintf(`ssh "$NODE_SSH" rm /tmp/%s "/tmp/%s"`, file, util[len("$BACKUP_DIR/"):]))...)
	b.cut()
	// The member's etcd must be gone before its data directory moves: the
	// kubelet stops a static pod whose manifest left the directory on its
	// next sync, not at once.
	b.add(fmt.Sprintf("# on each %s, before any of them restores: stop its static pods, and wait until its etcd container has stopped", what))
	b.add(chain("sudo mkdir -p "+stoppedManifests,
		`sudo sh -c 'mv /etc/kubernetes/manifests/*.yaml `+stoppedManifests+`/'`,
		`while ETCD_IDS=$(sudo crictl ps --name '^etcd$' -q) && [ -n "$ETCD_IDS" ]; do sleep 2; done`,
		etcdStopped)...)
	b.cut()
}

// memberList sets INITIAL to etcd's members as --initial-cluster takes
// them (name=peer URL, comma-separated), read in node's etcd pod: etcdctl
// member list -w simple prints "ID, status, name, peer URLs, client URLs,
// is learner" joined by ", ", a member's several peer URLs joined by ","
// within their field (etcdctl/ctlv3/command/printer_simple.go,
// etcd-io/etcd v3.6.0 to v3.7.1), and --initial-cluster takes one
// name=URL pair per peer URL. A member not started yet has no name,
// and an empty list is a failed read (the pipeline's status is awk's):
// awk fails on either.
func memberList(node string) string {
	return fmt.Sprintf(`INITIAL=$(%s | awk -F', ' '$3 == "" {bad = 1} {n = split($4, u, ","); for (i = 1; i <= n; i++) {printf "%%s%%s=%%s", sep, $3, u[i]; sep = ","}} END {exit bad || NR == 0}')`, etcdctl(node, "member list -w simple"))
}

// etcdStopped fails unless crictl answers and lists no running etcd
// container: a crictl that cannot reach the runtime (no
// /etc/crictl.yaml, not on sudo's PATH) prints nothing, which must not read
// as "stopped" (crictl ps lists running containers, --name is a regular
// expression: cri-tools docs/crictl.md, v1.34).
const etcdStopped = `ETCD_IDS=$(sudo crictl ps --name '^etcd$' -q) && test -z "$ETCD_IDS"`

// restoreEtcdutl is where a member keeps the etcdutl of the restore of
// the hop to minor.
func restoreEtcdutl(minor string) string { return "/root/etcdutl-pre-" + minor }

// etcdRevisionBump is how far the restore moves etcd's revision past the
// snapshot's, with the revisions in between marked compacted, so that no
// watcher or informer sees a revision go backward or reads one that the
// restore discarded: etcdutl snapshot restore --bump-revision and
// --mark-compacted (etcdutl/etcdutl/snapshot_command.go, etcd-io/etcd
// v3.5.10 to v3.7.1, absent at v3.5.9: --mark-compacted "required if
// --bump-revision > 0"), added for restoring Kubernetes' etcd without
// revisions going backward (etcd-io/etcd#16028, the etcd side of
// kubernetes/kubernetes#118501); 1000000000 is the bump used there and in
// kubernetes/kubernetes#131115, far more writes than a cluster makes
// between a snapshot and its restore.
const etcdRevisionBump = "1000000000"

// etcdRestoreLines restore the snapshot on one member, as the member its
// stopped etcd manifest names, into a fresh data directory put in place
// of the one the manifest's --data-dir names, with the etcdutl the backup
// kept (kubeadm puts none on the host, and the node may reach no download
// while the control plane is down), the revision bumped past every one a
// client saw. The member directory moves, not the data directory, which
// is often a mount point of its own (a dedicated disk), which mv cannot
// move: etcdutl snapshot restore writes member/snap and member/wal under
// --data-dir when no --wal-dir is given (etcdutl/snapshot/v3_snapshot.go,
// etcd-io/etcd v3.7.1), and kubeadm sets no --wal-dir.
func etcdRestoreLines(s Step) []string {
	manifest := stoppedManifests + "/etcd.yaml"
	return []string{
		etcdStopped,
		fmt.Sprintf(`ETCD_DATA=$(sudo sed -n 's/^ *- --data-dir=//p' %s)`, manifest),
		`test -n "$ETCD_DATA"`,
		fmt.Sprintf(`sudo %s snapshot restore /root/%s --data-dir "$ETCD_DATA-restored" --name "$(sudo sed -n 's/.*--name=//p' %s)" --initial-advertise-peer-urls "$(sudo sed -n 's/.*--initial-advertise-peer-urls=//p' %s)" --initial-cluster "$INITIAL" --bump-revision %s --mark-compacted`, restoreEtcdutl(s.To), etcdSnapshotFile(s.To), manifest, manifest, etcdRevisionBump),
		fmt.Sprintf(`sudo mkdir -p "$ETCD_DATA-failed-%s"`, s.To),
		fmt.Sprintf(`sudo mv "$ETCD_DATA/member" "$ETCD_DATA-failed-%s/"`, s.To),
		`sudo mv "$ETCD_DATA-restored/member" "$ETCD_DATA/"`,
		`sudo rmdir "$ETCD_DATA-restored"`,
	}
}

// kubeletBack puts the kubelet of prev back on a node of the pool the
// step upgraded in place, with the cluster's installer.
func (r *renderer) kubeletBack(b *blocks, s Step, prev string) {
	switch r.prov {
	case ProviderKubeadm:
		byManager(b, packageManager(r.pools[s.Pool].OSImages), func(pm string) []string {
			lines := append(repoSwitch(pm, s.To, prev), downgrade(pm, prev, "kubelet", "kubectl")...)
			return chain(append(lines, "sudo systemctl daemon-reload", "sudo systemctl restart kubelet")...)
		})
	case ProviderK3s:
		b.add(k3sInstall("agent", prev)...)
	case ProviderRKE2:
		b.add(rke2Pinned("agent", r.poolRelease(s.Pool, prev), prev)...)
	default:
		b.add(fmt.Sprintf("# put the v%s kubelet back with the installer that made the cluster", prev))
	}
}

// poolRelease is the distribution's release the inventory saw the pool
// run at minor (v1.37.3+rke2r1), where it saw exactly one; else a
// placeholder for the release the pool ran before the step (a pool that
// reached minor at an earlier hop of this plan got that channel's newest
// patch then, which the inventory did not see).
func (r *renderer) poolRelease(pool, minor string) string {
	var rel []string
	for _, vc := range r.pools[pool].Versions {
		v, err := ParseVersion(vc.Version)
		if err == nil && v.MinorString() == minor && strings.Contains(vc.Version, "+") {
			rel = append(rel, vc.Version)
		}
	}
	if len(rel) == 1 {
		return rel[0]
	}
	return "<v" + minor + ".N+rke2rM>"
}

// gpuUnitBack takes the failing unit (or batch) of a GPU pool upgraded in
// place back to prev under the step's own gang-drain run: a unit whose
// validation failed is still drained by that run (its restore is chained
// to the validation), and a run of another id over its nodes would be
// refused as a conflicting run, while the restore of the step's run would
// put the failing nodes back in service. gang-drain run with the step's
// run id resumes that run where it is active and drains the unit afresh
// where it was restored; its restore then ends it once the unit passes
// validation at prev.
func (r *renderer) gpuUnitBack(b *blocks, s Step, prev string) {
	intro, unitSel, run := r.unitBlock(s, r.selector(s.Pool))
	b.add(fmt.Sprintf("# the failing unit (or batch) only, under the step's own gang-drain run, which still holds it where its validation failed: drained (or kept drained), a v%s kubelet on each of its nodes, brought back once it validates at v%s; a kubelet one minor older than the control plane stays inside the skew", prev, prev))
	if unitSel == "" {
		// The batch's nodes, not the next batch's.
		b.add(strings.SplitN(intro[1], "   # ", 2)[0] + "   # the nodes of the failing batch")
	} else {
		b.add(intro[1:]...)
	}
	b.add(r.gangDrain(unitSel, run))
	b.cut()
	if unitSel == "" {
		b.add("# on each node of $NODES:")
	} else {
		b.add("# on each node of the unit (kubectl get nodes -l " + unitSel + " -o name):")
	}
	r.kubeletBack(b, s, prev)
	b.cut()
	b.add("# here:")
	if unitSel == "" {
		b.add(chain(fmt.Sprintf("kubectl gpu-validate nodes $NODES --kubelet-version v%s %s", prev, validateChecks), "kubectl gang-drain restore $NODES")...)
		return
	}
	b.add(chain(fmt.Sprintf("kubectl gpu-validate nodes -l %s --kubelet-version v%s %s", unitSel, prev, validateChecks), "kubectl gang-drain restore "+run)...)
}

// Cluster API facts the control-plane rollback rests on, all at
// kubernetes-sigs/cluster-api v1.14.0 (the release e2e/tools/capi pins):
//   - the Cluster webhook refuses a lower spec.topology.version ("version
//     cannot be decreased", core/webhooks/admission/cluster.go) unless the
//     Cluster carries ClusterTopologyUnsafeUpdateVersionAnnotation
//     (api/core/v1beta2/common_types.go; docs/book/src/reference/api/labels-and-annotations.md);
//   - the KubeadmControlPlane webhook refuses only a version more than one
//     minor up (validateVersion in
//     controlplane/kubeadm/webhooks/admission/kubeadmcontrolplane.go), and
//     the topology controller does not hand a new version to a control
//     plane that is still upgrading (computeControlPlaneVersion in
//     exp/topology/desiredstate/desired_state.go), so a rollout that stopped
//     half way goes back only by the KubeadmControlPlane's own spec.version;
//   - spec.paused "can be used to prevent controllers from processing the
//     Cluster and all its associated objects" (api/core/v1beta2/cluster_types.go;
//     the same field in v1beta1), so that no remediation replaces a
//     machine while its etcd member restores;
//   - Cluster API documents no etcd restore of its own ("Cluster API does
//     not support version downgrades", docs/book/src/reference/versions.md,
//     is about Cluster API's own releases): the machines run kubeadm's
//     static pods, so the restore is kubeadm's.
const capiUnsafeVersionAnnotation = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"

// phCPNow is a control-plane node of the workload cluster as it runs now
// (kubectl get nodes -l node-role.kubernetes.io/control-plane).
const phCPNow = "<control-plane-node-now>"

// capiControlPlaneBack is the way back of a KubeadmControlPlane rollout:
// the etcd snapshot restored when the data is at fault, then the version
// put back on the Cluster and on the KubeadmControlPlane, which replaces
// the machines at the previous version one at a time.
func (r *renderer) capiControlPlaneBack(s Step, prev string) blocks {
	var b blocks
	mgmt := r.kubectlMgmt()
	cluster := fmt.Sprintf("%s -n %s %%s cluster.cluster.x-k8s.io %s", mgmt, sq(r.capiNS), sq(r.capiName))
	kcps := fmt.Sprintf("%s -n %s get kubeadmcontrolplanes.controlplane.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=%s", mgmt, sq(r.capiNS), sq(r.capiName))
	b.add("# on the management cluster: what failed; <control-plane-node-now> below is a control-plane node of the workload cluster that runs now (kubectl get nodes -l node-role.kubernetes.io/control-plane): the rollout may have replaced the one the plan read",
		fmt.Sprintf("clusterctl describe cluster %s -n %s --kubeconfig-context %s --show-conditions all", sq(r.capiName), sq(r.capiNS), sq(phMgmt)))
	b.cut()
	pause := func(on bool) string {
		return fmt.Sprintf(`%s --type merge -p '{"spec":{"paused":%t}}'`, fmt.Sprintf(cluster, "patch"), on)
	}
	b.add("# only when etcd's data is at fault (objects lost or damaged since the snapshot); otherwise go on to the version below. On the management cluster: pause the Cluster, so that no controller replaces a machine while its member restores:",
		pause(true))
	b.cut()
	// The rollout replaced machines: the node the inventory names may be
	// gone, so the member to ask is one that runs now.
	r.etcdRestoreIntro(&b, s, "control-plane node", phCPNow)
	b.add(fmt.Sprintf("# on each control-plane node, once every one has stopped its static pods: restore the snapshot into a fresh data directory as this member with the etcdutl the backup kept, and start its static pods again (the machine keeps its v%s manifests: the machines go back to v%s below, replaced by Cluster API):", s.To, prev),
		"INITIAL='<the INITIAL printed above>'")
	b.add(chain(append(etcdRestoreLines(s), startManifests)...)...)
	b.cut()
	b.add("# here, when every machine has restored: the members answer; then resume the Cluster on the management cluster")
	b.add(chain(etcdctl(phCPNow, "endpoint health --cluster"), pause(false))...)
	b.cut()
	workersRestart(&b)
	b.cut()
	ann := fmt.Sprintf(cluster, "annotate")
	b.add(fmt.Sprintf("# on the management cluster: the version back to the v%s patch the Cluster ran before (the Cluster webhook takes a lower version only under %s, taken off again at once), and on the KubeadmControlPlane too, which Cluster API does not move while its rollout is unfinished; it then replaces the machines at v%s one at a time:", prev, capiUnsafeVersionAnnotation, prev),
		"PREV='v"+prev+"."+phPatch+"'   # the version spec.topology.version had before the step")
	b.add(chain(
		fmt.Sprintf("%s %s=true --overwrite", ann, capiUnsafeVersionAnnotation),
		fmt.Sprintf(`%s --type merge -p "{\"spec\":{\"topology\":{\"version\":\"$PREV\"}}}"`, fmt.Sprintf(cluster, "patch")),
		fmt.Sprintf("%s %s-", ann, capiUnsafeVersionAnnotation),
		fmt.Sprintf(`%s -o name | xargs -r -I{} %s -n %s patch {} --type merge -p "{\"spec\":{\"version\":\"$PREV\"}}"`, kcps, mgmt, sq(r.capiNS)))...)
	b.add(kcps + " -o wide   # until every replica is updated, at $PREV")
	return b
}

// k3sBack restores a k3s or RKE2 datastore and puts the previous release
// back on the servers, matching the backup k3sBackup took.
func (r *renderer) k3sBack(b *blocks, dist string, s Step, prev string) {
	data := "/var/lib/rancher/" + dist + "/server"
	unit := serverUnit(dist)
	// reinstall puts the previous release in place, not started, and
	// chains then to it (serverBack).
	reinstall := func(first []string, then ...string) []string {
		return chain(append(append(first, serverBack(dist, s.To)...), then...)...)
	}
	b.add("# here, over ssh to the first server; writes since the backup are lost:", sshTo("SERVER", phServer, "the first server"), backupDir())
	switch {
	case dist == "rke2" || r.pf.EtcdNodes > 0:
		name := strings.ReplaceAll("pre-"+s.To, ".", `\.`)
		b.add(chain(
			fmt.Sprintf(`SNAP=$(ls -t "$BACKUP_DIR" | grep -m1 '^%s-')`, name),
			fmt.Sprintf(`scp "$BACKUP_DIR/$SNAP" "$SERVER":/tmp/`),
			fmt.Sprintf(`ssh "$SERVER" sudo install -m 0600 "/tmp/$SNAP" "%s/db/snapshots/$SNAP"`, data),
			`echo "SNAP='$SNAP'"`)...)
		b.cut()
		releaseToServers(b, dist, s.To, prev)
		b.cut()
		b.add("# on each server node, before the first one restores:", "sudo systemctl stop "+unit)
		b.cut()
		// --etcd-s3=false: with etcd-s3 in config.yaml the restore path
		// is read as an object of the bucket ("only the snapshot
		// filename should be passed", https://docs.rke2.io/datastore/backup_restore;
		// pkg/etcd/etcd.go Restore, k3s-io/k3s v1.34), and this snapshot
		// is the local copy; RKE2 refuses a cluster reset while the
		// server's config names a server URL (rancher/rke2#4806).
		b.add(fmt.Sprintf("# on the first server: v%s back (not started), the snapshot restored from the local copy, then started (a server whose config.yaml has a server: line refuses the reset: remove that line first):", prev), "SNAP='<the SNAP printed above>'")
		b.add(reinstall(nil, fmt.Sprintf(`sudo "$BIN" server --cluster-reset --cluster-reset-restore-path="%s/db/snapshots/$SNAP" --etcd-s3=false`, data), "sudo systemctl start "+unit)...)
		b.cut()
		b.add(fmt.Sprintf("# on each other server, once the first one has started again: v%s back, its db directory out of the way, rejoined:", prev))
		b.add(reinstall([]string{dbAsideGuard("sudo", data, s.To)}, dbAside("sudo", data, s.To), "sudo systemctl start "+unit)...)
	case r.pf.ServerNodes > 1:
		b.add("# an external datastore: restore it with the database's own tools first, then the servers below")
		b.cut()
		releaseToServers(b, dist, s.To, prev)
		b.cut()
		b.add(fmt.Sprintf("# on each server node, once the datastore is restored: v%s back, started:", prev))
		b.add(reinstall(nil, "sudo systemctl start "+unit)...)
	default:
		tgz := fmt.Sprintf("k3s-server-db-pre-%s.tgz", s.To)
		b.add(chain(
			dbAsideGuard(`ssh "$SERVER" sudo`, data, s.To),
			fmt.Sprintf(`ssh "$SERVER" sudo systemctl stop %s`, unit),
			dbAside(`ssh "$SERVER" sudo`, data, s.To),
			fmt.Sprintf(`ssh "$SERVER" sudo tar -C %s -xzf - db < "$BACKUP_DIR/%s"`, data, tgz))...)
		b.cut()
		releaseToServers(b, dist, s.To, prev)
		b.cut()
		b.add(fmt.Sprintf("# on the server: v%s back, started:", prev))
		b.add(reinstall(nil, "sudo systemctl start "+unit)...)
	}
}

// serverBack puts back on a server, its service stopped first, the
// release the backup kept for it (releaseKeep, copied to the node by
// releaseToServers), so that nothing of it is downloaded while the
// control plane is down (RKE2's images still are, unless the node has
// them: releaseToServers) and the unit and its env file stay as they are.
// The binary is the one the unit runs, read from its ExecStart before
// anything is stopped, not the one PATH finds: the install scripts put it
// elsewhere than /usr/local/bin, k3s in INSTALL_K3S_BIN_DIR or /opt/bin
// where /usr/local/bin is read-only (install.sh setup_env, k3s-io/k3s at
// 0136cf258954a458da1404858396342724b93d24), RKE2 under /opt/rke2 where
// /usr/local is read-only or a mount point (install.sh setup_env,
// rancher/rke2 at 9d03d45080237c06a0e957b36ae9609fdca468d1).
//
// A binary install: the kept binary is checked against the sha256
// recorded when it was kept, installed beside the unit's binary under a
// temporary name with the unit binary's SELinux label where SELinux is
// on (the install scripts label it container_runtime_exec_t), and renamed
// over it, so that the unit's path never names a half-written file.
//
// An RKE2 server installed from RPMs (the node decides, rke2RPM) goes
// back through the package manager instead: the repository file of the
// previous minor the backup kept is put back and rke2-server and
// rke2-common are downgraded to the exact package versions the node had,
// so that the RPM database holds the release that runs and a later
// dnf update stays within the previous minor. Copying a binary over the
// package's would leave the database at the newer release, which the
// next update puts back. RKE2's rollback reinstalls the previous version
// ("roll back the RKE2 binary to the previous version",
// docs/upgrades/roll-back.md, rancher/rke2-docs at
// f06f555ce158da4a510cf93eb4ecb904845c1aac), which on the RPM method is
// the package of that version from the repository of its minor
// (do_install_rpm, install.sh, rancher/rke2 at
// 6ce1a8019e9d0b81eb7a715edbc2b8ac12d26da0); dnf downgrade takes a
// package to the exact older version named (dnf(8), "Downgrade Command").
func serverBack(dist, minor string) []string {
	k := releaseOnNode(dist, minor)
	unit := serverUnit(dist)
	binary := strings.Join([]string{
		fmt.Sprintf(`sudo sh -c 'cd %s && sha256sum -c %s.sha256'`, k, dist),
		fmt.Sprintf(`sudo install -m 0755 %s/%s "$BIN.rollback"`, k, dist),
		`{ ! command -v selinuxenabled >/dev/null || ! selinuxenabled || sudo chcon --reference="$BIN" "$BIN.rollback"; }`,
		`sudo mv -f "$BIN.rollback" "$BIN"`,
	}, " && ")
	put := binary
	// What the RPM way back needs is checked before the server stops:
	// the kept package versions and repository, and dnf or yum (a SUSE
	// node has zypper, which this block does not drive).
	var ready []string
	if dist == "rke2" {
		ready = append(ready, fmt.Sprintf(`{ ! %s || { sudo test -s %s/rpm-server && sudo test -s %s/rpm-common && sudo test -s %s/rancher-rke2.repo || { echo "rke2-server is an RPM here, but the backup kept no package versions or repository for this node: downgrade rke2-server and rke2-common to the release the node ran before with its package manager" >&2; false; }; } && { command -v dnf >/dev/null || command -v yum >/dev/null || { echo "rke2-server is an RPM here and there is no dnf or yum (zypper on SUSE): zypper --non-interactive install --oldpackage rke2-server-\$(sudo cat %s/rpm-server) rke2-common-\$(sudo cat %s/rpm-common)" >&2; false; }; }; }`,
			rke2RPM(""), k, k, k, k, k))
		rpm := strings.Join([]string{
			fmt.Sprintf(`PKG=$(sudo cat %s/rpm-server)`, k),
			fmt.Sprintf(`COMMON=$(sudo cat %s/rpm-common)`, k),
			`PM=$(command -v dnf || command -v yum)`,
			fmt.Sprintf(`sudo install -m 0644 %s/rancher-rke2.repo %s`, k, rke2Repo),
			`{ rpm -q "rke2-server-$PKG" "rke2-common-$COMMON" >/dev/null || sudo "$PM" downgrade -y "rke2-server-$PKG" "rke2-common-$COMMON"; }`,
		}, " && ")
		put = fmt.Sprintf("if %s; then %s; else %s; fi", rke2RPM(""), rpm, binary)
	}
	out := append(unitBinary("", unit),
		fmt.Sprintf(`PREV=$(sudo cat %s/release)`, k),
		fmt.Sprintf(`{ case "$PREV" in v%s.*) ;; *) echo "%s/release says '$PREV', not a v%s release: copy this node's kept release again" >&2; false;; esac; }`, prevMinor(minor), k, prevMinor(minor)))
	out = append(out, ready...)
	return append(out,
		"sudo systemctl stop "+unit,
		put,
		`"$BIN" --version | grep -F " $PREV "`)
}

// unitBinary sets $BIN to the executable unit's ExecStart runs, which
// systemctl show prints as "{ path=<executable> ; argv[]=<argv> ; ... }"
// (print_property in src/systemctl/systemctl-show.c, systemd v255), and
// stops, loudly, unless it is an executable file. run is "" on the node
// itself, or the ssh that reaches it (ssh "$SERVER").
func unitBinary(run, unit string) []string {
	pre := ""
	if run != "" {
		pre = run + " "
	}
	return []string{
		fmt.Sprintf(`BIN=$(%ssystemctl show -p ExecStart --value %s | sed -n 's/^{ path=\([^ ;]*\) ;.*/\1/p')`, pre, unit),
		fmt.Sprintf(`{ test -n "$BIN" && %stest -x "$BIN" || { echo "no executable in the ExecStart of %s ('$BIN'): systemctl cat %s names its binary; set BIN to it and paste the lines after this one" >&2; false; }; }`, pre, unit, unit),
	}
}

// dbAside moves a server's db directory out of the way before the hop to
// minor is undone, run by run (sudo, or ssh to the server and sudo).
func dbAside(run, data, minor string) string {
	return fmt.Sprintf("%s mv %s/db %s/db-failed-%s", run, data, data, minor)
}

// dbAsideGuard stops the rollback, loudly, before anything is stopped
// where db-failed-<minor> is there already: an earlier paste moved the db
// aside, and mv would move db into that directory rather than beside it.
func dbAsideGuard(run, data, minor string) string {
	f := fmt.Sprintf("%s/db-failed-%s", data, minor)
	return fmt.Sprintf(`{ %s test ! -e %s || { echo "%s is there already: an earlier paste moved the db aside; move that directory elsewhere (keep it: it holds the failed db) and paste this again" >&2; false; }; }`, run, f, f)
}

// eksNodegroupCopy is the JMESPath over describe-nodegroup's answer that
// makes the CreateNodegroup input of the node group beside it: the fields
// of the Nodegroup shape that CreateNodegroupRequest takes too (nodeRole,
// subnets, capacityType, scalingConfig, labels, taints, tags, updateConfig,
// nodeRepairConfig: botocore 1.43.11 data/eks/2017-11-01/service-2.json,
// aws eks create-nodegroup --generate-cli-skeleton, aws-cli 1.45.11), as
// one JSON document for --cli-input-json, so that no list is passed as an
// unquoted expansion (zsh does not split one into words). A field the
// group does not have is left out (merge of an empty object) rather than
// sent as null, which the CLI's parameter validation refuses; labels,
// taints and tags go in even when empty, so the document is never {},
// which the CLI's JSON output prints as nothing (JSONFormatter skips a
// response equal to {}, awscli/formatter.py, aws-cli 1.45.11).
//
// instanceTypes go in where the group has them: without them, and with a
// launch template that names no instance type, "t3.medium is used, by
// default" (CreateNodegroup instanceTypes, botocore 1.43.11). Tags do not:
// a group that eksctl made carries its CloudFormation stack's
// aws:cloudformation:* tags, and "tag keys prefixed with aws: are
// reserved for AWS use" and refused (Tagging best practices, Amazon EKS
// API TagResource); JMESPath cannot drop keys from a map, so the block
// says to tag the new group with the user's own.
const eksNodegroupCopy = "nodegroup | merge({nodeRole: nodeRole, subnets: subnets, scalingConfig: scalingConfig, labels: labels || `{}`, taints: taints || `[]`}, " +
	"instanceTypes && {instanceTypes: instanceTypes} || `{}`, capacityType && {capacityType: capacityType} || `{}`, updateConfig && {updateConfig: updateConfig} || `{}`, nodeRepairConfig && {nodeRepairConfig: nodeRepairConfig} || `{}`)"

// eksSecondCopy is what a node group made beside a pool at its full size
// costs while both exist.
const eksSecondCopy = "Capacity: the new group starts at the failed group's full size, so until the failed group is deleted the account runs a second copy of the pool: twice its instances (for a GPU pool, twice its GPUs), within the EC2 quota of the instance family (Service Quotas) and the zone's capacity or capacity reservation. Without room for that, raise the quota or reserve the capacity first; otherwise there is no way back that keeps the pool running: stop its gangs at a checkpoint (kubectl gang-drain run), delete the failed group before creating the new one, and bring the gangs back once the new group's nodes pass gpu-validate."

// eksNodegroupBack is the way back of a managed node group that runs a
// custom AMI from a launch template of the user's. EKS takes no node group
// back in place: "You cannot roll back a node group to an earlier
// Kubernetes version or AMI version" (UpdateNodegroupVersion,
// https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupVersion.html,
// and aws eks update-nodegroup-version help, aws-cli 1.45.11). The way
// back is a node group beside it made from the launch template version in
// use before the step, whose AMI is the previous release (create-nodegroup
// takes the template by name or id, not both, and a version: the
// LaunchTemplateSpecification shape; without --kubernetes-version, which
// fails "If you specify launchTemplate, and your launch template uses a
// custom AMI": aws eks create-nodegroup help, aws-cli 1.45.11, botocore
// 1.43.11 data/eks/2017-11-01/service-2.json). It copies the failed group's
// role, subnets, size, capacity type, labels and taints (describe-nodegroup's
// Nodegroup shape, the same shapes CreateNodegroup takes: scalingConfig,
// labels, taints), the pool moves onto it, and the failed group is
// deleted. "The node group name can't be
// longer than 63 characters. It must start with letter or digit, but can
// also include hyphens and underscores for the remaining characters"
// (Amazon EKS User Guide, doc_source/cni-custom-network.md,
// awsdocs/amazon-eks-user-guide 9c5afd0060c3).
func (r *renderer) eksNodegroupBack(s Step, prev string) blocks {
	var b blocks
	ng := r.providerPool(s.Pool, "<nodegroup-name>", labelEKSNodegroup, "alpha.eksctl.io/nodegroup-name")
	suffix := "-v" + strings.ReplaceAll(prev, ".", "-")
	loc := fmt.Sprintf("--region %s --cluster-name %s", sq(r.region), sq(r.cluster))
	describe := func(query, output string) string {
		return fmt.Sprintf(`aws eks describe-nodegroup %s --nodegroup-name "$NG" --query %s --output %s`, loc, sq(query), output)
	}
	// Each block names the two groups itself, so that it also runs in a
	// shell of its own.
	groups := []string{"NG=" + sq(ng) + "   # the failed node group",
		fmt.Sprintf(`BACK="${NG:0:%d}%s"   # the new node group's name: letters, digits, hyphens, at most 63 characters`, 63-len(suffix), suffix)}
	b.add(fmt.Sprintf("# EKS takes no managed node group back to an earlier AMI in place: create a node group beside it from the launch template version in use before the step (its v%s AMI; no --kubernetes-version, which fails with a custom AMI), copying the failed group's role, subnets, instance types, capacity type, size, labels, taints, update and node repair settings, then move the pool onto it and delete the failed group. Tags are not copied (a group eksctl made carries its stack's aws:* tags, which AWS reserves and create-nodegroup refuses): add your own afterwards with aws eks tag-resource.", prev),
		"# "+eksSecondCopy)
	b.add(groups...)
	b.add("PREV_LT_VERSION=" + sq("<version-in-use>") + "   # the launchTemplate.version describe-nodegroup printed before the step's update")
	b.add(chain(
		"LT_NAME=$("+describe("nodegroup.launchTemplate.name", "text")+")",
		"NGCONF=$("+describe(eksNodegroupCopy, "json")+")",
		fmt.Sprintf(`aws eks create-nodegroup %s --nodegroup-name "$BACK" --launch-template "name=$LT_NAME,version=$PREV_LT_VERSION" --cli-input-json "$NGCONF" --query nodegroup.nodegroupName --output text`, loc),
		fmt.Sprintf(`aws eks wait nodegroup-active %s --nodegroup-name "$BACK"`, loc),
		`kubectl get nodes -l eks.amazonaws.com/nodegroup="$BACK" -o wide`)...)
	b.cut()
	old := `eks.amazonaws.com/nodegroup="$NG"`
	if r.inferencePool(s.Pool) {
		// An inference pool moves as the step moved it: paced by the
		// hydrate bandwidth, each model kept at its budget, the surge
		// scaled back by the restore (pkg/inference).
		run := fmt.Sprintf(`"%s-back-%s"`, s.Pool, s.To)
		b.add(fmt.Sprintf("# the new group's nodes validated at v%s first; then the failed group drained as an inference pool, paced, onto the new group, and the surge scaled back (a workload that selects eks.amazonaws.com/nodegroup by the failed group's name needs the new one):", prev))
		b.add(groups...)
		b.add(r.inferenceBackDrain(s, old, run, fmt.Sprintf(`kubectl gpu-validate nodes -l eks.amazonaws.com/nodegroup="$BACK" --kubelet-version v%s %s`, prev, validateChecks))...)
	} else if r.gpuPool(s.Pool) {
		run := fmt.Sprintf(`"%s-back-%s"`, s.Pool, s.To)
		b.add(fmt.Sprintf("# the new group's nodes validated at v%s first; then the failed group's gangs stopped at a checkpoint, all at once (the new group already has the pool's size, so no capacity is lost), and brought back on the new group (a workload that selects eks.amazonaws.com/nodegroup by the failed group's name needs the new one):", prev))
		b.add(groups...)
		b.add(chain(
			fmt.Sprintf(`kubectl gpu-validate nodes -l eks.amazonaws.com/nodegroup="$BACK" --kubelet-version v%s %s`, prev, validateChecks),
			fmt.Sprintf("kubectl gang-drain run -l %s --run-id %s --timeout %s", old, run, selfDrainTimeout),
			"kubectl gang-drain restore "+run)...)
	} else {
		b.add("# the failed group's nodes drained onto the new group, one at a time (a workload that selects eks.amazonaws.com/nodegroup by the failed group's name needs the new one):")
		b.add(groups[0])
		// break, not exit: zsh runs the last command of a pipeline in
		// the pasting shell itself, which exit would close.
		b.add(fmt.Sprintf(`kubectl get nodes -l %s -o name | while read -r NODE; do kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout=%s || break; done`, old, selfDrainTimeout))
	}
	b.cut()
	b.add("# then the failed group deleted:", groups[0])
	b.add(chain(
		fmt.Sprintf(`aws eks delete-nodegroup %s --nodegroup-name "$NG" --query nodegroup.status --output text`, loc),
		fmt.Sprintf(`aws eks wait nodegroup-deleted %s --nodegroup-name "$NG"`, loc))...)
	return b
}

// managedBack says how far back a managed control plane goes.
func (r *renderer) managedBack(s Step) []string {
	switch r.prov {
	case ProviderEKS:
		return []string{"# EKS does not downgrade a control plane; read the update's errors, fix what they name and run the step again:",
			fmt.Sprintf("aws eks describe-update --region %s --name %s --update-id \"$UPDATE_ID\" --query 'update.errors'", sq(r.region), sq(r.cluster))}
	case ProviderGKE:
		return []string{"# GKE does not downgrade a control plane's minor; the cluster's operations say what failed:",
			fmt.Sprintf("gcloud container operations list --location=%s%s --filter=targetLink~%s --limit=5", sq(phLocation), r.project(), sq(r.cluster))}
	case ProviderAKS:
		return []string{"# AKS does not downgrade a control plane; the cluster's state says what failed:",
			fmt.Sprintf("az aks show --resource-group %s --name %s --query '{state:provisioningState,version:currentKubernetesVersion}'", sq(r.resourceGroup()), sq(r.cluster))}
	}
	return nil
}

// addonsBack undoes the addons step. An EKS add-on goes back with
// update-addon to the version it ran before, where EKS still lists it for
// the cluster's version (aws eks describe-addon-versions); a self-managed
// one with rollout undo. Where the cluster does not show who manages an
// add-on, the two ways are alternatives, one block each, as in the step.
func (r *renderer) addonsBack(s Step) blocks {
	var b blocks
	undo := []string{"kubectl -n kube-system rollout undo daemonset/kube-proxy", "kubectl -n kube-system rollout undo deployment/coredns"}
	helm := "# an addon installed with Helm: helm history RELEASE -n NAMESPACE, then helm rollback RELEASE REVISION -n NAMESPACE --wait"
	switch r.prov {
	case ProviderEKS:
		for _, a := range []string{"vpc-cni", "kube-proxy", "coredns"} {
			managed, seen := r.pf.EKSAddons[a]
			back := append([]string{"# <previous-" + a + "-version>: the version describe-addon printed before the step's update"}, chain(
				fmt.Sprintf("aws eks update-addon --region %s --cluster-name %s --addon-name %s --addon-version %s --resolve-conflicts PRESERVE", sq(r.region), sq(r.cluster), a, sq("<previous-"+a+"-version>")),
				fmt.Sprintf("aws eks wait addon-active --region %s --cluster-name %s --addon-name %s", sq(r.region), sq(r.cluster), a))...)
			w := map[string]string{"vpc-cni": "daemonset/aws-node", "kube-proxy": "daemonset/kube-proxy", "coredns": "deployment/coredns"}[a]
			self := chain("kubectl -n kube-system rollout undo "+w, fmt.Sprintf("kubectl -n kube-system rollout status %s --timeout=10m", w))
			switch {
			case seen && managed:
				b.add("# " + a + ", an EKS add-on: the version before the step")
				b.add(back...)
			case seen:
				b.add("# " + a + ", self-managed:")
				b.add(self...)
			default:
				choice := "who manages " + a
				b.alt(choice, "describe-addon printed a version: "+a+" is an EKS add-on", back...)
				b.alt(choice, "describe-addon failed with ResourceNotFoundException: "+a+" is self-managed", self...)
			}
		}
		b.add(helm)
	case ProviderGKE, ProviderAKS:
		b.add(fmt.Sprintf("# %s runs kube-proxy and the cluster DNS itself: only addons of your own go back", r.prov.Title()), helm)
	case ProviderK3s, ProviderRKE2:
		b.add(fmt.Sprintf("# %s's kube-proxy and packaged components go back with the servers (roll back the apiservers step); addons of your own:", r.prov.Title()), helm)
	case ProviderKubeadm, ProviderCAPI:
		// Only what kubeadm's upgrade (or KubeadmControlPlane) moved: a
		// cluster without kube-proxy has nothing to undo (kubeadmAddons).
		if r.prov == ProviderCAPI {
			b.add("# KubeadmControlPlane puts kube-proxy and CoreDNS back at its version on every reconcile: hold it off them first (the next hop's control-plane step releases the hold), on the management cluster:",
				r.capiAddonsHold(true))
		}
		b.add(r.kubeadmAddons(func(w string) string { return "kubectl -n kube-system rollout undo " + w }, false)...)
		b.add(helm)
	default:
		b.add(append(undo, helm)...)
	}
	return b
}

// poolBack is a node pool's way back, by who replaced its nodes.
func (r *renderer) poolBack(s Step, prev string) blocks {
	var b blocks
	if r.controlPlanePool(s.Pool) && (r.prov == ProviderKubeadm || r.prov == ProviderK3s || r.prov == ProviderRKE2 || r.prov == ProviderCAPI) {
		b.add("# the control-plane nodes moved with the control-plane step: roll that step back")
		return b
	}
	if r.asgOf(s.Pool) != "" {
		b.join(r.asgBack(s))
		return b
	}
	switch r.replacer(s.Pool) {
	case replaceInPlace:
		if r.inferencePool(s.Pool) {
			r.inferenceBack(&b, s, prev)
			return b
		}
		if r.gpuPool(s.Pool) {
			r.gpuUnitBack(&b, s, prev)
			return b
		}
		b.add(fmt.Sprintf("# the failing node only: drain it, put a v%s kubelet on it, bring it back; a kubelet one minor older than the control plane stays inside the skew", prev),
			"NODE="+sq(phNode), fmt.Sprintf(`kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout=%s`, selfDrainTimeout))
		b.cut()
		b.add("# on $NODE:")
		r.kubeletBack(&b, s, prev)
		b.cut()
		b.add("# here:", `kubectl uncordon "$NODE"`)
	case replaceGKE:
		np := sq(r.providerPool(s.Pool, "<node-pool-name>", labelGKENodepool))
		b.add("# a node pool upgrade that failed or was cancelled goes back to its previous version (gcloud container node-pools rollback, Google Cloud SDK 528):",
			fmt.Sprintf("gcloud container node-pools rollback %s --cluster=%s --location=%s%s --quiet", np, sq(r.cluster), sq(phLocation), r.project()))
	case replaceAKS:
		b.add("# AKS does not downgrade a node pool (azure-cli 2.45 has no az aks nodepool rollback): create a pool at the previous version beside it and move the workloads, then delete the failed one:",
			fmt.Sprintf("az aks nodepool list --resource-group %s --cluster-name %s --query '[].{name:name,version:currentOrchestratorVersion,state:provisioningState}' --output table", sq(r.resourceGroup()), sq(r.cluster)))
	case replaceEKSNodegroup:
		if r.pools[s.Pool].LaunchTemplateNodes > 0 {
			b.join(r.eksNodegroupBack(s, prev))
		} else {
			b.add("# EKS does not downgrade a managed node group's Kubernetes version: create a node group at the previous version beside it and move the workloads, then delete the failed one.", "# "+eksSecondCopy)
		}
	case replaceKarpenter:
		if r.inferencePool(s.Pool) {
			sel := r.selector(s.Pool)
			b.add("# an inference pool: its drift held again (the budgets saved at the step stay the ones put back), the NodePool's EC2NodeClass pinned back to the AMIs it ran before (kept at the hold), then the pool drained paced under the step's own inference run and its nodes deleted, so that the replicas left Pending bring up nodes at the pinned AMIs, not drifted all at once by Karpenter:",
				fmt.Sprintf(`kubectl patch nodepool %s --type json -p '[{"op":"add","path":"/spec/disruption/budgets/-","value":{"nodes":"0","reasons":["Drifted"]}}]'`, sq(s.Pool)),
				fmt.Sprintf("NODECLASS=$(kubectl get nodepool %s -o jsonpath='{.spec.template.spec.nodeClassRef.name}')", sq(s.Pool)),
				`kubectl patch ec2nodeclass "$NODECLASS" --type merge -p "{\"spec\":{\"amiSelectorTerms\":$(cat "ec2nodeclass-$NODECLASS-pinned.json")}}"`)
			// As the step's own drain: only the nodes the run drains are
			// deleted, and the nodes Karpenter launched for replicas left
			// Pending (at the pinned AMIs) are waited on and validated, or
			// there are none (karpenterInferenceNodes).
			back := s
			back.To = prev
			b.add(fmt.Sprintf("OLD=$(kubectl get nodes -l %s -o name)   # the nodes the run below drains, the only ones to delete", sel))
			b.add(r.inferenceDrain(s, sel)...)
			b.add(karpenterInferenceNodes(back, sel)...)
			b.add(chain(fmt.Sprintf(`{ [ -z "$NEW" ] || kubectl gpu-validate nodes -l %s --kubelet-version v%s %s; }`, sel, prev, validateChecks), "kubectl gang-drain restore "+poolRun(s)+" --inference")...)
			b.add(budgetRestore(s.Pool)...)
			break
		}
		b.add("# pin the NodePool's EC2NodeClass back to the AMIs it ran before (kept at the hold): its nodes drift back",
			fmt.Sprintf("NODECLASS=$(kubectl get nodepool %s -o jsonpath='{.spec.template.spec.nodeClassRef.name}')", sq(s.Pool)),
			`kubectl patch ec2nodeclass "$NODECLASS" --type merge -p "{\"spec\":{\"amiSelectorTerms\":$(cat "ec2nodeclass-$NODECLASS-pinned.json")}}"`)
	case replaceAutoMode:
		b.add("# EKS Auto Mode chooses the AMI for the control plane's version: there is no way back for its nodes; hold further drift with the disruption budget:")
		b.add(r.budgetHold(s.Pool)...)
	case replaceCAPI:
		// A defer-upgrade keeps a MachineDeployment at its current
		// version (computeMachineDeploymentVersion returns it early,
		// cluster-api v1.14.0 exp/topology/desiredstate/desired_state.go),
		// so a MachineDeployment the release already moved to the Cluster's
		// version stays there and its rollout goes on: holding again stops
		// only topologies not yet moved.
		b.add("# Cluster API follows the topology version, which does not go back, and a defer-upgrade keeps a MachineDeployment at the version it has (cluster-api v1.14.0 computeMachineDeploymentVersion): holding the topologies again stops only those not yet moved; a MachineDeployment of this pool that moved only goes forward. Hold the others, and replace a failing new Machine (" + r.kubectlMgmt() + " -n " + sq(r.capiNS) + " delete machines.cluster.x-k8s.io MACHINE: it is recreated at the Cluster's version):")
		b.add(fmt.Sprintf("for MD in %s; do %s; done", r.capiAllTopologies(), r.capiApplyDefer(true)))
		if r.gpuPool(s.Pool) {
			// The hooks stay: they keep Cluster API's own drain, which
			// knows no checkpoint, off the units not yet drained; the
			// unit loop goes on, and the run is restored once the new
			// nodes validate, as on the way forward.
			b.cut()
			b.add("# this pool's rollout goes on forward: keep the pre-drain hooks on its old Machines (they keep Cluster API's own drain off the gangs not yet drained), paste the step's unit block again, once per unit, until it says to go on below; then, once the new nodes pass validation (replace a failing one as above), bring back the run's gangs:")
			b.add(chain(validateCmd(r.selector(s.Pool), s), "kubectl gang-drain restore "+poolRun(s)+" --dry-run", "kubectl gang-drain restore "+poolRun(s))...)
		}
	}
	return b
}
