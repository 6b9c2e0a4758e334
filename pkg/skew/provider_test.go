package skew

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

func platformNode(name, providerID string, labels map[string]string, kubelet string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
}

func TestPlatformFromNodes(t *testing.T) {
	a := newPlatformAcc()
	a.node(platformNode("i-1", "aws:///us-west-2a/i-0123456789abcdef0", map[string]string{labelEKSNodegroup: "gpu", labelEksctlCluster: "train-prod"}, ""))
	a.node(platformNode("i-2", "aws:///us-west-2b/i-0fedcba9876543210", map[string]string{labelEKSNodegroup: "gpu"}, ""))
	a.node(platformNode("g-1", "gce://my-project/us-central1-a/gke-x-pool-1-abcd", map[string]string{labelGKENodepool: "pool-1"}, ""))
	a.node(platformNode("k-1", "azure:///subscriptions/s/resourceGroups/MC_rg_aks1_westeurope/providers/Microsoft.Compute/virtualMachineScaleSets/aks-np-1-vmss/virtualMachines/0", nil, ""))
	a.node(platformNode("n-1", "", nil, ""))
	got := a.result()
	want := &Platform{
		ProviderIDs: map[string]int{"aws": 2, "gce": 1, "azure": 1, "": 1},
		Labels:      map[string]int{labelEKSNodegroup: 2, labelEksctlCluster: 1, labelGKENodepool: 1},
		ClusterName: "train-prod", Region: "us-central1", Zones: []string{"us-central1-a", "us-west-2a", "us-west-2b"},
		Project: "my-project", ResourceGroup: "MC_rg_aks1_westeurope",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	for z, r := range map[string]string{"us-west-2a": "us-west-2", "us-central1-a": "us-central1", "eu-central-1c": "eu-central-1", "westeurope": "westeurope"} {
		if got := regionOfZone(z); got != r {
			t.Errorf("regionOfZone(%s) = %s, want %s", z, got, r)
		}
	}
}

func TestDetectProvider(t *testing.T) {
	apis := []Component{comp(KindAPIServer, "kube-apiserver-cp-0", "v1.36.2")}
	for _, tc := range []struct {
		name string
		inv  Inventory
		want Provider
	}{
		{"kubeadm static pods", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Components: apis,
			Platform: &Platform{ControlPlanePods: 1, TierLabelled: 1, Labels: map[string]int{labelGKENodepool: 3}}}, ProviderKubeadm},
		{"eks by apiserver version", Inventory{Server: ServerVersion{GitVersion: "v1.36.2-eks-1a2b3c4"}}, ProviderEKS},
		{"gke by apiserver version", Inventory{Server: ServerVersion{GitVersion: "v1.36.2-gke.1587003"}}, ProviderGKE},
		{"eks by nodes", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Pools: []Pool{{Name: "gpu", Label: labelEKSNodegroup, Nodes: 3,
			Versions: []VersionCount{{Version: "v1.35.4-eks-5b6c7d8", Nodes: 3}}}},
			Platform: &Platform{ProviderIDs: map[string]int{"aws": 3}, Labels: map[string]int{labelEKSNodegroup: 3}}}, ProviderEKS},
		{"aks by nodes", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"},
			Platform: &Platform{ProviderIDs: map[string]int{"azure": 2}, Labels: map[string]int{labelAKSAgentpool: 2}}}, ProviderAKS},
		{"gke by nodes", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"},
			Platform: &Platform{ProviderIDs: map[string]int{"gce": 2}, Labels: map[string]int{labelGKENodepool: 2}}}, ProviderGKE},
		{"k3s by version", Inventory{Server: ServerVersion{GitVersion: "v1.36.2+k3s1"}}, ProviderK3s},
		{"rke2 wins over its static pods", Inventory{Server: ServerVersion{GitVersion: "v1.36.2+rke2r1"}, Components: apis,
			Platform: &Platform{ControlPlanePods: 1}}, ProviderRKE2},
		{"cluster api topology", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Components: apis,
			Platform: &Platform{ControlPlanePods: 1, ClusterAPIName: "c1", ClusterAPINamespace: "fleet",
				ClusterAPI: []ClusterAPICluster{{Namespace: "fleet", Name: "c0", Class: "gpu"}, {Namespace: "fleet", Name: "c1", Class: "gpu", Version: "v1.36.2"}}}}, ProviderCAPI},
		{"cluster api without topology is kubeadm", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Components: apis,
			Platform: &Platform{ControlPlanePods: 1, ClusterAPI: []ClusterAPICluster{{Namespace: "fleet", Name: "c1"}}}}, ProviderKubeadm},
		{"nothing", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}}, ProviderUnknown},
		{"a saved report from before platforms", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"}, Components: apis}, ProviderKubeadm},
		{"conflicting nodes", Inventory{Server: ServerVersion{GitVersion: "v1.36.2"},
			Platform: &Platform{ProviderIDs: map[string]int{"aws": 2, "gce": 2}}}, ProviderUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DetectProvider(tc.inv)
			if d.Provider != tc.want || d.Source != "detected" || len(d.Evidence) == 0 {
				t.Errorf("got %+v, want %s", d, tc.want)
			}
		})
	}
	if _, err := ParseProvider("openshift"); err == nil {
		t.Error("ParseProvider accepted openshift")
	}
	if p, err := ParseProvider("Cluster-API"); err != nil || p != ProviderCAPI {
		t.Errorf("ParseProvider(Cluster-API) = %s, %v", p, err)
	}
}

