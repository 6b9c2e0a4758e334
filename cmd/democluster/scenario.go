package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// The demo fleet: three pools of H100 nodes, two kubelet versions.
var demoPools = []harness.GPUPool{
	{Name: "h100-a", Nodes: 4, KubeletVersion: harness.KubeVersion, RackSets: 2},
	{Name: "h100-b", Nodes: 4, KubeletVersion: harness.KubeVersion, RackSets: 2},
	{Name: "h100-c", Nodes: 4, KubeletVersion: "v1.34.6", RackSets: 2},
}

const (
	inferenceNS = "inference"
	trainingNS  = "training"
	crdGroup    = "demo.gpufleet.dev"
)

// createScenario builds the demo objects and returns a summary to print.
func createScenario(ctx context.Context, cp *harness.ControlPlane) (string, error) {
	var sb strings.Builder
	for _, p := range demoPools {
		if _, err := cp.CreateGPUNodes(ctx, p); err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "  pool %-7s %d nodes x 8 nvidia.com/gpu, kubelet %s\n", p.Name, p.Nodes, p.KubeletVersion)
	}
	for _, ns := range []string{inferenceNS, trainingNS} {
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
	}

	// A serving Deployment on the old pool whose PDB allows no disruption:
	// draining h100-c is blocked until someone scales it or relaxes the PDB.
	d := harness.Deployment(inferenceNS, "llm-serve", 2, 1)
	d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: "h100-c"}
	if _, err := cp.CreateDeployment(ctx, d); err != nil {
		return "", err
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(inferenceNS, "llm-serve", "llm-serve", 2), 2); err != nil {
		return "", err
	}
	sb.WriteString("  inference/llm-serve: 2 pods on h100-c, PDB minAvailable 2 (disruptionsAllowed 0)\n")

	if err := storageVersionScenario(ctx, cp); err != nil {
		return "", err
	}
	sb.WriteString("  CRD checkpoints." + crdGroup + ": storage moved v1alpha1 -> v1beta1, storedVersions still lists v1alpha1\n")

	if err := deprecatedCall(ctx, cp.Config); err != nil {
		return "", err
	}
	sb.WriteString("  a legacy client listed resource.k8s.io/v1beta1 resourceslices (deprecated, removed in 1.38)\n")

	switch {
	case cp.Options.Kueue && cp.Options.JobSet:
		if err := trainingScenario(ctx, cp, "training"); err != nil {
			return "", err
		}
		sb.WriteString("  training/llama-pretrain: JobSet gang of 4 x 8 GPUs on h100-a, admitted by Kueue (queue training)\n")
	case cp.Options.JobSet:
		if err := trainingScenario(ctx, cp, ""); err != nil {
			return "", err
		}
		sb.WriteString("  training/llama-pretrain: JobSet gang of 4 x 8 GPUs on h100-a\n")
	default:
		sb.WriteString("  (JobSet not running: no training gang; start with --jobset)\n")
	}
	return sb.String(), nil
}

func storageVersionScenario(ctx context.Context, cp *harness.ControlPlane) error {
	crd := harness.MultiVersionCRD(crdGroup, "Checkpoint", "checkpoints", []string{"v1alpha1", "v1beta1"}, "v1alpha1")
	if err := cp.ApplyCRDs(ctx, crd); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: crdGroup, Version: "v1alpha1", Resource: "checkpoints"}
	for i := 0; i < 3; i++ {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crdGroup + "/v1alpha1",
			"kind":       "Checkpoint",
			"metadata":   map[string]any{"name": fmt.Sprintf("step-%d", (i+1)*1000), "namespace": trainingNS},
			"spec":       map[string]any{"size": fmt.Sprintf("%dGi", 40+i)},
		}}
		if err := retry(ctx, func() error {
			_, err := dyn.Resource(gvr).Namespace(trainingNS).Create(ctx, obj, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("create checkpoint: %w", err)
		}
	}
	moved := harness.MultiVersionCRD(crdGroup, "Checkpoint", "checkpoints", []string{"v1alpha1", "v1beta1"}, "v1beta1")
	return cp.ApplyCRDs(ctx, moved)
}

// deprecatedCall lists a deprecated API as an old client would, so that
// apiserver_requested_deprecated_apis and the audit log record it.
func deprecatedCall(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.UserAgent = "legacy-dra-inventory/0.9 (linux/amd64)"
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	return cs.Discovery().RESTClient().Get().AbsPath("/apis/resource.k8s.io/v1beta1/resourceslices").Do(ctx).Error()
}

func trainingScenario(ctx context.Context, cp *harness.ControlPlane, queue string) error {
	if queue != "" {
		if _, err := cp.CreateQueues(ctx, trainingNS, queue, map[string]string{harness.PoolLabel: "h100-a"}, 32); err != nil {
			return err
		}
	}
	js := harness.TrainingJobSet(trainingNS, "llama-pretrain", queue, 4, 8)
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: "h100-a"}
	}
	if _, err := cp.JobSetClient().JobsetV1alpha2().JobSets(trainingNS).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		return err
	}
	return cp.WaitPodsReady(ctx, trainingNS, "jobset.sigs.k8s.io/jobset-name=llama-pretrain", 4, 2*time.Minute)
}

func retry(ctx context.Context, f func() error) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = f(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}
