package skew

import (
	"fmt"
	"sort"
	"strings"
)

// PhaseControlPlane is the one step of a hop on a control plane the
// provider upgrades itself (EKS, GKE, AKS, Cluster API): it takes the
// etcd backups and replaces apiservers and controllers, so the plan has
// no etcd-snapshot, apiservers or controllers step of its own there.
const PhaseControlPlane = "control-plane"

// Placeholders the commands use where the cluster does not show a name.
const (
	phCluster       = "<cluster-name>"
	phRegion        = "<region>"
	phLocation      = "<location>"
	phResourceGroup = "<resource-group>"
	phPatch         = "<patch>"
	phRun           = "<run-id>"
	phSelector      = "<pool-selector>"
)

// forProvider rewrites a plan for its provider: on a managed control plane
// one step per hop replaces the etcd-snapshot, apiservers and controllers
// steps, and every step gets its commands.
func forProvider(p *Plan, inv Inventory, prov Provider) {
	r := newRenderer(inv, prov)
	if prov.Managed() {
		var steps []Step
		renumber := map[int]int{}
		for _, s := range p.Steps {
			switch s.Phase {
			case PhaseEtcd, PhaseControllers:
				continue
			case PhaseAPIServers:
				s.Phase = PhaseControlPlane
				s.Action = fmt.Sprintf("%s upgrades the control plane to %s: etcd backups, the apiserver instances one at a time and the controllers are the provider's own steps", prov.Title(), s.To)
				s.Note = fmt.Sprintf("no etcd snapshot or per-apiserver step here: %s does them; apiservers may be mixed while it runs, so hold back manifests that use APIs new in %s until it finishes", prov.Title(), s.To)
			}
			renumber[s.Number] = len(steps) + 1
			s.Number = len(steps) + 1
			steps = append(steps, s)
		}
		p.Steps = steps
		for i := range p.Pools {
			for j := range p.Pools[i].Upgrades {
				p.Pools[i].Upgrades[j].Step = renumber[p.Pools[i].Upgrades[j].Step]
			}
		}
	}
	r.target = p.Summary.Target
	for i := range p.Steps {
		p.Steps[i].Commands = r.commands(p.Steps[i])
	}
}

// renderer writes the commands of one plan's steps.
type renderer struct {
	prov     Provider
	inv      Inventory
	pf       Platform
	cluster  string
	region   string
	cpNodes  []string          // kubeadm control-plane nodes, from the apiserver pods
	cpOn     map[string]string // node -> apiserver version
	pools    map[string]Pool
	capiName string
	capiNS   string
	target   string
	// saved is the evidence file of the last pre-flight step so far.
	saved string
}

func newRenderer(inv Inventory, prov Provider) *renderer {
	r := &renderer{prov: prov, inv: inv, pools: map[string]Pool{}, cpOn: map[string]string{}}
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
		r.capiName, r.capiNS = orPlaceholder(r.pf.ClusterAPIName, phCluster), orPlaceholder(r.pf.ClusterAPINamespace, "<namespace>")
	}
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

// commands returns the lines of one step.
func (r *renderer) commands(s Step) []string {
	switch s.Phase {
	case PhaseFix:
		return nil
	case PhasePreflight:
		return r.preflight(s)
	case PhaseEtcd:
		return r.etcd(s)
	case PhaseAPIServers:
		return r.apiservers(s)
	case PhaseControllers:
		return r.controllers(s)
	case PhaseControlPlane:
		return r.controlPlane(s)
	case PhaseAddons:
		return r.addons(s)
	case PhaseNodePool:
		return r.nodePool(s)
	}
	return nil
}

func baseline(minor string) string { return "preflight-" + minor + ".yaml" }

