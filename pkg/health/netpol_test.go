package health

import (
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestSpecDigestIgnoresKeyOrderNotContent(t *testing.T) {
	a := map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}}
	b := map[string]any{"policyTypes": []any{"Ingress"}, "podSelector": map[string]any{}}
	c := map[string]any{"policyTypes": []any{"Ingress", "Egress"}, "podSelector": map[string]any{}}
	if SpecDigest(a) != SpecDigest(b) {
		t.Errorf("equal specs digest differently")
	}
	if SpecDigest(a) == SpecDigest(c) {
		t.Errorf("a changed spec digests the same")
	}
}

func TestDiffPolicies(t *testing.T) {
	p := func(kind, ns, name, d string) PolicyFact {
		return PolicyFact{Kind: kind, Namespace: ns, Name: name, Digest: d}
	}
	base := []PolicyFact{
		p("NetworkPolicy", "ml", "deny-all", "1"),
		p("NetworkPolicy", "ml", "allow-dns", "2"),
		p("NetworkPolicy", "web", "deny-all", "3"),
		p("CiliumNetworkPolicy", "ml", "l7", "4"),
		p("GlobalNetworkPolicy", "", "default-deny", "5"),
	}
	now := []PolicyFact{
		p("NetworkPolicy", "ml", "deny-all", "1"),
		p("NetworkPolicy", "ml", "allow-dns", "2b"),
		p("NetworkPolicy", "web", "new", "9"),
		p("GlobalNetworkPolicy", "", "default-deny", "5"),
	}
	got := DiffPolicies(base, now, map[string]bool{"CiliumNetworkPolicy": true})
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{
		"NetworkPolicy ml/allow-dns changed since the baseline (spec differs)",
		"NetworkPolicy web/deny-all is gone since the baseline",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if got := DiffPolicies(base, now, nil); len(got) != 3 || got[0].Policy.Kind != "CiliumNetworkPolicy" || !got[0].Gone {
		t.Errorf("a kind read now too: want the Cilium policy gone first, got %+v", got)
	}
	if got := DiffPolicies(base, base, nil); len(got) != 0 {
		t.Errorf("no change: got %+v", got)
	}
}

// A CRD default filled in on read changes a policy's digest while the
// object (its uid) and its generation stay: no change. A write that moves
// the generation, or the policy deleted and created again, is judged by
// the digest; a baseline recorded without uid and generation falls back
// to the digest alone.
func TestDiffPoliciesDefaultingIsNoChange(t *testing.T) {
	base := []PolicyFact{
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "defaulted", Digest: "a", UID: "u1", Generation: 3},
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "edited", Digest: "b", UID: "u2", Generation: 3},
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "edited-back", Digest: "c", UID: "u3", Generation: 3},
		{Kind: "GlobalNetworkPolicy", Name: "recreated", Digest: "d", UID: "u4", Generation: 1},
		{Kind: "NetworkPolicy", Namespace: "ml", Name: "old-baseline", Digest: "e"},
	}
	now := []PolicyFact{
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "defaulted", Digest: "a-with-defaults", UID: "u1", Generation: 3},
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "edited", Digest: "b2", UID: "u2", Generation: 4},
		{Kind: "CiliumNetworkPolicy", Namespace: "ml", Name: "edited-back", Digest: "c", UID: "u3", Generation: 5},
		{Kind: "GlobalNetworkPolicy", Name: "recreated", Digest: "d2", UID: "u5", Generation: 1},
		{Kind: "NetworkPolicy", Namespace: "ml", Name: "old-baseline", Digest: "e2", UID: "u6", Generation: 1},
	}
	var lines []string
	for _, c := range DiffPolicies(base, now, nil) {
		lines = append(lines, c.String())
	}
	want := []string{
		"CiliumNetworkPolicy ml/edited changed since the baseline (generation 3, now 4; spec differs)",
		"GlobalNetworkPolicy recreated changed since the baseline (deleted and created again, spec differs)",
		"NetworkPolicy ml/old-baseline changed since the baseline (spec differs)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// The aws-node DaemonSet as amazon-vpc-cni-k8s ships it runs the policy
// agent switched off; it enforces only with --enable-network-policy=true.
func TestEnforcingCNIsAWSNode(t *testing.T) {
	b, err := os.ReadFile("testdata/amazon-vpc-cni-k8s-v1.23.0-aws-node-daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(b, shipped); err != nil {
		t.Fatal(err)
	}
	shipped.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberReady: 2}
	if got := FindEnforcingCNIs([]*appsv1.DaemonSet{shipped}); len(got) != 0 {
		t.Errorf("aws-node as shipped (--enable-network-policy=false) enforces nothing: got %+v", got)
	}
	agent := func(ds *appsv1.DaemonSet) *corev1.Container {
		for i, c := range ds.Spec.Template.Spec.Containers {
			if strings.Contains(c.Image, "aws-network-policy-agent") {
				return &ds.Spec.Template.Spec.Containers[i]
			}
		}
		t.Fatal("no policy agent container in the shipped DaemonSet")
		return nil
	}
	for _, tc := range []struct {
		name string
		edit func(c *corev1.Container)
		want int
	}{
		{"switched on", func(c *corev1.Container) { replaceArg(c, "--enable-network-policy=true") }, 1},
		{"bare flag", func(c *corev1.Container) { replaceArg(c, "--enable-network-policy") }, 1},
		{"renamed, found by image", func(c *corev1.Container) { c.Name = "policy"; replaceArg(c, "--enable-network-policy=true") }, 1},
		{"off, as shipped", func(c *corev1.Container) {}, 0},
	} {
		ds := shipped.DeepCopy()
		tc.edit(agent(ds))
		got := FindEnforcingCNIs([]*appsv1.DaemonSet{ds})
		if len(got) != tc.want {
			t.Errorf("%s: got %+v", tc.name, got)
		} else if tc.want == 1 && (got[0].Name != "aws-node" || got[0].Namespace != "kube-system" || !got[0].OK()) {
			t.Errorf("%s: got %+v", tc.name, got)
		}
	}
}

