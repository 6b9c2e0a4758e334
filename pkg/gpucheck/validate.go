package gpucheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Validator runs the gates of `kubectl gpu-validate` on one cluster: the
// plugin fills it from its flags, calls Validate (or NCCLManifest) and
// prints what comes back.
type Validator struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Configz reads a node's kubelet configuration.
	Configz ConfigzFetcher
	Clock   clock.Clock
	// Namespace holds the check pods, the NCCL job and its baselines.
	Namespace string
	// OnEvent receives progress lines (may be nil).
	OnEvent func(string)
	// ResolveImage turns the NCCL image reference into a digest.
	ResolveImage func(ctx context.Context, ref string) (string, error)

	// Node selection: Selector or Nodes.
	Selector string
	Nodes    []string

	PoolLabel      string
	ExpectedGPUs   int
	KubeletVersion string

	ConfigDrift  bool
	BaselineNode string
	// FeatureGates is the removed-gate data drift is judged with (the
	// embedded apilifecycle.DefaultFeatureGates when nil).
	FeatureGates *apilifecycle.FeatureGates

	XID bool
	// Since (or SinceAgo before now) bounds the kernel log; zero means
	// from the earlier of the node's boot and its last Ready.
	Since      time.Time
	SinceAgo   time.Duration
	XidImage   string
	XidCatalog *XidCatalog

	DCGM      bool
	DCGMImage string
	// DCGMWarnFails fails a node on DCGM's own warnings, which otherwise
	// warn (DCGM's failures always fail).
	DCGMWarnFails bool

	NCCL      bool
	NCCLOnly  bool
	Image     string
	NoResolve bool
	Launcher  nccl.Launcher
	// Fabric is --fabric; empty picks the pool baseline's, else what the
	// nodes' devices call for (nccl.DetectFabric).
	Fabric nccl.Fabric
	// MinBusBW is an absolute bus bandwidth floor in GB/s (0: none).
	MinBusBW     float64
	RDMAResource string
	EFADevices   int
	GPUsPerNode  int
	GateSize     int64
	Tolerance    float64
	SaveBaseline bool
	Deadline     time.Duration
	Keep         bool

	// Timeout bounds the check pods and the NCCL job; Parallel is how many
	// per-node pods run at once.
	Timeout  time.Duration
	Parallel int
}

// SelectionError means the node selection matched nothing (bad input).
type SelectionError struct{ Msg string }

func (e *SelectionError) Error() string { return e.Msg }

// ClusterError is a failed call to the cluster, with what was being done.
type ClusterError struct {
	Op  string
	Err error
}

