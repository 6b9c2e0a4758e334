package preflight

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// TestWorkloadIdentityGKEWithoutAnnotation: Workload Identity Federation
// for GKE may grant IAM to the Kubernetes ServiceAccount itself
// (principal://.../subject/ns/NS/sa/KSA), so no ServiceAccount carries
// iam.gke.io/gcp-service-account; a node labelled
// iam.gke.io/gke-metadata-server-enabled=true, or the provider being GKE,
// still has the gke-metadata-server DaemonSet read: not ready is a FAIL
// in preflight and in verify, not "no ServiceAccount carries an identity
// binding".
func TestWorkloadIdentityGKEWithoutAnnotation(t *testing.T) {
	ctx := context.Background()
	cluster := func(ready int32, labelled bool, prov string) *Runner {
		objs := []runtime.Object{
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "trainer"}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}},
		}
		if labelled {
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2", Labels: map[string]string{health.LabelGKEMetadataServer: "true"}}},
				&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: health.GKEMetadataServerDaemonSet},
					Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: ready}})
		}
		inv := &skew.Inventory{}
		inv.Server.GitVersion = "v1.37.2" + prov
		return &Runner{Kube: fake.NewSimpleClientset(objs...), inventory: func() *skew.Inventory { return inv }}
	}
	g, base := cluster(1, true, "").workloadIdentityGate(ctx)
	if g.Status != StatusPass || !strings.Contains(g.Message, "the GKE metadata server is ready for the pods on 1 node labelled "+health.LabelGKEMetadataServer+"=true") {
		t.Errorf("ready: %s %q", g.Status, g.Message)
	}
	g, now := cluster(0, true, "").workloadIdentityGate(ctx)
	if g.Status != StatusFail || !strings.Contains(g.Message, "the GKE metadata server that serves the identity of the pods on 1 node labelled") {
		t.Errorf("not ready: %s %q", g.Status, g.Message)
	}
	regs := verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != "gke-metadata-server" ||
		!strings.Contains(regs[0].Message, "pods of the ServiceAccounts on 1 node labelled") {
		t.Errorf("verify: %+v", regs)
	}
	// Labelled nodes dropping (a GPU pool recreated with
	// --workload-metadata=GCE_METADATA) while the DaemonSet is fully ready
	// on the nodes left: a FAIL naming both counts.
	ten := *base
	tenGKE := *base.GKE
	tenGKE.Nodes, tenGKE.Desired, tenGKE.Ready = 10, 10, 10
	ten.GKE = &tenGKE
	regs = verifyWorkloadIdentity(&ten, base)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != "gke-metadata-server" ||
		!strings.Contains(regs[0].Message, "1 node labelled "+health.LabelGKEMetadataServer+"=true, 10 at the baseline") {
		t.Errorf("labelled nodes dropped: %+v", regs)
	}
	if regs := verifyWorkloadIdentity(base, &ten); len(regs) != 0 {
		t.Errorf("labelled nodes added: %+v", regs)
	}
	// GKE with the federation off on every node pool: nothing serves, PASS
	// saying so.
	g, _ = cluster(0, false, "-gke.1200").workloadIdentityGate(ctx)
	if g.Status != StatusPass || !strings.Contains(g.Message, "Workload Identity Federation for GKE is off on every node pool") {
		t.Errorf("GKE, off: %s %q", g.Status, g.Message)
	}
	// Not GKE and nothing labelled: no DaemonSet read.
	g, ev := cluster(0, false, "").workloadIdentityGate(ctx)
	if g.Status != StatusPass || ev.GKE != nil || strings.Contains(g.Message, "GKE") {
		t.Errorf("elsewhere: %s %q %+v", g.Status, g.Message, ev.GKE)
	}
}