// The collector reads Cluster API Clusters only when the group is served.
func TestCollectClusterAPI(t *testing.T) {
	kc := fakeClient("v1.36.2", platformNode("n-0", "", nil, "v1.36.2"))
	fd := kc.Discovery().(*fakediscovery.FakeDiscovery)
	fd.Resources = []*metav1.APIResourceList{{GroupVersion: "cluster.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "clusters", Namespaced: true, Kind: "Cluster"}}}}
	cl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
		"metadata": map[string]any{"name": "train", "namespace": "fleet"},
		"spec": map[string]any{"topology": map[string]any{"class": "gpu-class", "version": "v1.36.2",
			"workers": map[string]any{"machineDeployments": []any{
				map[string]any{"class": "gpu", "name": "h100"},
				map[string]any{"class": "cpu", "name": "system"},
			}}}},
	}}
	gvr := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "clusters"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ClusterList"}, cl)
	inv, err := (&Collector{Client: kc, Dynamic: dyn}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []ClusterAPICluster{{Namespace: "fleet", Name: "train", Class: "gpu-class", Version: "v1.36.2",
		MachineDeployments: []string{"h100", "system"}, WorkersRead: true}}
	if inv.Platform == nil || !inv.Platform.ClusterAPIServed || !cmp.Equal(want, inv.Platform.ClusterAPI) {
		t.Fatalf("platform %+v", inv.Platform)
	}
	if d := DetectProvider(inv); d.Provider != ProviderCAPI {
		t.Errorf("detected %+v", d)
	}
	// Not served: not read.
	inv, err = (&Collector{Client: fakeClient("v1.36.2"), Dynamic: dyn}).Collect(context.Background())
	if err != nil || inv.Platform.ClusterAPIServed || len(inv.Platform.ClusterAPI) != 0 {
		t.Errorf("cluster API read although not served: %+v %v", inv.Platform, err)
	}
}

func stepsByPhase(p Plan) map[string][]Step {
	out := map[string][]Step{}
	for _, s := range p.Steps {
		out[s.Phase] = append(out[s.Phase], s)
	}
	return out
}

func allCommands(p Plan) string {
	var b strings.Builder
	for _, s := range p.Steps {
		for _, c := range s.Commands {
			b.WriteString(c + "\n")
		}
	}
	return b.String()
}

// A kubeadm cluster in the middle of nothing: two control-plane nodes,
// apply on the first, node on the second, each drained for its kubelet and
// uncordoned before the next.
func TestCommandsKubeadm(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.35.4"}, Components: []Component{
		comp(KindAPIServer, "kube-apiserver-cp-0", "v1.35.4"), comp(KindAPIServer, "kube-apiserver-cp-1", "v1.35.4"),
	}, Pools: []Pool{pool("train", "v1.33.2")}, Platform: &Platform{ControlPlanePods: 2, TierLabelled: 2}}
	p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Provider.Provider != ProviderKubeadm {
		t.Fatalf("provider %+v", p.Provider)
	}
	ph := stepsByPhase(p)
	api := strings.Join(ph[PhaseAPIServers][0].Commands, "\n")
	for _, want := range []string{"# cp-0, the first control-plane node", "sudo kubeadm upgrade plan", "sudo kubeadm upgrade apply 'v1.36.<patch>' --yes", "# then cp-1", "sudo kubeadm upgrade node",
		"sudo sed -i 's#/v1.35/#/v1.36/#' /etc/apt/sources.list.d/kubernetes.list", "kubectl drain cp-1 --ignore-daemonsets"} {
		if !strings.Contains(api, want) {
			t.Errorf("apiserver commands lack %q:\n%s", want, api)
		}
	}
	if strings.Index(api, "upgrade apply") > strings.Index(api, "upgrade node") {
		t.Errorf("upgrade node before upgrade apply:\n%s", api)
	}
	if len(ph[PhaseEtcd]) != 1 || !strings.Contains(strings.Join(ph[PhaseEtcd][0].Commands, "\n"), `snapshot save "$ETCD_DATA/etcd-pre-1.36.db"`) {
		t.Errorf("etcd step %+v", ph[PhaseEtcd])
	}
	pre := strings.Join(ph[PhasePreflight][0].Commands, "\n")
	if !strings.Contains(pre, "kubectl skew preflight --target v1.36 --save preflight-1.36.yaml") || !strings.Contains(pre, "kubectl crd-migrate status") {
		t.Errorf("pre-flight commands:\n%s", pre)
	}
	// Pool train (1.33) must move before the hop to 1.37; to 1.36 it waits
	// for the last wave, one fabric batch at a time (no rack label), three
	// minors at once: reprovisioned.
	pools := ph[PhaseNodePool]
	if len(pools) != 1 {
		t.Fatalf("pool steps %+v", pools)
	}
	np := pools[0].Commands
	idx := func(prefix string) int {
		for i, c := range np {
			if strings.HasPrefix(c, prefix) {
				return i
			}
		}
		t.Errorf("no %q in\n%s", prefix, strings.Join(np, "\n"))
		return -1
	}
	order := []int{idx("kubectl pdb-blockers $NODES --drain-timeout 1h"), idx("kubectl gang-drain run $NODES"),
		idx("sudo kubeadm reset --force"), idx("sudo apt-mark unhold kubeadm kubelet kubectl &&"), idx("sudo kubeadm join "),
		idx("kubectl gpu-validate nodes $NODES --kubelet-version v1.36"), idx("kubectl gang-drain restore $NODES"), idx("kubectl skew verify --baseline preflight-1.36.yaml --pool train=v1.36")}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Errorf("pool commands out of order at %d: %v\n%s", i, order, strings.Join(np, "\n"))
		}
	}
}