func (r *renderer) preflight(s Step) []string {
	r.saved = baseline(s.To)
	out := []string{
		fmt.Sprintf("kubectl skew preflight --target v%s --save %s", s.To, baseline(s.To)),
		fmt.Sprintf("kubectl deprecations --target-version v%s", s.To),
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
		out = append(out, fmt.Sprintf("aws eks list-insights --region %s --cluster-name %s --filter 'categories=UPGRADE_READINESS,kubernetesVersions=%s,statuses=ERROR,WARNING,UNKNOWN'", r.region, r.cluster, s.To))
	case ProviderGKE:
		out = append(out, fmt.Sprintf("gcloud container get-server-config --location=%s%s --format='yaml(validMasterVersions)'", r.location(), r.project()))
	case ProviderAKS:
		out = append(out, fmt.Sprintf("az aks get-upgrades --resource-group %s --name %s --output table", r.resourceGroup(), r.cluster))
	case ProviderKubeadm:
		out = append(out, "sudo kubeadm upgrade plan   # on "+r.firstCP()+": lists the v"+s.To+" patch releases")
	}
	return out
}

func (r *renderer) etcd(s Step) []string {
	file := fmt.Sprintf("etcd-pre-%s.db", s.To)
	switch r.prov {
	case ProviderK3s:
		// https://docs.k3s.io/cli/etcd-snapshot
		return []string{fmt.Sprintf("sudo k3s etcd-snapshot save --name pre-%s   # on a server node", s.To), "sudo k3s etcd-snapshot ls"}
	case ProviderRKE2:
		// https://docs.rke2.io/datastore/backup_restore
		return []string{fmt.Sprintf("sudo rke2 etcd-snapshot save --name pre-%s   # on a server node", s.To), "sudo rke2 etcd-snapshot ls"}
	}
	// kubeadm's etcd certificates (https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#snapshot-using-etcdctl-options);
	// etcdutl checks the file (etcdctl snapshot status is deprecated since etcd 3.5).
	on := ""
	if r.prov == ProviderKubeadm {
		on = "   # on " + r.firstCP()
	}
	return []string{
		fmt.Sprintf("sudo etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key snapshot save %s%s", file, on),
		fmt.Sprintf("sudo etcdutl snapshot status %s -w table", file),
	}
}

func (r *renderer) firstCP() string {
	if len(r.cpNodes) > 0 {
		return r.cpNodes[0]
	}
	return "<first-control-plane-node>"
}

// aptRepo switches the pkgs.k8s.io repository, which is one per minor
// (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/change-package-repository/).
func aptRepo(from, to string) string {
	return fmt.Sprintf(`sudo sed -i 's#/v%s/#/v%s/#' /etc/apt/sources.list.d/kubernetes.list`, from, to)
}

func aptInstall(to string, pkgs ...string) string {
	var vs []string
	for _, p := range pkgs {
		vs = append(vs, fmt.Sprintf("%s='%s.%s-*'", p, to, phPatch))
	}
	return fmt.Sprintf("sudo apt-mark unhold %s && sudo apt-get update && sudo apt-get install -y %s && sudo apt-mark hold %s",
		strings.Join(pkgs, " "), strings.Join(vs, " "), strings.Join(pkgs, " "))
}

func prevMinor(to string) string {
	v, err := ParseVersion(to)
	if err != nil {
		return "<from>"
	}
	return v.AddMinors(-1).MinorString()
}

func (r *renderer) apiservers(s Step) []string {
	from := prevMinor(s.To)
	switch r.prov {
	case ProviderKubeadm:
		// https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/
		first, others := r.firstCP(), []string{}
		var todo []string
		for _, n := range r.cpNodes {
			if v, err := ParseVersion(r.cpOn[n]); err == nil && v.MinorString() == s.To {
				continue
			}
			todo = append(todo, n)
		}
		applied := len(todo) < len(r.cpNodes)
		if len(todo) > 0 {
			first, others = todo[0], todo[1:]
		} else if len(r.cpNodes) == 0 {
			others = []string{"<other-control-plane-node>"}
		}
		var out []string
		if applied {
			// Mid-upgrade: kubeadm upgrade apply already ran on a node
			// that is on the new minor; the rest take upgrade node.
			others = todo
		} else {
			out = append(out,
				"# on "+first+", the first control-plane node:",
				aptRepo(from, s.To),
				aptInstall(s.To, "kubeadm"),
				"sudo kubeadm upgrade plan",
				fmt.Sprintf("sudo kubeadm upgrade apply v%s.%s", s.To, phPatch))
		}
		for _, n := range others {
			out = append(out,
				"# then on "+n+":",
				aptRepo(from, s.To),
				aptInstall(s.To, "kubeadm"),
				"sudo kubeadm upgrade node")
		}
		return append(out, "kubectl -n kube-system get pods -l component=kube-apiserver -o wide")
	case ProviderK3s:
		// https://docs.k3s.io/upgrades/manual: the install script with a channel.
		return []string{fmt.Sprintf("curl -sfL https://get.k3s.io | INSTALL_K3S_CHANNEL=v%s sh -s - server   # on each server node, one at a time, with its usual arguments", s.To),
			"kubectl get nodes -l node-role.kubernetes.io/control-plane -o wide"}
	case ProviderRKE2:
		// https://docs.rke2.io/upgrades/manual_upgrade
		return []string{fmt.Sprintf("curl -sfL https://get.rke2.io | INSTALL_RKE2_CHANNEL=v%s sh -   # on each server node, one at a time", s.To),
			"sudo systemctl restart rke2-server",
			"kubectl get nodes -l node-role.kubernetes.io/control-plane -o wide"}
	}
	return []string{fmt.Sprintf("# upgrade kube-apiserver to v%s.%s on each control-plane host, one at a time, with the installer that made the cluster", s.To, phPatch),
		"kubectl version"}
}

