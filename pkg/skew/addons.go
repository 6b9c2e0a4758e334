package skew

import (
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// AddonWorkload is what addon detection reads of a Deployment or DaemonSet.
type AddonWorkload struct {
	// Kind is deployment or daemonset.
	Kind      string
	Namespace string
	Name      string
	Labels    map[string]string
	// Containers are the pod template's containers (init containers are
	// not looked at: no addon here runs its version in one).
	Containers []corev1.Container
}

// AddonMatch is an addon found on a workload.
type AddonMatch struct {
	// Name is the addon as the compatibility table names it.
	Name string
	// Image is the image the addon was found by (by name or labels: the
	// container that runs it), Version that image's tag; "" for an image
	// pinned by digest alone.
	Image   string
	Version string
	// ByImage is true when the image's repository named the addon, false
	// when the workload's name or labels did.
	ByImage bool
	// Primary is true when the workload is the one the project names for
	// the addon: several workloads may run one image (the GPU Operator's
	// validator runs the operator's, GPU Feature Discovery the device
	// plugin's).
	Primary bool
	// Judged is false for the parts the skew rules judge rather than the
	// compatibility table (cloud-controller-manager, konnectivity-agent):
	// the kube-system inventory lists them, the addons gate does not.
	Judged bool
}

// addonSpec says how an addon is recognised.
type addonSpec struct {
	name string
	// images are image repositories (without tag or digest), matched as a
	// suffix at a path boundary of the full name with its registry:
	// "kueue/kueue" matches registry.k8s.io/kueue/kueue and a mirror's
	// mirror.example/kueue/kueue; an entry with a registry host matches
	// that registry only.
	images []string
	// charts are the Helm chart names the project publishes; the addon's
	// version is the chart's appVersion unless chartVersion says the
	// chart's own version is the release (tigera-operator is numbered as
	// the Calico release it installs).
	charts       []string
	chartVersion bool
	// workloads and labels (app.kubernetes.io/name, app, k8s-app) find an
	// addon whose image was mirrored under another path.
	workloads []string
	labels    []string
	// container names the container that runs the addon, for a workload
	// found by name or labels.
	container string
	// inventoryOnly: listed by the kube-system inventory, not judged by
	// the addons gate.
	inventoryOnly bool
}

// addonSpecs are the addons detection knows, with the images, chart names
// and workload names their projects publish. Sources (each at the tag or
// revision read):
//   - NVIDIA GPU Operator: deployments/gpu-operator/values.yaml and
//     templates/operator.yaml (operator nvcr.io/nvidia/gpu-operator,
//     Deployment gpu-operator; devicePlugin nvcr.io/nvidia/k8s-device-plugin),
//     github.com/NVIDIA/gpu-operator v26.7.0.
//   - NVIDIA k8s-device-plugin: deployments/static/nvidia-device-plugin.yml
//     (DaemonSet nvidia-device-plugin-daemonset, label name
//     nvidia-device-plugin-ds) and the nvidia-device-plugin chart,
//     github.com/NVIDIA/k8s-device-plugin v0.20.0.
//   - NVIDIA DRA driver: deployments/helm/nvidia-dra-driver-gpu (image
//     nvcr.io/nvidia/k8s-dra-driver-gpu) at github.com/NVIDIA/k8s-dra-driver-gpu
//     v25.12.0, renamed dra-driver-nvidia-gpu (image
//     registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu) on its main
//     branch in kubernetes-sigs/dra-driver-nvidia-gpu.
//   - Kueue, JobSet, LeaderWorkerSet: charts/kueue, charts/jobset,
//     charts/lws; released images registry.k8s.io/{kueue/kueue,
//     jobset/jobset,lws/lws} (kubernetes-sigs, v0.19.2, v0.12.0, v0.10.0).
//   - Cilium quay.io/cilium/cilium (DaemonSet cilium, container
//     cilium-agent); Calico calico/node (docker.io before 3.30, quay.io
//     after; DaemonSet calico-node), chart tigera-operator.
//   - AWS VPC CNI: config/master/aws-k8s-cni.yaml (DaemonSet aws-node,
//     image .../amazon-k8s-cni), chart aws-vpc-cni, aws/amazon-vpc-cni-k8s
//     v1.23.x.
//   - CSI drivers: public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver (chart
//     aws-ebs-csi-driver), registry.k8s.io/cloud-provider-gcp/
//     gcp-compute-persistent-disk-csi-driver, mcr.microsoft.com/oss/
//     [v2/]kubernetes-csi/azuredisk-csi (chart azuredisk-csi-driver).
//   - Kyverno ghcr.io or reg.kyverno.io kyverno/kyverno (chart kyverno);
//     Gatekeeper openpolicyagent/gatekeeper (chart gatekeeper); Istio
//     pilot in docker.io/istio, gcr.io/istio-release and, from 1.30,
//     registry.istio.io/release (chart istiod, Deployment istiod).
//   - Karpenter public.ecr.aws/karpenter/controller (chart karpenter,
//     rendered as repository:tag@digest); cert-manager
//     quay.io/jetstack/cert-manager-controller.
var addonSpecs = []addonSpec{
	{name: KindKubeProxy, images: []string{"kube-proxy"}, workloads: []string{"kube-proxy"}, labels: []string{"kube-proxy"}, container: "kube-proxy"},
	{name: KindCoreDNS, images: []string{"coredns"}, charts: []string{"coredns"}, workloads: []string{"coredns", "kube-dns"}, labels: []string{"coredns", "kube-dns"}, container: "coredns"},
	{name: KindCloudControllerManager, workloads: []string{"cloud-controller-manager"}, inventoryOnly: true},
	{name: "konnectivity-agent", images: []string{"kas-network-proxy/proxy-agent"}, workloads: []string{"konnectivity-agent"}, labels: []string{"konnectivity-agent"}, inventoryOnly: true},
	{name: "cluster-autoscaler", images: []string{"cluster-autoscaler"}, charts: []string{"cluster-autoscaler"}, workloads: []string{"cluster-autoscaler"}, labels: []string{"cluster-autoscaler"}},
	{name: "metrics-server", images: []string{"metrics-server"}, charts: []string{"metrics-server"}, workloads: []string{"metrics-server"}, labels: []string{"metrics-server"}, container: "metrics-server"},
	{name: "nvidia-gpu-operator", images: []string{"nvidia/gpu-operator"}, charts: []string{"gpu-operator"}, workloads: []string{"gpu-operator"}, labels: []string{"gpu-operator"}, container: "gpu-operator"},
	{name: "nvidia-device-plugin", images: []string{"nvidia/k8s-device-plugin"}, charts: []string{"nvidia-device-plugin"}, workloads: []string{"nvidia-device-plugin-daemonset"}, labels: []string{"nvidia-device-plugin-ds", "nvidia-device-plugin"}, container: "nvidia-device-plugin-ctr"},
	{name: "nvidia-dra-driver", images: []string{"nvidia/k8s-dra-driver-gpu", "dra-driver-nvidia/dra-driver-nvidia-gpu"}, charts: []string{"nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu"}, labels: []string{"nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu"}},
	{name: "kueue", images: []string{"kueue/kueue"}, charts: []string{"kueue"}, workloads: []string{"kueue-controller-manager"}, container: "manager"},
	{name: "jobset", images: []string{"jobset/jobset"}, charts: []string{"jobset"}, workloads: []string{"jobset-controller-manager"}, container: "manager"},
	{name: "leaderworkerset", images: []string{"lws/lws"}, charts: []string{"lws"}, workloads: []string{"lws-controller-manager"}, container: "manager"},
	{name: "cert-manager", images: []string{"jetstack/cert-manager-controller"}, charts: []string{"cert-manager"}, workloads: []string{"cert-manager"}, labels: []string{"cert-manager"}, container: "cert-manager-controller"},
	{name: "ingress-nginx", images: []string{"ingress-nginx/controller"}, charts: []string{"ingress-nginx"}, workloads: []string{"ingress-nginx-controller"}, labels: []string{"ingress-nginx"}, container: "controller"},
	{name: "cilium", images: []string{"cilium/cilium"}, charts: []string{"cilium"}, workloads: []string{"cilium"}, labels: []string{"cilium-agent"}, container: "cilium-agent"},
	{name: "calico", images: []string{"calico/node"}, charts: []string{"tigera-operator"}, chartVersion: true, workloads: []string{"calico-node"}, labels: []string{"calico-node"}, container: "calico-node"},
	{name: "aws-vpc-cni", images: []string{"amazon-k8s-cni"}, charts: []string{"aws-vpc-cni"}, workloads: []string{"aws-node"}, labels: []string{"aws-node"}, container: "aws-node"},
	{name: "aws-ebs-csi-driver", images: []string{"aws-ebs-csi-driver"}, charts: []string{"aws-ebs-csi-driver"}, workloads: []string{"ebs-csi-controller"}, container: "ebs-plugin"},
	{name: "gcp-pd-csi-driver", images: []string{"gcp-compute-persistent-disk-csi-driver"}, charts: []string{"gcp-compute-persistent-disk-csi-driver"}, workloads: []string{"csi-gce-pd-controller"}, container: "gce-pd-driver"},
	{name: "azuredisk-csi-driver", images: []string{"kubernetes-csi/azuredisk-csi"}, charts: []string{"azuredisk-csi-driver"}, workloads: []string{"csi-azuredisk-controller"}, container: "azuredisk"},
	{name: "karpenter", images: []string{"karpenter/controller"}, charts: []string{"karpenter"}, workloads: []string{"karpenter"}, labels: []string{"karpenter"}, container: "controller"},
	{name: "kyverno", images: []string{"kyverno/kyverno"}, charts: []string{"kyverno"}, workloads: []string{"kyverno-admission-controller", "kyverno"}, labels: []string{"kyverno"}, container: "kyverno"},
	{name: "gatekeeper", images: []string{"openpolicyagent/gatekeeper"}, charts: []string{"gatekeeper"}, workloads: []string{"gatekeeper-controller-manager"}, labels: []string{"gatekeeper"}, container: "manager"},
	{name: "istio", images: []string{"istio/pilot", "istio-release/pilot", "registry.istio.io/release/pilot"}, charts: []string{"istiod"}, workloads: []string{"istiod"}, labels: []string{"istiod"}, container: "discovery"},
}

// ImageRepository returns an image's full repository name, registry
// included, without tag or digest and with Docker Hub's defaults filled
// in: quay.io/cilium/cilium:v1.18.2@sha256:… is quay.io/cilium/cilium,
// istio/pilot:1.29.0 is index.docker.io/istio/pilot. An image that does
// not parse is returned stripped of tag and digest as written.
func ImageRepository(image string) string {
	image = strings.TrimSpace(image)
	if ref, err := name.ParseReference(image, name.WeakValidation); err == nil {
		return strings.ToLower(ref.Context().Name())
	}
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if slash, colon := strings.LastIndexByte(image, '/'), strings.LastIndexByte(image, ':'); colon > slash {
		image = image[:colon]
	}
	return strings.ToLower(image)
}

// repoMatches reports whether pattern names repo: equal, or a suffix of it
// that starts at a path boundary.
func repoMatches(repo, pattern string) bool {
	return repo == pattern || strings.HasSuffix(repo, "/"+pattern)
}

// DetectAddon returns the addon a Deployment or DaemonSet runs: by any
// container's image first, then by the workload's name or labels (an
// image mirrored under another path).
func DetectAddon(w AddonWorkload) (AddonMatch, bool) {
	for _, s := range addonSpecs {
		for _, c := range w.Containers {
			repo := ImageRepository(c.Image)
			for _, p := range s.images {
				if repoMatches(repo, p) {
					return AddonMatch{Name: s.name, Image: c.Image, Version: ImageTag(c.Image), ByImage: true,
						Primary: slices.Contains(s.workloads, w.Name), Judged: !s.inventoryOnly}, true
				}
			}
		}
	}
	if len(w.Containers) == 0 {
		return AddonMatch{}, false
	}
	lbl := []string{w.Labels["app.kubernetes.io/name"], w.Labels["app"], w.Labels["k8s-app"]}
	for _, s := range addonSpecs {
		primary := slices.Contains(s.workloads, w.Name)
		hit := primary
		for _, l := range s.labels {
			hit = hit || slices.Contains(lbl, l)
		}
		if !hit {
			continue
		}
		img := w.Containers[0].Image
		for _, c := range w.Containers {
			if s.container != "" && c.Name == s.container {
				img = c.Image
			}
		}
		return AddonMatch{Name: s.name, Image: img, Version: ImageTag(img), Primary: primary, Judged: !s.inventoryOnly}, true
	}
	return AddonMatch{}, false
}

// AddonForChart returns the addon a Helm chart installs and its version:
// the chart's appVersion (what most charts number apart from themselves,
// kyverno 3.x installs Kyverno 1.x), else the chart's version.
func AddonForChart(chart, chartVersion, appVersion string) (name, version string, ok bool) {
	for _, s := range addonSpecs {
		if !slices.Contains(s.charts, chart) || s.inventoryOnly {
			continue
		}
		if appVersion == "" || s.chartVersion {
			return s.name, chartVersion, true
		}
		return s.name, appVersion, true
	}
	return "", "", false
}
