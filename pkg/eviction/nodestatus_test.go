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
