package runbooke2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations the mirror writes.
const (
	// scenarioLabel marks every object a scenario creates, so that the
	// next scenario starts from none of them.
	scenarioLabel = "runbook.gpufleet.dev/scenario"
	kwokNode      = "kwok.x-k8s.io/node"
	// noNode is a node selector no node matches: the add-on workloads
	// exist for the inventory, without pods to drain around.
	noNodeLabel = "runbook.gpufleet.dev/no-node"
)

// Mirror keeps the local control plane in step with a World: the nodes of
// its pools at their kubelet versions, kube-system's add-on workloads and
// (kubeadm) static control-plane pods.
type Mirror struct {
	Client kubernetes.Interface
	World  *World
	Name   string
	// KubeletPort, when set, is the kubelet endpoint (on 127.0.0.1) the
	// nodes name: the server of the check pods' logs (CheckPods).
	KubeletPort int
}

// Create creates the world's objects and waits for KWOK to report the
// nodes Ready.
func (m *Mirror) Create(ctx context.Context) error {
	w := m.World
	w.Lock()
	nodes := m.nodes()
	workloads := m.workloads()
	pods := m.staticPods()
	w.Unlock()
	for _, n := range nodes {
		if _, err := m.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
	}
	for _, o := range workloads {
		if err := m.apply(ctx, o); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if _, err := m.Client.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s: %w", p.Name, err)
		}
	}
	return wait(ctx, "the scenario's nodes Ready", func(ctx context.Context) (bool, error) {
		l, err := m.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + m.Name})
		if err != nil {
			return false, err
		}
		ready := 0
		for i := range l.Items {
			for _, c := range l.Items[i].Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == len(nodes), nil
	})
}

// Delete removes every object of the scenario and waits until the nodes
// are gone.
func (m *Mirror) Delete(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: scenarioLabel + "=" + m.Name}
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	if err := m.Client.CoreV1().Pods("kube-system").DeleteCollection(ctx, del, sel); err != nil {
		return err
	}
	if err := m.Client.AppsV1().DaemonSets("kube-system").DeleteCollection(ctx, del, sel); err != nil {
		return err
	}
	if err := m.Client.AppsV1().Deployments("kube-system").DeleteCollection(ctx, del, sel); err != nil {
		return err
	}
	if err := m.Client.CoreV1().Nodes().DeleteCollection(ctx, del, sel); err != nil {
		return err
	}
	return wait(ctx, "the scenario's nodes deleted", func(ctx context.Context) (bool, error) {
		l, err := m.Client.CoreV1().Nodes().List(ctx, sel)
		return err == nil && len(l.Items) == 0, err
	})
}

