package gpucheck

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// DRADriver is NVIDIA's DRA driver name for GPUs.
const DRADriver = "gpu.nvidia.com"

// ResourceSliceVersions are tried in order: GA first, then the betas that
// clusters still serve.
var ResourceSliceVersions = []string{"v1", "v1beta2", "v1beta1"}

// DRACounts is the number of DRA GPU devices per node and the
// resource.k8s.io version they were read from.
type DRACounts struct {
	Version string
	PerNode map[string]int
}

// CountDRADevices counts the devices of driver (DRADriver when empty) in
// every node's ResourceSlices. Only the newest generation of each pool
// counts, as the scheduler does. A cluster that serves no ResourceSlice
// version returns empty counts and no error.
func CountDRADevices(ctx context.Context, dyn dynamic.Interface, driver string) (DRACounts, error) {
	if driver == "" {
		driver = DRADriver
	}
	out := DRACounts{PerNode: map[string]int{}}
	for _, v := range ResourceSliceVersions {
		gvr := schema.GroupVersionResource{Group: "resource.k8s.io", Version: v, Resource: "resourceslices"}
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || isNoMatch(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("listing resource.k8s.io/%s resourceslices: %w", v, err)
		}
		out.Version = v
		countSlices(list.Items, driver, out.PerNode)
		return out, nil
	}
	return out, nil
}

func isNoMatch(err error) bool {
	if err == nil {
		return false
	}
	// The fake dynamic client answers unregistered resources this way.
	var se apierrors.APIStatus
	if ok := asStatus(err, &se); ok {
		return se.Status().Code == 404
	}
	return false
}

func asStatus(err error, target *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*target = s
	}
	return ok
}

type poolKey struct{ driver, pool string }

func countSlices(items []unstructured.Unstructured, driver string, perNode map[string]int) {
	newest := map[poolKey]int64{}
	for _, it := range items {
		d, _, _ := unstructured.NestedString(it.Object, "spec", "driver")
		if d != driver {
			continue
		}
		pool, _, _ := unstructured.NestedString(it.Object, "spec", "pool", "name")
		gen, _, _ := unstructured.NestedInt64(it.Object, "spec", "pool", "generation")
		k := poolKey{d, pool}
		if g, ok := newest[k]; !ok || gen > g {
			newest[k] = gen
		}
	}
	for _, it := range items {
		d, _, _ := unstructured.NestedString(it.Object, "spec", "driver")
		if d != driver {
			continue
		}
		node, _, _ := unstructured.NestedString(it.Object, "spec", "nodeName")
		if node == "" {
			continue
		}
		pool, _, _ := unstructured.NestedString(it.Object, "spec", "pool", "name")
		gen, _, _ := unstructured.NestedInt64(it.Object, "spec", "pool", "generation")
		if gen != newest[poolKey{d, pool}] {
			continue
		}
		devs, _, _ := unstructured.NestedSlice(it.Object, "spec", "devices")
		perNode[node] += len(devs)
	}
}
