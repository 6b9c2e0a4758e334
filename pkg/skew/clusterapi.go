package skew

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// clusterAPIGroup is Cluster API's core group; Clusters with
// spec.topology are managed through a ClusterClass
// (https://cluster-api.sigs.k8s.io/tasks/experimental-features/cluster-class/).
const clusterAPIGroup = "cluster.x-k8s.io"

// clusterAPI reads the cluster.x-k8s.io Clusters when the group is
// served. It returns a note when it could not read them.
func (c *Collector) clusterAPI(ctx context.Context) string {
	if c.Dynamic == nil {
		return ""
	}
	groups, err := c.Client.Discovery().ServerGroups()
	if err != nil || groups == nil {
		return ""
	}
	version := ""
	for _, g := range groups.Groups {
		if g.Name == clusterAPIGroup {
			version = g.PreferredVersion.Version
		}
	}
	if version == "" {
		return ""
	}
	gvr := schema.GroupVersionResource{Group: clusterAPIGroup, Version: version, Resource: "clusters"}
	list, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{})
	c.platform.mu.Lock()
	defer c.platform.mu.Unlock()
	c.platform.p.ClusterAPIServed = true
	c.platform.p.ClusterAPIVersion = version
	if err != nil {
		if isForbidden(err) {
			return "listing clusters.cluster.x-k8s.io is forbidden; Cluster API not considered for the provider"
		}
		return fmt.Sprintf("listing clusters.cluster.x-k8s.io failed: %v; Cluster API not considered for the provider", err)
	}
	for i := range list.Items {
		u := &list.Items[i]
		cl := ClusterAPICluster{Namespace: u.GetNamespace(), Name: u.GetName()}
		cl.Class, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "class")
		if cl.Class == "" {
			// v1beta2 moved the class name under classRef.
			cl.Class, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "classRef", "name")
		}
		cl.Version, _, _ = unstructured.NestedString(u.Object, "spec", "topology", "version")
		if cl.Class != "" {
			cl.MachineDeployments, cl.MachinePools = topologyNames(u, "machineDeployments"), topologyNames(u, "machinePools")
			cl.WorkersRead = true
		}
		c.platform.p.ClusterAPI = append(c.platform.p.ClusterAPI, cl)
	}
	return ""
}

// topologyNames returns the names of spec.topology.workers.<list>: the
// MachineDeployment (or MachinePool) topologies the topology controller
// rolls to spec.topology.version (api/core/v1beta2 cluster_types.go,
// WorkersTopology, kubernetes-sigs/cluster-api v1.14.0; the same path in
// v1beta1).
func topologyNames(u *unstructured.Unstructured, list string) []string {
	items, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "workers", list)
	var out []string
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			if n, _ := m["name"].(string); n != "" {
				out = append(out, n)
			}
		}
	}
	return out
}