// Sync writes the world's versions to the cluster: each node's kubelet
// version, and the static pods' images.
func (m *Mirror) Sync(ctx context.Context) error {
	w := m.World
	w.Lock()
	want := map[string]string{}
	reset := map[string]bool{}
	for _, p := range w.Pools {
		for _, n := range p.Nodes {
			want[n.Name] = kubeletVersion(w.Provider, n.Kubelet)
			reset[n.Name] = n.Host.Reset
		}
	}
	pods := m.staticPods()
	w.Unlock()
	l, err := m.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: scenarioLabel + "=" + m.Name})
	if err != nil {
		return err
	}
	for i := range l.Items {
		n := &l.Items[i]
		// A node whose kubelet kubeadm reset stopped has no kubelet: the
		// lane takes it from KWOK (which plays every node's kubelet, the
		// nodes of its --manage-nodes-with-annotation-selector, which
		// pkg/localcluster sets to kwokNode=fake) by removing that
		// annotation, and writes the Ready condition the node lifecycle
		// controller writes once node-monitor-grace-period passes without
		// a heartbeat (Unknown, NodeStatusUnknown). While KWOK manages a
		// node, its node-initialize Stage (kwok v0.8.0
		// kustomize/stage/node/fast, no delay) matches any node whose
		// Ready is not True and sets it True again at once, before a
		// kubectl wait for Ready=Unknown pasted next can see it; KWOK
		// filters a node's events by that selector on its own side
		// (pkg/utils/informer Option.filter), so an unannotated node's
		// changes reach no Stage. Joined again, the node is KWOK's again
		// and its kubelet posts Ready True.
		managed := n.Annotations[kwokNode] == "fake"
		if reset[n.Name] && managed {
			if err := m.annotateKwok(ctx, n.Name, nil); err != nil {
				return err
			}
		}
		st := readyStatus(n)
		if (reset[n.Name] && st != corev1.ConditionUnknown) || (!reset[n.Name] && st == corev1.ConditionUnknown) {
			cond := map[string]any{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
			if !reset[n.Name] {
				cond["status"], cond["reason"], cond["message"] = "True", "KubeletReady", "kubelet is posting ready status"
			}
			patch, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{cond}}})
			if _, err := m.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				return fmt.Errorf("patch node %s: %w", n.Name, err)
			}
		}
		if _, known := reset[n.Name]; known && !reset[n.Name] && !managed {
			fake := "fake"
			if err := m.annotateKwok(ctx, n.Name, &fake); err != nil {
				return err
			}
		}
		v, ok := want[n.Name]
		if !ok || n.Status.NodeInfo.KubeletVersion == v {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"kubeletVersion": v}}})
		if _, err := m.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("patch node %s: %w", n.Name, err)
		}
	}
	for _, p := range pods {
		got, err := m.Client.CoreV1().Pods("kube-system").Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Spec.Containers[0].Image == p.Spec.Containers[0].Image {
			continue
		}
		got.Spec.Containers[0].Image = p.Spec.Containers[0].Image
		if _, err := m.Client.CoreV1().Pods("kube-system").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// annotateKwok sets node's KWOK annotation to *v, or removes it when v
// is nil (see Sync).
func (m *Mirror) annotateKwok(ctx context.Context, node string, v *string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{kwokNode: v}}})
	if _, err := m.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s: %w", node, err)
	}
	return nil
}

func (m *Mirror) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{scenarioLabel: m.Name}}
}

// nodes are the world's nodes as the provider's nodes show themselves:
// its pool label and provider ID, as skew's provider detection reads them
// (pkg/skew provider.go cites each source).
func (m *Mirror) nodes() []*corev1.Node {
	w := m.World
	var out []*corev1.Node
	for _, p := range w.Pools {
		for i, n := range p.Nodes {
			o := &corev1.Node{ObjectMeta: m.meta(n.Name)}
			o.Annotations = map[string]string{kwokNode: "fake", "node.alpha.kubernetes.io/ttl": "0"}
			l := o.Labels
			l["kubernetes.io/hostname"] = n.Name
			l["kubernetes.io/os"] = "linux"
			l["kubernetes.io/arch"] = "amd64"
			l["type"] = "kwok"
			if p.ControlPlane {
				l["node-role.kubernetes.io/control-plane"] = ""
				if p.Etcd {
					l["node-role.kubernetes.io/etcd"] = "true"
				}
			} else {
				l[p.Label] = p.Name
			}
			if p.UnitLabel != "" {
				l[p.UnitLabel] = n.Unit
			}
			res := corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("96"),
				corev1.ResourceMemory: resource.MustParse("1Ti"),
				corev1.ResourcePods:   resource.MustParse("110"),
			}
			if p.GPUs > 0 {
				res["nvidia.com/gpu"] = *resource.NewQuantity(int64(p.GPUs), resource.DecimalSI)
				// GPU Feature Discovery's labels: the product and the
				// count gpu-validate expects.
				l["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
				l["nvidia.com/gpu.count"] = fmt.Sprint(p.GPUs)
			}
			switch w.Provider {
			case "eks":
				zone := w.Region + string(rune('a'+i%2))
				l["alpha.eksctl.io/cluster-name"] = w.Cluster
				l["topology.kubernetes.io/region"] = w.Region
				l["topology.kubernetes.io/zone"] = zone
				o.Spec.ProviderID = fmt.Sprintf("aws:///%s/i-0a1b2c3d4e5f6%04d", zone, len(out))
			case "gke":
				zone := w.Location + "-a"
				l["topology.kubernetes.io/region"] = w.Location
				l["topology.kubernetes.io/zone"] = zone
				o.Spec.ProviderID = fmt.Sprintf("gce://%s/%s/%s", w.Project, zone, n.Name)
			case "aks":
				mc := fmt.Sprintf("MC_%s_%s_%s", w.ResourceGroup, w.Cluster, w.Region)
				l["kubernetes.azure.com/cluster"] = mc
				l["topology.kubernetes.io/region"] = w.Region
				o.Spec.ProviderID = fmt.Sprintf("azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/aks-%s-12345678-vmss/virtualMachines/%d",
					w.Subscription, strings.ToLower(mc), p.Name, i)
			case "capi":
				o.Annotations["cluster.x-k8s.io/cluster-name"] = w.Cluster
				o.Annotations["cluster.x-k8s.io/cluster-namespace"] = w.Namespace
			case "k3s":
				o.Spec.ProviderID = "k3s://" + n.Name
			}
			o.Status = corev1.NodeStatus{
				Capacity: res, Allocatable: res.DeepCopy(), Phase: corev1.NodeRunning,
				NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion(w.Provider, n.Kubelet), OperatingSystem: "linux", Architecture: "amd64", OSImage: p.OS},
			}
			if m.KubeletPort != 0 {
				o.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: "127.0.0.1"}}
				o.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(m.KubeletPort)
			}
			out = append(out, o)
		}
	}
	return out
}

