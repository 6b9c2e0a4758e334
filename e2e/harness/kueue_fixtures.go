package harness

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetclient "sigs.k8s.io/jobset/client-go/clientset/versioned"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// KueueClient returns a clientset for Kueue's API.
func (cp *ControlPlane) KueueClient() kueueclient.Interface {
	return kueueclient.NewForConfigOrDie(cp.Config)
}

// JobSetClient returns a clientset for JobSet's API.
func (cp *ControlPlane) JobSetClient() jobsetclient.Interface {
	return jobsetclient.NewForConfigOrDie(cp.Config)
}

// ResourceFlavor returns a flavor that places workloads on nodes with the
// given labels (for example PoolLabel: "h100-a").
func ResourceFlavor(name string, nodeLabels map[string]string) *kueuev1beta2.ResourceFlavor {
	return &kueuev1beta2.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       kueuev1beta2.ResourceFlavorSpec{NodeLabels: nodeLabels},
	}
}

// ClusterQueue returns a queue open to every namespace with a nominal quota
// of gpus nvidia.com/gpu (and ample cpu and memory) in flavor.
func ClusterQueue(name, flavor string, gpus int) *kueuev1beta2.ClusterQueue {
	return &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, GPUResource},
				Flavors: []kueuev1beta2.FlavorQuotas{{
					Name: kueuev1beta2.ResourceFlavorReference(flavor),
					Resources: []kueuev1beta2.ResourceQuota{
						{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("10000")},
						{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("100Ti")},
						{Name: GPUResource, NominalQuota: *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
					},
				}},
			}},
		},
	}
}

// LocalQueue returns a namespaced queue feeding clusterQueue.
func LocalQueue(ns, name, clusterQueue string) *kueuev1beta2.LocalQueue {
	return &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(clusterQueue)},
	}
}

// CreateQueues creates a ResourceFlavor, a ClusterQueue with gpus GPUs of
// quota and a LocalQueue in ns (all named name, the flavor selecting
// nodeLabels), and waits until the ClusterQueue is active. The cluster-scoped
// objects are deleted by the returned cleanup.
func (cp *ControlPlane) CreateQueues(ctx context.Context, ns, name string, nodeLabels map[string]string, gpus int) (cleanup func(), err error) {
	kc := cp.KueueClient().KueueV1beta2()
	if _, err := kc.ResourceFlavors().Create(ctx, ResourceFlavor(name, nodeLabels), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := kc.ClusterQueues().Create(ctx, ClusterQueue(name, name, gpus), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := kc.LocalQueues(ns).Create(ctx, LocalQueue(ns, name, name), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	cleanup = func() {
		bg := context.Background()
		_ = kc.ClusterQueues().Delete(bg, name, metav1.DeleteOptions{})
		_ = kc.ResourceFlavors().Delete(bg, name, metav1.DeleteOptions{})
	}
	err = Eventually(ctx, "ClusterQueue "+name+" active", 60*time.Second, func(ctx context.Context) (bool, error) {
		cq, err := kc.ClusterQueues().Get(ctx, name, getOpts)
		if err != nil {
			return false, err
		}
		return metaConditionTrue(cq.Status.Conditions, kueuev1beta2.ClusterQueueActive), nil
	})
	if err != nil {
		cleanup()
		return nil, err
	}
	return cleanup, nil
}

// QueuedJob returns Job(...) created suspended in queue, as Kueue expects
// when its admission webhook is not registered.
func QueuedJob(ns, name, queue string, parallelism int32, gpusPerPod int) *batchv1.Job {
	j := Job(ns, name, parallelism, gpusPerPod, false)
	j.Labels[QueueNameLabel] = queue
	j.Spec.Suspend = ptr.To(true)
	return j
}

// WorkloadFor returns the Kueue Workload owned by the object with uid.
func (cp *ControlPlane) WorkloadFor(ctx context.Context, ns string, uid string) (*kueuev1beta2.Workload, error) {
	wls, err := cp.KueueClient().KueueV1beta2().Workloads(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range wls.Items {
		for _, o := range wls.Items[i].OwnerReferences {
			if string(o.UID) == uid {
				return &wls.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no workload owned by %s in %s", uid, ns)
}

// WorkloadAdmitted reports whether the workload's Admitted condition is True.
func WorkloadAdmitted(wl *kueuev1beta2.Workload) bool {
	return metaConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
}

// TrainingJobSet returns a JobSet gang of workers Indexed pods (one
// replicated job "workers", one pod per node asking gpusPerPod GPUs). With
// queue set it is created suspended with the queue-name label, for Kueue.
// Its pods stay Running under KWOK.
func TrainingJobSet(ns, name, queue string, workers int32, gpusPerPod int) *jobsetv1alpha2.JobSet {
	job := Job(ns, name, workers, gpusPerPod, false)
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
				Name:     "workers",
				Replicas: 1,
				Template: batchv1.JobTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       job.Spec,
				},
			}},
		},
	}
	if queue != "" {
		js.Labels[QueueNameLabel] = queue
		js.Spec.Suspend = ptr.To(true)
	}
	return js
}