func (e *ClusterError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// ImageError means the NCCL image could not be resolved to a digest.
type ImageError struct{ Err error }

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

func (v *Validator) event(format string, args ...any) {
	if v.OnEvent != nil {
		v.OnEvent(fmt.Sprintf(format, args...))
	}
}

// Validate selects the nodes and runs every gate asked for. It returns the
// report and what could not be evaluated (unavailable); err is a
// *SelectionError or *ClusterError when no report could be made.
func (v *Validator) Validate(ctx context.Context) (rep *Report, unavailable []string, err error) {
	nodes, all, err := v.resolveNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	rep, unavailable = v.validate(ctx, nodes, all)
	return rep, unavailable, nil
}

// NCCLManifest renders the NCCL test for the nodes; with no nodes it reads
// them from the selection, and with gpus 0 it takes the smallest
// allocatable count among them.
func (v *Validator) NCCLManifest(ctx context.Context, names []string, gpus int) (*nccl.Manifest, error) {
	if len(names) == 0 || gpus == 0 {
		nodes, _, err := v.resolveNodes(ctx)
		if err != nil {
			return nil, err
		}
		if gpus == 0 {
			gpus = minAllocatable(nodes)
		}
		names = nil
		for _, n := range nodes {
			names = append(names, n.Name)
		}
	}
	if gpus <= 0 {
		return nil, &SelectionError{"the nodes advertise no nvidia.com/gpu; pass --gpus-per-node"}
	}
	fabric, rdma := v.Fabric, v.RDMAResource
	if fabric == "" && v.Kube == nil {
		fabric = nccl.FabricTCP
		v.event("no cluster to read the nodes' devices from: the manifest uses --fabric tcp; pass --fabric for the pool's")
	} else if fabric == "" {
		nodes, _, err := v.resolveNodes(ctx)
		if err != nil {
			return nil, err
		}
		fabric, rdma, _ = v.fabricFor(nodes, nil)
	}
	spec, err := v.jobSpec(ctx, names, gpus, fabric, rdma)
	if err != nil {
		return nil, err
	}
	m, err := nccl.Render(spec)
	if err != nil {
		return nil, &SelectionError{err.Error()}
	}
	return m, nil
}

// resolveNodes returns the nodes under test (sorted) and every node of the
// cluster (for pool majorities and baselines).
func (v *Validator) resolveNodes(ctx context.Context) ([]*corev1.Node, []corev1.Node, error) {
	list, err := v.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, &ClusterError{Op: "listing nodes", Err: err}
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var out []*corev1.Node
	if v.Selector != "" {
		sel, err := v.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: v.Selector})
		if err != nil {
			return nil, nil, &ClusterError{Op: "listing nodes", Err: err}
		}
		for i := range sel.Items {
			out = append(out, byName[sel.Items[i].Name])
		}
		if len(out) == 0 {
			return nil, nil, &SelectionError{fmt.Sprintf("no nodes match selector %q", v.Selector)}
		}
	} else {
		seen := map[string]bool{}
		var missing []string
		for _, n := range v.Nodes {
			if seen[n] {
				continue
			}
			seen[n] = true
			if nd, ok := byName[n]; ok {
				out = append(out, nd)
			} else {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return nil, nil, &SelectionError{cli.Agree(len(missing), "node", "nodes") + " not found: " + strings.Join(missing, ", ")}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, list.Items, nil
}

func poolName(nodes []*corev1.Node, label string) string {
	if len(nodes) == 0 {
		return ""
	}
	return PoolOf(nodes[0], label)
}

func minAllocatable(nodes []*corev1.Node) int {
	m := 0
	for i, n := range nodes {
		q := n.Status.Allocatable[GPUResource]
		v := int(q.Value())
		if i == 0 || v < m {
			m = v
		}
	}
	return m
}

func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// validate runs every gate and returns the report and what could not be
// evaluated.
func (v *Validator) validate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node) (*Report, []string) {
	var unavailable []string
	rep := &Report{}
	items := map[string]*NodeReport{}
	for _, n := range nodes {
		ready, msg := NodeReady(n)
		it := &NodeReport{Name: n.Name, Pool: PoolOf(n, v.PoolLabel), KubeletVersion: n.Status.NodeInfo.KubeletVersion, Ready: ready}
		if !ready {
			it.add(CheckReady, LevelFail, "node is not Ready: "+msg)
		}
		if n.Spec.Unschedulable {
			it.add(CheckReady, LevelInfo, "node is cordoned")
		}
		if v.KubeletVersion != "" && !KubeletIs(it.KubeletVersion, v.KubeletVersion) {
			it.add(CheckVersion, LevelFail, fmt.Sprintf("kubelet %s, want %s", it.KubeletVersion, v.KubeletVersion))
		}
		items[n.Name] = it
		rep.Items = append(rep.Items, it)
	}

	if !v.NCCLOnly {
		rep.Warnings = append(rep.Warnings, v.countGate(ctx, nodes, all, items)...)
		if v.ConfigDrift {
			unavailable = append(unavailable, v.configGate(ctx, nodes, all, items)...)
		}
		if v.XID {
			unavailable = append(unavailable, v.xidGate(ctx, nodes, items)...)
		}
		if v.DCGM {
			unavailable = append(unavailable, v.dcgmGate(ctx, nodes, items)...)
		}
	}
	if v.NCCL {
		runs, un := v.ncclGate(ctx, nodes, items)
		rep.NCCL = runs
		unavailable = append(unavailable, un...)
	}
	for _, it := range rep.Items {
		SortFindings(it.Findings)
		it.Status = StatusOf(it.Findings)
	}
	rep.Summary = summarize(rep)
	return rep, unavailable
}

// countGate checks GPU allocatable per node; it returns the warnings that
// belong in the report (what could not be counted), which are printed on
// stderr too.
func (v *Validator) countGate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node, items map[string]*NodeReport) []string {
	var warnings []string
	dra, err := CountDRADevices(ctx, v.Dynamic, "")
	if err != nil {
		w := fmt.Sprintf("DRA devices not counted: %v", err)
		warnings = append(warnings, w)
		v.event("warning: %s", w)
	}
	pools := map[string][]corev1.Node{}
	for i := range all {
		if p := PoolOf(&all[i], v.PoolLabel); p != "" {
			k := majorityGroup(&all[i], p)
			pools[k] = append(pools[k], all[i])
		}
	}
	for _, n := range nodes {
		it := items[n.Name]
		in := CountInput{Node: n, ExpectedFlag: v.ExpectedGPUs}
		if it.Pool != "" {
			in.PoolMajority, in.PoolSize = PoolMajority(pools[majorityGroup(n, it.Pool)])
			if in.PoolSize < 3 {
				in.PoolMajority = 0 // no majority in a pool this small
			}
		}
		if c, ok := dra.PerNode[n.Name]; ok {
			in.DRADevices = &c
		}
		count, fs := CheckCount(in)
		it.GPUs = &count
		it.Findings = append(it.Findings, fs...)
	}
	return warnings
}

