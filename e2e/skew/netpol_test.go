//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// The network-policy gate on a control plane of its own (a CNI DaemonSet
// and a Cilium CRD would change what the shared cluster's other tests
// see): two NetworkPolicies, a CiliumNetworkPolicy (its CRD served), a
// CiliumClusterwideNetworkPolicy (a structural CRD) and a "cilium"
// DaemonSet whose pods KWOK reports ready pass preflight. A default added
// to the clusterwide kind's CRD afterwards shows in every read of the
// stored policy, and verify still reports it unchanged. After a policy is
// deleted, another's spec changed, the Cilium policy deleted, the
// defaulted policy's spec changed and the DaemonSet left with no ready
// pod, verify fails naming each, and lists a policy created since as a
// WARN.
func TestNetworkPolicyGate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cp, err := harness.Start(ctx, harness.Options{StartTimeout: 6 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "np", Nodes: 2}); err != nil {
		t.Fatal(err)
	}
	const ns = "netpol-e2e"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "allow-dns", Namespace: ns}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}}}}}},
	} {
		if _, err := cp.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Cilium's CRD, as far as the gate needs it (served, any spec).
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ciliumnetworkpolicies.cilium.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "cilium.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ciliumnetworkpolicies", Singular: "ciliumnetworkpolicy", Kind: "CiliumNetworkPolicy", ListKind: "CiliumNetworkPolicyList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}}
	// A clusterwide policy kind with a structural schema, so that the
	// apiserver prunes and defaults it as it does a real Cilium or Calico
	// policy CRD (a stand-in: only the fields the test writes).
	ccnp := ccnpCRD(nil)
	if err := cp.ApplyCRDs(ctx, crd, ccnp); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	cnp := schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnetworkpolicies"}
	if err := harness.Eventually(ctx, "CiliumNetworkPolicy served", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(cnp).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy",
			"metadata": map[string]any{"name": "l7", "namespace": ns},
			"spec":     map[string]any{"endpointSelector": map[string]any{}, "ingress": []any{map[string]any{"fromEndpoints": []any{map[string]any{}}}}}}}, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ccnpGVR := schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumclusterwidenetworkpolicies"}
	if err := harness.Eventually(ctx, "CiliumClusterwideNetworkPolicy served", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(ccnpGVR).Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cilium.io/v2", "kind": "CiliumClusterwideNetworkPolicy",
			"metadata": map[string]any{"name": "default-deny"},
			"spec":     map[string]any{"endpointSelector": map[string]any{}, "ingress": []any{map[string]any{}}}}}, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// The enforcing CNI's agent: KWOK runs its pods on the fake nodes.
	lbl := map[string]string{"k8s-app": "cilium"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "cilium", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "cilium-agent", Image: "quay.io/cilium/cilium:v1.16.5"}}}}}}
	if _, err := cp.Client.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dsReady := func(ctx context.Context) (bool, error) {
		d, err := cp.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "cilium", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.DesiredNumberScheduled > 0 && d.Status.NumberReady == d.Status.DesiredNumberScheduled, nil
	}
	if err := harness.Eventually(ctx, "cilium DaemonSet ready", time.Minute, dsReady); err != nil {
		t.Fatal(err)
	}

	baseline := t.TempDir() + "/baseline.yaml"
	r := skew(t, cp, "preflight", "-o", "json", "--target", "v1.37", "--network-policy", "--save", baseline)
	g := gateOf(t, r, "network-policy")
	if g.Status != "ok" || !strings.Contains(g.Message, "4 network policies of NetworkPolicy, CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy recorded; enforced by Cilium") ||
		!evidenceHas(g, "Cilium DaemonSet kube-system/cilium: 2 of 2 pods ready") || !evidenceHas(g, "1 CiliumNetworkPolicy") || !evidenceHas(g, "2 NetworkPolicy") || !evidenceHas(g, "1 CiliumClusterwideNetworkPolicy") {
		t.Fatalf("clean: want PASS with 4 policies and Cilium ready, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
	}

	// The CNI's upgrade adds a default to its policy CRD: the stored
	// policy is untouched, and every read of it now carries the field.
	if err := cp.ApplyCRDs(ctx, ccnpCRD(&apiextensionsv1.JSON{Raw: []byte(`{"ingress":true,"egress":true}`)})); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "the CRD's default applied on read", 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(ccnpGVR).Get(ctx, "default-deny", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, ok, _ := unstructured.NestedMap(got.Object, "spec", "enableDefaultDeny"); !ok {
			return false, nil
		}
		if got.GetGeneration() != 1 {
			return false, fmt.Errorf("generation %d after a default was added, want 1", got.GetGeneration())
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Unchanged: verify reports nothing of it, defaulted field or not.
	if v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline); strings.Contains(v.Stdout, `"network-policy"`) {
		t.Fatalf("unchanged: want no network-policy item\n%s", v)
	}

	if err := cp.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "deny-all", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.NetworkingV1().NetworkPolicies(ns).Patch(ctx, "allow-dns", types.MergePatchType,
		[]byte(`{"spec":{"egress":[{"ports":[{"protocol":"TCP"}]}]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(cnp).Namespace(ns).Delete(ctx, "l7", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A real change to the defaulted policy's spec.
	if _, err := dyn.Resource(ccnpGVR).Patch(ctx, "default-deny", types.MergePatchType,
		[]byte(`{"spec":{"endpointSelector":{"matchLabels":{"app":"db"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// A policy new since the baseline: listed as a WARN.
	if _, err := cp.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "new-deny", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The agent's pods gone from every node: no node enforces policy.
	if _, err := cp.Client.AppsV1().DaemonSets("kube-system").Patch(ctx, "cilium", types.MergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"nodeSelector":{"gpufleet.dev/no-such-node":"true"}}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "cilium DaemonSet without pods", time.Minute, func(ctx context.Context) (bool, error) {
		d, err := cp.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "cilium", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.DesiredNumberScheduled == 0, nil
	}); err != nil {
		t.Fatal(err)
	}
	v := skew(t, cp, "verify", "-o", "json", "--baseline", baseline)
	var vr struct {
		Items []struct{ Kind, Status, Object, Message string }
	}
	if err := json.Unmarshal([]byte(v.Stdout), &vr); err != nil {
		t.Fatalf("%v\n%s", err, v)
	}
	want := map[string]string{
		"NetworkPolicy " + ns + "/deny-all":           "is gone since the baseline",
		"NetworkPolicy " + ns + "/allow-dns":          "changed since the baseline",
		"CiliumNetworkPolicy " + ns + "/l7":           "is gone since the baseline",
		"CiliumClusterwideNetworkPolicy default-deny": "changed since the baseline (generation 1, now 2; spec differs)",
		"cni": "Cilium DaemonSet kube-system/cilium: 0 of 0 pods ready",
	}
	sawNew := false
	for _, it := range vr.Items {
		if it.Kind != "network-policy" {
			continue
		}
		if w, ok := want[it.Object]; ok && it.Status == "fail" && strings.Contains(it.Message, w) {
			delete(want, it.Object)
		}
		if it.Object == "NetworkPolicy "+ns+"/new-deny" {
			sawNew = it.Status == "warn" && strings.Contains(it.Message, "is new since the baseline")
		}
	}
	if !sawNew {
		t.Errorf("want a WARN item naming the new policy %s/new-deny\n%s", ns, v)
	}
	if v.ExitCode != 1 || len(want) != 0 {
		t.Fatalf("want exit 1 and a FAIL for each of %v\n%s", want, v)
	}
}

// ccnpCRD is a stand-in for Cilium's CiliumClusterwideNetworkPolicy CRD
// with a structural schema (the apiserver prunes what it does not list),
// whose spec.enableDefaultDeny has def as its default (none when nil).
func ccnpCRD(def *apiextensionsv1.JSON) *apiextensionsv1.CustomResourceDefinition {
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"endpointSelector":  open,
		"ingress":           {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &open}},
		"enableDefaultDeny": {Type: "object", Default: def, Properties: map[string]apiextensionsv1.JSONSchemaProps{"ingress": {Type: "boolean"}, "egress": {Type: "boolean"}}},
	}}
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "ciliumclusterwidenetworkpolicies.cilium.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "cilium.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "ciliumclusterwidenetworkpolicies", Singular: "ciliumclusterwidenetworkpolicy",
				Kind: "CiliumClusterwideNetworkPolicy", ListKind: "CiliumClusterwideNetworkPolicyList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}}}}}
}