// workload is a kube-system DaemonSet or Deployment and the field manager
// that writes it.
type workload struct {
	obj     any
	manager string
}

// workloads are the add-ons kube-system runs. EKS writes the add-ons it
// manages with the field manager eks
// (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-field-management.html);
// a self-managed add-on was applied by kubectl. GKE runs kube-dns, not
// CoreDNS (https://cloud.google.com/kubernetes-engine/docs/how-to/kube-dns).
// Without the provider's usual add-ons (AddonWorkloads false) the cluster
// runs Cilium in place of kube-proxy and the provider's CNI, and a CoreDNS
// it installed itself.
func (m *Mirror) workloads() []workload {
	w := m.World
	cp := Minor(w.ControlPlane)
	var out []workload
	add := func(ds bool, name, container, image, manager string) {
		spec := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": name}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{noNodeLabel: "true"},
				Containers: []corev1.Container{{Name: container, Image: image}}},
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": name}}
		meta := m.meta(name)
		meta.Namespace = "kube-system"
		if ds {
			out = append(out, workload{&appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta,
				Spec: appsv1.DaemonSetSpec{Selector: sel, Template: spec}}, manager})
			return
		}
		// No replicas: a pod that no node takes would stay Pending and
		// fail the pre-flight's kube-system gate.
		zero := int32(0)
		out = append(out, workload{&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: sel, Template: spec}}, manager})
	}
	if !w.AddonWorkloads {
		add(true, "cilium", "cilium-agent", "quay.io/cilium/cilium:v1.18.2", "helm")
		add(false, "coredns", "coredns", "registry.k8s.io/coredns/coredns:v1.12.1", "helm")
		return out
	}
	switch w.Provider {
	case "eks":
		ecr := "602401143452.dkr.ecr." + w.Region + ".amazonaws.com/"
		manager := func(a string) string {
			if _, ok := w.Addons[a]; ok {
				return "eks"
			}
			return "kubectl-client-side-apply"
		}
		add(true, "aws-node", "aws-node", ecr+"amazon-k8s-cni:"+eksAddonVersion("vpc-cni", cp), manager("vpc-cni"))
		add(true, "kube-proxy", "kube-proxy", ecr+"eks/kube-proxy:"+eksAddonVersion("kube-proxy", cp), manager("kube-proxy"))
		add(false, "coredns", "coredns", ecr+"eks/coredns:"+eksAddonVersion("coredns", cp), manager("coredns"))
	case "gke":
		add(false, "kube-dns", "kubedns", "gke.gcr.io/k8s-dns-kube-dns:1.26.4-gke.1", "addon-manager")
	case "k3s":
		add(false, "coredns", "coredns", "rancher/mirrored-coredns-coredns:1.12.1", "deploy@cp-0")
	case "rke2":
		add(false, "rke2-coredns-rke2-coredns", "coredns", "rancher/hardened-coredns:v1.12.1-build20250611", "helm")
	default:
		add(true, "kube-proxy", "kube-proxy", "registry.k8s.io/kube-proxy:v"+w.ControlPlane, "kubeadm")
		add(false, "coredns", "coredns", "registry.k8s.io/coredns/coredns:v1.12.1", "kubeadm")
	}
	return out
}

