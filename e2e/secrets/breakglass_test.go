//go:build e2e

package secretse2e

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// whoAmI is the user the kubeconfig authenticates as, as the server says.
func whoAmI(t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	ssr, err := cp.Client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || ssr.Status.UserInfo.Username == "" {
		t.Fatalf("self subject review: %v", err)
	}
	return ssr.Status.UserInfo.Username
}

// checkRecord checks a break-glass record "<prefix><user>[ (<program>)]
// at <RFC 3339>" names user and a time inside [from, to].
func checkRecord(t *testing.T, what, got, prefix, user string, from, to time.Time) {
	t.Helper()
	i := strings.LastIndex(got, " at ")
	if i < 0 {
		t.Errorf("%s: record %q has no time", what, got)
		return
	}
	who := got[:i]
	if who != prefix+user && !strings.HasPrefix(who, prefix+user+" (") {
		t.Errorf("%s: record %q, want %q[ (program)] at <time>", what, got, prefix+user)
	}
	at, err := time.Parse(time.RFC3339, got[i+len(" at "):])
	if err != nil || at.Before(from.Truncate(time.Second)) || at.After(to) {
		t.Errorf("%s: record %q: time %v not within the run (%s to %s)", what, got, err, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
}

// TestBreakGlassGangDrainDisableEviction: `gang-drain run
// --disable-eviction` deletes a pod its PodDisruptionBudget protects, and
// the node keeps who did it and when.
func TestBreakGlassGangDrainDisableEviction(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	pool := "bg-" + ns[len(ns)-5:]
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: pool, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0].Name
	t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	if _, err := cp.CreateDeployment(ctx, harness.Deployment(ns, "svc", 1, 1)); err != nil {
		t.Fatal(err)
	}
	// minAvailable 1 of 1: the eviction API refuses every eviction.
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "svc", "svc", 1), 1); err != nil {
		t.Fatal(err)
	}
	user := whoAmI(t, cp)
	from := time.Now()
	res := plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-gang_drain"), plugintest.Cmd{
		Args:    []string{"run", node, "--disable-eviction", "--kubeconfig", cp.Kubeconfig, "--timeout", "90s", "--poll-interval", "1s"},
		Timeout: 2 * time.Minute,
	})
	to := time.Now().Add(time.Second)
	if res.ExitCode != 0 {
		t.Fatalf("gang-drain run --disable-eviction: exit %d\n%s", res.ExitCode, res)
	}
	if !strings.Contains(res.Stderr, "BREAK-GLASS") {
		t.Errorf("no break-glass warning on stderr\n%s", res.Stderr)
	}
	n, err := cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const ann = "gpufleet.dev/gang-drain.disable-eviction-by"
	got, ok := n.Annotations[ann]
	if !ok {
		t.Fatalf("node %s has no %s after --disable-eviction; annotations %v", node, ann, n.Annotations)
	}
	checkRecord(t, "node "+node, got, "", user, from, to)
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s still on the drained node", p.Name)
		}
	}
}

// TestBreakGlassCRDMigrateForce: `crd-migrate run --force` on a CRD that
// needs nothing rewrites it anyway, and the CRD keeps who did it and when.
func TestBreakGlassCRDMigrateForce(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	group := ns + ".breakglass.example.com"
	crd := harness.MultiVersionCRD(group, "Widget", "widgets", []string{"v1"}, "v1")
	if err := cp.ApplyCRDs(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if err := harness.Eventually(ctx, "create a Widget", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": "1"},
		}}, metav1.CreateOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	user := whoAmI(t, cp)
	from := time.Now()
	res := plugintest.Run(t, "kubectl-crd_migrate", "run", crd.Name, "--force", "--method", "client", "--kubeconfig", cp.Kubeconfig)
	to := time.Now().Add(time.Second)
	if res.ExitCode != 0 {
		t.Fatalf("crd-migrate run --force: exit %d\n%s", res.ExitCode, res)
	}
	got, err := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := got.Annotations["gpufleet.dev/break-glass"]
	if !ok {
		t.Fatalf("CRD %s has no gpufleet.dev/break-glass after --force; annotations %v\n%s", crd.Name, got.Annotations, res.Stderr)
	}
	checkRecord(t, "CRD "+crd.Name, rec, "crd-migrate run --force by ", user, from, to)
	if !strings.Contains(res.Stderr, "break-glass") {
		t.Errorf("the run does not say it recorded the break-glass\n%s", res.Stderr)
	}
}