func (r *renderer) controllers(s Step) []string {
	if r.prov == ProviderKubeadm {
		return []string{"# kubeadm upgrade apply and kubeadm upgrade node upgraded kube-controller-manager and kube-scheduler with each apiserver; check:",
			"kubectl -n kube-system get pods -l tier=control-plane -o custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image",
			"kubectl skew"}
	}
	if r.prov == ProviderK3s || r.prov == ProviderRKE2 {
		return []string{"# the " + r.prov.Title() + " server binary carries the controllers: upgraded with the servers; check:", "kubectl skew"}
	}
	return []string{fmt.Sprintf("# upgrade kube-controller-manager, kube-scheduler and cloud-controller-manager to v%s.%s on each control-plane host", s.To, phPatch), "kubectl skew"}
}

func (r *renderer) controlPlane(s Step) []string {
	var out []string
	switch r.prov {
	case ProviderEKS:
		// https://docs.aws.amazon.com/eks/latest/userguide/update-cluster.html
		out = []string{
			fmt.Sprintf("aws eks update-cluster-version --region %s --name %s --kubernetes-version %s", r.region, r.cluster, s.To),
			fmt.Sprintf("aws eks wait cluster-active --region %s --name %s", r.region, r.cluster),
		}
	case ProviderGKE:
		// https://cloud.google.com/kubernetes-engine/docs/how-to/upgrading-a-cluster
		out = []string{fmt.Sprintf("gcloud container clusters upgrade %s --master --cluster-version=%s --location=%s%s", r.cluster, s.To, r.location(), r.project())}
	case ProviderAKS:
		// https://learn.microsoft.com/azure/aks/upgrade-aks-cluster
		out = []string{fmt.Sprintf("az aks upgrade --resource-group %s --name %s --kubernetes-version %s.%s --control-plane-only", r.resourceGroup(), r.cluster, s.To, phPatch)}
	case ProviderCAPI:
		// A ClusterClass cluster upgrades by its topology version
		// (https://cluster-api.sigs.k8s.io/tasks/experimental-features/cluster-class/operate-cluster#upgrade-a-cluster);
		// run against the management cluster.
		out = []string{
			fmt.Sprintf(`kubectl patch cluster.cluster.x-k8s.io %s -n %s --type merge -p '{"spec":{"topology":{"version":"v%s.%s"}}}'`, r.capiName, r.capiNS, s.To, phPatch),
			fmt.Sprintf("clusterctl describe cluster %s -n %s", r.capiName, r.capiNS),
		}
	}
	return append(out, "kubectl skew")
}

