//go:build e2e

// Package queueing runs the Kueue and JobSet smoke tests against a control
// plane that runs both managers.
package queueing

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestMain starts the Kueue and JobSet managers with the control plane;
// E2E_QUEUEING=0 skips the package (building both adds minutes to a cold run).
func TestMain(m *testing.M) {
	if os.Getenv("E2E_QUEUEING") == "0" {
		fmt.Println("skipping the Kueue and JobSet e2e tests (E2E_QUEUEING=0)")
		os.Exit(0)
	}
	harness.Main(m, harness.Options{Kueue: true, JobSet: true})
}

func setup(t *testing.T, gpus int) (*harness.ControlPlane, context.Context, string, string) {
	t.Helper()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	ns := cp.Namespace(t)
	pool := "q-" + ns[len(ns)-5:]
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: pool, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
	cleanup, err := cp.CreateQueues(ctx, ns, pool, map[string]string{harness.PoolLabel: pool}, gpus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return cp, ctx, ns, pool
}

// TestKueueAdmitsAndDeactivates shows that a suspended Job with a queue name
// is admitted by the real Kueue manager and runs, and that setting its
// Workload's spec.active=false evicts it: the Job is suspended again and its
// pods go away.
func TestKueueAdmitsAndDeactivates(t *testing.T) {
	cp, ctx, ns, queue := setup(t, 16)
	job, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, harness.QueuedJob(ns, "train", queue, 2, 8), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wl *kueuev1beta2.Workload
	if err := harness.Eventually(ctx, "workload admitted", 90*time.Second, func(ctx context.Context) (bool, error) {
		wl, err = cp.WorkloadFor(ctx, ns, string(job.UID))
		return err == nil && harness.WorkloadAdmitted(wl), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := cp.WaitPodsReady(ctx, ns, "app=train", 2, 90*time.Second); err != nil {
		t.Fatal(err)
	}

	patch := []byte(`{"spec":{"active":false}}`)
	if _, err := cp.KueueClient().KueueV1beta2().Workloads(ns).Patch(ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "workload evicted and job suspended", 90*time.Second, func(ctx context.Context) (bool, error) {
		got, err := cp.KueueClient().KueueV1beta2().Workloads(ns).Get(ctx, wl.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		j, err := cp.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		evicted := false
		for _, c := range got.Status.Conditions {
			if c.Type == kueuev1beta2.WorkloadEvicted && c.Status == metav1.ConditionTrue {
				evicted = true
			}
		}
		return evicted && !harness.WorkloadAdmitted(got) && j.Spec.Suspend != nil && *j.Spec.Suspend, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "pods gone", 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=train"})
		return err == nil && len(pods.Items) == 0, err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestJobSetGangRunsUnderKueue shows a JobSet training gang admitted by
// Kueue, defaulted by the JobSet webhook and run by the JobSet controller,
// with pods that stay Running under KWOK.
func TestJobSetGangRunsUnderKueue(t *testing.T) {
	cp, ctx, ns, queue := setup(t, 16)
	js, err := cp.JobSetClient().JobsetV1alpha2().JobSets(ns).Create(ctx, harness.TrainingJobSet(ns, "gang", queue, 2, 8), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := "jobset.sigs.k8s.io/jobset-name=gang"
	if err := cp.WaitPodsReady(ctx, ns, sel, 2, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	wl, err := cp.WorkloadFor(ctx, ns, string(js.UID))
	if err != nil || !harness.WorkloadAdmitted(wl) {
		t.Fatalf("workload for the JobSet: %v admitted=%v", err, wl != nil && harness.WorkloadAdmitted(wl))
	}
	// Training pods must not complete on their own.
	time.Sleep(3 * time.Second)
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if !harness.PodReady(&p) {
			t.Errorf("pod %s: phase %s, want Running and Ready", p.Name, p.Status.Phase)
		}
	}
	t.Logf("gang pods running: %d", len(pods.Items))
}
