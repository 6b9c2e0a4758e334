package eviction

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// NodeStatus keeps what a node-health check reads; without it the
// snapshot stays slim.
func TestLoadNodeStatus(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}},
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.36.2"},
		Images:     []corev1.ContainerImage{{Names: []string{"big"}}},
	}}
	for _, keep := range []bool{false, true} {
		s, err := Load(context.Background(), fake.NewClientset(n), LoadOptions{NodeStatus: keep})
		if err != nil || len(s.Nodes) != 1 {
			t.Fatalf("Load: %v, %d nodes", err, len(s.Nodes))
		}
		got := s.Nodes[0].Status
		if keep != (len(got.Conditions) == 1 && got.NodeInfo.KubeletVersion == "v1.36.2") || len(got.Images) != 0 {
			t.Errorf("NodeStatus %v: status %+v", keep, got)
		}
	}
}

// NodeAnnotations and KeepPods keep what a caller judges from the same
// read: the named node annotations, and one namespace's pods whole.
func TestLoadKeepsForOtherReaders(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: map[string]string{"cluster.x-k8s.io/cluster-name": "prod", "other": "x"}}}
	sys := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-0",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "coredns:v1"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "coredns", RestartCount: 3}}}}
	app := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "web-0"}}
	s, err := Load(context.Background(), fake.NewClientset(n, sys, app), LoadOptions{NodeAnnotations: []string{"cluster.x-k8s.io/cluster-name"}, KeepPods: "kube-system"})
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Nodes[0].Annotations; len(a) != 1 || a["cluster.x-k8s.io/cluster-name"] != "prod" {
		t.Errorf("node annotations %v", a)
	}
	if len(s.Pods) != 2 || len(s.KeptPods) != 1 {
		t.Fatalf("%d pods, %d kept", len(s.Pods), len(s.KeptPods))
	}
	k := s.KeptPods[0]
	if k.Name != "coredns-0" || k.Status.ContainerStatuses[0].RestartCount != 3 || k.Spec.Containers[0].Image != "coredns:v1" || k.ManagedFields != nil {
		t.Errorf("kept pod %+v", k)
	}
	if s2, _ := Load(context.Background(), fake.NewClientset(n, sys, app), LoadOptions{}); len(s2.KeptPods) != 0 || len(s2.Nodes[0].Annotations) != 0 {
		t.Errorf("kept without being asked: %d pods, annotations %v", len(s2.KeptPods), s2.Nodes[0].Annotations)
	}
}
