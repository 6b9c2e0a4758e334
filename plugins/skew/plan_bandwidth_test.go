package skew

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// servingCluster is the test cluster with a pool h100-s serving one model
// Deployment (a replica on each node, 140Gi of weights, a budget).
func servingCluster() []runtime.Object {
	lbl := map[string]string{"app": "llm"}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llm", UID: "uid-llm",
		Annotations: map[string]string{inference.AnnWeightsBytes: "140Gi", inference.AnnWeightsSource: "object-store"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llm-abc", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "llm", UID: types.UID("uid-llm"), Controller: ptr.To(true)}}}}
	one := intstr.FromInt32(1)
	objs := []runtime.Object{d, rs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llm"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: lbl}}}}
	for _, n := range []string{"s-0", "s-1"} {
		nd := gpuNode(n, "h100-s", "v1.37.2")
		nd.Labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
		nd.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
		nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		objs = append(objs, nd)
	}
	for i, n := range []string{"s-0", "s-1"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llm-" + string(rune('a'+i)), Labels: lbl,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, Controller: ptr.To(true)}}},
			Spec:   spec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		p.Spec.NodeName = n
		objs = append(objs, p)
	}
	return objs
}

// surgeCluster is servingCluster with a GPU pool h100-f of one free node
// of the same product: headroom to surge the model into.
func surgeCluster() []runtime.Object {
	nd := gpuNode("f-0", "h100-f", "v1.37.2")
	nd.Labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
	nd.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	nd.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return append(servingCluster(), nd)
}

// plan --hydrate-bandwidth plans an inference pool's drain with it, as
// gang-drain takes it: the runbook sets BW to the bandwidth it was planned
// with; without it the runbook asks for one. A bandwidth gang-drain
// refuses is a usage error with its parser's words.
func TestPlanHydrateBandwidth(t *testing.T) {
	with := run(t, getter(cluster("v1.37.2", servingCluster()...)), "", "plan", "--target", "v1.38", "--runbook", "--hydrate-bandwidth", "object-store=1250M/s")
	if !strings.Contains(with.Out, "BW=object-store=1250000000/s   # the hydrate bandwidth it was planned with") {
		t.Errorf("with --hydrate-bandwidth: exit %d err %q\n%s", with.Code, with.Err, with.Out)
	}
	without := run(t, getter(cluster("v1.37.2", servingCluster()...)), "", "plan", "--target", "v1.38", "--runbook")
	if strings.Contains(without.Out, "it was planned with") || !strings.Contains(without.Out, "BW='object-store=<bytes-per-second>'") {
		t.Errorf("without --hydrate-bandwidth: exit %d err %q\n%s", without.Code, without.Err, without.Out)
	}
	_, perr := inference.ParseBandwidth([]string{"object-store=fast"})
	bad := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "v1.38", "--hydrate-bandwidth", "object-store=fast")
	if perr == nil || bad.Code != cli.ExitUsage || !strings.Contains(bad.Err, perr.Error()) {
		t.Errorf("bad bandwidth: exit %d err %q (parser: %v)", bad.Code, bad.Err, perr)
	}
}