func replaceArg(c *corev1.Container, arg string) {
	for i, a := range c.Args {
		if strings.HasPrefix(a, "--enable-network-policy") {
			c.Args[i] = arg
		}
	}
}

func TestEnforcingCNIs(t *testing.T) {
	ds := func(ns, name string, desired, ready int32, containers ...string) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: desired, NumberReady: ready}}
		for _, c := range containers {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: c})
		}
		return d
	}
	got := FindEnforcingCNIs([]*appsv1.DaemonSet{
		ds("kube-system", "cilium", 3, 3), ds("kube-system", "kube-flannel-ds", 3, 3),
		ds("kube-system", "aws-node", 3, 3, "aws-node"), ds("calico-system", "calico-node", 3, 2),
	})
	if len(got) != 2 || got[0].CNI != "Calico" || got[0].OK() || got[1].CNI != "Cilium" || !got[1].OK() {
		t.Fatalf("got %+v", got)
	}
	base := []CNIFact{{CNI: "Cilium", Namespace: "kube-system", Name: "cilium", Desired: 3, Ready: 3}, {CNI: "Calico", Namespace: "calico-system", Name: "calico-node", Desired: 3, Ready: 3}}
	now := []CNIFact{{CNI: "Cilium", Namespace: "kube-system", Name: "cilium", Desired: 3, Ready: 1}}
	regs := CNIRegressions(base, now)
	if len(regs) != 2 || !strings.Contains(regs[0], "cilium: 1 of 3 pods ready") || !strings.Contains(regs[1], "calico-node, which enforces network policy, is gone") {
		t.Errorf("got %q", regs)
	}
	if regs := CNIRegressions(now, now); len(regs) != 0 {
		t.Errorf("not ready at the baseline too: got %q", regs)
	}
}

func TestDownNodePods(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.NodeStatus {
		return corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "up"}, Status: ready(corev1.ConditionTrue)},
		{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true}, Status: ready(corev1.ConditionTrue)},
		{ObjectMeta: metav1.ObjectMeta{Name: "down"}, Status: ready(corev1.ConditionUnknown)},
	}
	pod := func(name, node, owner string, isReady bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: owner}}},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
		}
	}
	pods := []*corev1.Pod{
		pod("a", "up", "cilium", false),       // counts against the DaemonSet
		pod("b", "cordoned", "cilium", false), // excused
		pod("c", "down", "cilium", false),     // excused
		pod("d", "down", "cilium", true),      // ready: nothing to excuse
		pod("e", "down", "kube-proxy", false), // another DaemonSet
	}
	if got := DownNodePods("kube-system", "cilium", pods, nodes); got != 2 {
		t.Errorf("excused %d, want 2", got)
	}
	c := CNIFact{CNI: "Cilium", Namespace: "kube-system", Name: "cilium", Desired: 4, Ready: 1, Excused: 2}
	if c.OK() {
		t.Errorf("%s: OK with a pod not ready on a Ready node", c)
	}
	c.Ready = 2
	if !c.OK() || c.String() != "Cilium DaemonSet kube-system/cilium: 2 of 4 pods ready (2 not ready on nodes NotReady or cordoned, not counted)" {
		t.Errorf("%s: OK %v", c, c.OK())
	}
}
