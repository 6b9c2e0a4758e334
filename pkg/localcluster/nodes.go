package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and resources the fixtures use.
const (
	// GPUResource is the extended resource fake GPU nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// PoolLabel names a node's pool (GKE's label, which the plugins read).
	PoolLabel = "cloud.google.com/gke-nodepool"
	// RackSetLabel groups nodes that share a failure domain.
	RackSetLabel = "gpufleet.dev/rack-set"
	// GPUProductLabel is the GPU model, as NVIDIA's feature discovery sets it.
	GPUProductLabel = "nvidia.com/gpu.product"
	// PauseImage is the image fixtures put in pods; KWOK never pulls it.
	PauseImage = "registry.k8s.io/pause:3.10"
)

// GPUPool describes a set of fake GPU nodes.
type GPUPool struct {
	// Name is the pool label value and the node name prefix.
	Name string
	// Nodes is how many nodes to create.
	Nodes int
	// GPUsPerNode defaults to 8.
	GPUsPerNode int
	// KubeletVersion goes in status.nodeInfo.kubeletVersion (default the
	// control plane's version).
	KubeletVersion string
	// RackSets spreads nodes round-robin over this many rack sets
	// (<pool>-rs<i>); 0 means one.
	RackSets int
	// Product is the nvidia.com/gpu.product label (default NVIDIA-H100-80GB-HBM3).
	Product string
	// Labels are added to every node.
	Labels map[string]string
	// Taints are added to every node.
	Taints []corev1.Taint
}

// GPUNode returns a fake GPU node object for KWOK to manage.
func GPUNode(name string, pool GPUPool, rackSet string) *corev1.Node {
	gpus := pool.GPUsPerNode
	if gpus == 0 {
		gpus = 8
	}
	version := pool.KubeletVersion
	if version == "" {
		version = KubeVersion
	}
	product := pool.Product
	if product == "" {
		product = "NVIDIA-H100-80GB-HBM3"
	}
	lbl := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
		PoolLabel:                pool.Name,
		RackSetLabel:             rackSet,
		GPUProductLabel:          product,
	}
	for k, v := range pool.Labels {
		lbl[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("96"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("110"),
		GPUResource:           *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      lbl,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: pool.Taints},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: version, OperatingSystem: "linux", Architecture: "amd64"},
			Phase:       corev1.NodeRunning,
		},
	}
}

// CreateGPUNodes creates the pool's nodes (<pool>-<i>) and waits until KWOK
// reports them Ready.
func (cp *Cluster) CreateGPUNodes(ctx context.Context, pool GPUPool) ([]*corev1.Node, error) {
	rs := pool.RackSets
	if rs <= 0 {
		rs = 1
	}
	var out []*corev1.Node
	for i := 0; i < pool.Nodes; i++ {
		n := GPUNode(fmt.Sprintf("%s-%d", pool.Name, i), pool, fmt.Sprintf("%s-rs%d", pool.Name, i%rs))
		created, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create node %s: %w", n.Name, err)
		}
		out = append(out, created)
	}
	for i, n := range out {
		name := n.Name
		err := Eventually(ctx, "node "+name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			got, err := cp.Client.CoreV1().Nodes().Get(ctx, name, getOpts)
			if err != nil {
				return false, err
			}
			out[i] = got
			return NodeReady(got), nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WaitSchedulable waits until the named nodes no longer carry the taints
// the node-lifecycle controller puts on a node it has not yet seen Ready
// (node.kubernetes.io/not-ready and unreachable, NoSchedule on a new
// node): KWOK reports a node Ready a few seconds before the controller
// lifts them, and until then the scheduler, and a plan that filters as it
// does, keeps pods off the node.
func (cp *Cluster) WaitSchedulable(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := Eventually(ctx, "node "+name+" without not-ready taints", 2*time.Minute, func(ctx context.Context) (bool, error) {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, getOpts)
			if err != nil {
				return false, nil
			}
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodReady reports whether the pod runs and its Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
