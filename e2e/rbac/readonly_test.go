//go:build e2e

package rbace2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// pool creates n Ready GPU nodes named <name>-<i>, removed when the test ends.
func pool(t *testing.T, cp *harness.ControlPlane, name string, n int, kubelet string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: name, Nodes: n, KubeletVersion: kubelet})
	var names []string
	for _, nd := range nodes {
		names = append(names, nd.Name)
	}
	t.Cleanup(func() {
		for i := 0; i < n; i++ {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), fmt.Sprintf("%s-%d", name, i), metav1.DeleteOptions{})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// adminCodes fills each flow's expected exit code from a run as the admin,
// after checking it is one of the allowed codes.
func adminCodes(t *testing.T, cp *harness.ControlPlane, bin string, flows map[string]flow, allowed ...int) {
	t.Helper()
	for name, f := range flows {
		r := run(t, cp, bin, "", f.args...)
		ok := false
		for _, c := range allowed {
			ok = ok || r.ExitCode == c
		}
		if !ok {
			t.Fatalf("flow %s as admin: exit %d\n%s", name, r.ExitCode, r)
		}
		f.code = r.ExitCode
		flows[name] = f
	}
}

func TestSkewRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	pool(t, cp, "rbac-skew", 1, "")
	skewWebhookFixture(t, cp)
	policyCRDs(t, cp)
	// A calendar in which the target is past its end of life: the
	// support-window gate (which reads nothing) fails on every run, so
	// preflight exits 1 whatever the other gates find and each removal is
	// judged by the gate it turns UNKNOWN.
	cal := filepath.Join(t.TempDir(), "calendar.yaml")
	if err := os.WriteFile(cal, []byte("dataDate: \"2026-01-01\"\nreleases:\n- {minor: \"1.37\", released: \"2024-01-01\", endOfLife: \"2025-01-01\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := loadRoles(t, "skew")
	const bin = "kubectl-skew"
	flows := map[string]flow{
		"check":     {args: []string{"-o", "json"}},
		"preflight": {args: []string{"preflight", "--target", "v1.37", "--calendar", cal, "--workload-identity", "--network-policy", "-o", "json"}},
	}
	adminCodes(t, cp, bin, flows, 0, 1)
	if flows["preflight"].code != 1 {
		t.Fatalf("preflight as admin: exit %d, want 1 (support window past its end)", flows["preflight"].code)
	}
	user := grant(t, cp, "skew", "full", rs, "", nil)
	// preflight's admission probes (a privileged pod in a namespace without
	// a Pod Security label, for the cluster default) need the probe role
	// beside it, as the README says.
	probes := loadRoles(t, "skew-probes").cluster.DeepCopy()
	probes.Name = "gpufleet-rbac-skew-probes"
	ctx := context.Background()
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, probes, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), probes.Name, metav1.DeleteOptions{})
	})
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: probes.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: probes.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), probes.Name, metav1.DeleteOptions{})
	})
	checkFlows(t, cp, bin, user, []string{"check", "preflight"}, flows)
	code := flows["check"].code
	checkRemovals(t, cp, "skew", bin, "", rs, flows, []removal{
		{flow: "check", code: 3, line: denied("list", "nodes")},
		{flow: "check", code: code, also: []string{"listing pods in kube-system is forbidden"}},
		{flow: "check", code: code, also: []string{"listing DaemonSets in kube-system is forbidden", "listing Deployments in kube-system is forbidden"}},
		{flow: "preflight", code: 1, also: []string{"source metrics not read", "forbidden: cannot get /metrics"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot get /readyz/etcd"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list secrets", "source helm not read"}},
		{flow: "preflight", code: 1, also: []string{"source helm not read"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list customresourcedefinitions", "source crds not read"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot read webhook services"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list namespaces"}},
		{flow: "preflight", code: 1, also: []string{"cannot list serviceaccounts"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list ciliumnetworkpolicies.cilium.io", "forbidden: cannot list ciliumclusterwidenetworkpolicies.cilium.io"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list networkpolicies.crd.projectcalico.org", "forbidden: cannot list globalnetworkpolicies.crd.projectcalico.org"}},
		{flow: "preflight", code: 1, also: []string{"forbidden: cannot list networkpolicies.projectcalico.org", "forbidden: cannot list globalnetworkpolicies.projectcalico.org"}},
		{flow: "preflight", code: 1, also: []string{"Warning events in kube-system not read"}},
	})
}

// skewWebhookFixture is a webhook that matches nothing (its namespace
// selector selects no namespace, failurePolicy Ignore) behind a Service, so
// preflight's webhook gate has a Service to read.
func skewWebhookFixture(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	ignore := admissionv1.Ignore
	none := admissionv1.SideEffectClassNone
	name := "rbac-skew-hook"
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{Name: "nothing.gpufleet.dev", FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig:      admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "default", Name: name}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpufleet.dev/no-such-namespace": "true"}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}}
	if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(), vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func TestPDBBlockersRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := pool(t, cp, "rbac-pdbb", 1, "")
	ns := cp.Namespace(t)
	d := harness.Deployment(ns, "web", 1, 0)
	d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: "rbac-pdbb"}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "web", "web", 1), 1); err != nil {
		t.Fatal(err)
	}
	rs := loadRoles(t, "pdb-blockers")
	const bin = "kubectl-pdb_blockers"
	flows := map[string]flow{
		"check":   {args: []string{nodes[0]}, code: 1},
		"dry-run": {args: []string{nodes[0], "--server-dry-run", "-o", "wide"}, code: 1},
	}
	user := grant(t, cp, "pdb-blockers", "full", rs, ns, nil)
	checkFlows(t, cp, bin, user, []string{"check", "dry-run"}, flows)
	checkRemovals(t, cp, "pdb-blockers", bin, ns, rs, flows, []removal{
		{flow: "check", code: 3, line: denied("list", "nodes")},
		{flow: "check", code: 3, line: denied("list", "pods")},
		{flow: "check", code: 3, line: denied("list", "poddisruptionbudgets")},
		// Documented: without create on pods/eviction the dry run is reported per pod, not fatal.
		{flow: "dry-run", code: 1, also: []string{"Forbidden", "1 server dry run disagrees"}},
	})
}

func TestDeprecationsRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	rs := loadRoles(t, "deprecations")
	const bin = "kubectl-deprecations"
	flows := map[string]flow{"cluster": {args: []string{"--fail-on", "blocking"}}}
	adminCodes(t, cp, bin, flows, 0, 1)
	user := grant(t, cp, "deprecations", "full", rs, "", nil)
	checkFlows(t, cp, bin, user, []string{"cluster"}, flows)
	code := flows["cluster"].code
	checkRemovals(t, cp, "deprecations", bin, "", rs, flows, []removal{
		{flow: "cluster", code: 3, line: deniedPath("get", "/metrics")},
		{flow: "cluster", code: 3, line: "cannot list resource"},
		{flow: "cluster", code: 3, line: denied("list", "secrets")},
		{flow: "cluster", code: 3, line: denied("list", "configmaps")},
		{flow: "cluster", code: 3, line: denied("list", "customresourcedefinitions")},
	})
	_ = code
}

func TestGPUValidateRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	nodes := pool(t, cp, "rbac-gpuv", 1, "v1.37.2")
	// A second pool whose older node is the kubelet-config baseline of the newer one.
	drift := pool(t, cp, "rbac-gpuv-drift", 1, "v1.36.4")
	ctx := context.Background()
	newer := harness.GPUNode("rbac-gpuv-drift-new", harness.GPUPool{Name: "rbac-gpuv-drift", KubeletVersion: "v1.37.2"}, "rbac-gpuv-drift-rs0")
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, newer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), newer.Name, metav1.DeleteOptions{})
	})
	_ = drift
	ns := cp.Namespace(t)
	rs := loadRoles(t, "gpu-validate")
	const bin = "kubectl-gpu_validate"
	flows := map[string]flow{
		"nodes": {args: []string{"nodes", nodes[0]}},
		"drift": {args: []string{"nodes", newer.Name}},
		"xid":   {args: []string{"nodes", nodes[0], "-n", ns, "--config-drift=false", "--xid", "--timeout", "3s"}},
		"nccl":  {args: []string{"nodes", nodes[0], "-n", ns, "--config-drift=false", "--nccl", "--image", "nccl-tests:e2e", "--no-resolve", "--timeout", "5s"}},
		"nccl-jobset": {args: []string{"nodes", nodes[0], "-n", ns, "--config-drift=false", "--nccl", "--launcher", "jobset",
			"--image", "nccl-tests:e2e", "--no-resolve", "--timeout", "5s"}},
	}
	adminCodes(t, cp, bin, flows, 0, 1, 3)
	user := grant(t, cp, "gpu-validate", "full", rs, ns, nil)
	checkFlows(t, cp, bin, user, []string{"nodes", "xid", "nccl", "nccl-jobset"}, flows)
	checkRemovals(t, cp, "gpu-validate", bin, ns, rs, flows, []removal{
		{flow: "nodes", code: 3, line: denied("list", "nodes")},
		// Documented: a warning, and the count is checked without DRA devices.
		{flow: "nodes", code: flows["nodes"].code, also: []string{"warning: DRA devices not counted", denied("list", "resourceslices")}},
		{unused: "the test apiserver answers 403 to every nodes/proxy request to a KWOK node, admin's too", check: func(t *testing.T) {
			r := run(t, cp, bin, "", flows["drift"].args...)
			if r.ExitCode != 3 || !strings.Contains(r.Stderr, "nodes/proxy") {
				t.Errorf("the proxy answers the admin now: cover the nodes/proxy rule with a flow\n%s", r)
			}
		}},
		{flow: "xid", code: 3, line: denied("create", "pods")},
		{unused: "KWOK pods never finish, so no check pod's log is ever read here", check: func(t *testing.T) {}},
		{flow: "nccl", code: 3, line: denied("list", "pods")},
		{flow: "nccl", code: 3, line: denied("create", "secrets")},
		{flow: "nccl", code: 3, line: denied("create", "jobs")},
		{flow: "nccl-jobset", code: 3, line: denied("create", "jobsets")},
		{unused: "the MPIJob API is not served by the test control plane", check: func(t *testing.T) {
			if _, err := cp.Client.Discovery().ServerResourcesForGroupVersion("kubeflow.org/v2beta1"); err == nil {
				t.Error("kubeflow.org/v2beta1 is served now: cover the mpijobs rule with a flow")
			}
		}},
		{flow: "nccl", code: 3, line: denied("get", "configmaps")},
	})
}

// policyCRDs serves a CRD for each network policy kind the network-policy
// gate reads where its CRD is served (pkg/health PolicyKinds: Cilium's and
// Calico's), with any spec, so that the gate lists them; removed at the
// end.
func policyCRDs(t *testing.T, cp *harness.ControlPlane) {
	t.Helper()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, k := range health.PolicyKinds {
		if k.CRD == "" {
			continue
		}
		kind := k.Kind[strings.LastIndex(k.Kind, "/")+1:]
		scope := apiextensionsv1.NamespaceScoped
		if strings.Contains(kind, "Clusterwide") || strings.HasPrefix(kind, "Global") {
			scope = apiextensionsv1.ClusterScoped
		}
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: k.CRD},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: k.GVR.Group, Scope: scope,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: k.GVR.Resource, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: k.GVR.Version, Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}})
	}
	if err := cp.ApplyCRDs(context.Background(), crds...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range crds {
			_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), c.Name, metav1.DeleteOptions{})
		}
	})
}