func olderVersion(a, b string) bool {
	va, err1 := version.ParseGeneric(a)
	vb, err2 := version.ParseGeneric(b)
	if err1 != nil || err2 != nil {
		return false
	}
	return va.LessThan(vb)
}

// baselineFor picks the node a node's kubelet configuration is compared
// with: --baseline-node, else the node of the same pool, not under test,
// Ready, on the newest kubelet older than the node's.
func (v *Validator) baselineFor(n *corev1.Node, all []corev1.Node, testing map[string]bool) *corev1.Node {
	if v.BaselineNode != "" {
		for i := range all {
			if all[i].Name == v.BaselineNode {
				return &all[i]
			}
		}
		return nil
	}
	pool := PoolOf(n, v.PoolLabel)
	var best *corev1.Node
	for i := range all {
		c := &all[i]
		if testing[c.Name] || pool == "" || PoolOf(c, v.PoolLabel) != pool {
			continue
		}
		if ok, _ := NodeReady(c); !ok {
			continue
		}
		if !olderVersion(c.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.KubeletVersion) {
			continue
		}
		if best == nil || olderVersion(best.Status.NodeInfo.KubeletVersion, c.Status.NodeInfo.KubeletVersion) ||
			best.Status.NodeInfo.KubeletVersion == c.Status.NodeInfo.KubeletVersion && c.Name < best.Name {
			best = c
		}
	}
	return best
}