// A pool without GPU nodes is drained with kubectl drain, one node at a
// time, and uncordoned.
func TestCommandsPlainDrain(t *testing.T) {
	zero := 0
	pl := pool("cpu", "v1.35.4")
	pl.GPUNodes = &zero
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.36.1"}, Components: []Component{comp(KindAPIServer, "kube-apiserver-cp-0", "v1.36.1")},
		Pools: []Pool{pl}, Platform: &Platform{ControlPlanePods: 1}}
	p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := allCommands(p)
	if !strings.Contains(c, `kubectl drain "$NODE" --ignore-daemonsets --delete-emptydir-data --timeout=1h`) ||
		!strings.Contains(c, `kubectl uncordon "$NODE"`) || strings.Contains(c, "gang-drain") || strings.Contains(c, "gpu-validate") {
		t.Errorf("commands:\n%s", c)
	}
	// No hop: the pool step records its own pre-flight evidence first.
	if !strings.HasPrefix(c, "kubectl skew preflight --target v1.36 --save preflight-1.36.yaml\n") {
		t.Errorf("no pre-flight before the only pool step:\n%s", c)
	}
}

// A managed control plane has no etcd, apiservers or controllers step:
// one control-plane step per hop says the provider does them.
func TestCommandsManaged(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.34.2-eks-1a2b3c4"},
		Pools: []Pool{{Name: "gpu-a", Label: labelEKSNodegroup, Nodes: 4, Versions: []VersionCount{{Version: "v1.31.9-eks-5b6c7d8", Nodes: 4}}},
			{Name: "spot", Label: "karpenter.sh/nodepool", Nodes: 1, Versions: []VersionCount{{Version: "v1.34.2-eks-5b6c7d8", Nodes: 1}}}},
		Platform: &Platform{ProviderIDs: map[string]int{"aws": 4}, Labels: map[string]int{labelEKSNodegroup: 4}, Region: "us-west-2", Zones: []string{"us-west-2a"}}}
	p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Provider.Provider != ProviderEKS {
		t.Fatalf("provider %+v", p.Provider)
	}
	ph := stepsByPhase(p)
	if len(ph[PhaseEtcd])+len(ph[PhaseAPIServers])+len(ph[PhaseControllers]) != 0 || len(ph[PhaseControlPlane]) != 2 {
		t.Fatalf("phases %q", phases(p))
	}
	for i, s := range p.Steps {
		if s.Number != i+1 {
			t.Errorf("step %d numbered %d", i, s.Number)
		}
	}
	for _, pp := range p.Pools {
		for _, u := range pp.Upgrades {
			if s := p.Steps[u.Step-1]; s.Phase != PhaseNodePool || s.Pool != pp.Name || s.To != u.To {
				t.Errorf("pool upgrade %+v points at step %+v", u, s)
			}
		}
	}
	c := allCommands(p)
	for _, want := range []string{
		"aws eks update-cluster-version --region us-west-2 --name '<cluster-name>' --kubernetes-version 1.35",
		"aws eks list-insights --region us-west-2 --cluster-name '<cluster-name>' --filter 'categories=UPGRADE_READINESS,kubernetesVersions=1.36,statuses=ERROR,WARNING,UNKNOWN'",
		"aws eks update-nodegroup-version --region us-west-2 --cluster-name '<cluster-name>' --nodegroup-name gpu-a --kubernetes-version 1.34",
		"aws eks describe-addon --region us-west-2 --cluster-name '<cluster-name>' --addon-name coredns",
		`kubectl gang-drain run $NODES`,
		"kubectl get nodeclaims -l karpenter.sh/nodepool=spot -o wide",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("commands lack %q:\n%s", want, c)
		}
	}
	for _, bad := range []string{"etcdctl", "kubeadm", "kubectl drain", "kubectl uncordon"} {
		if strings.Contains(c, bad) {
			t.Errorf("managed plan runs %q:\n%s", bad, c)
		}
	}
	if !strings.Contains(ph[PhaseControlPlane][0].Action, "EKS upgrades the control plane") {
		t.Errorf("control-plane step %+v", ph[PhaseControlPlane][0])
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "mixed") {
		t.Errorf("EKS runs several apiservers: warnings %q", p.Warnings)
	}
}