// apply writes one workload with server-side apply under its manager, as
// its owner would.
func (m *Mirror) apply(ctx context.Context, o workload) error {
	b, err := json.Marshal(o.obj)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: o.manager, Force: &force}
	switch v := o.obj.(type) {
	case *appsv1.DaemonSet:
		_, err = m.Client.AppsV1().DaemonSets("kube-system").Patch(ctx, v.Name, types.ApplyPatchType, b, opts)
	case *appsv1.Deployment:
		_, err = m.Client.AppsV1().Deployments("kube-system").Patch(ctx, v.Name, types.ApplyPatchType, b, opts)
	}
	if err != nil {
		return fmt.Errorf("apply kube-system workload: %w", err)
	}
	return nil
}

// staticPods are kubeadm's control-plane static pods on each
// control-plane node, labelled component=<name> and tier=control-plane
// (kubernetes cmd/kubeadm/app/util/staticpod/utils.go, ComponentPod), at
// the node's control-plane version.
func (m *Mirror) staticPods() []*corev1.Pod {
	w := m.World
	if w.Provider != "kubeadm" && w.Provider != "capi" {
		return nil
	}
	var out []*corev1.Pod
	for _, p := range w.Pools {
		if !p.ControlPlane {
			continue
		}
		for _, n := range p.Nodes {
			for _, c := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"} {
				img := "registry.k8s.io/" + c + ":v" + n.Host.ControlPlane
				if c == "etcd" {
					img = "registry.k8s.io/etcd:" + EtcdRelease + "-0"
				}
				pod := &corev1.Pod{ObjectMeta: m.meta(c + "-" + n.Name), Spec: corev1.PodSpec{
					NodeName:    n.Name,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: c, Image: img}},
				}}
				pod.Namespace = "kube-system"
				// The kubelet's mirror pod of a static pod, which drain
				// and eviction leave alone (k8s.io/api/core/v1
				// MirrorPodAnnotationKey).
				pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "runbook"}
				if c == "etcd" {
					pod.Spec.Containers[0].Command = etcdCommand(n.Name, fmt.Sprintf("10.0.0.%d", 10+len(out)/4))
				}
				pod.Labels["component"] = c
				pod.Labels["tier"] = "control-plane"
				out = append(out, pod)
			}
		}
	}
	return out
}

// etcdCommand is the command of kubeadm's etcd static pod on a node, in
// the order kubeadm writes it (kubernetes v1.37.2
// cmd/kubeadm/app/phases/etcd/local.go getEtcdCommand, arguments sorted by
// kubeadmutil.ArgumentsToCommand; the data directory of
// ClusterConfiguration etcd.local.dataDir's default, /var/lib/etcd).
func etcdCommand(node, ip string) []string {
	pki := "/etc/kubernetes/pki/etcd/"
	return []string{"etcd",
		"--advertise-client-urls=https://" + ip + ":2379",
		"--cert-file=" + pki + "server.crt",
		"--client-cert-auth=true",
		"--data-dir=/var/lib/etcd",
		"--feature-gates=InitialCorruptCheck=true",
		"--initial-advertise-peer-urls=https://" + ip + ":2380",
		"--initial-cluster=" + node + "=https://" + ip + ":2380",
		"--key-file=" + pki + "server.key",
		"--listen-client-urls=https://127.0.0.1:2379,https://" + ip + ":2379",
		"--listen-metrics-urls=http://127.0.0.1:2381",
		"--listen-peer-urls=https://" + ip + ":2380",
		"--name=" + node,
		"--peer-cert-file=" + pki + "peer.crt",
		"--peer-client-cert-auth=true",
		"--peer-key-file=" + pki + "peer.key",
		"--peer-trusted-ca-file=" + pki + "ca.crt",
		"--snapshot-count=10000",
		"--trusted-ca-file=" + pki + "ca.crt",
		"--watch-progress-notify-interval=5s",
	}
}

// wait polls cond every 200ms for up to a minute.
func wait(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readyStatus is the status of n's Ready condition, "" without one.
func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
