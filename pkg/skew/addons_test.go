package skew

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func workload(kind, name, image string) AddonWorkload {
	return AddonWorkload{Kind: kind, Namespace: "ns", Name: name, Containers: []corev1.Container{{Name: "c", Image: image}}}
}

// TestDetectAddonRealImages detects each addon by the image its project
// publishes, as the project's own chart or manifest writes it (the source
// of each name is in the comment beside it).
func TestDetectAddonRealImages(t *testing.T) {
	for _, tc := range []struct {
		w             AddonWorkload
		name, version string
		primary       bool
	}{
		// NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/values.yaml:
		// operator and validator nvcr.io/nvidia + gpu-operator; devicePlugin
		// and gfd nvcr.io/nvidia + k8s-device-plugin v0.20.0.
		{workload("deployment", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v26.7.0"), "nvidia-gpu-operator", "v26.7.0", true},
		{workload("daemonset", "nvidia-operator-validator", "nvcr.io/nvidia/gpu-operator:v26.7.0"), "nvidia-gpu-operator", "v26.7.0", false},
		{workload("daemonset", "nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"), "nvidia-device-plugin", "v0.20.0", true},
		{workload("daemonset", "gpu-feature-discovery", "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"), "nvidia-device-plugin", "v0.20.0", false},
		// NVIDIA/k8s-device-plugin v0.20.0 deployments/static/nvidia-device-plugin.yml.
		{workload("daemonset", "nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.1-ubi9"), "nvidia-device-plugin", "v0.17.1-ubi9", true},
		// kubernetes-sigs/dra-driver-nvidia-gpu main, charts' values.yaml.
		{workload("daemonset", "dra-driver-nvidia-gpu-kubelet-plugin", "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v25.12.0"), "nvidia-dra-driver", "v25.12.0", false},
		// Released Kueue, JobSet and LWS images (registry.k8s.io promotion).
		{workload("deployment", "kueue-controller-manager", "registry.k8s.io/kueue/kueue:v0.14.1"), "kueue", "v0.14.1", true},
		{workload("deployment", "jobset-controller-manager", "registry.k8s.io/jobset/jobset:v0.12.0"), "jobset", "v0.12.0", true},
		{workload("deployment", "lws-controller-manager", "registry.k8s.io/lws/lws:v0.10.0"), "leaderworkerset", "v0.10.0", true},
		// aws/karpenter-provider-aws charts/karpenter at v1.14.0: repository,
		// tag and digest rendered as repository:tag@digest.
		{workload("deployment", "karpenter", "public.ecr.aws/karpenter/controller:1.13.0@sha256:ea731b0cd813add8b2947a76bfe861c38069d85922b01d0c1647d1466279b7fe"), "karpenter", "1.13.0", true},
		{workload("daemonset", "cilium", "quay.io/cilium/cilium:v1.18.14"), "cilium", "v1.18.14", true},
		{workload("daemonset", "calico-node", "docker.io/calico/node:v3.29.3"), "calico", "v3.29.3", true},
		{workload("daemonset", "calico-node", "quay.io/calico/node:v3.31.0"), "calico", "v3.31.0", true},
		// aws/amazon-vpc-cni-k8s config/master/aws-k8s-cni.yaml; the EKS
		// add-on's tags carry -eksbuild.N.
		{workload("daemonset", "aws-node", "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.23.1"), "aws-vpc-cni", "v1.23.1", true},
		{workload("daemonset", "aws-node", "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.19.2-eksbuild.1"), "aws-vpc-cni", "v1.19.2-eksbuild.1", true},
		// CSI drivers: aws-ebs-csi-driver chart values, the GCP PD and Azure
		// Disk drivers' READMEs.
		{workload("deployment", "ebs-csi-controller", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.64.0"), "aws-ebs-csi-driver", "v1.64.0", true},
		{workload("deployment", "csi-gce-pd-controller", "registry.k8s.io/cloud-provider-gcp/gcp-compute-persistent-disk-csi-driver:v1.20.0"), "gcp-pd-csi-driver", "v1.20.0", true},
		{workload("deployment", "csi-azuredisk-controller", "mcr.microsoft.com/oss/v2/kubernetes-csi/azuredisk-csi:v1.34.5"), "azuredisk-csi-driver", "v1.34.5", true},
		{workload("deployment", "kyverno-admission-controller", "ghcr.io/kyverno/kyverno:v1.15.1"), "kyverno", "v1.15.1", true},
		// open-policy-agent/gatekeeper charts/gatekeeper/values.yaml.
		{workload("deployment", "gatekeeper-controller-manager", "openpolicyagent/gatekeeper:v3.23.0"), "gatekeeper", "v3.23.0", true},
		// Istio's pilot on Docker Hub, gcr.io/istio-release and, from 1.30,
		// registry.istio.io/release (1.30 release announcement).
		{workload("deployment", "istiod", "docker.io/istio/pilot:1.29.0"), "istio", "1.29.0", true},
		{workload("deployment", "istiod", "gcr.io/istio-release/pilot:1.26.3-distroless"), "istio", "1.26.3-distroless", true},
		{workload("deployment", "istiod", "registry.istio.io/release/pilot:1.30.0"), "istio", "1.30.0", true},
		{workload("deployment", "cert-manager", "quay.io/jetstack/cert-manager-controller:v1.21.0"), "cert-manager", "v1.21.0", true},
		{workload("daemonset", "kube-proxy", "registry.k8s.io/kube-proxy:v1.36.2"), KindKubeProxy, "v1.36.2", true},
		{workload("deployment", "coredns", "registry.k8s.io/coredns/coredns:v1.12.1"), KindCoreDNS, "v1.12.1", true},
	} {
		m, ok := DetectAddon(tc.w)
		if !ok || m.Name != tc.name || m.Version != tc.version || !m.ByImage || m.Primary != tc.primary || !m.Judged {
			t.Errorf("%s %s: got %+v %v, want %s %s primary=%v", tc.w.Name, tc.w.Containers[0].Image, m, ok, tc.name, tc.version, tc.primary)
		}
	}
}

// TestDetectAddonByNameAndNot: an image mirrored under another path is
// found by its workload's name or labels and the container that runs it;
// look-alike paths and other projects' images are not addons.
func TestDetectAddonByNameAndNot(t *testing.T) {
	w := AddonWorkload{Kind: "deployment", Name: "kueue-controller-manager", Containers: []corev1.Container{
		{Name: "kube-rbac-proxy", Image: "registry.k8s.io/kubebuilder/kube-rbac-proxy:v0.16.0"},
		{Name: "manager", Image: "mirror.example:5000/ml/kueue-controller:v0.14.1"}}}
	if m, ok := DetectAddon(w); !ok || m.Name != "kueue" || m.ByImage || m.Version != "v0.14.1" || !m.Primary {
		t.Errorf("mirrored kueue: %+v %v", m, ok)
	}
	w = AddonWorkload{Kind: "daemonset", Name: "gpu-dp", Labels: map[string]string{"app.kubernetes.io/name": "nvidia-device-plugin"},
		Containers: []corev1.Container{{Name: "nvidia-device-plugin-ctr", Image: "harbor.local/nv/dp@sha256:ea731b0cd813add8b2947a76bfe861c38069d85922b01d0c1647d1466279b7fe"}}}
	if m, ok := DetectAddon(w); !ok || m.Name != "nvidia-device-plugin" || m.Version != "" {
		t.Errorf("device plugin by label, pinned by digest: %+v %v", m, ok)
	}
	for _, img := range []string{
		"example.com/team/not-kueue:v1",
		"metallb/controller:v0.9.6", // not karpenter/controller
		"quay.io/coreos/kube-rbac-proxy:v0.4.1",
		"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.9.0",
		"602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init:v1.23.1",
	} {
		if m, ok := DetectAddon(workload("deployment", "x", img)); ok {
			t.Errorf("%s: detected as %+v", img, m)
		}
	}
	if m, ok := DetectAddon(workload("deployment", "cloud-controller-manager", "registry.k8s.io/cloud-provider-aws/cloud-controller-manager:v1.36.0")); !ok || m.Judged {
		t.Errorf("cloud-controller-manager: in the inventory, not judged by the table: %+v %v", m, ok)
	}
}

func TestAddonForChart(t *testing.T) {
	for _, tc := range []struct{ chart, version, app, name, want string }{
		{"gpu-operator", "v25.10.1", "v25.10.1", "nvidia-gpu-operator", "v25.10.1"},
		{"kyverno", "3.5.1", "v1.15.1", "kyverno", "v1.15.1"},
		{"lws", "0.1.0", "v0.10.0", "leaderworkerset", "v0.10.0"},
		{"aws-ebs-csi-driver", "2.64.0", "1.64.0", "aws-ebs-csi-driver", "1.64.0"},
		{"tigera-operator", "v3.30.2", "v1.38.3", "calico", "v3.30.2"},
		{"kueue", "0.14.1", "", "kueue", "0.14.1"},
	} {
		name, v, ok := AddonForChart(tc.chart, tc.version, tc.app)
		if !ok || name != tc.name || v != tc.want {
			t.Errorf("AddonForChart(%s %s %s) = %s %s %v, want %s %s", tc.chart, tc.version, tc.app, name, v, ok, tc.name, tc.want)
		}
	}
	if _, _, ok := AddonForChart("web", "1.0.0", "1.0.0"); ok {
		t.Error("a chart of no known addon was taken for one")
	}
}

// corpusDir is the shared corpus of real manifests, read in place: beside
// the project root (../shared/corpus), or one level further up from a
// worktree of it.
func corpusDir(t *testing.T) string {
	t.Helper()
	for _, dir := range []string{filepath.Join("..", "..", "..", "shared", "corpus"), filepath.Join("..", "..", "..", "..", "shared", "corpus")} {
		if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
			return dir
		}
	}
	t.Skip("no manifest corpus beside the project")
	return ""
}

// TestDetectAddonCorpus runs detection over every Deployment and DaemonSet
// of the corpus's static manifests: ingress-nginx's controller (image
// repository:tag@digest) and metrics-server (an -amd64 image found by its
// Deployment's name) are found; flannel, MetalLB, the dashboard and
// kube-prometheus's workloads are not addons the table knows.
func TestDetectAddonCorpus(t *testing.T) {
	dir := corpusDir(t)
	files := []string{
		"public/ingress-nginx-controller-v0.34.1/deploy/static/provider/cloud/deploy.yaml",
		"public/ingress-nginx-controller-v0.34.1/deploy/static/provider/baremetal/deploy.yaml",
		"public/metrics-server-v0.3.6/deploy/1.8+/metrics-server-deployment.yaml",
		"public/flannel-v0.11.0/Documentation/kube-flannel.yml",
		"public/metallb-v0.9.6/manifests/metallb.yaml",
		"public/dashboard-v1.10.1/src/deploy/recommended/kubernetes-dashboard.yaml",
	}
	prom, _ := filepath.Glob(filepath.Join(dir, "public/kube-prometheus-v0.1.0/manifests/*-d*.yaml"))
	for _, p := range prom {
		rel, _ := filepath.Rel(dir, p)
		files = append(files, rel)
	}
	var got []string
	workloads := 0
	for _, f := range files {
		for _, w := range readWorkloads(t, filepath.Join(dir, f)) {
			workloads++
			if m, ok := DetectAddon(w); ok {
				got = append(got, m.Name+" "+m.Version+" "+w.Name+" "+map[bool]string{true: "image", false: "name"}[m.ByImage])
			}
		}
	}
	sort.Strings(got)
	want := []string{
		"ingress-nginx v0.34.1 ingress-nginx-controller image",
		"ingress-nginx v0.34.1 ingress-nginx-controller image",
		"metrics-server v0.3.6 metrics-server name",
	}
	if d := cmp.Diff(want, got); d != "" || workloads < 12 {
		t.Errorf("%d workloads read; detected (-want +got):\n%s", workloads, d)
	}
}

// TestAddonForChartCorpus: the DRA driver's chart as published at v25.3.0
// names its addon, and the image its templates render
// (repository:v<appVersion>) is detected as the same addon and version.
func TestAddonForChartCorpus(t *testing.T) {
	chartDir := filepath.Join(corpusDir(t), "public/k8s-dra-driver-gpu-v25.3.0/deployments/helm/nvidia-dra-driver-gpu")
	var meta struct{ Name, Version, AppVersion string }
	var values struct {
		Image struct{ Repository string } `json:"image"`
	}
	for f, into := range map[string]any{"Chart.yaml": &meta, "values.yaml": &values} {
		b, err := os.ReadFile(filepath.Join(chartDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatal(f, err)
		}
	}
	name, v, ok := AddonForChart(meta.Name, meta.Version, meta.AppVersion)
	if !ok || name != "nvidia-dra-driver" || v != "25.3.0" {
		t.Errorf("chart %+v: %s %s %v", meta, name, v, ok)
	}
	img := values.Image.Repository + ":v" + meta.AppVersion
	m, ok := DetectAddon(workload("daemonset", "nvidia-dra-driver-gpu-kubelet-plugin", img))
	if !ok || m.Name != "nvidia-dra-driver" || m.Version != "v25.3.0" {
		t.Errorf("image %s: %+v %v", img, m, ok)
	}
}

// readWorkloads reads the Deployments and DaemonSets of a manifest file,
// whatever their apps API version.
func readWorkloads(t *testing.T, path string) []AddonWorkload {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []AddonWorkload
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []corev1.Container `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if o.Kind == "Deployment" || o.Kind == "DaemonSet" {
			out = append(out, AddonWorkload{Kind: strings.ToLower(o.Kind), Name: o.Metadata.Name, Labels: o.Metadata.Labels, Containers: o.Spec.Template.Spec.Containers})
		}
	}
}
