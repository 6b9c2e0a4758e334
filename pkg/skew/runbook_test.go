package skew

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The tests of this file plan the inventories of testdata/runbook (at the
// top of the repository) to v1.38 and check each finding the runbook must
// get right, one test a finding.

var variants = []string{"kubeadm-apt", "kubeadm-rpm", "kubeadm-ha", "eks-managed", "eks-selfmanaged", "eks-automode",
	"gke", "aks", "capi", "k3s-sqlite", "k3s-etcd", "rke2"}

func variantInventory(t *testing.T, name string) Inventory {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "runbook", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Inventory Inventory `json:"inventory"`
	}
	if err := yaml.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep.Inventory
}

func variantPlan(t *testing.T, name string) Plan {
	t.Helper()
	p, err := MakePlan(variantInventory(t, name), MustParseVersion("v1.38"), PlanOptions{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// stepOf returns the first step of a phase (and pool, when given).
func stepOf(t *testing.T, p Plan, phase, pool string) Step {
	t.Helper()
	for _, s := range p.Steps {
		if s.Phase == phase && (pool == "" || s.Pool == pool) {
			return s
		}
	}
	t.Fatalf("no %s step %s in %q", phase, pool, phases(p))
	return Step{}
}

func lastStepOf(t *testing.T, p Plan, phase, pool string) Step {
	t.Helper()
	var got Step
	for _, s := range p.Steps {
		if s.Phase == phase && (pool == "" || s.Pool == pool) {
			got = s
		}
	}
	if got.Number == 0 {
		t.Fatalf("no %s step %s in %q", phase, pool, phases(p))
	}
	return got
}

func cmds(s Step) string { return strings.Join(s.Commands, "\n") }

func wantIn(t *testing.T, where, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", where, w, text)
		}
	}
}

// wantInOrder wants each of order in text, each after the start of the one
// before it.
func wantInOrder(t *testing.T, where, text string, order ...string) {
	t.Helper()
	at := -1
	for _, w := range order {
		i := strings.Index(text[at+1:], w)
		if i < 0 {
			t.Fatalf("%s lacks, or out of order, %q:\n%s", where, w, text)
		}
		at += 1 + i
	}
}

func wantNotIn(t *testing.T, where, text string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(text, b) {
			t.Errorf("%s has %q:\n%s", where, b, text)
		}
	}
}

// Finding 1 (Cluster API): the topology controller rolls every
// MachineDeployment with the control plane unless deferred, so a hold step
// sets defer-upgrade before each control-plane step and each pool's step
// removes it; the Cluster webhook holds a deferred MachineDeployment for
// one hop only, so no drains are claimed saved.
func TestRunbookCAPIDefersMachineDeployments(t *testing.T) {
	p := variantPlan(t, "capi")
	for i, s := range p.Steps {
		if s.Phase != PhaseControlPlane {
			continue
		}
		hold := p.Steps[i-1]
		if hold.Phase != PhaseHold || len(hold.Holds) != 2 {
			t.Fatalf("step %d (%s) is not preceded by a hold of both MachineDeployments: %+v", s.Number, s.Phase, hold)
		}
		wantIn(t, "hold", cmds(hold), "topology.cluster.x-k8s.io/defer-upgrade", `apply --server-side --field-manager="gpufleet-defer-$MD"`, "--context '<management-context>'")
	}
	pool := lastStepOf(t, p, PhaseNodePool, "h100-a")
	c := cmds(pool)
	wantIn(t, "GPU pool step", c, `}\n' | `, "kubectl gang-drain run $NODES --run-id")
	// Released only once every old Machine of the pool carries the
	// pre-drain hook, which keeps Cluster API's own drain off the gangs
	// until gang-drain has stopped them (capi_order.go).
	if hook := strings.Index(c, "$MACHINES "+capiHook+"=gpufleet"); hook < 0 || hook > strings.Index(c, `}\n' | `) {
		t.Errorf("the defer is undone before the pool's Machines are hooked:\n%s", c)
	}
	if p.Summary.NodeDisruptionsSaved != 0 {
		t.Errorf("Cluster API follows every hop, yet %d drains are claimed saved", p.Summary.NodeDisruptionsSaved)
	}
	for _, pp := range p.Pools {
		if pp.Name != "control-plane" && len(pp.Upgrades) != 2 {
			t.Errorf("pool %s upgrades %+v, want one per hop", pp.Name, pp.Upgrades)
		}
	}
}

