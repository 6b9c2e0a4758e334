package skew

import (
	"fmt"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// The tests of this file hold the runbook safe to paste, provider by
// provider: holds found from the provider's objects, backups off the node,
// install settings kept, one alternative per block, gates that gate.

// relabel returns the inventory with every pool that is not the
// control plane grouped by label instead of the provider's own label.
func relabel(inv Inventory, label string) Inventory {
	out := inv
	out.Pools = nil
	for _, p := range inv.Pools {
		if p.Label != controlPlaneRoles[0] && p.Label != controlPlaneRoles[1] {
			p.Label = label
		}
		out.Pools = append(out.Pools, p)
	}
	return out
}

func planOf(t *testing.T, inv Inventory, target string, prov Provider) Plan {
	t.Helper()
	p, err := MakePlan(inv, MustParseVersion(target), PlanOptions{Provider: prov})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Holds are decided from the provider: on Cluster API from the Cluster's
// spec.topology.workers.machineDeployments (Nodes carry no MachineDeployment
// label by default), on GKE always (every node pool auto-upgrades), never
// from the label that grouped the nodes here.
func TestRunbookHoldsFromTheProvider(t *testing.T) {
	capi := variantInventory(t, "capi")
	noWorkers := variantInventory(t, "capi")
	pf := *noWorkers.Platform
	pf.ClusterAPI = []ClusterAPICluster{{Namespace: "fleet", Name: "gpu-cell-07", Class: "gpu-training-cell", Version: "v1.36.4", WorkersRead: true, MachinePools: []string{"mp-0"}}}
	noWorkers.Platform = &pf
	for _, tc := range []struct {
		name  string
		inv   Inventory
		prov  Provider
		holds int // hold steps
		wants []string
	}{
		{"capi: stock Nodes grouped by a node.cluster.x-k8s.io label", capi, "", 2,
			[]string{`for MD in $(kubectl --context '<management-context>' -n fleet get cluster.cluster.x-k8s.io gpu-cell-07 -o jsonpath='{.spec.topology.workers.machineDeployments[*].name}')`,
				`--field-manager="gpufleet-defer-$MD"`, "defer-upgrade: gpufleet-upgrade", "grep -v '=gpufleet-upgrade$'"}},
		{"capi: Nodes with no pool label at all", relabel(capi, ""), "", 2, []string{"defer-upgrade: gpufleet-upgrade"}},
		// Its pools are behind the control plane, a GPU pool among them:
		// a hold comes before their catch-up steps too.
		{"capi chosen with --provider: worker topologies read when the hold runs", variantInventory(t, "kubeadm-apt"), ProviderCAPI, 3,
			[]string{".spec.topology.workers.machineDeployments[*].name"}},
		{"capi: the Cluster has no MachineDeployment topology", noWorkers, "", 0, nil},
		{"gke: pools grouped by node.kubernetes.io/pool", relabel(variantInventory(t, "gke"), "node.kubernetes.io/pool"), "", 1,
			[]string{"--add-maintenance-exclusion-scope=no_minor_or_node_upgrades"}},
		{"gke: pools grouped by GKE's label", variantInventory(t, "gke"), "", 1, []string{"--add-maintenance-exclusion-end=$(date -u -d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.inv, "v1.38", tc.prov)
			var holds []Step
			hopped := false // a control-plane step came before
			for i, s := range p.Steps {
				hopped = hopped || s.Phase == PhaseControlPlane
				if s.Phase != PhaseHold {
					continue
				}
				holds = append(holds, s)
				// The catch-up hold of Cluster API comes before the pools'
				// catch-up steps (TestRunbookCAPIHoldsBeforeCatchUp).
				if next := p.Steps[i+1]; next.Phase != PhaseControlPlane && (hopped || next.Phase != PhaseNodePool || !strings.HasPrefix(tc.name, "capi")) {
					t.Errorf("hold step %d is followed by %s, not the control-plane step", s.Number, next.Phase)
				}
				wantIn(t, "hold", cmds(s), tc.wants...)
			}
			if len(holds) != tc.holds {
				t.Fatalf("%d hold steps, want %d: %q", len(holds), tc.holds, phases(p))
			}
		})
	}
	// Cluster API: the control-plane step moves the version only while
	// every topology is deferred; each worker pool releases the topologies
	// of its own nodes, found from the Machines, once a GPU pool's old
	// Machines carry the pre-drain hook that keeps Cluster API's drain off
	// the gangs until gang-drain stopped them (capi_order.go); the hop's
	// last pool step releases whatever is left.
	p := planOf(t, capi, "v1.38", "")
	cp := stepOf(t, p, PhaseControlPlane, "")
	wantIn(t, "control plane", cmds(cp), "grep -v '=gpufleet-upgrade$' && \\", `patch cluster.cluster.x-k8s.io gpu-cell-07 -n fleet --type merge`)
	gpu := cmds(stepOf(t, p, PhaseNodePool, "h100-a"))
	wantIn(t, "GPU pool", gpu, "get machines.cluster.x-k8s.io -l cluster.x-k8s.io/cluster-name=gpu-cell-07", "topology\\.cluster\\.x-k8s\\.io/deployment-name",
		"kubectl get nodes -l node.cluster.x-k8s.io/pool=h100-a", "for MD in $TOPOLOGIES; do", `}\n' | `)
	if h := strings.Index(gpu, "$MACHINES "+capiHook+"=gpufleet"); h < 0 || h > strings.Index(gpu, "for MD in $TOPOLOGIES") {
		t.Errorf("the GPU pool's topologies are released before its Machines are hooked:\n%s", gpu)
	}
	releasedAll := 0
	for _, s := range p.Steps {
		if strings.Contains(cmds(s), "undo any defer-upgrade left") {
			releasedAll++
			if !r0(p).lastPoolStepOfHop(s) {
				t.Errorf("step %d releases every topology before the hop's last pool step", s.Number)
			}
		}
	}
	if releasedAll != 2 {
		t.Errorf("every topology released %d times, want once per hop (2)", releasedAll)
	}
}

// r0 is a renderer over a plan's steps, for lastPoolStepOfHop.
func r0(p Plan) *renderer { return &renderer{plan: &p} }

// A backup step copies the backup off the node with a command, to a
// directory the operator names, checks the copy byte for byte against the
// node's file, and then checks the copy (not the node's file) with etcdutl
// of an etcd release downloaded to the operator's machine: etcdctl has no
// snapshot status since etcd v3.6 and the etcd image carries no etcdutl.
// Nothing is left only in /root of a machine the next step upgrades or
// deletes. The order holds: the check of a copy comes after the copy.
func TestRunbookBackupsLeaveTheNode(t *testing.T) {
	kubeadmOrder := func(to string) []string {
		f := "etcd-pre-" + to + ".db"
		return []string{`-o jsonpath='{range .spec.containers[0].command[*]}{@}{"\n"}{end}' | sed -n 's/^--data-dir=//p') && test -n "$ETCD_DATA" && \`,
			"exec etcd-", "-- etcdctl ", `snapshot save "$ETCD_DATA/` + f + `" && \`,
			`ssh "$NODE_SSH" sudo cat "$ETCD_DATA/` + f + `" > "$BACKUP_DIR/` + f + `.partial" && \`,
			`ssh "$NODE_SSH" sudo sha256sum "$ETCD_DATA/` + f + `" | awk -v f="$BACKUP_DIR/` + f + `.partial" '{print $1 "  " f}' | sha256sum -c - && \`,
			`ssh "$NODE_SSH" sudo rm "$ETCD_DATA/` + f + `" && \`,
			// The copy takes the backup's name only once checked.
			`mv "$BACKUP_DIR/` + f + `.partial" "$BACKUP_DIR/` + f + `"`,
			`-o jsonpath='{.spec.containers[0].image}' | sed 's/.*://; s/^v//; s/-.*//') && \`,
			`case "$ETCD_OS" in linux) curl -fsSL "https://github.com/etcd-io/etcd/releases/download/v$ETCD_VER/etcd-v$ETCD_VER-linux-$ETCD_ARCH.tar.gz" | tar -xzf - -C "$ETCDUTL_DIR" --strip-components=1 "etcd-v$ETCD_VER-linux-$ETCD_ARCH/etcdutl";; darwin) `,
			`"$ETCDUTL_DIR/etcdutl" version | grep -F "etcdutl version: $ETCD_VER" && \`,
			`"$ETCDUTL_DIR/etcdutl" snapshot status "$BACKUP_DIR/` + f + `" -w table && \`,
			`cp "$ETCDUTL_DIR/linux-$NODE_ARCH/etcdutl" "$BACKUP_DIR/etcdutl-pre-` + to + `-linux-$NODE_ARCH"`}
	}
	k3sOrder := func(dist string) []string {
		data := "/var/lib/rancher/" + dist + "/server"
		return []string{`sudo "$BIN" etcd-snapshot save --name pre-1.38 >&2`, "sudo ls -t " + data + "/db/snapshots | grep -m1 '^pre-1\\.38-')",
			`ssh "$SERVER" sudo cat "` + data + `/db/snapshots/$SNAP" > "$BACKUP_DIR/$SNAP.partial" && `,
			`ssh "$SERVER" sudo sha256sum "` + data + `/db/snapshots/$SNAP" | awk -v f="$BACKUP_DIR/$SNAP.partial" '{print $1 "  " f}' | sha256sum -c - && `,
			`mv "$BACKUP_DIR/$SNAP.partial" "$BACKUP_DIR/$SNAP"; }; } && \`,
			`ssh "$SERVER" sudo cat ` + data + `/token > "$BACKUP_DIR/` + dist + `-token-pre-1.38" && \`,
			"ETCD_VER=" + etcdutlCheckRelease + " && \\",
			`"$ETCDUTL_DIR/etcdutl" version | grep -F "etcdutl version: $ETCD_VER" && \`,
			`"$ETCDUTL_DIR/etcdutl" snapshot status "$BACKUP_DIR/$SNAP" -w table`}
	}
	for _, tc := range []struct {
		variant string
		wants   []string
		order   []string // of the first hop's backup
	}{
		{"kubeadm-apt", []string{"NODE_SSH=cp-0", "kubectl -n kube-system get pod etcd-cp-0 -o jsonpath"}, kubeadmOrder("1.37")},
		{"kubeadm-rpm", nil, kubeadmOrder("1.38")},
		{"kubeadm-ha", nil, kubeadmOrder("1.38")},
		{"capi", []string{"replaces the machines at the next step"}, kubeadmOrder("1.37")},
		{"k3s-etcd", nil, k3sOrder("k3s")},
		{"rke2", []string{"/var/lib/rancher/rke2/server/db/snapshots"}, k3sOrder("rke2")},
		{"k3s-sqlite", []string{`sudo tar -C /var/lib/rancher/k3s/server -czf - db token > "$BACKUP_DIR/k3s-server-db-pre-1.38.tgz.partial" && \`, "grep -qx db/state.db",
			`mv "$BACKUP_DIR/k3s-server-db-pre-1.38.tgz.partial" "$BACKUP_DIR/k3s-server-db-pre-1.38.tgz"`}, nil},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			p := variantPlan(t, tc.variant)
			n := 0
			for _, s := range p.Steps {
				if s.Phase != PhaseEtcd {
					continue
				}
				n++
				c := cmds(s)
				wantIn(t, "backup", c, "BACKUP_DIR='<backup-dir>'")
				if s.To == stepOf(t, p, PhaseEtcd, "").To {
					wantIn(t, "backup", c, tc.wants...)
					wantInOrder(t, "backup", c, tc.order...)
				}
				// Nothing checked on the node or in the etcd pod with a tool
				// that is not there; nothing parked in /root.
				wantNotIn(t, "backup", c, "/root/", "sudo mv ", "sudo cp ", "-- etcdutl", "etcdctl snapshot status", "sudo etcdutl", "sudo etcdctl")
			}
			if n == 0 {
				t.Fatalf("no backup step in %q", phases(p))
			}
		})
	}
	// Managed control planes take their own backups: no step.
	for _, v := range []string{"eks-managed", "gke", "aks"} {
		for _, s := range variantPlan(t, v).Steps {
			if s.Phase == PhaseEtcd {
				t.Errorf("%s has a backup step", v)
			}
		}
	}
}

// parseBlock parses a pasted block as the shell would read it.
func parseBlock(t *testing.T, where string, b Block) *syntax.File {
	t.Helper()
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(strings.Join(b.Commands, "\n")+"\n"), where)
	if err != nil {
		t.Errorf("%s: %v\n%s", where, err, strings.Join(b.Commands, "\n"))
		return nil
	}
	return f
}

// Every block of every variant parses as shell, so that a pasted block
// runs as written.
func TestRunbookBlocksParse(t *testing.T) {
	for _, v := range variants {
		for _, s := range variantPlan(t, v).Steps {
			for i, b := range stepBlocks(s) {
				parseBlock(t, fmt.Sprintf("%s step %d block %d", v, s.Number, i+1), b)
			}
		}
	}
}

// Re-running the k3s install script keeps the node's settings: the unit
// and its env file are kept, the script runs without starting, and both
// are put back before the restart; RKE2's settings live in its
// config.yaml, which the script does not write.
func TestRunbookK3sKeepsInstallSettings(t *testing.T) {
	for _, tc := range []struct {
		variant, phase, pool, unit, role string
	}{
		{"k3s-etcd", PhaseAPIServers, "", "k3s", "server"},
		{"k3s-sqlite", PhaseAPIServers, "", "k3s", "server"},
		{"k3s-etcd", PhaseNodePool, "cpu", "k3s-agent", "agent"},
	} {
		t.Run(tc.variant+" "+tc.role, func(t *testing.T) {
			c := cmds(stepOf(t, variantPlan(t, tc.variant), tc.phase, tc.pool))
			keep := "/root/" + tc.unit + "-pre-1.38"
			steps := []string{
				"sudo mkdir -p " + keep,
				"sudo cp -p /etc/systemd/system/" + tc.unit + ".service /etc/systemd/system/" + tc.unit + ".service.env " + keep + "/ && \\",
				"curl -sfL https://get.k3s.io | INSTALL_K3S_CHANNEL=v1.38 INSTALL_K3S_SKIP_START=true sh -s - " + tc.role + " && \\",
				"sudo cp -p " + keep + "/" + tc.unit + ".service " + keep + "/" + tc.unit + ".service.env /etc/systemd/system/ && \\",
				"sudo systemctl restart " + tc.unit + " && \\",
				"k3s --version | grep -F ' v1.38.'",
			}
			at := -1
			for _, w := range steps {
				i := strings.Index(c, w)
				if i < 0 || i < at {
					t.Fatalf("lacks, or out of order, %q:\n%s", w, c)
				}
				at = i
			}
			if strings.Contains(c, "sh -s - "+tc.role+"\n") {
				t.Errorf("the install script runs without keeping the settings:\n%s", c)
			}
		})
	}
	wantIn(t, "rke2 servers", cmds(stepOf(t, variantPlan(t, "rke2"), PhaseAPIServers, "")),
		"curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_CHANNEL=v1.38 sh - && \\", "sudo systemctl restart rke2-server && \\", "rke2 --version | grep -F ' v1.38.'")
}

// EKS add-ons whose management the cluster does not show get one block
// per way, each saying how to tell; a self-managed image keeps the
// registry and repository the cluster runs and changes only after the
// registry confirms the tag.
func TestRunbookEKSAddonAlternatives(t *testing.T) {
	unknown := variantInventory(t, "eks-managed")
	pf := *unknown.Platform
	pf.EKSAddons = nil
	unknown.Platform = &pf
	for _, tc := range []struct {
		name    string
		inv     Inventory
		choices int
	}{
		{"management not shown", unknown, 3},
		{"EKS-managed", variantInventory(t, "eks-managed"), 0},
		{"self-managed", variantInventory(t, "eks-selfmanaged"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stepOf(t, planOf(t, tc.inv, "v1.38", ""), PhaseAddons, "")
			choices := map[string]int{}
			for _, b := range s.Blocks {
				c := strings.Join(b.Commands, "\n")
				if strings.Contains(c, "aws eks update-addon") && strings.Contains(c, "set image") {
					t.Errorf("one block runs both ways:\n%s", c)
				}
				if b.Choice != "" {
					choices[b.Choice]++
					if b.When == "" {
						t.Errorf("alternative of %q without when", b.Choice)
					}
				}
				wantNotIn(t, "add-ons", c, "<account>", "<region>.amazonaws.com")
			}
			if len(choices) != tc.choices {
				t.Errorf("%d choices, want %d: %v", len(choices), tc.choices, choices)
			}
			for ch, n := range choices {
				if n != 2 {
					t.Errorf("choice %q has %d alternatives, want 2", ch, n)
				}
			}
		})
	}
	self := cmds(stepOf(t, variantPlan(t, "eks-selfmanaged"), PhaseAddons, ""))
	order := []string{
		`IMAGE=$(kubectl -n kube-system get daemonset kube-proxy -o jsonpath='{.spec.template.spec.containers[?(@.name=="kube-proxy")].image}') && \`,
		`curl -fsSI -o /dev/null -u "AWS:$(aws ecr get-login-password --region "$(echo "$REGISTRY" | cut -d. -f4)")" -H 'Accept: `,
		`"https://$REGISTRY/v2/$REPO/manifests/$TAG" && \`,
		`kubectl -n kube-system set image daemonset.apps/kube-proxy kube-proxy="$REGISTRY/$REPO:$TAG" && \`,
		"kubectl -n kube-system rollout status daemonset/kube-proxy --timeout=10m",
	}
	at := -1
	for _, w := range order {
		i := strings.Index(self, w)
		if i <= at {
			t.Fatalf("self-managed kube-proxy lacks, or out of order, %q:\n%s", w, self)
		}
		at = i
	}
}

// Node pools are held to the provider's own skew limit, from
// providers.json with its source: GKE two minors, AKS and the
// self-managed providers the upstream three.
func TestPlanProviderSkewLimits(t *testing.T) {
	data := DefaultProviderCalendar()
	for _, tc := range []struct {
		prov  Provider
		limit int
	}{
		{ProviderGKE, 2}, {ProviderAKS, 3}, {ProviderEKS, 3}, {ProviderKubeadm, 3}, {ProviderK3s, 3}, {ProviderRKE2, 3}, {ProviderCAPI, 3},
	} {
		t.Run(string(tc.prov), func(t *testing.T) {
			if got := data.NodeSkewLimit(tc.prov, MustParseVersion("v1.35.0")); got != tc.limit {
				t.Fatalf("limit %d, want %d", got, tc.limit)
			}
			if ns := data.NodeSkewOf(tc.prov); ns != nil && (!strings.HasPrefix(ns.Source, "https://") || ns.Quote == "") {
				t.Errorf("node skew without its source: %+v", ns)
			}
			// Control plane on 1.37, a pool on 1.35: to reach 1.38 the
			// pool must move before the hop where the limit is two.
			inv := Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Components: []Component{comp(KindAPIServer, "kube-apiserver-cp-0", "v1.37.2")},
				Pools: []Pool{pool("train", "v1.35.4")}}
			p := planOf(t, inv, "v1.38", tc.prov)
			pp := p.Pools[0]
			if pp.Limit != tc.limit {
				t.Errorf("pool limit %d, want %d", pp.Limit, tc.limit)
			}
			var cp Step
			for _, s := range p.Steps {
				if (s.Phase == PhaseControlPlane || s.Phase == PhaseAPIServers) && cp.Number == 0 {
					cp = s
				}
			}
			first := pp.Upgrades[0].Step
			if tc.limit == 2 && first > cp.Number {
				t.Errorf("the pool two behind moves at step %d, after the hop at step %d", first, cp.Number)
			}
			// Cluster API moves every MachineDeployment with every hop, and
			// EKS refuses update-cluster-version while a node group lags.
			every := tc.prov == ProviderCAPI || tc.prov == ProviderEKS
			if tc.limit == 3 && !every && first < cp.Number {
				t.Errorf("the pool within the upstream limit moves at step %d, before the hop at step %d", first, cp.Number)
			}
			if every && first > cp.Number {
				t.Errorf("the pool two behind moves at step %d, after the hop at step %d that the provider refuses while it lags", first, cp.Number)
			}
			all := strings.Join(p.Warnings, "\n")
			for _, s := range p.Steps {
				all += "\n" + s.Note
			}
			if tc.limit == 2 {
				wantIn(t, "warnings", all, "GKE keeps node pools at most 2 minors behind the control plane", "https://cloud.google.com/kubernetes-engine/versioning")
				wantNotIn(t, "notes", all, "2 minors of slack")
			}
		})
	}
	if _, err := ParseProviderCalendar([]byte(`{"dataDate":"2026-12-06","providers":[{"provider":"gke","source":"x","releases":[],"nodeSkew":{"maxMinorsBehind":2,"source":"","quote":"q","checked":"2026-12-06"}}]}`)); err == nil {
		t.Error("a node skew limit without its source was accepted")
	}
}

// With the node's OS unknown, the apt and dnf ways are alternatives of
// their own: no block runs both, so kubeadm upgrade node runs once and the
// kubelet restarts once.
func TestRunbookOneOSPerBlock(t *testing.T) {
	noOS := variantInventory(t, "kubeadm-apt")
	mixed := variantInventory(t, "kubeadm-apt")
	noOS.Pools, mixed.Pools = nil, nil
	for _, p := range variantInventory(t, "kubeadm-apt").Pools {
		q := p
		q.OSImages = nil
		noOS.Pools = append(noOS.Pools, q)
		m := p
		m.OSImages = []string{"Ubuntu 24.04.3 LTS", "Rocky Linux 9.6 (Blue Onyx)"}
		mixed.Pools = append(mixed.Pools, m)
	}
	for _, tc := range []struct {
		name    string
		inv     Inventory
		choices bool
	}{
		{"OS images not shown", noOS, true},
		{"Ubuntu and Rocky in one pool", mixed, true},
		{"Ubuntu", variantInventory(t, "kubeadm-apt"), false},
		{"Rocky and RHEL", variantInventory(t, "kubeadm-rpm"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planOf(t, tc.inv, "v1.38", "")
			alts := 0
			for _, s := range p.Steps {
				for _, b := range s.Blocks {
					c := strings.Join(b.Commands, "\n")
					if strings.Contains(c, "apt-get") && strings.Contains(c, "dnf") {
						t.Errorf("step %d: one block runs apt-get and dnf:\n%s", s.Number, c)
					}
					if strings.Count(c, "sudo systemctl restart kubelet") > 1 {
						t.Errorf("step %d: one block restarts the kubelet twice:\n%s", s.Number, c)
					}
					if b.Choice != "" {
						alts++
						if b.Choice != osChoice || (b.When != osWhen[pkgApt] && b.When != osWhen[pkgDnf] && b.When != osOtherWhen) {
							t.Errorf("alternative %q/%q", b.Choice, b.When)
						}
					}
				}
			}
			if (alts > 0) != tc.choices {
				t.Errorf("%d alternatives, want some: %v", alts, tc.choices)
			}
		})
	}
}

// A provider command names a pool by the provider's own name for it: the
// value of the provider's pool label, or a placeholder, never the value of
// whatever other label grouped the nodes here.
func TestRunbookProviderPoolNames(t *testing.T) {
	for _, tc := range []struct {
		variant, pool string
		wants, bad    []string
	}{
		{"gke", "a3-gpu", []string{"--node-pool=a3-gpu "}, nil},
		{"aks", "system", []string{"--name system --kubernetes-version"}, nil},
		{"eks-managed", "system", []string{"--nodegroup-name system"}, nil},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			inv := variantInventory(t, tc.variant)
			wantIn(t, "own label", cmds(stepOf(t, planOf(t, inv, "v1.38", ""), PhaseNodePool, tc.pool)), tc.wants...)
			c := cmds(stepOf(t, planOf(t, relabel(inv, "node.kubernetes.io/pool"), "v1.38", ""), PhaseNodePool, tc.pool))
			wantNotIn(t, "another label", c, "--node-pool="+tc.pool, "--name "+tc.pool+" ", "--nodegroup-name "+tc.pool)
			wantIn(t, "another label", c, map[string]string{"gke": "--node-pool='<node-pool-name>'", "aks": "--name '<nodepool-name>'", "eks-managed": "--nodegroup-name '<nodegroup-name>'"}[tc.variant])
		})
	}
}

// callLine is the words of a call as written, for matching.
func callLine(ce *syntax.CallExpr) string {
	var w []string
	for _, a := range ce.Args {
		w = append(w, wordValue(a))
	}
	return strings.Join(w, " ")
}

// calls lists the calls of a statement in order, nested ones included.
func calls(n syntax.Node) []string {
	var out []string
	syntax.Walk(n, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			out = append(out, callLine(ce))
		}
		return true
	})
	return out
}

var gateCalls = []string{"kubectl gpu-validate", "kubectl skew verify", "etcdutl snapshot status", "kubectl -n kube-system exec etcd-", "sha256sum -c", "kubectl rollout status", "kubectl -n kube-system rollout status", "[ sample = Successful ]"}

func isGate(call string) bool {
	for _, g := range gateCalls {
		if strings.HasPrefix(call, g) {
			return true
		}
	}
	return false
}

// Gates gate: a validation is never followed, in its block, by a command
// of its own line that would run whatever it said; gangs come back
// (gang-drain restore) only in a chain behind gpu-validate of their nodes,
// in a step's blocks and in its rollback's, on every provider (on
// provider-rolled pools too, where the provider's rollout ends first).
func TestRunbookGatesGate(t *testing.T) {
	// Karpenter and EKS Auto Mode start the new nodes only for the
	// readmitted gangs: there is nothing to validate before the restore.
	karpenter := map[string]bool{"eks-selfmanaged gpu-karpenter": true, "eks-automode gpu-train": true}
	restores := 0
	for _, v := range variants {
		for _, s := range variantPlan(t, v).Steps {
			for i, b := range stepBlocks(s) {
				where := fmt.Sprintf("%s step %d (%s %s) block %d", v, s.Number, s.Phase, s.Pool, i+1)
				f := parseBlock(t, where, b)
				if f == nil {
					continue
				}
				for j, st := range f.Stmts {
					cs := calls(st)
					if len(cs) == 0 {
						continue
					}
					if _, single := st.Cmd.(*syntax.CallExpr); single && isGate(cs[0]) && j < len(f.Stmts)-1 {
						t.Errorf("%s: gate %q is followed by a line of its own", where, cs[0])
					}
					for k, c := range cs {
						if !strings.HasPrefix(c, "kubectl gang-drain restore ") || strings.Contains(c, "--dry-run") || karpenter[v+" "+s.Pool] {
							continue
						}
						restores++
						validated := false
						for _, before := range cs[:k] {
							validated = validated || strings.HasPrefix(before, "kubectl gpu-validate nodes")
						}
						if _, chained := st.Cmd.(*syntax.BinaryCmd); !validated || !chained {
							t.Errorf("%s: %q is not chained behind gpu-validate", where, c)
						}
					}
				}
			}
		}
	}
	if restores == 0 {
		t.Fatal("no gang-drain restore found")
	}
}

// A GPU pool the provider replaces whole is said to cost the whole pool,
// with the capacity-keeping way; a pool moved unit by unit costs a unit
// (Cluster API's, whose rollout order the runbook sets: capi_order.go).
func TestRunbookWholePoolCostSaid(t *testing.T) {
	for _, tc := range []struct {
		variant, pool string
		whole         bool
	}{
		{"gke", "a3-gpu", true}, {"aks", "gpunp", true}, {"eks-managed", "gpu-p5", true}, {"capi", "h100-a", false},
		{"kubeadm-apt", "gpu-h100", false}, {"kubeadm-ha", "gpu-h200", false}, {"gke", "default-pool", false},
	} {
		t.Run(tc.variant+" "+tc.pool, func(t *testing.T) {
			w := strings.Join(variantPlan(t, tc.variant).Warnings, "\n")
			said := strings.Contains(w, "pool "+tc.pool+": ") && strings.Contains(w, "leave training from the first unit's drain") && strings.Contains(w, "to keep capacity, create a pool at the target version")
			if said != tc.whole {
				t.Errorf("whole-pool cost said: %v, want %v\n%s", said, tc.whole, w)
			}
		})
	}
}

// Before you start says why a plan reports a violation, and EKS's node
// group rule does not depend on the label that grouped the nodes.
func TestRunbookBeforeYouStart(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.37.2"}, Components: []Component{comp(KindAPIServer, "kube-apiserver-cp-0", "v1.37.2")},
		Pools: []Pool{pool("old", "v1.33.4"), pool("train", "v1.37.2")}}
	p := planOf(t, inv, "v1.38", ProviderKubeadm)
	if len(p.Warnings) == 0 || !strings.HasPrefix(p.Warnings[0], "pool old is out of policy now (the pool is 4 minors behind the apiserver 1.37, beyond the limit of 3") ||
		!strings.Contains(p.Warnings[0], "step 1 repairs it") {
		t.Errorf("first warning %q", p.Warnings)
	}
	for _, label := range []string{labelEKSNodegroup, "node.kubernetes.io/pool"} {
		ep := planOf(t, relabel(variantInventory(t, "eks-managed"), label), "v1.38", "")
		notes := ""
		for _, s := range ep.Steps {
			notes += s.Note + "\n"
		}
		wantIn(t, label, notes, "update-cluster-version is refused while a node group is not on the control plane's current minor")
	}
}

// A kubeadm node more than one minor behind the control plane is
// reprovisioned: kubeadm upgrade node moves a node one minor, and stepping
// it a minor at a time would run an intermediate kubeadm older than the
// control plane, outside kubeadm's skew. One behind stays in place, one
// kubeadm upgrade node by the control plane's kubeadm.
func TestRunbookKubeadmReprovisionsFarBehind(t *testing.T) {
	for _, tc := range []struct {
		from, cp    string
		upgrades    int
		reprovision bool
	}{
		{"v1.36.4", "v1.37.2", 1, false},
		{"v1.35.4", "v1.37.2", 0, true},
		{"v1.34.4", "v1.37.2", 0, true},
	} {
		t.Run(tc.from, func(t *testing.T) {
			inv := Inventory{Server: ServerVersion{GitVersion: tc.cp}, Components: []Component{comp(KindAPIServer, "kube-apiserver-cp-0", tc.cp)},
				Pools:    []Pool{{Name: "cpu", Label: "gpufleet.dev/pool", Nodes: 2, Versions: []VersionCount{{Version: tc.from, Nodes: 2}}, GPUNodes: new(int), OSImages: []string{"Ubuntu 24.04.3 LTS"}}},
				Platform: &Platform{ControlPlanePods: 1}}
			st := stepOf(t, planOf(t, inv, "v1.37", ""), PhaseNodePool, "cpu")
			c := cmds(st)
			if tc.reprovision {
				// kubeadm join refuses a Node of its name that is still
				// Ready: the reset, the wait here and the join are three
				// blocks in that order.
				at := func(want string) int {
					for i, b := range st.Blocks {
						if strings.Contains(strings.Join(b.Commands, "\n"), want) {
							return i
						}
					}
					return -1
				}
				reset, wait, join := at("sudo kubeadm reset --force"), at(`kubectl wait node "$NODE" --for=condition=Ready=Unknown --timeout=5m`), at("sudo kubeadm join ")
				if !(reset >= 0 && reset < wait && wait < join) || at("sudo kubeadm join ") == reset {
					t.Errorf("blocks of the reset %d, the wait for Ready=Unknown %d and the join %d, want three in that order:\n%s", reset, wait, join, c)
				}
			}
			if n := strings.Count(c, "sudo kubeadm upgrade node"); n != tc.upgrades {
				t.Errorf("%d kubeadm upgrade node, want %d:\n%s", n, tc.upgrades, c)
			}
			if got := strings.Contains(c, "sudo kubeadm reset --force && \\"); got != tc.reprovision {
				t.Errorf("reprovisioned: %v, want %v:\n%s", got, tc.reprovision, c)
			}
			// No kubeadm older than the control plane runs, and nothing
			// claims it would be inside kubeadm's skew.
			wantNotIn(t, "node", c, "inside kubeadm's skew", "kubeadm='1.36", "kubeadm-1.36")
			if tc.reprovision {
				wantIn(t, "reprovision", c, "kubeadm upgrade node moves a node one minor", "join again with kubeadm 1.37", "on cp-0, a control-plane node", "sudo kubeadm token create --print-join-command --ttl 2h",
					"sudo apt-get install -y kubeadm='1.37.<patch>-*' kubelet='1.37.<patch>-*' kubectl='1.37.<patch>-*'", "sudo kubeadm join '<control-plane-endpoint>'", `kubectl uncordon "$NODE"`)
			}
		})
	}
}

// awsKubeadm is the kubeadm-apt cluster on EC2, its worker pools made by
// Auto Scaling groups when asgs is set.
func awsKubeadm(t *testing.T) Inventory {
	inv := variantInventory(t, "kubeadm-apt")
	pf := *inv.Platform
	pf.ProviderIDs = map[string]int{"aws": 8}
	pf.Region = "us-east-2"
	inv.Platform = &pf
	inv.Pools = append([]Pool(nil), inv.Pools...)
	for i := range inv.Pools {
		inv.Pools[i].AWSNodes = inv.Pools[i].Nodes
	}
	return inv
}

// A self-managed pool an Auto Scaling group makes is replaced from a new
// AMI: a launch template version that changes the AMI alone (its diff
// printed, anything else refused), an instance refresh a fifth at a time
// with checkpoints, every terminating instance's node drained first
// (gang-drain on GPU pools), paused on too many NotReady nodes, watched
// to its end; the gangs come back behind validation.
func TestRunbookASGImmutableWorkers(t *testing.T) {
	asgs := map[string]string{"gpu-h100": "gpu-h100-asg", "cpu": "cpu-asg"}
	p, err := MakePlan(awsKubeadm(t), MustParseVersion("v1.38"), PlanOptions{ASGs: asgs})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool  string
		drain string
		batch string
	}{
		{"gpu-h100", `kubectl gang-drain run $NODES --run-id "gpu-h100-to-1.38" --timeout 1h`, "-le 1 ]"},
		{"cpu", `kubectl drain $NODES --ignore-daemonsets`, "-le 1 ]"},
	} {
		t.Run(tc.pool, func(t *testing.T) {
			c := cmds(lastStepOf(t, p, PhaseNodePool, tc.pool))
			order := []string{
				"ASG=" + asgs[tc.pool],
				`--source-version "$OLD" --version-description 'gpufleet v1.38 AMI' --launch-template-data "{\"ImageId\":\"$AMI\"}"`,
				"diff lt-" + tc.pool + "-old.json lt-" + tc.pool + "-new.json   # the whole difference",
				`{ [ -s lt-` + tc.pool + `-old.json ] && [ -s lt-` + tc.pool + `-new.json ] && `,
				"--lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING --heartbeat-timeout 7200",
				`'{"MinHealthyPercentage":80,"CheckpointPercentages":[20,40,60,80,100],"CheckpointDelay":600,"SkipMatching":true,"AutoRollback":true,"ScaleInProtectedInstances":"Refresh","StandbyInstances":"Wait"}'`,
				tc.drain,
				"--lifecycle-action-result CONTINUE",
				tc.batch,
				`|| [ "$S" != InProgress ] || aws autoscaling cancel-instance-refresh`,
				`[ "$S" = Successful ] && \`,
				"aws autoscaling delete-lifecycle-hook",
			}
			at := -1
			for _, w := range order {
				i := strings.Index(c, w)
				if i <= at {
					t.Fatalf("lacks, or out of order, %q:\n%s", w, c)
				}
				at = i
			}
			wantNotIn(t, "ASG pool", c, "kubeadm upgrade node", "apt-get", "kubeadm reset")
			// A GPU pool's step says, before its refresh starts, what stays
			// stopped and until when, and why not restored per batch.
			cost := strings.Index(c, "# the cost on this GPU pool: every gang gang-drain stops as its instance waits to terminate stays stopped")
			if gpu := tc.pool == "gpu-h100"; gpu != (cost >= 0) || (gpu && (cost > strings.Index(c, "start-instance-refresh") || !strings.Contains(c, "until the refresh has replaced all 4 nodes and the new nodes pass gpu-validate") || !strings.Contains(c, "not restored per batch, since"))) {
				t.Errorf("the ASG path's cost to the gangs is not stated before the refresh (or is, on a CPU pool):\n%s", c)
			}
		})
	}
	gpu := cmds(lastStepOf(t, p, PhaseNodePool, "gpu-h100"))
	if v, r := strings.Index(gpu, "kubectl gpu-validate nodes -l gpufleet.dev/pool=gpu-h100 --kubelet-version v1.38 --xid --dcgm && \\"), strings.Index(gpu, `kubectl gang-drain restore "gpu-h100-to-1.38" && \`); v < 0 || r < v {
		t.Errorf("the gangs do not come back behind validation:\n%s", gpu)
	}
	// Without --asg the plan says the path exists.
	wantIn(t, "warnings", strings.Join(planOf(t, awsKubeadm(t), "v1.38", "").Warnings, "\n"), "plan again with --asg POOL=GROUP")
	wantNotIn(t, "warnings", strings.Join(p.Warnings, "\n"), "plan again with --asg")
}
