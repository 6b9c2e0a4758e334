package nodepool

import "testing"

func TestName(t *testing.T) {
	for _, tc := range []struct {
		labels     map[string]string
		label      string
		name, from string
	}{
		{map[string]string{"cluster.x-k8s.io/deployment-name": "md-gpu", "cluster.x-k8s.io/set-name": "md-gpu-abc"}, "", "md-gpu", "cluster.x-k8s.io/deployment-name"},
		{map[string]string{"cluster.x-k8s.io/set-name": "ms-1"}, "", "ms-1", "cluster.x-k8s.io/set-name"},
		{map[string]string{"cloud.google.com/gke-nodepool": "a", "karpenter.sh/nodepool": "b"}, "", "a", "cloud.google.com/gke-nodepool"},
		{map[string]string{"rack": "r1", "cloud.google.com/gke-nodepool": "a"}, "rack", "r1", "rack"},
		{map[string]string{"cloud.google.com/gke-nodepool": "a"}, "rack", "", ""},
		{map[string]string{"node.kubernetes.io/instance-type": "p5"}, "", "", ""},
	} {
		if n, f := Name(tc.labels, tc.label); n != tc.name || f != tc.from {
			t.Errorf("Name(%v, %q) = %q, %q; want %q, %q", tc.labels, tc.label, n, f, tc.name, tc.from)
		}
	}
}