func (r *renderer) addons(s Step) []string {
	switch r.prov {
	case ProviderKubeadm:
		return []string{"# kubeadm upgrade apply upgraded kube-proxy and CoreDNS; check them and the other addons:",
			"kubectl -n kube-system get daemonset/kube-proxy deployment/coredns -o wide",
			fmt.Sprintf("kubectl skew preflight --target v%s", s.To)}
	case ProviderEKS:
		// EKS add-ons are upgraded by the user after the control plane
		// (https://docs.aws.amazon.com/eks/latest/userguide/updating-an-add-on.html).
		var out []string
		for _, a := range []string{"kube-proxy", "coredns", "vpc-cni"} {
			out = append(out,
				fmt.Sprintf("aws eks describe-addon-versions --region %s --kubernetes-version %s --addon-name %s --query 'addons[].addonVersions[0].addonVersion' --output text", r.region, s.To, a),
				fmt.Sprintf("aws eks update-addon --region %s --cluster-name %s --addon-name %s --addon-version <%s-version> --resolve-conflicts PRESERVE", r.region, r.cluster, a, a))
		}
		return append(out, fmt.Sprintf("kubectl skew preflight --target v%s", s.To))
	case ProviderGKE, ProviderAKS, ProviderK3s, ProviderRKE2:
		return []string{fmt.Sprintf("# %s upgrades kube-proxy and CoreDNS with the control plane; check them and the other addons:", r.prov.Title()),
			"kubectl skew", fmt.Sprintf("kubectl skew preflight --target v%s", s.To)}
	}
	return []string{"kubectl -n kube-system get daemonset/kube-proxy deployment/coredns -o wide", fmt.Sprintf("kubectl skew preflight --target v%s", s.To)}
}

// selector returns the label selector of a pool's nodes.
func (r *renderer) selector(pool string) string {
	pl, ok := r.pools[pool]
	if !ok || pl.Label == "" || pool == NoPool {
		return phSelector
	}
	for _, l := range controlPlaneRoles {
		if pl.Label == l {
			return l
		}
	}
	return pl.Label + "=" + pool
}

// gpuPool reports whether a pool has GPU nodes, where training gangs run.
// Not knowing counts as yes, since gang-drain drains a pool without gangs
// just as well (it evicts what is not a gang). Which pods are gangs is
// gang-drain's own question (pkg/gang), asked when it runs; the plan
// reads no pods outside kube-system, so that the offline plan from a
// saved report gives the same commands.
func (r *renderer) gpuPool(pool string) bool {
	pl, ok := r.pools[pool]
	if !ok || pl.GPUNodes == nil {
		return true
	}
	return *pl.GPUNodes > 0
}

