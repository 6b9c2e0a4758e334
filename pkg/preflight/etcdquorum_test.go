package preflight

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

func TestEtcdServersFromAPIServerPods(t *testing.T) {
	pod := func(name string, labels map[string]string, cmd ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Command: cmd}}}}
	}
	pods := []*corev1.Pod{
		pod("kube-apiserver-cp1", map[string]string{"component": "kube-apiserver"}, "kube-apiserver", "--etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379", "--etcd-cafile=/etc/kubernetes/pki/etcd/ca.crt"),
		pod("kube-apiserver-cp2", map[string]string{"component": "kube-apiserver"}, "kube-apiserver", "--etcd-servers=https://10.0.0.2:2379"),
		pod("coredns", map[string]string{"k8s-app": "kube-dns"}, "coredns", "--etcd-servers=https://not-this:2379"),
	}
	got := strings.Join(etcdServers(pods), ",")
	if got != "https://10.0.0.1:2379,https://10.0.0.2:2379" {
		t.Errorf("etcdServers = %s", got)
	}
}

func TestEtcdQuorumGateManagedAndUnconfigured(t *testing.T) {
	for _, c := range []struct {
		inv  skew.Inventory
		want string
	}{
		{inv: skew.Inventory{Server: skew.ServerVersion{GitVersion: "v1.37.2-eks-1a2b3c4"}}, want: "runs etcd for you"},
		{inv: skew.Inventory{}, want: "no etcd endpoint"},
	} {
		r := &Runner{Kube: fake.NewClientset()}
		r.Health.EtcdQuorum = true
		g, q, _ := r.etcdQuorumGate(context.Background(), func() *skew.Inventory { return &c.inv })
		if g.Status != StatusUnknown || !strings.Contains(g.Message, c.want) || q != nil {
			t.Errorf("gate %s %q, want UNKNOWN with %q", g.Status, g.Message, c.want)
		}
	}
}