// Finding 1 (Karpenter): a NodeClass on an AMI alias drifts when the
// control plane moves; the hold pins it to the AMI ids its nodes run and
// the pool's step puts the alias back.
func TestRunbookKarpenterPinsAMI(t *testing.T) {
	p := variantPlan(t, "eks-selfmanaged")
	hold := stepOf(t, p, PhaseHold, "")
	cp := stepOf(t, p, PhaseControlPlane, "")
	if hold.Number != cp.Number-1 || strings.Join(hold.Holds, ",") != "cpu-karpenter,gpu-karpenter" {
		t.Fatalf("hold %+v before control plane %d", hold, cp.Number)
	}
	wantIn(t, "hold", cmds(hold), `{.status.imageID}`, `\"amiSelectorTerms\":[$AMIS]`, "ec2nodeclass-$NODECLASS-terms.json")
	for _, pool := range []string{"cpu-karpenter", "gpu-karpenter"} {
		wantIn(t, pool, cmds(stepOf(t, p, PhaseNodePool, pool)), `"amiSelectorTerms\":$(cat "ec2nodeclass-$NODECLASS-terms.json")`)
	}
	// The managed node group does not roll by itself: not held.
	wantNotIn(t, "hold", strings.Join(hold.Holds, " "), "system")
}

// Finding 1 (GKE): node auto-upgrade is on by default; a maintenance
// exclusion holds every pool from before the first control-plane step to
// after the last pool step.
func TestRunbookGKEMaintenanceExclusion(t *testing.T) {
	p := variantPlan(t, "gke")
	var holds []Step
	for _, s := range p.Steps {
		if s.Phase == PhaseHold {
			holds = append(holds, s)
		}
	}
	first := stepOf(t, p, PhaseControlPlane, "")
	if len(holds) != 1 || holds[0].Number != first.Number-1 {
		t.Fatalf("holds %+v, want one right before step %d", holds, first.Number)
	}
	wantIn(t, "hold", cmds(holds[0]), "--add-maintenance-exclusion-scope=no_minor_or_node_upgrades", "--add-maintenance-exclusion-name=gpufleet-upgrade-1-38")
	last := p.Steps[len(p.Steps)-1]
	wantIn(t, "last step", cmds(last), "--remove-maintenance-exclusion=gpufleet-upgrade-1-38")
	if strings.Count(strings.Join(allCommandsOf(p), "\n"), "--remove-maintenance-exclusion") != 1 {
		t.Errorf("the exclusion is lifted more than once")
	}
}

func allCommandsOf(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.Commands...)
	}
	return out
}

// Finding 1 (EKS Auto Mode): a NodePool disruption budget of 0 holds the
// drift of a NodePool of the user's; the built-in NodePools cannot be held;
// the 21-day node lifetime means no drains are saved.
func TestRunbookAutoModeBudget(t *testing.T) {
	p := variantPlan(t, "eks-automode")
	hold := stepOf(t, p, PhaseHold, "")
	if strings.Join(hold.Holds, ",") != "gpu-train" {
		t.Errorf("holds %v, want only gpu-train (general-purpose is built in)", hold.Holds)
	}
	wantIn(t, "hold", cmds(hold), `"value":{"nodes":"0","reasons":["Drifted"]}`)
	wantIn(t, "gpu-train step", cmds(stepOf(t, p, PhaseNodePool, "gpu-train")), "nodepool-gpu-train-budgets.json")
	wantIn(t, "general-purpose step", cmds(stepOf(t, p, PhaseNodePool, "general-purpose")), "built-in EKS Auto Mode NodePool")
	if p.Summary.NodeDisruptionsSaved != 0 || p.Summary.NodeDisruptions != p.Summary.NodeDisruptionsEveryHop {
		t.Errorf("summary %+v claims drains saved on EKS Auto Mode", p.Summary)
	}
	wantIn(t, "warnings", strings.Join(p.Warnings, "\n"), "21-day lifetime")
}

