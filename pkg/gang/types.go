package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// Kind is what holds a gang together.
type Kind string

// Gang kinds.
const (
	KindJobSet          Kind = "JobSet"
	KindJob             Kind = "Job"
	KindLeaderWorkerSet Kind = "LeaderWorkerSet"
	KindPyTorchJob      Kind = "PyTorchJob"
	KindMPIJob          Kind = "MPIJob"
	KindTrainJob        Kind = "TrainJob"
	KindVolcanoJob      Kind = "VolcanoJob"
	KindPodGroup        Kind = "PodGroup"
)

// StopMethod is how a gang is stopped as one unit.
type StopMethod string

// Stop methods.
const (
	// StopKueue sets the Kueue Workload's spec.active=false; Kueue evicts
	// the gang and keeps it queued until it is reactivated.
	StopKueue StopMethod = "kueue-deactivate"
	// StopSuspend sets spec.suspend=true (spec.runPolicy.suspend for
	// kubeflow jobs) on the root object.
	StopSuspend StopMethod = "suspend"
	// StopScaleToZero sets spec.replicas=0 on a LeaderWorkerSet, recording
	// the replicas to restore.
	StopScaleToZero StopMethod = "scale-to-zero"
	// StopDeletePods deletes every pod of a bare pod group together.
	StopDeletePods StopMethod = "delete-pods"
	// StopUnsupported means the gang cannot be stopped as a unit by this
	// tool; its nodes cannot be drained safely.
	StopUnsupported StopMethod = "unsupported"
)

// Object names a Kubernetes object with its resource.
type Object struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid,omitempty"`
	// Resource is the plural resource name, e.g. "jobsets".
	Resource string `json:"resource"`
}

// GVR returns the object's group, version and resource.
func (o Object) GVR() schema.GroupVersionResource {
	gv, _ := schema.ParseGroupVersion(o.APIVersion)
	return gv.WithResource(o.Resource)
}

// Target returns the object as a checkpoint target.
func (o Object) Target() checkpoint.Target {
	return checkpoint.Target{Resource: o.GVR(), Namespace: o.Namespace, Name: o.Name}
}

// Pod is one rank of a gang.
type Pod struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	Node string    `json:"node,omitempty"`
	GPUs int64     `json:"gpus"`
	// OnChosenNode is true when the pod runs on one of the nodes being
	// drained.
	OnChosenNode bool `json:"onChosenNode"`
	// GracePeriodSeconds is the pod's terminationGracePeriodSeconds (the
	// Kubernetes default when unset): how long its containers have between
	// SIGTERM and SIGKILL when the gang is stopped.
	GracePeriodSeconds int64 `json:"terminationGracePeriodSeconds"`
}

// DefaultGracePeriodSeconds is Kubernetes' default
// terminationGracePeriodSeconds (k8s.io/api core/v1
// DefaultTerminationGracePeriodSeconds).
const DefaultGracePeriodSeconds = corev1.DefaultTerminationGracePeriodSeconds

// PodGracePeriod returns a pod's terminationGracePeriodSeconds, or the
// default when unset.
func PodGracePeriod(p *corev1.Pod) int64 {
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return DefaultGracePeriodSeconds
}

// Gang is one training gang: pods that must stop and start together.
type Gang struct {
	// Key is "namespace/Kind/name", unique per gang.
	Key       string `json:"key"`
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Root is the object the gang hangs from; nil for a bare pod group.
	Root *Object `json:"root,omitempty"`
	// Workload is the Kueue Workload admitting the gang, if any.
	Workload *Object `json:"workload,omitempty"`
	// Queue is the Kueue queue name.
	Queue string `json:"queue,omitempty"`
	// Method is how the gang would be stopped.
	Method StopMethod `json:"stopMethod"`
	// Problem says why the gang cannot be stopped as a unit.
	Problem string `json:"problem,omitempty"`

	Pods         []Pod    `json:"pods"`
	Ranks        int      `json:"ranks"`
	RanksOnNodes int      `json:"ranksOnNodes"`
	GPUs         int64    `json:"gpus"`
	GPUsOnNodes  int64    `json:"gpusOnNodes"`
	Nodes        []string `json:"nodes"`
	// StartedAt is when the earliest running rank started.
	StartedAt time.Time `json:"startedAt,omitzero"`

	// Labels and Annotations of the root object (or of the first pod for a
	// bare pod group), for the checkpoint protocol.
	Labels      map[string]string `json:"-"`
	Annotations map[string]string `json:"-"`

	indexed bool
}

// PodNames lists the gang's pod names.
func (g *Gang) PodNames() []string {
	out := make([]string, 0, len(g.Pods))
	for _, p := range g.Pods {
		out = append(out, p.Name)
	}
	return out
}

// PodGPUs returns the GPUs a pod asks for (requests, else limits) of the
// given resources, summed over its containers.
func PodGPUs(p *corev1.Pod, resources []corev1.ResourceName) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		for _, r := range resources {
			if q, ok := c.Resources.Requests[r]; ok {
				n += q.Value()
			} else if q, ok := c.Resources.Limits[r]; ok {
				n += q.Value()
			}
		}
	}
	return n
}

// DefaultGPUResources are the extended resources counted as GPUs.
var DefaultGPUResources = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}
