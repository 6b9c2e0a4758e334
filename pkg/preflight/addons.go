package preflight

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// addonMatcher recognises an addon by its workload name, a label value or
// an image path fragment (the image repository without registry or tag).
type addonMatcher struct {
	name string
	// workloads are names of Deployments or DaemonSets.
	workloads []string
	// labels are app.kubernetes.io/name, app or k8s-app values.
	labels []string
	// images are fragments of the image repository path, matched at a
	// path boundary ("cert-manager-controller" matches
	// quay.io/jetstack/cert-manager-controller).
	images []string
}

// addonMatchers are the addons the inventory looks for, by their usual
// workload names, labels and images (the upstream charts' defaults).
var addonMatchers = []addonMatcher{
	{name: skew.KindKubeProxy, workloads: []string{"kube-proxy"}, labels: []string{"kube-proxy"}, images: []string{"kube-proxy"}},
	{name: skew.KindCoreDNS, workloads: []string{"coredns", "kube-dns"}, labels: []string{"coredns", "kube-dns"}, images: []string{"coredns"}},
	{name: "cluster-autoscaler", workloads: []string{"cluster-autoscaler"}, labels: []string{"cluster-autoscaler"}, images: []string{"cluster-autoscaler"}},
	{name: "metrics-server", workloads: []string{"metrics-server"}, labels: []string{"metrics-server"}, images: []string{"metrics-server"}},
	{name: "nvidia-gpu-operator", workloads: []string{"gpu-operator"}, labels: []string{"gpu-operator"}, images: []string{"gpu-operator"}},
	{name: "nvidia-device-plugin", workloads: []string{"nvidia-device-plugin-daemonset", "nvidia-device-plugin"}, labels: []string{"nvidia-device-plugin-ds", "nvidia-device-plugin"}, images: []string{"k8s-device-plugin"}},
	{name: "nvidia-dra-driver", labels: []string{"nvidia-dra-driver-gpu"}, images: []string{"k8s-dra-driver-gpu", "k8s-dra-driver"}},
	{name: "kueue", workloads: []string{"kueue-controller-manager"}, images: []string{"kueue"}},
	{name: "jobset", workloads: []string{"jobset-controller-manager"}, images: []string{"jobset"}},
	{name: "cert-manager", workloads: []string{"cert-manager"}, labels: []string{"cert-manager"}, images: []string{"cert-manager-controller"}},
	{name: "ingress-nginx", workloads: []string{"ingress-nginx-controller"}, labels: []string{"ingress-nginx"}, images: []string{"ingress-nginx/controller"}},
	{name: "cilium", workloads: []string{"cilium"}, labels: []string{"cilium-agent"}, images: []string{"cilium/cilium"}},
	{name: "calico", workloads: []string{"calico-node"}, labels: []string{"calico-node"}, images: []string{"calico/node"}},
	{name: "karpenter", workloads: []string{"karpenter"}, labels: []string{"karpenter"}, images: []string{"karpenter/controller"}},
	{name: "kyverno", workloads: []string{"kyverno-admission-controller", "kyverno"}, labels: []string{"kyverno"}, images: []string{"kyverno/kyverno"}},
	{name: "gatekeeper", workloads: []string{"gatekeeper-controller-manager"}, labels: []string{"gatekeeper"}, images: []string{"gatekeeper"}},
}

// imageRepo returns the repository path of an image without registry host,
// tag or digest: registry.k8s.io/kueue/kueue:v0.17.0 -> kueue/kueue.
func imageRepo(image string) string {
	s := image
	if i := strings.Index(s, "@"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndex(s, ":"); i >= 0 && !strings.Contains(s[i:], "/") {
		s = s[:i]
	}
	if i := strings.Index(s, "/"); i >= 0 && strings.ContainsAny(s[:i], ".:") {
		s = s[i+1:]
	}
	return s
}

// imageMatches reports whether frag matches repo at path boundaries.
func imageMatches(repo, frag string) bool {
	if repo == frag || strings.HasSuffix(repo, "/"+frag) {
		return true
	}
	return false
}

// workloadInfo is what the inventory needs of a Deployment or DaemonSet.
type workloadInfo struct {
	kind, namespace, name string
	labels                map[string]string
	containers            []corev1.Container
}

// findAddon returns the addon a workload is and the image it runs.
func findAddon(w workloadInfo) (string, string, bool) {
	lbl := []string{w.labels["app.kubernetes.io/name"], w.labels["app"], w.labels["k8s-app"]}
	for _, m := range addonMatchers {
		for _, c := range w.containers {
			repo := imageRepo(c.Image)
			for _, f := range m.images {
				if imageMatches(repo, f) {
					return m.name, c.Image, true
				}
			}
		}
	}
	for _, m := range addonMatchers {
		hit := false
		for _, n := range m.workloads {
			hit = hit || w.name == n
		}
		for _, l := range m.labels {
			for _, v := range lbl {
				hit = hit || (v != "" && v == l)
			}
		}
		if hit && len(w.containers) > 0 {
			return m.name, w.containers[0].Image, true
		}
	}
	return "", "", false
}

// findAddons runs findAddon over workloads and sorts the result.
func findAddons(ws []workloadInfo) []Addon {
	var out []Addon
	for _, w := range ws {
		name, img, ok := findAddon(w)
		if !ok {
			continue
		}
		out = append(out, Addon{Name: name, Namespace: w.namespace, Workload: w.kind + "/" + w.name, Image: img, Version: skew.ImageTag(img)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Workload < b.Workload
	})
	return out
}
