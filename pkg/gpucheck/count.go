package gpucheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/nodepool"
)

// Resource and label names of NVIDIA's device plugin and GPU feature
// discovery.
const (
	GPUResource      corev1.ResourceName = "nvidia.com/gpu"
	MIGPrefix                            = "nvidia.com/mig-"
	GPUCountLabel                        = "nvidia.com/gpu.count"
	MIGStrategyLabel                     = "nvidia.com/mig.strategy"
	MIGConfigLabel                       = "nvidia.com/mig.config"
)

// ExpectedSource says where an expected GPU count came from.
type ExpectedSource string

// Sources of the expected count: the flag; else the larger of the label
// and the pool majority.
const (
	SourceFlag  ExpectedSource = "flag"
	SourceLabel ExpectedSource = "label"
	SourcePool  ExpectedSource = "pool-majority"
	SourceNone  ExpectedSource = "none"
)

// CountState classifies a node's GPUs.
type CountState string

// Count states.
const (
	CountOK            CountState = "ok"
	CountMissing       CountState = "missing"
	CountUnhealthy     CountState = "unhealthy"
	CountNotAdvertised CountState = "not-advertised"
	CountExtra         CountState = "extra"
	CountMIG           CountState = "mig"
	CountUnknown       CountState = "no-expectation"
)

// GPUCount is the count gate's result for one node.
type GPUCount struct {
	Expected       int            `json:"expected"`
	ExpectedSource ExpectedSource `json:"expectedSource"`
	Capacity       int            `json:"capacity"`
	Allocatable    int            `json:"allocatable"`
	// Found is what workloads can use: allocatable, or the DRA devices.
	Found int `json:"found"`
	// DRADevices counts gpu.nvidia.com devices in the node's ResourceSlices
	// (nil when the node publishes none).
	DRADevices *int       `json:"draDevices,omitempty"`
	State      CountState `json:"state"`
	// MIG describes a MIG layout ("2x nvidia.com/mig-3g.40gb, ...").
	MIG string `json:"mig,omitempty"`
}

// CountInput is what CheckCount needs for one node.
type CountInput struct {
	Node *corev1.Node
	// ExpectedFlag is --expected-gpus (0 = not given).
	ExpectedFlag int
	// PoolMajority is the pool's majority capacity (0 = unknown).
	PoolMajority int
	// PoolSize is how many nodes the majority was taken over.
	PoolSize int
	// DRADevices is the node's gpu.nvidia.com device count; nil when the
	// node has no such ResourceSlices.
	DRADevices *int
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) (int, bool) {
	q, ok := l[name]
	if !ok {
		return 0, false
	}
	return int(q.Value()), true
}

// migLayout lists MIG resources of a node, or "" for none. A node labelled
// with the single strategy advertises MIG devices as nvidia.com/gpu.
func migLayout(n *corev1.Node) string {
	var parts []string
	for name, q := range n.Status.Capacity {
		if strings.HasPrefix(string(name), MIGPrefix) && q.Value() > 0 {
			parts = append(parts, fmt.Sprintf("%dx %s", q.Value(), name))
		}
	}
	sort.Strings(parts)
	strategy := n.Labels[MIGStrategyLabel]
	cfg := n.Labels[MIGConfigLabel]
	if strategy == "single" && cfg != "" && cfg != "all-disabled" {
		parts = append(parts, "single strategy ("+cfg+")")
	}
	return strings.Join(parts, ", ")
}