func (v *Validator) configGate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node, items map[string]*NodeReport) []string {
	testing := map[string]bool{}
	for _, n := range nodes {
		testing[n.Name] = true
	}
	if v.BaselineNode != "" && v.baselineFor(nil, all, testing) == nil {
		return []string{fmt.Sprintf("baseline node %s not found", v.BaselineNode)}
	}
	cache := map[string]map[string]any{}
	errs := map[string]error{}
	fetch := func(name string) (map[string]any, error) {
		if c, ok := cache[name]; ok {
			return c, nil
		}
		if e, ok := errs[name]; ok {
			return nil, e
		}
		b, err := v.Configz(ctx, name)
		if err == nil {
			var cfg map[string]any
			if cfg, err = ParseConfigz(b); err == nil {
				cache[name] = cfg
				return cfg, nil
			}
			err = fmt.Errorf("node %s: %w", name, err)
		}
		errs[name] = err
		return nil, err
	}
	var unavailable []string
	forbidden := false
	for _, n := range nodes {
		it := items[n.Name]
		base := v.baselineFor(n, all, testing)
		if base == nil {
			it.add(CheckConfig, LevelInfo, "no baseline node (no node of this pool on an older kubelet; pass --baseline-node)")
			continue
		}
		if base.Name == n.Name {
			it.add(CheckConfig, LevelInfo, "node is its own baseline")
			continue
		}
		it.ConfigBaseline = base.Name
		bcfg, err := fetch(base.Name)
		if err == nil {
			var ncfg map[string]any
			if ncfg, err = fetch(n.Name); err == nil {
				diffs := DiffKubeletConfigGates(bcfg, ncfg, base.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.KubeletVersion, v.FeatureGates)
				it.ConfigDiffs = diffs
				it.Findings = append(it.Findings, ConfigFindings(base.Name, diffs)...)
				continue
			}
		}
		if errors.Is(err, ErrKubeletRefused) {
			it.add(CheckConfig, LevelWarning, "kubelet config not checked: "+err.Error())
			unavailable = append(unavailable, "kubelet config: "+err.Error())
			continue
		}
		if errors.Is(err, ErrConfigzForbidden) || apierrors.IsForbidden(err) {
			forbidden = true
			it.add(CheckConfig, LevelWarning, "kubelet config not checked: forbidden (needs get on nodes/proxy)")
			continue
		}
		it.add(CheckConfig, LevelFail, "kubelet config not checked: "+err.Error())
		unavailable = append(unavailable, "kubelet config: "+err.Error())
	}
	if forbidden {
		unavailable = append(unavailable, "cannot read kubelet configuration: forbidden: get on nodes/proxy is required")
	}
	return unavailable
}

func readyNames(nodes []*corev1.Node, items map[string]*NodeReport) []string {
	var out []string
	for _, n := range nodes {
		if items[n.Name].Ready {
			out = append(out, n.Name)
		}
	}
	return out
}

func (v *Validator) podRunner() *NodePodRunner {
	return &NodePodRunner{Kube: v.Kube, Clock: v.Clock, Timeout: v.Timeout, Parallel: v.Parallel,
		OnEvent: func(m string) { v.event("%s", m) }}
}

// xidWindow returns the command that reads a node's kernel log and the
// time before which the parser drops events: --since when given; else the
// earlier of the node's boot and its last Ready, which the command works
// out on the node (the parser then keeps everything it prints).
func (v *Validator) xidWindow(n *corev1.Node) ([]string, time.Time) {
	switch {
	case !v.Since.IsZero():
		return XidCommand(v.Since), v.Since
	case v.SinceAgo > 0:
		t := v.Clock.Now().Add(-v.SinceAgo)
		return XidCommand(t), t
	}
	ready := v.Clock.Now()
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			ready = c.LastTransitionTime.Time
		}
	}
	return XidCommandFromBoot(ready), time.Time{}
}

