package preflight

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const digest = "@sha256:0c8a4b1f8b6fc4c6a67e8e45c4d4c0b8ab17bd6f0d2c6bd8c6a2bd9dcb7a3f2e"

func ds(ns, name, image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
}

func TestImagesGate(t *testing.T) {
	static := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-apiserver-cp-0", Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.36.2"}}}}
	kc := fake.NewClientset(static,
		ds("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.36.2"+digest),
		deploy("kube-system", "coredns", "registry.k8s.io/coredns/coredns:v1.14.6"),
		deploy("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v25.10.0"),
		ds("gpu-operator", "nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.6.0-ubuntu22.04"),
		deploy("web", "shop", "nginx:1.27"))
	g, facts := (&Runner{Kube: kc}).imagesGate(context.Background())
	ev := strings.Join(g.Evidence, "\n")
	if g.Status != StatusWarn || len(facts) != 5 || !strings.Contains(g.Message, "4 of 5 images run by tag, not digest (1 control-plane, 1 kube-system, 2 GPU stack)") ||
		!strings.Contains(ev, "gpu-stack gpu-operator/daemonset/nvidia-dcgm-exporter container c: nvcr.io/nvidia/k8s/dcgm-exporter") ||
		strings.Contains(ev, "kube-proxy") || strings.Contains(ev, "nginx") || !strings.HasPrefix(g.Command, "crane digest ") {
		t.Errorf("%s %s %q\n%s", g.Status, g.Message, g.Command, ev)
	}
	// kube-proxy goes back to a tag in the upgrade.
	now := append([]ImageFact(nil), facts...)
	for i := range now {
		if strings.Contains(now[i].Workload, "kube-proxy") {
			now[i].Image, now[i].Digest = "registry.k8s.io/kube-proxy:v1.37.2", false
		}
	}
	regs := verifyImages(&PolicyEvidence{Images: facts}, &PolicyEvidence{Images: now})
	if len(regs) != 1 || regs[0].Object != "kube-system/daemonset/kube-proxy" || regs[0].Status != StatusWarn {
		t.Errorf("%+v", regs)
	}
}

func TestPinnedByDigest(t *testing.T) {
	for img, want := range map[string]bool{
		"nginx:1.27": false, "nginx": false, "nginx" + digest: true, "registry.k8s.io/pause:3.10" + digest: true, "localhost:5000/x:1": false,
	} {
		if got := pinnedByDigest(img); got != want {
			t.Errorf("%s: %v", img, got)
		}
	}
}
