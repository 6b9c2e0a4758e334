//go:build linux

package localcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodField(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ring-r1-step-1", Namespace: "argo", UID: "u-1",
		Labels: map[string]string{"workflows.argoproj.io/workflow": "ring-r1"}}, Spec: corev1.PodSpec{NodeName: "fleet-exec"}}
	for path, want := range map[string]string{
		"metadata.name":      "ring-r1-step-1",
		"metadata.namespace": "argo",
		"metadata.uid":       "u-1",
		"spec.nodeName":      "fleet-exec",
		"metadata.labels['workflows.argoproj.io/workflow']": "ring-r1",
		"status.podIP":  "192.0.2.7",
		"status.hostIP": "192.0.2.7",
	} {
		if got, ok := podField(p, path, "192.0.2.7"); !ok || got != want {
			t.Errorf("%s = %q, %v; want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"metadata.labels['absent']", "status.phase", "metadata.labels"} {
		if got, ok := podField(p, path, "192.0.2.7"); ok {
			t.Errorf("%s = %q, want no value", path, got)
		}
	}
}
