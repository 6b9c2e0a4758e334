package preflight

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// ImageFact is one container the image-pinning gate looked at.
type ImageFact struct {
	// Group is control-plane (static pods), kube-system or gpu-stack.
	Group string `json:"group"`
	// Workload is namespace/kind/name.
	Workload  string `json:"workload"`
	Container string `json:"container"`
	Image     string `json:"image"`
	// Digest: the image is pinned by digest (name@sha256:...).
	Digest bool `json:"digest,omitempty"`
}

// Image groups.
const (
	ImagesControlPlane = "control-plane"
	ImagesKubeSystem   = "kube-system"
	ImagesGPUStack     = "gpu-stack"
)

// gpuAddons are the addons (addons.go) of the GPU stack; the workloads in
// the GPU Operator's namespace are its operands (driver, toolkit, device
// plugin, DCGM exporter, feature discovery, validator) and count too.
var gpuAddons = map[string]bool{"nvidia-gpu-operator": true, "nvidia-device-plugin": true, "nvidia-dra-driver": true}

// pinnedByDigest reports an image reference that names a digest.
func pinnedByDigest(image string) bool {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return strings.Contains(image, "@sha256:")
	}
	_, ok := ref.(name.Digest)
	return ok
}

func containersOf(spec corev1.PodSpec) []corev1.Container {
	return append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
}

// imagesGate lists the images of control-plane static pods (where the
// cluster shows them), kube-system workloads and the GPU stack that run
// by tag: a tag can move, and a blue/green pool pulls every image afresh
// (pin by digest before the upgrade).
func (r *Runner) imagesGate(ctx context.Context) (Gate, []ImageFact) {
	var facts []ImageFact
	add := func(group, workload string, spec corev1.PodSpec) {
		for _, c := range containersOf(spec) {
			facts = append(facts, ImageFact{Group: group, Workload: workload, Container: c.Name, Image: c.Image, Digest: pinnedByDigest(c.Image)})
		}
	}
	var notes []string
	if pods, ok := r.systemPods(ctx); ok {
		for _, p := range pods {
			// A mirror pod of a static pod, or kubeadm's labels on one
			// (component=kube-apiserver ..., tier=control-plane).
			if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror || p.Labels["tier"] == "control-plane" {
				add(ImagesControlPlane, p.Namespace+"/pod/"+p.Name, p.Spec)
			}
		}
	} else {
		notes = append(notes, "control-plane static pods not read (pods in kube-system)")
	}
	deps, err := r.deployments(ctx)
	if err != nil {
		return unknown("list deployments", err), nil
	}
	dss, err := r.daemonSets(ctx)
	if err != nil {
		return unknown("list daemonsets", err), nil
	}
	// One workload: what addon detection reads, and every container
	// (init containers too) whose image is listed.
	type workload struct {
		skew.AddonWorkload
		spec corev1.PodSpec
	}
	var ws []workload
	for _, d := range deps {
		ws = append(ws, workload{skew.AddonWorkload{Kind: "deployment", Namespace: d.Namespace, Name: d.Name, Labels: d.Labels, Containers: d.Spec.Template.Spec.Containers}, d.Spec.Template.Spec})
	}
	for _, d := range dss {
		ws = append(ws, workload{skew.AddonWorkload{Kind: "daemonset", Namespace: d.Namespace, Name: d.Name, Labels: d.Labels, Containers: d.Spec.Template.Spec.Containers}, d.Spec.Template.Spec})
	}
	gpuNS := map[string]bool{}
	for _, w := range ws {
		if m, ok := skew.DetectAddon(w.AddonWorkload); ok && m.Name == "nvidia-gpu-operator" {
			gpuNS[w.Namespace] = true
		}
	}
	for _, w := range ws {
		group := ""
		m, isAddon := skew.DetectAddon(w.AddonWorkload)
		switch {
		case isAddon && gpuAddons[m.Name], gpuNS[w.Namespace]:
			group = ImagesGPUStack
		case w.Namespace == metav1.NamespaceSystem:
			group = ImagesKubeSystem
		default:
			continue
		}
		add(group, w.Namespace+"/"+w.Kind+"/"+w.Name, w.spec)
	}
	sort.Slice(facts, func(i, j int) bool {
		if facts[i].Workload != facts[j].Workload {
			return facts[i].Workload < facts[j].Workload
		}
		return facts[i].Container < facts[j].Container
	})
	byGroup := map[string]int{}
	var lines []string
	first := ""
	for _, f := range facts {
		if f.Digest {
			continue
		}
		byGroup[f.Group]++
		lines = append(lines, fmt.Sprintf("%s %s container %s: %s", f.Group, f.Workload, f.Container, f.Image))
		if first == "" {
			first = f.Image
		}
	}
	if len(lines) == 0 {
		msg := fmt.Sprintf("every image of the control plane, kube-system and the GPU stack is pinned by digest (%s)", cli.Plural(len(facts), "image"))
		if len(facts) == 0 {
			msg = "no control-plane static pod, kube-system workload or GPU stack visible"
		}
		return Gate{Status: StatusPass, Message: msg,
			Evidence: notes, Command: "kubectl get ds,deploy -n kube-system -o custom-columns=NAME:.metadata.name,IMAGES:.spec.template.spec.containers[*].image"}, facts
	}
	return Gate{Status: StatusWarn, Message: fmt.Sprintf("%d of %d images run by tag, not digest (%d control-plane, %d kube-system, %d GPU stack): pin them where they are set before new nodes pull them",
		len(lines), len(facts), byGroup[ImagesControlPlane], byGroup[ImagesKubeSystem], byGroup[ImagesGPUStack]),
		Evidence: capLines(append(lines, notes...)), Command: "crane digest " + first}, facts
}

// verifyImages reports a container pinned by digest at the baseline that
// runs by tag now.
func verifyImages(base, now *PolicyEvidence) []Regression {
	pinned := map[string]string{}
	for _, f := range base.Images {
		if f.Digest {
			pinned[f.Workload+"\x00"+f.Container] = f.Image
		}
	}
	var out []Regression
	for _, f := range now.Images {
		was, ok := pinned[f.Workload+"\x00"+f.Container]
		if !ok || f.Digest {
			continue
		}
		out = append(out, Regression{Kind: RegImagePin, Status: StatusWarn, Object: f.Workload,
			Message: fmt.Sprintf("%s container %s was pinned (%s) and runs by tag now: %s", f.Workload, f.Container, was, f.Image),
			Command: "crane digest " + f.Image})
	}
	return out
}