func (v *Validator) xidGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport) []string {
	since := map[string]time.Time{}
	cmds := map[string][]string{}
	for _, n := range nodes {
		cmds[n.Name], since[n.Name] = v.xidWindow(n)
	}
	spec := NodePodSpec{Check: CheckXid, Namespace: v.Namespace, RunID: newRunID(), Image: v.XidImage, HostRoot: true,
		CommandFor: func(node string) []string { return cmds[node] }}
	var unavailable []string
	for _, r := range v.podRunner().Run(ctx, spec, readyNames(nodes, items)) {
		it := items[r.Node]
		if r.Err != nil {
			it.add(CheckXid, LevelFail, "Xid check could not run: "+r.Err.Error())
			unavailable = append(unavailable, "xid: "+r.Err.Error())
			continue
		}
		evs, err := v.XidCatalog.ParseKernelLog(strings.NewReader(r.Log), since[r.Node])
		if err != nil {
			it.add(CheckXid, LevelFail, "kernel log unreadable: "+err.Error())
			continue
		}
		if r.Phase == corev1.PodFailed && len(evs) == 0 {
			it.add(CheckXid, LevelFail, strings.TrimSpace("kernel log pod "+r.Pod+" failed without output "+r.Reason))
			continue
		}
		it.Xids = evs
		it.Findings = append(it.Findings, XidFindings(evs)...)
	}
	return unavailable
}

func (v *Validator) dcgmGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport) []string {
	gpus := map[string]int{}
	for _, n := range nodes {
		q := n.Status.Allocatable[GPUResource]
		gpus[n.Name] = int(q.Value())
	}
	var targets []string
	for _, name := range readyNames(nodes, items) {
		if gpus[name] > 0 {
			targets = append(targets, name)
		} else {
			items[name].add(CheckDCGM, LevelWarning, "DCGM not run: no allocatable GPUs")
		}
	}
	spec := NodePodSpec{Check: CheckDCGM, Namespace: v.Namespace, RunID: newRunID(), Image: v.DCGMImage,
		Command: DCGMCommand(), GPUsFor: func(node string) int { return gpus[node] }}
	var unavailable []string
	for _, r := range v.podRunner().Run(ctx, spec, targets) {
		it := items[r.Node]
		if r.Err != nil {
			it.add(CheckDCGM, LevelFail, "DCGM check could not run: "+r.Err.Error())
			unavailable = append(unavailable, "dcgm: "+r.Err.Error())
			continue
		}
		res, err := ParseDCGM(strings.NewReader(r.Log))
		if err != nil {
			msg := fmt.Sprintf("no DCGM result in the log of pod %s (phase %s)", r.Pod, r.Phase)
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			it.add(CheckDCGM, LevelFail, msg)
			continue
		}
		it.DCGM = res
		it.Findings = append(it.Findings, DCGMFindings(res, v.DCGMWarnFails)...)
	}
	return unavailable
}

func (v *Validator) image(ctx context.Context) (string, error) {
	if v.NoResolve {
		return v.Image, nil
	}
	return v.ResolveImage(ctx, v.Image)
}

// fabricFor picks a pool's fabric: --fabric; else its baseline's, so
// that the run is comparable, unless the baseline was measured over tcp
// and the nodes have an EFA or RDMA fabric (tcp cannot see it; earlier
// releases measured every baseline over tcp by default); else what the
// nodes' devices call for. It returns the RDMA resource to ask for and
// why it chose.
func (v *Validator) fabricFor(nodes []*corev1.Node, base *nccl.Baseline) (nccl.Fabric, string, string) {
	if v.Fabric != "" {
		return v.Fabric, v.RDMAResource, "--fabric"
	}
	var alloc []corev1.ResourceList
	for _, n := range nodes {
		alloc = append(alloc, n.Status.Allocatable)
	}
	detected, rdma, why := nccl.DetectFabric(alloc)
	if v.RDMAResource != "" {
		rdma = v.RDMAResource
	}
	if base != nil && base.Fabric != "" {
		if f, err := nccl.ParseFabric(base.Fabric); err == nil {
			if f == nccl.FabricTCP && detected != nccl.FabricTCP {
				return detected, rdma, fmt.Sprintf("%s; the pool's baseline was measured over tcp, which cannot see that fabric, so it is not compared (save one over %s with --save-baseline on a known-good pool)", why, detected)
			}
			return f, rdma, "the pool's baseline was measured over " + base.Fabric
		}
	}
	return detected, rdma, why
}