// Finding 2: no step drains a whole pool at once. kubectl drain takes one
// node; gang-drain takes one fabric unit (or a stated batch of nodes);
// control-plane nodes go strictly one at a time.
func TestRunbookNeverDrainsAPool(t *testing.T) {
	poolWide := regexp.MustCompile(`kubectl drain -l|kubectl drain [^"$]*-l |gang-drain run -l [a-z0-9./-]+=[a-z0-9.-]+( |$)`)
	for _, v := range variants {
		p := variantPlan(t, v)
		for _, c := range allCommandsOf(p) {
			if !strings.HasPrefix(c, "#") && poolWide.MatchString(c) {
				t.Errorf("%s drains a whole pool: %s", v, c)
			}
		}
	}
	// The GPU pool's unit is its rack set.
	apt := cmds(stepOf(t, variantPlan(t, "kubeadm-apt"), PhaseNodePool, "gpu-h100"))
	wantIn(t, "kubeadm-apt GPU pool", apt, `kubectl gang-drain run -l "gpufleet.dev/pool=gpu-h100,gpufleet.dev/rack-set=$UNIT"`, "(rs-01 rs-02)",
		`kubectl gang-drain restore "gpu-h100-to-1.38-$UNIT"`)
	// Without a fabric label: a stated batch (a quarter of 6 nodes is 1).
	rpm := cmds(stepOf(t, variantPlan(t, "kubeadm-rpm"), PhaseNodePool, "gpu-a100"))
	wantIn(t, "kubeadm-rpm GPU pool", rpm, "1 node at a time", "kubectl gang-drain run $NODES")
	// HA control plane: drain, upgrade, uncordon each node before the next.
	api := stepOf(t, variantPlan(t, "kubeadm-ha"), PhaseAPIServers, "").Commands
	var seq []string
	for _, c := range api {
		switch {
		case strings.HasPrefix(c, "kubectl drain "):
			seq = append(seq, "drain "+strings.Fields(c)[2])
		case strings.HasPrefix(c, "kubectl uncordon "):
			seq = append(seq, "uncordon "+strings.Fields(c)[2])
		}
	}
	if got := strings.Join(seq, ", "); got != "drain cp-0, uncordon cp-0, drain cp-1, uncordon cp-1, drain cp-2, uncordon cp-2" {
		t.Errorf("control-plane drains: %s", got)
	}
}