func TestCommandsOtherProviders(t *testing.T) {
	base := Inventory{Server: ServerVersion{GitVersion: "v1.35.4"}, Pools: []Pool{{Name: "np1", Label: "kubernetes.azure.com/agentpool", Nodes: 1, Versions: []VersionCount{{Version: "v1.35.4", Nodes: 1}}}}}
	for _, tc := range []struct {
		prov     Provider
		platform *Platform
		want     []string
	}{
		{ProviderGKE, &Platform{Project: "proj"}, []string{
			"gcloud container clusters upgrade '<cluster-name>' --master --cluster-version=1.36 --location='<location>' --project=proj",
			// The pool is grouped by an AKS label here: not a GKE node pool name.
			"gcloud container clusters upgrade '<cluster-name>' --node-pool='<node-pool-name>' --cluster-version=1.36 --location='<location>' --project=proj",
			"gcloud container node-pools complete-upgrade '<node-pool-name>'"}},
		{ProviderAKS, &Platform{ResourceGroup: "MC_rg1_aks1_westeurope"}, []string{
			"az aks upgrade --resource-group rg1 --name aks1 --kubernetes-version '1.36.<patch>' --control-plane-only",
			"az aks nodepool upgrade --resource-group rg1 --cluster-name aks1 --name np1 --kubernetes-version '1.36.<patch>'"}},
		{ProviderCAPI, &Platform{ClusterAPI: []ClusterAPICluster{{Namespace: "fleet", Name: "train", Class: "gpu"}}}, []string{
			`kubectl --context '<management-context>' patch cluster.cluster.x-k8s.io train -n fleet --type merge -p '{"spec":{"topology":{"version":"v1.36.<patch>"}}}'`,
			"clusterctl describe cluster train -n fleet --kubeconfig-context '<management-context>'"}},
		{ProviderK3s, nil, []string{"sudo tar -C /var/lib/rancher/k3s/server -czf - db token", "INSTALL_K3S_CHANNEL=v1.36 INSTALL_K3S_SKIP_START=true sh -s - server", "INSTALL_K3S_CHANNEL=v1.36 INSTALL_K3S_SKIP_START=true sh -s - agent"}},
		{ProviderRKE2, nil, []string{`sudo "$BIN" etcd-snapshot save --name pre-1.36`, "INSTALL_RKE2_CHANNEL=v1.36 sh -", "sudo systemctl restart rke2-agent"}},
		{ProviderUnknown, nil, []string{"kubectl skew preflight --target v1.36", "# upgrade kube-apiserver to v1.36.<patch>"}},
	} {
		t.Run(string(tc.prov), func(t *testing.T) {
			inv := base
			inv.Platform = tc.platform
			p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{Provider: tc.prov})
			if err != nil {
				t.Fatal(err)
			}
			if p.Provider.Source != "--provider" || p.Provider.Provider != tc.prov {
				t.Errorf("provider %+v", p.Provider)
			}
			c := allCommands(p)
			for _, w := range tc.want {
				if !strings.Contains(c, w) {
					t.Errorf("commands lack %q:\n%s", w, c)
				}
			}
			managed := len(stepsByPhase(p)[PhaseControlPlane]) > 0
			if managed != tc.prov.Managed() || (managed && tc.prov != ProviderCAPI && strings.Contains(c, "etcd")) {
				t.Errorf("managed %v for %s:\n%s", managed, tc.prov, c)
			}
			for _, s := range p.Steps {
				if len(s.Commands) == 0 {
					t.Errorf("step %d (%s) has no commands", s.Number, s.Phase)
				}
			}
		})
	}
}