// CheckCount gates a node's GPU count. MIG layouts are reported, not
// failed: with MIG the advertised count is of slices, not GPUs.
func CheckCount(in CountInput) (GPUCount, []Finding) {
	n := in.Node
	c := GPUCount{ExpectedSource: SourceNone, DRADevices: in.DRADevices}
	capN, hasCap := quantity(n.Status.Capacity, GPUResource)
	alloc, _ := quantity(n.Status.Allocatable, GPUResource)
	c.Capacity, c.Allocatable, c.Found = capN, alloc, alloc
	// GPU feature discovery's count label counts the devices NVML sees on
	// the node, the same ones the device plugin advertises: a GPU lost at
	// reboot lowers both, so the label alone would expect 7 of 7. Without
	// --expected-gpus the larger of the label and the pool's majority is
	// expected.
	switch {
	case in.ExpectedFlag > 0:
		c.Expected, c.ExpectedSource = in.ExpectedFlag, SourceFlag
	case n.Labels[GPUCountLabel] != "":
		if v, err := strconv.Atoi(n.Labels[GPUCountLabel]); err == nil && v > 0 {
			c.Expected, c.ExpectedSource = v, SourceLabel
		}
	}
	if c.ExpectedSource != SourceFlag && in.PoolMajority > c.Expected {
		c.Expected, c.ExpectedSource = in.PoolMajority, SourcePool
	}
	f := func(l Level, format string, args ...any) []Finding {
		return []Finding{{Check: CheckGPUCount, Level: l, Message: fmt.Sprintf(format, args...)}}
	}
	if mig := migLayout(n); mig != "" {
		c.MIG, c.State = mig, CountMIG
		return c, f(LevelInfo, "MIG layout %s; %d nvidia.com/gpu allocatable (count not gated on MIG nodes)", mig, alloc)
	}
	if !hasCap && in.DRADevices != nil {
		c.Found = *in.DRADevices
		if c.Expected == 0 {
			c.State = CountUnknown
			return c, f(LevelWarning, "%d GPUs in DRA ResourceSlices; no expected count (pass --expected-gpus)", c.Found)
		}
		if c.Found < c.Expected {
			c.State = CountMissing
			return c, f(LevelFail, "missing GPUs: %d of %d expected (%s) published in DRA ResourceSlices", c.Found, c.Expected, c.ExpectedSource)
		}
		if c.Found > c.Expected {
			c.State = CountExtra
			return c, f(LevelWarning, "%d GPUs in DRA ResourceSlices, more than the %d expected (%s)", c.Found, c.Expected, c.ExpectedSource)
		}
		c.State = CountOK
		return c, f(LevelInfo, "%d/%d GPUs (DRA driver gpu.nvidia.com)", c.Found, c.Expected)
	}
	if !hasCap || capN == 0 {
		c.State = CountNotAdvertised
		exp := ""
		if c.Expected > 0 {
			exp = fmt.Sprintf(" (expected %d, %s)", c.Expected, c.ExpectedSource)
		}
		return c, f(LevelFail, "nvidia.com/gpu not advertised%s: is the device plugin running?", exp)
	}
	if c.Expected == 0 {
		c.State = CountUnknown
		return c, f(LevelWarning, "%d/%d GPUs allocatable/capacity; no expected count (pass --expected-gpus or label %s)", alloc, capN, GPUCountLabel)
	}
	switch {
	case capN < c.Expected:
		c.State = CountMissing
		return c, f(LevelFail, "missing GPUs: capacity %d of %d expected (%s); allocatable %d", capN, c.Expected, c.ExpectedSource, alloc)
	case alloc < c.Expected:
		c.State = CountUnhealthy
		return c, f(LevelFail, "unhealthy GPUs: allocatable %d of %d expected (%s) while capacity is %d", alloc, c.Expected, c.ExpectedSource, capN)
	case capN > c.Expected:
		c.State = CountExtra
		return c, f(LevelWarning, "capacity %d is more than the %d expected (%s)", capN, c.Expected, c.ExpectedSource)
	}
	c.State = CountOK
	return c, f(LevelInfo, "%d/%d GPUs allocatable (expected from %s)", alloc, c.Expected, c.ExpectedSource)
}

// PoolMajority returns the most common nvidia.com/gpu capacity among the
// nodes (ties go to the larger count) and how many nodes advertised one.
// Nodes without the resource are left out.
func PoolMajority(nodes []corev1.Node) (count, size int) {
	votes := map[int]int{}
	for i := range nodes {
		if v, ok := quantity(nodes[i].Status.Capacity, GPUResource); ok && v > 0 {
			votes[v]++
			size++
		}
	}
	best, bestVotes := 0, 0
	for v, n := range votes {
		if n > bestVotes || n == bestVotes && v > best {
			best, bestVotes = v, n
		}
	}
	return best, size
}

// GPUProductLabel is GPU feature discovery's model of a node's GPUs (with
// the MIG profile under the single strategy), nvidia.com/gpu.count's
// neighbour (NVIDIA/k8s-device-plugin@90c0589
// docs/gpu-feature-discovery/README.md, "Generated Labels").
const GPUProductLabel = "nvidia.com/gpu.product"

// majorityGroup is what a node's GPU count is compared within: its pool,
// and, where the nodes say, its machine type, GPU model and MIG layout.
// A pool may mix them (a Karpenter NodePool of several instance types, a
// pool partly partitioned by MIG), and the count of one kind says nothing
// of another's.
func majorityGroup(n *corev1.Node, pool string) string {
	return strings.Join([]string{pool, n.Labels[instanceTypeLabel], n.Labels[GPUProductLabel], n.Labels[MIGConfigLabel]}, "\x00")
}

// PoolLabels are tried in order to find a node's pool: the list every
// plugin shares (package nodepool), so a pool has the same name in
// kubectl skew and kubectl gpu-validate.
var PoolLabels = nodepool.Labels

// instanceTypeLabel groups the nodes that carry no pool label, so that
// their GPU majority is taken among machines of one type.
const instanceTypeLabel = "node.kubernetes.io/instance-type"

// PoolOf returns a node's pool: the value of label when given, else of the
// first PoolLabels entry the node has, else its instance type, else "".
func PoolOf(n *corev1.Node, label string) string {
	if name, _ := nodepool.Name(n.Labels, label); name != "" || label != "" {
		return name
	}
	return n.Labels[instanceTypeLabel]
}

// NodeReady reports the Ready condition's status and message.
func NodeReady(n *corev1.Node) (bool, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, strings.TrimSpace(c.Reason + " " + c.Message)
		}
	}
	return false, "no Ready condition"
}