// Finding 3: EKS waits on the update it started, not on the cluster's
// status, which can still read ACTIVE before the update begins.
func TestRunbookEKSWaitsOnUpdate(t *testing.T) {
	p := variantPlan(t, "eks-managed")
	c := cmds(stepOf(t, p, PhaseControlPlane, ""))
	wantIn(t, "control plane", c, "UPDATE_ID=$(aws eks update-cluster-version", "--query update.id --output text)",
		`aws eks describe-update --region us-west-2 --name train-prod --update-id "$UPDATE_ID"`, "= InProgress ]", `--query update.status --output text)" = Successful ] && \`)
	wantNotIn(t, "commands", strings.Join(allCommandsOf(p), "\n"), "wait cluster-active", "wait nodegroup-active")
}

// Finding 4: Cluster API keeps its etcd snapshot step (KubeadmControlPlane
// takes no backup), and commands on Cluster API objects run against the
// management cluster.
func TestRunbookCAPIEtcdAndManagementCluster(t *testing.T) {
	p := variantPlan(t, "capi")
	wantIn(t, "etcd", cmds(stepOf(t, p, PhaseEtcd, "")), "kubectl -n kube-system exec etcd-gpu-cell-07-cp-7xk2p -- etcdctl", "snapshot save")
	for _, c := range allCommandsOf(p) {
		if strings.HasPrefix(c, "#") {
			continue
		}
		touches := strings.Contains(c, "cluster.cluster.x-k8s.io") || strings.Contains(c, "machinedeployment") || strings.Contains(c, "kind: Cluster")
		if touches && !strings.Contains(c, "--context '<management-context>'") {
			t.Errorf("Cluster API command without the management context: %s", c)
		}
	}
	wantIn(t, "warnings", strings.Join(p.Warnings, "\n"), "management cluster")
}

// Finding 5: a kubeadm node moves one minor per kubeadm upgrade node; RPM
// nodes get dnf and the yum repository file; etcdctl runs in the etcd
// static pod with kubeadm's TLS flags; CoreDNS and kube-proxy move with the
// last control-plane node; the target's patch comes from dl.k8s.io; the
// cloud-controller-manager has a step of its own.
func TestRunbookKubeadmFacts(t *testing.T) {
	apt := variantPlan(t, "kubeadm-apt")
	cpu := cmds(stepOf(t, apt, PhaseNodePool, "cpu"))
	// Three minors behind: reprovisioned, no kubeadm upgrade node (see
	// TestRunbookKubeadmReprovisionsFarBehind).
	if n := strings.Count(cpu, "sudo kubeadm upgrade node"); n != 0 {
		t.Errorf("1.34 to 1.37 runs %d kubeadm upgrade node, want a reprovision:\n%s", n, cpu)
	}
	wantIn(t, "cpu pool", cpu, "s#/v1.34/#/v1.37/#", "sudo kubeadm reset --force", "kubeadm token create --print-join-command")
	wantNotIn(t, "cpu pool", cpu, "dnf")
	wantIn(t, "pre-flight", cmds(stepOf(t, apt, PhasePreflight, "")), "https://dl.k8s.io/release/stable-1.37.txt")
	wantNotIn(t, "pre-flight", cmds(stepOf(t, apt, PhasePreflight, "")), "kubeadm upgrade plan")
	wantIn(t, "etcd", cmds(stepOf(t, apt, PhaseEtcd, "")), "kubectl -n kube-system exec etcd-cp-0 -- etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key snapshot save",
		`"$ETCDUTL_DIR/etcdutl" snapshot status "$BACKUP_DIR/etcd-pre-1.37.db" -w table`)
	// Neither etcdutl nor etcdctl snapshot status runs in the etcd pod or on the node.
	wantNotIn(t, "etcd", cmds(stepOf(t, apt, PhaseEtcd, "")), "sudo etcdctl", "sudo etcdutl", "-- etcdutl", "etcdctl snapshot status")

	rpm := variantPlan(t, "kubeadm-rpm")
	all := strings.Join(allCommandsOf(rpm), "\n")
	wantIn(t, "kubeadm-rpm", all, "/etc/yum.repos.d/kubernetes.repo", "sudo dnf install -y 'kubeadm-1.38.<patch>-*' --disableexcludes=kubernetes",
		"sudo dnf install -y 'kubelet-1.38.<patch>-*' 'kubectl-1.38.<patch>-*' --disableexcludes=kubernetes")
	wantNotIn(t, "kubeadm-rpm", all, "apt-get", "sources.list.d")

	ha := variantPlan(t, "kubeadm-ha")
	wantIn(t, "addons", cmds(stepOf(t, ha, PhaseAddons, "")), "the last kubeadm upgrade node in HA")
	api := cmds(stepOf(t, ha, PhaseAPIServers, ""))
	if strings.Count(api, "kubeadm upgrade apply") != 1 || strings.Count(api, "sudo kubeadm upgrade node") != 2 {
		t.Errorf("HA control plane: want one apply and two upgrade node:\n%s", api)
	}
	wantIn(t, "controllers", cmds(stepOf(t, ha, PhaseControllers, "")), "cloud-controller-manager (daemonset/cloud-controller-manager, v1.37.0) is not upgraded by kubeadm")
}

// Finding 6: k3s and RKE2 servers are drained before their kubelet moves a
// minor; k3s etcd-snapshot is for embedded etcd only (SQLite is a copy of
// the db directory); the server token is backed up with the datastore.
func TestRunbookK3sRKE2(t *testing.T) {
	sqlite := variantPlan(t, "k3s-sqlite")
	e := cmds(stepOf(t, sqlite, PhaseEtcd, ""))
	wantIn(t, "k3s on SQLite", e, "sudo tar -C /var/lib/rancher/k3s/server -czf - db token")
	wantNotIn(t, "k3s on SQLite", e, "etcd-snapshot save")
	etcd := variantPlan(t, "k3s-etcd")
	wantIn(t, "k3s on etcd", cmds(stepOf(t, etcd, PhaseEtcd, "")), `sudo "$BIN" etcd-snapshot save --name pre-1.38`, "/var/lib/rancher/k3s/server/token", "systemctl show -p ExecStart --value k3s")
	wantIn(t, "rke2", cmds(stepOf(t, variantPlan(t, "rke2"), PhaseEtcd, "")), `sudo "$BIN" etcd-snapshot save`, "systemctl show -p ExecStart --value rke2-server", "/var/lib/rancher/rke2/server/token")
	for _, v := range []string{"k3s-sqlite", "k3s-etcd", "rke2"} {
		api := cmds(stepOf(t, variantPlan(t, v), PhaseAPIServers, ""))
		if d, u, i := strings.Index(api, "kubectl drain"), strings.Index(api, "kubectl uncordon"), strings.Index(api, "curl -sfL"); d < 0 || i < d || u < i {
			t.Errorf("%s: a server is not drained before its upgrade and uncordoned after:\n%s", v, api)
		}
	}
}

// Finding 7: EKS add-ons: update-addon only for EKS-managed add-ons, the
// self-managed path otherwise, the VPC CNI one minor at a time; a
// custom-AMI node group rolls a launch template version; node groups
// are on the control plane's minor before each hop.
func TestRunbookEKSAddonsAndNodeGroups(t *testing.T) {
	managed := variantPlan(t, "eks-managed")
	add := cmds(stepOf(t, managed, PhaseAddons, ""))
	wantIn(t, "managed add-ons", add, "aws eks update-addon --region us-west-2 --cluster-name train-prod --addon-name vpc-cni", "one minor at a time")
	wantNotIn(t, "managed add-ons", add, "kubectl set image")
	self := cmds(stepOf(t, variantPlan(t, "eks-selfmanaged"), PhaseAddons, ""))
	wantIn(t, "self-managed add-ons", self, "kubectl -n kube-system set image daemonset.apps/kube-proxy", "kubectl -n kube-system set image deployment.apps/coredns", "amazon-vpc-cni-k8s")
	wantNotIn(t, "self-managed add-ons", self, "aws eks update-addon")
	gpu := cmds(stepOf(t, managed, PhaseNodePool, "gpu-p5"))
	wantIn(t, "custom-AMI node group", gpu, "aws ec2 create-launch-template-version", "--launch-template 'id=<launch-template-id>,version=<new-version>'")
	wantNotIn(t, "custom-AMI node group", gpu, "--kubernetes-version 1.38")
	// A node group follows every control-plane hop: EKS refuses
	// update-cluster-version while one lags the cluster's minor.
	first, last := stepOf(t, managed, PhaseNodePool, "system"), lastStepOf(t, managed, PhaseNodePool, "system")
	wantIn(t, "system node group, before the hop", cmds(first), "--kubernetes-version 1.37")
	wantIn(t, "system node group, after the hop", cmds(last), "--kubernetes-version 1.38")
	cp := lastStepOf(t, managed, PhaseControlPlane, "")
	if first.Number > cp.Number || last.Number < cp.Number {
		t.Errorf("system node group steps %d and %d do not surround the hop at step %d", first.Number, last.Number, cp.Number)
	}
	wantIn(t, "system node group note", first.Note, "https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html")
	wantNotIn(t, "warnings", strings.Join(managed.Warnings, "\n"), "two rules")
}

// Finding 8: GKE Standard runs kube-dns; every placeholder is quoted, so a
// pasted one reaches the tool instead of the shell's redirection.
func TestRunbookKubeDNSAndQuotedPlaceholders(t *testing.T) {
	wantIn(t, "GKE addons", cmds(stepOf(t, variantPlan(t, "gke"), PhaseAddons, "")), "get deployment -l k8s-app=kube-dns")
	wantNotIn(t, "GKE addons", cmds(stepOf(t, variantPlan(t, "gke"), PhaseAddons, "")), "deployment/coredns")
	for _, v := range variants {
		for _, c := range allCommandsOf(variantPlan(t, v)) {
			if i := unquotedAngle(c); i >= 0 {
				t.Errorf("%s: unquoted placeholder at %d: %s", v, i, c)
			}
		}
	}
}

// unquotedAngle returns where a '<' stands outside quotes and comments in
// a shell line, or -1.
func unquotedAngle(line string) int {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\\':
			i++
		case c == '#' && (i == 0 || line[i-1] == ' '):
			return -1
		case c == '<':
			return i
		}
	}
	return -1
}

func TestUnquotedAngle(t *testing.T) {
	for line, want := range map[string]int{
		"kubectl drain <node>":            14,
		"kubectl drain '<node>'":          -1,
		`echo "<a>" x # <comment>`:        -1,
		"aws eks x --name <c> # fine <c>": 17,
	} {
		if got := unquotedAngle(line); got != want {
			t.Errorf("unquotedAngle(%q) = %d, want %d", line, got, want)
		}
	}
}

