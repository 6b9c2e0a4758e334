package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// rootAPIVersions are the versions used to name a root object from its
// kind alone (the served versions of the controllers gang-drain supports).
var rootAPIVersions = map[string]string{
	"JobSet":          "jobset.x-k8s.io/v1alpha2",
	"Job":             "batch/v1",
	"LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
	"PyTorchJob":      "kubeflow.org/v1",
	"MPIJob":          "kubeflow.org/v2beta1",
	"TrainJob":        "trainer.kubeflow.org/v1alpha1",
	"Workload":        kueuev1beta2.GroupVersion.String(),
}

// RootRef names the root object of a gang from an apiVersion (optional:
// the usual version of kind), a kind and a name, as an owner reference
// does. Kind must be one gang-drain stops as a unit, or a Kueue Workload.
func RootRef(apiVersion, kind, ns, name string) (*Object, error) {
	if apiVersion == "" {
		apiVersion = rootAPIVersions[kind]
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || apiVersion == "" {
		return nil, fmt.Errorf("unknown root kind %q: want one of %s, or give its apiVersion", kind, strings.Join(rootKinds(), ", "))
	}
	resource := ""
	if info, ok := knownKinds[schema.GroupKind{Group: gv.Group, Kind: kind}]; ok && info.gang != "" {
		resource = info.resource
	} else if gv.Group == kueueGroup && kind == "Workload" {
		resource = workloadsResourceName
	} else {
		return nil, fmt.Errorf("%s %s is not a gang root gang-drain knows: want one of %s", apiVersion, kind, strings.Join(rootKinds(), ", "))
	}
	return &Object{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, Resource: resource}, nil
}

func rootKinds() []string {
	out := make([]string, 0, len(rootAPIVersions))
	for k := range rootAPIVersions {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RootFromLabels names the object a gang's checkpoint-and-yield requests
// are written on, from one pod's labels alone (what a downward-API volume
// shows a container): the JobSet or LeaderWorkerSet the pod belongs to, or
// the Workload of a Kueue pod group (named after the group). It returns
// nil when the labels name none; then the pod's owners decide (RootOfPod).
func RootFromLabels(ns string, labels map[string]string) *Object {
	if v := labels[LabelJobSetName]; v != "" {
		o, _ := RootRef("", "JobSet", ns, v)
		return o
	}
	if v := labels[LabelLWSName]; v != "" {
		o, _ := RootRef("", "LeaderWorkerSet", ns, v)
		return o
	}
	if v := labels[LabelKueuePodGroup]; v != "" {
		// Kueue names a pod group's Workload after the group
		// (sigs.k8s.io/kueue v0.17.0 pkg/controller/jobs/pod/pod_controller.go,
		// GetWorkloadName and FindMatchingWorkloads).
		o, _ := RootRef("", "Workload", ns, v)
		return o
	}
	return nil
}

// RootOfPod finds the root object of p's gang by walking its controller
// owners (and then its labels) exactly as Discover does; nil when p
// belongs to no gang with a root object.
func (d *Discoverer) RootOfPod(ctx context.Context, p *corev1.Pod) (*Object, error) {
	if d.owners == nil {
		d.owners = map[string]*unstructured.Unstructured{}
	}
	k, err := d.classify(ctx, p)
	if err != nil {
		return nil, err
	}
	if k.root != nil {
		return k.root, nil
	}
	if k.kind == KindPodGroup {
		return RootFromLabels(p.Namespace, p.Labels), nil
	}
	return nil, nil
}
