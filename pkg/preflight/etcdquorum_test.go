package preflight

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
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

// TestNoEtcdEndpointByProvider: with no kube-apiserver pod naming
// --etcd-servers, the UNKNOWN says why for the provider found, not only
// for k3s: a pod list refused, k3s's process and datastores, a Cluster API
// management cluster, a static-pod distribution, and an unknown provider
// (a managed service or hosted control plane, or an apiserver outside a
// pod).
func TestNoEtcdEndpointByProvider(t *testing.T) {
	for _, c := range []struct {
		version string
		forbid  bool
		want    string
	}{
		{version: "v1.37.2+k3s1", want: "k3s runs the apiserver inside its server process, not as a pod; with embedded etcd (--cluster-init) pass --etcd-endpoints"},
		{version: "v1.37.2+rke2r1", want: "where RKE2 runs it as a static pod; pass --etcd-endpoints"},
		{version: "v1.37.2", want: "where a provider runs the control plane (a managed service other than EKS, GKE and AKS, or a hosted control plane) etcd is not reachable"},
		{version: "v1.37.2", forbid: true, want: "the pods of kube-system could not be listed"},
	} {
		kube := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
		if c.forbid {
			kube.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errString("no"))
			})
		}
		r := &Runner{Kube: kube}
		r.Health.EtcdQuorum = true
		inv := skew.Inventory{Server: skew.ServerVersion{GitVersion: c.version}}
		g, _, _ := r.etcdQuorumGate(context.Background(), func() *skew.Inventory { return &inv })
		if g.Status != StatusUnknown || !strings.Contains(g.Message, c.want) || strings.Contains(g.Message, "\n") {
			t.Errorf("%s (forbidden %v): %s %q, want UNKNOWN with %q", c.version, c.forbid, g.Status, g.Message, c.want)
		}
	}
	if m := noEtcdEndpoint(skew.ProviderCAPI, true); !strings.Contains(m, "point --kubeconfig at the workload cluster") {
		t.Errorf("Cluster API: %q", m)
	}
}

// TestVerifyEtcdProblemAtBaselineStillFails: a NOSPACE alarm, or an even
// member count, present at preflight is still a FAIL in verify (it said so
// at preflight; going on upgrading past it is no safer later), marked as
// not new; a member down since is a FAIL too.
func TestVerifyEtcdProblemAtBaselineStillFails(t *testing.T) {
	member := func(id string, up bool) health.EtcdMember {
		return health.EtcdMember{ID: id, Name: "m" + id, Started: true, Reachable: up, Leader: "1", Error: map[bool]string{false: "context deadline exceeded"}[up]}
	}
	ev := func(alarm bool, ms ...health.EtcdMember) Evidence {
		q := &health.EtcdQuorum{Members: ms, Leaders: []string{"1"}}
		if alarm {
			q.Alarms = []health.EtcdAlarm{{Member: "1", Alarm: "NOSPACE"}}
		}
		return Evidence{Health: &HealthEvidence{Etcd: q, EtcdMaxLag: health.DefaultEtcdMaxLag}}
	}
	base := ev(true, member("1", true), member("2", true))
	var got []string
	for _, r := range verifyHealth(base, ev(true, member("1", true), member("2", true))) {
		got = append(got, string(r.Status)+" "+r.Message)
	}
	want := []string{
		"FAIL 2 voting members: an even count tolerates no more failures than one member fewer; run an odd number (already so at the baseline)",
		"FAIL alarm NOSPACE raised on member 1 (already so at the baseline)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	regs := verifyHealth(ev(false, member("1", true), member("2", true), member("3", true)), ev(false, member("1", true), member("2", true), member("3", false)))
	if len(regs) != 1 || regs[0].Status != StatusFail || !strings.Contains(regs[0].Message, "member m3 (3) is not reachable") || strings.Contains(regs[0].Message, "baseline") {
		t.Errorf("member down: %+v", regs)
	}
}
