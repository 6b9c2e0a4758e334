package preflight

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// TestNetworkPolicyGateCalicoNativeV3 reads Calico's projectcalico.org/v3
// policies where they are native CRDs, and not where the group is served
// by Calico's aggregation API server (no such CRD; its v1 storage CRDs are
// read instead).
func TestNetworkPolicyGateCalicoNativeV3(t *testing.T) {
	crd := func(name string) *apiextv1.CustomResourceDefinition {
		return &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: apiextv1.CustomResourceDefinitionSpec{Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: "v", Served: true, Storage: true}}}}
	}
	policy := func(gv, kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gv, "kind": kind,
			"metadata": map[string]any{"name": name, "namespace": ns, "uid": name, "generation": int64(1)},
			"spec":     map[string]any{"selector": "all()"}}}
		if ns == "" {
			unstructured.RemoveNestedField(u.Object, "metadata", "namespace")
		}
		return u
	}
	lists := map[schema.GroupVersionResource]string{}
	for _, k := range health.PolicyKinds {
		lists[k.GVR] = k.Kind[strings.LastIndex(k.Kind, "/")+1:] + "List"
	}
	objs := []runtime.Object{
		policy("projectcalico.org/v3", "NetworkPolicy", "ml", "allow-nccl"),
		policy("projectcalico.org/v3", "GlobalNetworkPolicy", "", "default-deny"),
		policy("crd.projectcalico.org/v1", "NetworkPolicy", "ml", "default.allow-nccl"),
	}
	gate := func(crds ...string) (Gate, *NetworkPolicyEvidence) {
		var cs []runtime.Object
		for _, c := range crds {
			cs = append(cs, crd(c))
		}
		r := &Runner{Kube: fake.NewClientset(), Ext: apiextfake.NewClientset(cs...),
			Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)}
		return r.networkPolicyGate(context.Background())
	}

	// Native v3 CRDs: both projectcalico.org kinds are read.
	g, ev := gate("networkpolicies.projectcalico.org", "globalnetworkpolicies.projectcalico.org")
	var ids []string
	for _, p := range ev.Policies {
		ids = append(ids, p.ID())
	}
	want := []string{"projectcalico.org/GlobalNetworkPolicy default-deny", "projectcalico.org/NetworkPolicy ml/allow-nccl"}
	if !slices.Equal(ids, want) {
		t.Errorf("native v3: policies %q, want %q", ids, want)
	}
	if !slices.Contains(ev.Kinds, "projectcalico.org/NetworkPolicy") || !slices.Contains(ev.Kinds, "projectcalico.org/GlobalNetworkPolicy") {
		t.Errorf("native v3: kinds read %q", ev.Kinds)
	}
	if !strings.Contains(g.Command, "kubectl get networkpolicies.projectcalico.org -A") {
		t.Errorf("native v3: command %q does not list the v3 kind", g.Command)
	}

	// The aggregation API server: only the v1 storage CRDs exist, and the
	// v3 kinds are not read, so a policy is recorded once.
	_, ev = gate("networkpolicies.crd.projectcalico.org", "globalnetworkpolicies.crd.projectcalico.org")
	ids = nil
	for _, p := range ev.Policies {
		ids = append(ids, p.ID())
	}
	want = []string{"crd.projectcalico.org/NetworkPolicy ml/default.allow-nccl"}
	if !slices.Equal(ids, want) {
		t.Errorf("aggregated: policies %q, want %q", ids, want)
	}
	if slices.Contains(ev.Kinds, "projectcalico.org/NetworkPolicy") {
		t.Errorf("aggregated: the v3 kind was read: %q", ev.Kinds)
	}
}