// tcpBaselineOnFabric: the pool's baseline was measured over tcp and this
// run, picked without --fabric, goes over the nodes' own fabric: the
// baseline judges nothing of it.
func (v *Validator) tcpBaselineOnFabric(base *nccl.Baseline, fabric nccl.Fabric) bool {
	return v.Fabric == "" && base != nil && base.Fabric == string(nccl.FabricTCP) && fabric != nccl.FabricTCP
}

func (v *Validator) jobSpec(ctx context.Context, nodes []string, gpus int, fabric nccl.Fabric, rdma string) (nccl.JobSpec, error) {
	img, err := v.image(ctx)
	if err != nil {
		return nccl.JobSpec{}, &ImageError{Err: err}
	}
	runID := newRunID()
	spec := nccl.JobSpec{
		Name: "gpu-validate-nccl-" + runID, Namespace: v.Namespace, RunID: runID,
		Launcher: v.Launcher, Fabric: fabric, Image: img, Nodes: nodes, GPUsPerNode: gpus,
		MaxBytes: v.GateSize, Deadline: v.Deadline,
		FabricOptions: nccl.FabricOptions{RDMAResource: rdma, EFADevices: v.EFADevices},
	}
	if v.GateSize < 1<<30 {
		spec.MinBytes = v.GateSize
	}
	if v.Launcher != nccl.LauncherMPIJob {
		if spec.SSHKey, err = nccl.NewSSHKey(nil); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// ncclGate runs one test per pool over the nodes that passed the other
// gates and attaches the verdict to each of them.
func (v *Validator) ncclGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport) ([]NCCLRun, []string) {
	byPool := map[string][]*corev1.Node{}
	var pools []string
	for _, n := range nodes {
		it := items[n.Name]
		if StatusOf(it.Findings) == StatusFail {
			it.add(CheckNCCL, LevelInfo, "NCCL test skipped: the node failed an earlier gate")
			continue
		}
		if _, ok := byPool[it.Pool]; !ok {
			pools = append(pools, it.Pool)
		}
		byPool[it.Pool] = append(byPool[it.Pool], n)
	}
	sort.Strings(pools)
	var runs []NCCLRun
	var unavailable []string
	for _, pool := range pools {
		run, err := v.ncclPool(ctx, pool, byPool[pool])
		if err != nil {
			unavailable = append(unavailable, fmt.Sprintf("nccl (pool %s): %v", pool, err))
			run.Error = err.Error()
		}
		for _, n := range byPool[pool] {
			it := items[n.Name]
			switch {
			case run.Error != "":
				it.add(CheckNCCL, LevelFail, "NCCL test could not finish: "+run.Error)
			case run.Gate.Verdict == nccl.VerdictFail:
				it.add(CheckNCCL, LevelFail, "NCCL all-reduce: "+strings.Join(run.Gate.Reasons, "; "))
			case run.Gate.Verdict == nccl.VerdictWarn:
				it.add(CheckNCCL, LevelWarning, "NCCL all-reduce: "+strings.Join(run.Gate.Reasons, "; "))
			default:
				it.add(CheckNCCL, LevelInfo, fmt.Sprintf("NCCL all-reduce busbw %.1f GB/s at %s (baseline %.1f, min %.1f)",
					run.Gate.BusBW, nccl.FormatBytes(run.Gate.SizeBytes), run.Gate.BaselineBusBW, run.Gate.MinBusBW))
			}
		}
		runs = append(runs, run)
	}
	return runs, unavailable
}

func (v *Validator) ncclPool(ctx context.Context, pool string, nodes []*corev1.Node) (NCCLRun, error) {
	run := NCCLRun{Pool: pool, Launcher: string(v.Launcher)}
	for _, n := range nodes {
		run.Nodes = append(run.Nodes, n.Name)
	}
	gpus := v.GPUsPerNode
	if gpus == 0 {
		gpus = minAllocatable(nodes)
	}
	if gpus <= 0 {
		return run, fmt.Errorf("the nodes advertise no nvidia.com/gpu")
	}
	store := nccl.BaselineStore{Client: v.Kube, Namespace: v.Namespace}
	base, err := store.Get(ctx, pool)
	if err != nil {
		return run, err
	}
	run.Baseline = base
	fabric, rdma, why := v.fabricFor(nodes, base)
	run.Fabric, run.FabricFrom = string(fabric), why
	v.event("NCCL test of pool %s over %s (%s)", pool, fabric, why)
	spec, err := v.jobSpec(ctx, run.Nodes, gpus, fabric, rdma)
	if err != nil {
		return run, err
	}
	run.Image = spec.Image
	m, err := nccl.Render(spec)
	if err != nil {
		return run, err
	}
	runner := &nccl.Runner{Kube: v.Kube, Dynamic: v.Dynamic, Clock: v.Clock, Timeout: v.Timeout, Keep: v.Keep,
		OnEvent: func(s string) { v.event("%s", s) }}
	res, err := runner.Run(ctx, m)
	if res != nil {
		run.Pod = res.Pod
		for _, c := range res.CleanupErrors {
			v.event("warning: not deleted: %s", c)
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource") {
			err = fmt.Errorf("%w (is the %s API installed?)", err, v.Launcher)
		}
		return run, err
	}
	parsed, perr := nccl.ParseString(res.Log)
	if perr != nil && res.Phase == string(corev1.PodFailed) {
		return run, fmt.Errorf("test pod %s failed without results", res.Pod)
	}
	failed := res.Phase == string(corev1.PodFailed)
	gate := func(b *nccl.Baseline) nccl.GateResult {
		g := nccl.Gate(nccl.GateInput{Result: parsed, SizeBytes: v.GateSize, Baseline: b, Tolerance: v.Tolerance, ExpectedRanks: m.ExpectedRanks(), Failed: failed,
			Nodes: len(run.Nodes), GPUsPerNode: gpus, Fabric: string(fabric), MinBusBW: v.MinBusBW})
		if fabric == nccl.FabricTCP && v.Fabric == "" && len(g.Reasons) > 0 {
			g.Reasons = append(g.Reasons, "over tcp: "+why)
		}
		return g
	}
	if v.tcpBaselineOnFabric(base, fabric) {
		run.Gate = gate(nil)
		run.Gate.Reasons = append(run.Gate.Reasons, why)
	} else {
		run.Gate = gate(base)
	}
	if v.SaveBaseline && !failed && run.Gate.Wrong == 0 && run.Gate.OutOfBounds == 0 && run.Gate.BusBW > 0 && parsed != nil {
		b := nccl.Baseline{Pool: pool, BusBW: run.Gate.BusBW, SizeBytes: run.Gate.SizeBytes, Nodes: len(run.Nodes), GPUsPerNode: gpus,
			Fabric: string(fabric), Launcher: string(v.Launcher), Image: spec.Image, RecordedAt: v.Clock.Now().UTC(), RecordedOn: run.Nodes}
		if err := store.Save(ctx, b); err != nil {
			return run, err
		}
		run.BaselineSaved = true
		run.Baseline = &b
		run.Gate = gate(&b)
		v.event("saved baseline for pool %s: %s", pool, b.Summary())
	}
	return run, nil
}

// KubeletIs reports whether a node's kubelet version is want: the same
// version, or any patch of want's minor when want names only a minor
// (v1.38 matches v1.38.2 and a vendor's v1.38.2-eks-113cf36), so that a
// runbook can gate a pool on the minor it planned.
func KubeletIs(have, want string) bool {
	h, w := strings.TrimPrefix(have, "v"), strings.TrimPrefix(want, "v")
	if strings.Count(w, ".") == 1 {
		return strings.HasPrefix(h, w+".")
	}
	return h == w
}
