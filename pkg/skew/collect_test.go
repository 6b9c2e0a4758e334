package skew

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func node(name string, labels map[string]string, kubelet string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
}

func staticPod(component, nodeName, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: component + "-" + nodeName, Namespace: "kube-system",
			Labels: map[string]string{"component": component, "tier": "control-plane"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: component, Image: image}}},
	}
}

func fakeClient(gitVersion string, objs ...runtime.Object) *fake.Clientset {
	c := fake.NewClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: gitVersion}
	return c
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func TestCollect(t *testing.T) {
	gke := "cloud.google.com/gke-nodepool"
	objs := []runtime.Object{
		node("a-0", map[string]string{gke: "h100-a"}, "v1.37.2"),
		node("a-1", map[string]string{gke: "h100-a"}, "v1.36.1"),
		node("b-0", map[string]string{"karpenter.sh/nodepool": "spot"}, "v1.33.0-eks-ab12cd3"),
		node("c-0", map[string]string{"node-role.kubernetes.io/control-plane": ""}, "v1.37.2"),
		node("d-0", nil, ""),
		node("d-1", nil, "v1.35.0"),
		staticPod(KindAPIServer, "cp-0", "registry.k8s.io/kube-apiserver:v1.37.2"),
		staticPod(KindAPIServer, "cp-1", "registry.k8s.io/kube-apiserver:v1.36.1@sha256:00"),
		staticPod(KindControllerManager, "cp-0", "registry.k8s.io/kube-controller-manager:v1.36.1"),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.36.1"}}}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system", Labels: map[string]string{"k8s-app": "kube-dns"}},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.1"}}}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: "kube-system"}},
	}
	c := &Collector{Client: fakeClient("v1.37.2", objs...), Now: func() time.Time { return t0 },
		Kubectl: func(context.Context) (string, error) { return "v1.36.0", nil }}
	inv, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	want := Inventory{
		CollectedAt: t0,
		Server:      ServerVersion{GitVersion: "v1.37.2"},
		Components: []Component{
			{Name: KindAPIServer, Instance: "kube-apiserver-cp-0", Version: "v1.37.2", State: StateVisible, Source: "pod kube-system/kube-apiserver-cp-0 image registry.k8s.io/kube-apiserver:v1.37.2"},
			{Name: KindAPIServer, Instance: "kube-apiserver-cp-1", Version: "v1.36.1", State: StateVisible, Source: "pod kube-system/kube-apiserver-cp-1 image registry.k8s.io/kube-apiserver:v1.36.1@sha256:00"},
			{Name: KindControllerManager, Instance: "kube-controller-manager-cp-0", Version: "v1.36.1", State: StateVisible, Source: "pod kube-system/kube-controller-manager-cp-0 image registry.k8s.io/kube-controller-manager:v1.36.1"},
			{Name: KindScheduler, State: StateNotVisible, Source: "no pod in kube-system labelled component=kube-scheduler"},
			{Name: KindCloudControllerManager, State: StateNotVisible, Source: "no pod in kube-system labelled component=cloud-controller-manager"},
			{Name: KindKubeProxy, Instance: "daemonset/kube-proxy", Version: "v1.36.1", State: StateVisible, Source: "daemonset kube-system/kube-proxy image registry.k8s.io/kube-proxy:v1.36.1"},
			{Name: KindCoreDNS, Instance: "deployment/coredns", Version: "v1.12.1", State: StateVisible, Source: "deployment kube-system/coredns image registry.k8s.io/coredns/coredns:v1.12.1"},
			{Name: KindKubectl, Instance: "PATH", Version: "v1.36.0", State: StateVisible, Source: "kubectl version --client"},
		},
		Pools: []Pool{
			{Name: NoPool, Nodes: 2, Versions: []VersionCount{{Version: "v1.35.0", Nodes: 1}}, Unknown: 1, UnknownNodes: []string{"d-0"}, GPUNodes: &zero},
			{Name: "control-plane", Label: "node-role.kubernetes.io/control-plane", Nodes: 1, Versions: []VersionCount{{Version: "v1.37.2", Nodes: 1}}, GPUNodes: &zero},
			{Name: "h100-a", Label: gke, Nodes: 2, Versions: []VersionCount{{Version: "v1.36.1", Nodes: 1}, {Version: "v1.37.2", Nodes: 1}}, GPUNodes: &zero},
			{Name: "spot", Label: "karpenter.sh/nodepool", Nodes: 1, Versions: []VersionCount{{Version: "v1.33.0-eks-ab12cd3", Nodes: 1}}, GPUNodes: &zero},
		},
		Platform: &Platform{ProviderIDs: map[string]int{"": 6}, Labels: map[string]int{gke: 2}, ControlPlanePods: 2, TierLabelled: 2, ServerNodes: 1},
	}
	if diff := cmp.Diff(want, inv); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// Nodes, pods, DaemonSets and Deployments a caller hands over give the
