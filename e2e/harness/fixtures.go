package harness

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// PodSpec returns a pod spec with one pause container that asks for gpus
// nvidia.com/gpu (none when 0) and runs only on KWOK nodes.
func PodSpec(gpus int) corev1.PodSpec {
	c := corev1.Container{Name: "main", Image: PauseImage}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		c.Resources.Requests[GPUResource] = q
		c.Resources.Limits = corev1.ResourceList{GPUResource: q}
	}
	return corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		// KWOK nodes are the only nodes; say so explicitly.
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "type", Operator: corev1.NodeSelectorOpIn, Values: []string{"kwok"}}},
			}}},
		}},
	}
}

// Deployment returns a Deployment of replicas pause pods labelled app=name.
func Deployment(ns, name string, replicas int32, gpusPerPod int) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       PodSpec(gpusPerPod),
			},
		},
	}
}

// CreateDeployment creates d and waits until all its replicas are Ready.
func (cp *ControlPlane) CreateDeployment(ctx context.Context, d *appsv1.Deployment) (*appsv1.Deployment, error) {
	created, err := cp.Client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
	if err := cp.WaitPodsReady(ctx, d.Namespace, sel.String(), int(want), 90*time.Second); err != nil {
		return nil, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	return created, nil
}

// WaitPodsReady waits until at least n pods matching selector are Ready.
func (cp *ControlPlane) WaitPodsReady(ctx context.Context, ns, selector string, n int, timeout time.Duration) error {
	var ready, total int
	err := Eventually(ctx, fmt.Sprintf("%d ready pods %q in %s", n, selector, ns), timeout, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		ready, total = 0, len(pods.Items)
		for i := range pods.Items {
			if PodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%d of %d ready)", err, ready, total)
	}
	return nil
}

// PDB returns a PodDisruptionBudget over pods labelled app=app with the
// given minAvailable.
func PDB(ns, name, app string, minAvailable int) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(int32(minAvailable))),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
}

// CreatePDB creates pdb and waits until the disruption controller has
// observed it (status.observedGeneration catches up) and counts expectPods
// pods (currentHealthy+... = expectedPods); expectPods < 0 skips that check.
func (cp *ControlPlane) CreatePDB(ctx context.Context, pdb *policyv1.PodDisruptionBudget, expectPods int32) (*policyv1.PodDisruptionBudget, error) {
	created, err := cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var got *policyv1.PodDisruptionBudget
	err = Eventually(ctx, "PDB "+pdb.Name+" status", 60*time.Second, func(ctx context.Context) (bool, error) {
		got, err = cp.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Get(ctx, created.Name, getOpts)
		if err != nil {
			return false, err
		}
		if got.Status.ObservedGeneration < got.Generation {
			return false, nil
		}
		return expectPods < 0 || got.Status.ExpectedPods == expectPods, nil
	})
	return got, err
}

// Job returns an Indexed Job of parallelism pods asking gpusPerPod GPUs
// each. Its pods keep running under KWOK unless complete is true, in which
// case they are labelled KwokCompleteLabel and finish at once.
func Job(ns, name string, parallelism int32, gpusPerPod int, complete bool) *batchv1.Job {
	lbl := map[string]string{"app": name}
	if complete {
		lbl[KwokCompleteLabel] = "true"
	}
	spec := PodSpec(gpusPerPod)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(parallelism),
			Completions:    ptr.To(parallelism),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit:   ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec:       spec,
			},
		},
	}
}

var getOpts = metav1.GetOptions{}

func metaConditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}