// GPU nodes are counted per pool from their allocatable GPUs.
func TestCollectGPUNodes(t *testing.T) {
	gpu := platformNode("g-0", "", map[string]string{labelGKENodepool: "h100"}, "v1.36.2")
	gpu.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	zeroGPU := platformNode("g-1", "", map[string]string{labelGKENodepool: "h100"}, "v1.36.2")
	zeroGPU.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}
	cpu := platformNode("c-0", "", map[string]string{labelGKENodepool: "cpu"}, "v1.36.2")
	inv, err := (&Collector{Client: fakeClient("v1.36.2", gpu, zeroGPU, cpu)}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, p := range inv.Pools {
		if p.GPUNodes == nil {
			t.Fatalf("pool %s: GPU nodes not counted", p.Name)
		}
		got[p.Name] = *p.GPUNodes
	}
	if diff := cmp.Diff(map[string]int{"h100": 1, "cpu": 0}, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// Mid-upgrade on kubeadm: one control-plane node already took kubeadm
// upgrade apply, so the others take kubeadm upgrade node and nothing runs
// apply again.
func TestCommandsKubeadmMidUpgrade(t *testing.T) {
	inv := Inventory{Server: ServerVersion{GitVersion: "v1.35.4"}, Components: []Component{
		comp(KindAPIServer, "kube-apiserver-cp-0", "v1.36.1"),
		comp(KindAPIServer, "kube-apiserver-cp-1", "v1.35.4"),
		comp(KindAPIServer, "kube-apiserver-cp-2", "v1.35.4"),
	}, Pools: []Pool{pool("train", "v1.35.4")}, Platform: &Platform{ControlPlanePods: 3}}
	p, err := MakePlan(inv, MustParseVersion("v1.36"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The OS is not shown: the apt and dnf ways are alternatives; count
	// one way.
	api := oneWay(stepsByPhase(p)[PhaseAPIServers][0], osWhen[pkgApt])
	if strings.Contains(api, "upgrade apply") || strings.Count(api, "sudo kubeadm upgrade node") != 2 ||
		!strings.Contains(api, "# then cp-1") || !strings.Contains(api, "# then cp-2") || strings.Contains(api, "cp-0") {
		t.Errorf("mid-upgrade apiserver commands:\n%s", api)
	}
}

// oneWay joins a step's blocks, of each choice only the alternative whose
// When is when.
func oneWay(s Step, when string) string {
	var out []string
	for _, b := range s.Blocks {
		if b.Choice == "" || b.When == when {
			out = append(out, b.Commands...)
		}
	}
	return strings.Join(out, "\n")
}