// Issue 36 item 1: every pool step ends with gates that fail when the pool
// is not on its planned version, and checks its drain against the
// provider's own time limit.
func TestRunbookPoolStepsProveTheirVersion(t *testing.T) {
	limits := map[string]string{"eks-managed": "--drain-timeout 15m", "gke": "--drain-timeout 1h", "aks": "--drain-timeout 30m", "kubeadm-apt": "--drain-timeout 1h"}
	for _, v := range variants {
		p := variantPlan(t, v)
		for _, s := range p.Steps {
			if s.Phase != PhaseNodePool {
				continue
			}
			c := cmds(s)
			wantIn(t, v+" "+s.Pool, c, "kubectl skew verify --baseline preflight-")
			if !strings.Contains(c, " --pool "+sq(s.Pool+"=v"+s.To)) {
				t.Errorf("%s %s: verify without --pool %s=v%s:\n%s", v, s.Pool, s.Pool, s.To, c)
			}
			if inv := variantInventory(t, v); gpuNodes(inv, s.Pool) > 0 && !strings.Contains(c, "kubectl gpu-validate nodes") {
				t.Errorf("%s %s: a GPU pool step without gpu-validate", v, s.Pool)
			} else if gpuNodes(inv, s.Pool) > 0 && !strings.Contains(c, "--kubelet-version v"+s.To) {
				t.Errorf("%s %s: gpu-validate without --kubelet-version v%s:\n%s", v, s.Pool, s.To, c)
			}
		}
		if want, ok := limits[v]; ok {
			wantIn(t, v, strings.Join(allCommandsOf(p), "\n"), "kubectl pdb-blockers", want)
		}
	}
}

func gpuNodes(inv Inventory, pool string) int {
	for _, p := range inv.Pools {
		if p.Name == pool && p.GPUNodes != nil {
			return *p.GPUNodes
		}
	}
	return 0
}