func (r *renderer) nodePool(s Step) []string {
	sel := r.selector(s.Pool)
	gangs := r.gpuPool(s.Pool)
	var out []string
	if r.saved == "" {
		// No hop before this step: record the evidence to verify against.
		r.saved = baseline(r.target)
		out = append(out, fmt.Sprintf("kubectl skew preflight --target v%s --save %s", r.target, r.saved))
	}
	out = append(out, "kubectl pdb-blockers -l "+sel)
	selfDrain := !r.prov.Managed()
	switch {
	case gangs:
		out = append(out, "kubectl gang-drain run -l "+sel)
	case selfDrain:
		out = append(out, "kubectl drain -l "+sel+" --ignore-daemonsets --delete-emptydir-data")
	}
	switch r.prov {
	case ProviderKubeadm:
		// https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/upgrading-linux-nodes/
		out = append(out, "# on each node of the pool:",
			aptRepo(s.From, s.To),
			aptInstall(s.To, "kubeadm", "kubelet", "kubectl"),
			"sudo kubeadm upgrade node",
			"sudo systemctl daemon-reload && sudo systemctl restart kubelet")
	case ProviderEKS:
		if pl := r.pools[s.Pool]; pl.Label == "karpenter.sh/nodepool" {
			// Karpenter replaces nodes that drifted from their NodePool and
			// EC2NodeClass, such as an AMI alias for the old version
			// (https://karpenter.sh/docs/concepts/disruption/#drift).
			out = append(out,
				fmt.Sprintf("# Karpenter NodePool %s: point its EC2NodeClass at AMIs for %s (or let an @latest alias follow the control plane); drifted nodes are replaced", s.Pool, s.To),
				fmt.Sprintf("kubectl get nodeclaims -l karpenter.sh/nodepool=%s -o wide", s.Pool))
			break
		}
		// https://docs.aws.amazon.com/eks/latest/userguide/update-managed-node-group.html
		ng := s.Pool
		if pl := r.pools[s.Pool]; pl.Label != labelEKSNodegroup && pl.Label != "alpha.eksctl.io/nodegroup-name" {
			ng = "<nodegroup-name>"
		}
		out = append(out,
			fmt.Sprintf("aws eks update-nodegroup-version --region %s --cluster-name %s --nodegroup-name %s --kubernetes-version %s", r.region, r.cluster, ng, s.To),
			fmt.Sprintf("aws eks wait nodegroup-active --region %s --cluster-name %s --nodegroup-name %s", r.region, r.cluster, ng))
	case ProviderGKE:
		// Surge or blue-green is the pool's own upgrade strategy; a
		// blue-green pool soaks and then finishes with complete-upgrade
		// (https://cloud.google.com/kubernetes-engine/docs/concepts/node-pool-upgrade-strategies).
		loc := r.location() + r.project()
		out = append(out,
			fmt.Sprintf("gcloud container node-pools describe %s --cluster=%s --location=%s --format='value(upgradeSettings.strategy)'", s.Pool, r.cluster, loc),
			fmt.Sprintf("gcloud container clusters upgrade %s --node-pool=%s --cluster-version=%s --location=%s", r.cluster, s.Pool, s.To, loc),
			fmt.Sprintf("# BLUE_GREEN pools only, after the soak: gcloud container node-pools complete-upgrade %s --cluster=%s --location=%s", s.Pool, r.cluster, loc))
	case ProviderAKS:
		// https://learn.microsoft.com/azure/aks/upgrade-aks-cluster#upgrade-a-node-pool
		out = append(out, fmt.Sprintf("az aks nodepool upgrade --resource-group %s --cluster-name %s --name %s --kubernetes-version %s.%s", r.resourceGroup(), r.cluster, s.Pool, s.To, phPatch))
	case ProviderCAPI:
		// The topology controller rolls each MachineDeployment to the
		// Cluster's topology.version after the control plane, unless its
		// topology carries topology.cluster.x-k8s.io/defer-upgrade.
		out = append(out,
			fmt.Sprintf("# the topology controller rolls MachineDeployment %s to v%s after the control plane; follow it:", s.Pool, s.To),
			fmt.Sprintf("clusterctl describe cluster %s -n %s", r.capiName, r.capiNS),
			fmt.Sprintf("kubectl get machinedeployment %s -n %s -o wide", s.Pool, r.capiNS))
	case ProviderK3s:
		out = append(out, fmt.Sprintf("curl -sfL https://get.k3s.io | INSTALL_K3S_CHANNEL=v%s sh -s - agent   # on each node of the pool, with its usual K3S_URL and K3S_TOKEN", s.To))
	case ProviderRKE2:
		out = append(out, fmt.Sprintf("curl -sfL https://get.rke2.io | INSTALL_RKE2_CHANNEL=v%s INSTALL_RKE2_TYPE=agent sh -   # on each node of the pool", s.To),
			"sudo systemctl restart rke2-agent")
	default:
		out = append(out, fmt.Sprintf("# upgrade the kubelet on each node of the pool to v%s.%s with the installer that made the cluster", s.To, phPatch))
	}
	// Validate the GPUs before the pool takes work again.
	if gangs {
		out = append(out, "kubectl gpu-validate nodes -l "+sel)
	}
	switch {
	case gangs:
		out = append(out, fmt.Sprintf("kubectl gang-drain restore %s   # the run gang-drain run printed (kubectl gang-drain status)", phRun))
	case selfDrain:
		out = append(out, "kubectl uncordon -l "+sel)
	}
	return append(out, fmt.Sprintf("kubectl skew verify --baseline %s", r.saved))
}

func (r *renderer) location() string {
	// A single zone may be a zonal cluster's location or one zone of a
	// regional cluster: the cluster's location is not shown, so it stays a
	// placeholder.
	return phLocation
}

func (r *renderer) project() string {
	if r.pf.Project == "" {
		return ""
	}
	return " --project=" + r.pf.Project
}

func (r *renderer) resourceGroup() string {
	return orPlaceholder(r.pf.ResourceGroup, phResourceGroup)
}
