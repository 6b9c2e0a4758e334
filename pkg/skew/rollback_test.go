package skew

import (
	"os/exec"
	"strings"
	"testing"
)

// stepBlocks are a step's blocks and its rollback's, every block a reader
// may paste.
func stepBlocks(s Step) []Block {
	if s.Rollback == nil {
		return s.Blocks
	}
	return append(append([]Block(nil), s.Blocks...), s.Rollback.Blocks...)
}

func rollbackText(s Step) string {
	if s.Rollback == nil {
		return ""
	}
	return strings.Join(FlattenBlocks(s.Rollback.Blocks), "\n")
}

// Every step of every variant declares its trigger and its way back
// before it runs.
func TestRunbookEveryStepHasRollback(t *testing.T) {
	for _, v := range variants {
		for _, s := range variantPlan(t, v).Steps {
			if s.Rollback == nil || s.Rollback.Trigger == "" || len(s.Rollback.Blocks) == 0 {
				t.Errorf("%s step %d (%s %s): no trigger or no way back: %+v", v, s.Number, s.Phase, s.Pool, s.Rollback)
			}
		}
	}
}

// The way back per layer and provider: the control plane by its snapshot
// and the previous binaries, workers by the provider's own way back,
// addons by rollout undo, helm rollback or the previous add-on version.
func TestRunbookRollbackPerLayer(t *testing.T) {
	for _, tc := range []struct {
		variant, phase, pool string
		want, bad            []string
		order                []string
	}{
		{variant: "kubeadm-ha", phase: PhaseAPIServers,
			want: []string{`INITIAL=$(cat "$BACKUP_DIR/etcd-members-pre-1.38")`, "--initial-cluster \"$INITIAL\"", "--allow-downgrades kubeadm='1.37.*'", "sed -i 's#/v1.38/#/v1.37/#'"},
			// The manifests kubeadm replaced go back first, then the
			// restore with the etcdutl the backup kept.
			order: []string{"scp \"$BACKUP_DIR/etcd-pre-1.38.db\"", "# on each control-plane node, before any of them restores",
				"if sudo test -d /etc/kubernetes/manifests-pre-1.38; then sudo cp -a /etc/kubernetes/manifests-pre-1.38/. /etc/kubernetes/manifests-stopped/; fi",
				`ETCD_DATA=$(sudo sed -n 's/^ *- --data-dir=//p' /etc/kubernetes/manifests-stopped/etcd.yaml) && \`,
				`sudo /root/etcdutl-pre-1.38 snapshot restore /root/etcd-pre-1.38.db`,
				"sudo sh -c 'mv /etc/kubernetes/manifests-stopped/*.yaml /etc/kubernetes/manifests/'", "sudo systemctl restart kubelet"},
			// Globs in kubeadm's 0700 directories are a root shell's, and
			// the manifests put back are the copy taken before this hop.
			bad: []string{"sudo etcdutl", "kubeadm-backup-manifests", "sudo mv /etc/kubernetes/manifests/*.yaml", "sudo mv /etc/kubernetes/manifests-stopped/*.yaml"}},
		{variant: "kubeadm-rpm", phase: PhaseAPIServers,
			want: []string{"sudo dnf install -y 'kubeadm-1.37.*'"}},
		{variant: "k3s-etcd", phase: PhaseAPIServers,
			order: []string{"SNAP=$(ls -t \"$BACKUP_DIR\" | grep -m1 '^pre-1\\.38-')", "# on each server node, before the first one restores", "sudo systemctl stop k3s",
				`sudo mv -f "$BIN.rollback" "$BIN" && \`, `sudo "$BIN" server --cluster-reset --cluster-reset-restore-path=`, "sudo systemctl start k3s",
				"sudo mv /var/lib/rancher/k3s/server/db /var/lib/rancher/k3s/server/db-failed-1.38"},
			bad: []string{"sudo systemctl restart k3s", "get.k3s.io"}},
		{variant: "k3s-sqlite", phase: PhaseAPIServers,
			order: []string{"ssh \"$SERVER\" sudo systemctl stop k3s", "ssh \"$SERVER\" sudo tar -C /var/lib/rancher/k3s/server -xzf - db < \"$BACKUP_DIR/k3s-server-db-pre-1.38.tgz\"", "sudo systemctl start k3s"}},
		{variant: "rke2", phase: PhaseAPIServers,
			order: []string{"sudo systemctl stop rke2-server", `sudo mv -f "$BIN.rollback" "$BIN"; fi && \`, `sudo "$BIN" server --cluster-reset --cluster-reset-restore-path=`, "sudo systemctl start rke2-server"},
			bad:   []string{"get.rke2.io"}},
		// Cluster API: the snapshot restored with the Cluster paused, then
		// the version back on the Cluster under the webhook's unsafe
		// annotation (taken off again) and on the KubeadmControlPlane.
		{variant: "capi", phase: PhaseControlPlane,
			want: []string{"--show-conditions all", "--initial-cluster \"$INITIAL\"", "PREV='v1.36.<patch>'", "exec etcd-'<control-plane-node-now>' -- etcdctl"},
			order: []string{`patch cluster.cluster.x-k8s.io gpu-cell-07 --type merge -p '{"spec":{"paused":true}}'`, "member list -w simple",
				"scp \"$BACKUP_DIR/etcd-pre-1.37.db\"", "# on each control-plane node, before any of them restores",
				"/etc/kubernetes/manifests-stopped/etcd.yaml) && \\", `sudo /root/etcdutl-pre-1.37 snapshot restore /root/etcd-pre-1.37.db`,
				"sudo sh -c 'mv /etc/kubernetes/manifests-stopped/*.yaml /etc/kubernetes/manifests/'", "endpoint health --cluster", `-p '{"spec":{"paused":false}}'`,
				"annotate cluster.cluster.x-k8s.io gpu-cell-07 unsafe.topology.cluster.x-k8s.io/disable-update-version-check=true --overwrite && \\",
				`patch cluster.cluster.x-k8s.io gpu-cell-07 --type merge -p "{\"spec\":{\"topology\":{\"version\":\"$PREV\"}}}" && \`,
				"unsafe.topology.cluster.x-k8s.io/disable-update-version-check- && \\",
				`get kubeadmcontrolplanes.controlplane.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=gpu-cell-07 -o name | xargs -r -I{} kubectl --context '<management-context>' -n fleet patch {} --type merge -p "{\"spec\":{\"version\":\"$PREV\"}}"`},
			// The member asked is one that runs now, not the machine the
			// rollout may have replaced.
			bad: []string{"apt-get", "dnf", "kubeadm-backup-manifests", "etcd-gpu-cell-07-cp-7xk2p"}},
		{variant: "eks-managed", phase: PhaseControlPlane, want: []string{"EKS does not downgrade a control plane", "aws eks describe-update"}},
		{variant: "eks-managed", phase: PhaseAddons, want: []string{"aws eks update-addon", "--addon-name kube-proxy", "helm rollback"}},
		{variant: "eks-selfmanaged", phase: PhaseAddons, want: []string{"kubectl -n kube-system rollout undo daemonset/kube-proxy"}, bad: []string{"aws eks update-addon"}},
		{variant: "kubeadm-apt", phase: PhaseAddons, want: []string{"rollout undo daemonset/kube-proxy", "rollout undo deployment/coredns", "helm rollback"}},
		{variant: "gke", phase: PhaseNodePool, want: []string{"gcloud container node-pools rollback", "--quiet"}},
		{variant: "gke", phase: PhaseHold, want: []string{"--remove-maintenance-exclusion=gpufleet-upgrade-1-38"}},
		{variant: "aks", phase: PhaseNodePool, want: []string{"AKS does not downgrade a node pool", "az aks nodepool list"}},
		{variant: "eks-automode", phase: PhaseNodePool, want: []string{"no way back"}},
		{variant: "kubeadm-ha", phase: PhaseNodePool, pool: "gpu-h200",
			// Under the step's own run, which still holds a unit whose
			// validation failed: a run of another id would be refused.
			order: []string{"UNIT='<clique>'", `kubectl gang-drain run -l "gpufleet.dev/pool=gpu-h200,nvidia.com/gpu.clique=$UNIT" --run-id "gpu-h200-to-1.38-$UNIT"`, "--allow-downgrades kubelet='1.37.*'",
				`kubectl gpu-validate nodes -l "gpufleet.dev/pool=gpu-h200,nvidia.com/gpu.clique=$UNIT" --kubelet-version v1.37 --xid --dcgm && \`, `kubectl gang-drain restore "gpu-h200-to-1.38-$UNIT"`},
			bad: []string{"-back-1.38"}},
	} {
		t.Run(tc.variant+" "+tc.phase+" "+tc.pool, func(t *testing.T) {
			s := stepOf(t, variantPlan(t, tc.variant), tc.phase, tc.pool)
			text := rollbackText(s)
			wantIn(t, "rollback", text, tc.want...)
			wantNotIn(t, "rollback", text, tc.bad...)
			wantInOrder(t, "rollback", text, tc.order...)
		})
	}
}

// An Auto Scaling group's pool goes back by rolling back a refresh that
// still runs, else by a refresh to the launch template version the step
// kept, with the drain hook and the watch of the forward step.
func TestRunbookRollbackASG(t *testing.T) {
	p, err := MakePlan(awsKubeadm(t), MustParseVersion("v1.38"), PlanOptions{ASGs: map[string]string{"gpu-h100": "gpu-h100-asg"}})
	if err != nil {
		t.Fatal(err)
	}
	s := stepOf(t, p, PhaseNodePool, "gpu-h100")
	wantIn(t, "step", cmds(s), `echo "$OLD" > lt-gpu-h100-old.version`)
	text := rollbackText(s)
	wantNotIn(t, "rollback", text, "--kubelet-version v1.37")
	wantInOrder(t, "rollback", text,
		"# the old AMI's nodes run kubeadm 1.35: once the control plane has moved past 1.35, their kubeadm join is outside kubeadm's skew",
		"OLD=$(cat lt-gpu-h100-old.version)",
		"--lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING",
		`case "$S" in Pending|InProgress|Baking) aws autoscaling rollback-instance-refresh`,
		`*) { { STANDBY=$(aws autoscaling describe-auto-scaling-groups`, `REFRESH=$(aws autoscaling start-instance-refresh`, `\"Version\":\"$OLD\"`,
		"kubectl gang-drain run $NODES --run-id \"gpu-h100-to-1.38\"",
		`case "$S" in Successful|RollbackSuccessful) true;; *) false;; esac`,
		"--kubelet-version v1.35 --xid --dcgm",
		"kubectl gang-drain restore \"gpu-h100-to-1.38\"",
		"aws autoscaling delete-lifecycle-hook",
	)
	// cancel-instance-refresh before rollback-instance-refresh would leave
	// nothing in progress to roll back.
	if i := strings.Index(text, "cancel-instance-refresh"); i >= 0 && i < strings.Index(text, "rollback-instance-refresh") {
		t.Errorf("cancels before rolling back:\n%s", text)
	}
}

// An EKS add-on whose management the cluster does not show goes back by
// one of two blocks, never both in one.
func TestRunbookRollbackEKSAddonAlternatives(t *testing.T) {
	unknown := variantInventory(t, "eks-managed")
	pf := *unknown.Platform
	pf.EKSAddons = nil
	unknown.Platform = &pf
	s := stepOf(t, planOf(t, unknown, "v1.38", ""), PhaseAddons, "")
	choices := map[string]int{}
	for _, b := range s.Rollback.Blocks {
		c := strings.Join(b.Commands, "\n")
		if strings.Contains(c, "aws eks update-addon") && strings.Contains(c, "rollout undo") {
			t.Errorf("one block runs both ways:\n%s", c)
		}
		if b.Choice != "" {
			choices[b.Choice]++
		}
	}
	if len(choices) != 3 {
		t.Errorf("%d choices, want 3: %v", len(choices), choices)
	}
	for c, n := range choices {
		if n != 2 {
			t.Errorf("%s: %d alternatives, want 2", c, n)
		}
	}
}

// The etcd release the backup downloads etcdutl of (for the check here
// and for the restore on the node) is read from what kubeadm wrote: the
// line the runbook prints runs through bash and sed on image references
// in kubeadm's form (image registry.k8s.io/etcd:<version>-<revision>:
// GetEtcdImage in cmd/kubeadm/app/images/images.go, DefaultEtcdVersion
// "3.7.0-0" in cmd/kubeadm/app/constants/constants.go, kubernetes v1.37.2)
// and as the pod spec gives them.
func TestRunbookEtcdReleaseFromManifest(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	run := func(line string) string {
		t.Helper()
		out, err := exec.Command("bash", "-c", line+` && printf %s "$ETCD_VER"`).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}
	backup := lineWith(t, cmds(stepOf(t, variantPlan(t, "kubeadm-apt"), PhaseEtcd, "")), "ETCD_VER=$(kubectl")
	_, pipe, _ := strings.Cut(strings.TrimSuffix(backup, ") && \\"), "}' | ")
	for image, want := range map[string]string{
		"registry.k8s.io/etcd:3.7.0-0":         "3.7.0",
		"registry.example:5000/etcd:3.6.5-0":   "3.6.5",
		"registry.example/mirror/etcd:v3.5.21": "3.5.21",
	} {
		if got := run("ETCD_VER=$(echo " + image + " | " + pipe + ")"); got != want {
			t.Errorf("backup: image %s gives ETCD_VER %q, want %q", image, got, want)
		}
	}
}

// lineWith returns the line of text that holds s.
func lineWith(t *testing.T, text, s string) string {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("no line with %q:\n%s", s, text)
	return ""
}

// Each kubeadm control-plane node copies its manifests before its kubeadm
// upgrade, once: the rollback puts back that copy, not kubeadm's newest
// kubeadm-backup-manifests-* directory, which is empty after kubeadm rolled
// itself back and is an earlier hop's on a node this hop never reached.
func TestRunbookKubeadmManifestsSavedBeforeUpgrade(t *testing.T) {
	s := stepOf(t, variantPlan(t, "kubeadm-ha"), PhaseAPIServers, "")
	text := strings.Join(s.Commands, "\n")
	save := "if ! sudo test -d /etc/kubernetes/manifests-pre-1.38; then sudo rm -rf /etc/kubernetes/manifests-pre-1.38.tmp && sudo cp -a /etc/kubernetes/manifests /etc/kubernetes/manifests-pre-1.38.tmp && sudo mv /etc/kubernetes/manifests-pre-1.38.tmp /etc/kubernetes/manifests-pre-1.38; fi && \\"
	for _, upgrade := range []string{"sudo kubeadm upgrade apply", "sudo kubeadm upgrade node"} {
		i, j := strings.Index(text, save), strings.Index(text, upgrade)
		if i < 0 || j < 0 || i > j {
			t.Errorf("%q: the manifests are not saved before it:\n%s", upgrade, text)
		}
	}
	if n, m := strings.Count(text, save), strings.Count(text, "sudo kubeadm upgrade "); n == 0 || n != m-strings.Count(text, "sudo kubeadm upgrade plan") {
		t.Errorf("%d saves for %d kubeadm upgrades:\n%s", n, m, text)
	}
}
