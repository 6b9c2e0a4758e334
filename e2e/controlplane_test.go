//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestControlPlaneSmoke proves the harness runs real components: KWOK nodes
// report the chosen kubelet version, Deployment pods become Ready, the real
// disruption controller fills PDB status, and the real apiserver refuses an
// eviction that PDB forbids with 429.
func TestControlPlaneSmoke(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)

	pool := harness.GPUPool{Name: "smoke-" + ns[len(ns)-5:], Nodes: 2, KubeletVersion: "v1.36.4", RackSets: 2}
	nodes, err := cp.CreateGPUNodes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	for _, n := range nodes {
		if got := n.Status.NodeInfo.KubeletVersion; got != "v1.36.4" {
			t.Errorf("node %s kubeletVersion = %q, want v1.36.4", n.Name, got)
		}
		if got := n.Status.Allocatable[harness.GPUResource]; got.Value() != 8 {
			t.Errorf("node %s allocatable %s = %s, want 8", n.Name, harness.GPUResource, got.String())
		}
	}

	if _, err := cp.CreateDeployment(ctx, harness.Deployment(ns, "trainer", 2, 4)); err != nil {
		t.Fatal(err)
	}

	pdb, err := cp.CreatePDB(ctx, harness.PDB(ns, "trainer", "trainer", 2), 2)
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Status.CurrentHealthy != 2 || pdb.Status.DesiredHealthy != 2 || pdb.Status.DisruptionsAllowed != 0 {
		t.Fatalf("PDB status = %+v, want currentHealthy 2, desiredHealthy 2, disruptionsAllowed 0", pdb.Status)
	}

	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=trainer"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("list pods: %v (%d pods)", err, len(pods.Items))
	}
	victim := pods.Items[0]
	if victim.Spec.NodeName == "" {
		t.Fatalf("pod %s was not scheduled", victim.Name)
	}
	err = cp.Client.CoreV1().Pods(ns).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victim.Name},
	})
	var status apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict %s: got %v, want 429 Too Many Requests", victim.Name, err)
	}
	if ok := asStatus(err, &status); !ok || status.Status().Code != http.StatusTooManyRequests {
		t.Fatalf("evict %s: status %+v, want code 429", victim.Name, status)
	}
	t.Logf("eviction refused as expected: %s", status.Status().Message)

	// The pod is still there and still Ready.
	got, err := cp.Client.CoreV1().Pods(ns).Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil || !harness.PodReady(got) || got.DeletionTimestamp != nil {
		t.Fatalf("pod %s after refused eviction: err=%v phase=%v", victim.Name, err, podPhase(got))
	}
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*out = s
	}
	return ok
}

func podPhase(p *corev1.Pod) corev1.PodPhase {
	if p == nil {
		return ""
	}
	return p.Status.Phase
}