// same inventory as the collector's own lists, which are then not made;
// a supplier that reports false is listed as usual.
func TestCollectFromSuppliedReads(t *testing.T) {
	gke := "cloud.google.com/gke-nodepool"
	n := node("a-0", map[string]string{gke: "h100-a"}, "v1.37.2")
	n.Annotations = map[string]string{annCAPIClusterName: "prod", annCAPIClusterNS: "fleet"}
	api := staticPod(KindAPIServer, "cp-0", "registry.k8s.io/kube-apiserver:v1.37.2")
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-cp-0", Namespace: "kube-system", Labels: map[string]string{"component": "etcd"}}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.36.1"}}}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "coredns", Namespace: "kube-system"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.12.1"}}}}}}
	objs := []runtime.Object{n, api, other, ds, dep}
	listed := &Collector{Client: fakeClient("v1.37.2", objs...), Now: func() time.Time { return t0 }}
	want, err := listed.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, ok := range []bool{true, false} {
		kc := fakeClient("v1.37.2", objs...)
		c := &Collector{Client: kc, Now: func() time.Time { return t0 },
			Nodes:       func(context.Context) ([]*corev1.Node, bool) { return []*corev1.Node{n}, ok },
			SystemPods:  func(context.Context) ([]*corev1.Pod, bool) { return []*corev1.Pod{api, other}, ok },
			DaemonSets:  func(context.Context) ([]*appsv1.DaemonSet, bool) { return []*appsv1.DaemonSet{ds}, ok },
			Deployments: func(context.Context) ([]*appsv1.Deployment, bool) { return []*appsv1.Deployment{dep}, ok },
		}
		got, err := c.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("supplied %v: (-listed +got)\n%s", ok, diff)
		}
		lists := 0
		for _, a := range kc.Actions() {
			if a.GetVerb() == "list" {
				lists++
			}
		}
		if wantLists := map[bool]int{true: 0, false: 4}[ok]; lists != wantLists {
			t.Errorf("supplied %v: %d lists, want %d", ok, lists, wantLists)
		}
	}
	if want.Platform.ClusterAPIName != "prod" {
		t.Errorf("platform %+v", want.Platform)
	}
}

func TestCollectPoolLabel(t *testing.T) {
	c := &Collector{Client: fakeClient("v1.37.2",
		node("a", map[string]string{"cloud.google.com/gke-nodepool": "x", "team": "ml"}, "v1.37.0"),
		node("b", map[string]string{"cloud.google.com/gke-nodepool": "y"}, "v1.37.0"))}
	c.PoolLabel = "team"
	inv, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range inv.Pools {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{NoPool, "ml"}, names); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestCollectForbiddenKubeSystem(t *testing.T) {
	c := fakeClient("v1.37.2", node("a", nil, "v1.37.0"))
	forbid := func(res string) k8stesting.ReactionFunc {
		return func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetNamespace() == "kube-system" {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: res}, "", errors.New("no"))
			}
			return false, nil, nil
		}
	}
	c.PrependReactor("list", "pods", forbid("pods"))
	c.PrependReactor("list", "daemonsets", forbid("daemonsets"))
	c.PrependReactor("list", "deployments", forbid("deployments"))
	col := &Collector{Client: c, Kubectl: func(context.Context) (string, error) { return "", fmt.Errorf("x: %w", ErrNoKubectl) }}
	inv, err := col.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Notes) != 3 || len(inv.Pools) != 1 {
		t.Errorf("notes %q pools %+v", inv.Notes, inv.Pools)
	}
	states := map[string]string{}
	for _, c := range inv.Components {
		states[c.Name] = c.State
	}
	want := map[string]string{KindAPIServer: StateForbidden, KindControllerManager: StateForbidden, KindScheduler: StateForbidden,
		KindCloudControllerManager: StateForbidden, KindKubeProxy: StateForbidden, KindCoreDNS: StateForbidden, KindKubectl: StateAbsent}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	// Not read is not known: UNKNOWN (a warning for --fail-on), never a
	// violation.
	if _, sum := Check(inv); sum.Status != StatusUnknown || sum.Violations != 0 {
		t.Errorf("forbidden kube-system reads must be unknown, not fail the check: %+v", sum)
	}
}

func TestCollectRequiredReads(t *testing.T) {
	c := fakeClient("v1.37.2")
	c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))
	})
	_, err := (&Collector{Client: c}).Collect(context.Background())
	var re *RequiredReadError
	if !errors.As(err, &re) || !apierrors.IsForbidden(err) {
		t.Errorf("err = %v, want a forbidden RequiredReadError", err)
	}
}

func TestCollectPaged(t *testing.T) {
	c := fakeClient("v1.37.2")
	calls := 0
	c.PrependReactor("list", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		opts := a.(k8stesting.ListActionImpl).ListOptions
		if opts.Limit != 2 {
			t.Errorf("limit = %d, want 2", opts.Limit)
		}
		list := &corev1.NodeList{}
		switch opts.Continue {
		case "":
			list.Items = []corev1.Node{*node("a", nil, "v1.37.0"), *node("b", nil, "v1.37.0")}
			list.Continue = "page2"
		case "page2":
			list.Items = []corev1.Node{*node("c", nil, "v1.36.0")}
		}
		return true, list, nil
	})
	inv, err := (&Collector{Client: c, PageSize: 2}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || len(inv.Pools) != 1 || inv.Pools[0].Nodes != 3 {
		t.Errorf("calls %d pools %+v", calls, inv.Pools)
	}
}

// A control-plane node without the workers' pool label is in the
// control-plane pool, with or without --pool-label; a worker without it is
// in no pool.
func TestPoolOfControlPlaneWithPoolLabel(t *testing.T) {
	cp := map[string]string{"node-role.kubernetes.io/control-plane": ""}
	for _, label := range []string{"", "gpufleet.dev/pool"} {
		if name, from := PoolOf(cp, label); name != "control-plane" || from != "node-role.kubernetes.io/control-plane" {
			t.Errorf("--pool-label %q: control-plane node in pool %q (label %q)", label, name, from)
		}
	}
	if name, _ := PoolOf(map[string]string{"gpufleet.dev/pool": "gpu"}, "gpufleet.dev/pool"); name != "gpu" {
		t.Errorf("worker in pool %q, want gpu", name)
	}
	if name, _ := PoolOf(map[string]string{"team": "a"}, "gpufleet.dev/pool"); name != NoPool {
		t.Errorf("unlabelled worker in pool %q, want %s", name, NoPool)
	}
}
