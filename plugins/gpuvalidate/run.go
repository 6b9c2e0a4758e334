package gpuvalidate

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

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Seams for tests: how configz is read and images are resolved.
var (
	newConfigzFetcher = gpucheck.NewConfigzFetcher
	resolveImage      = func(ctx context.Context, ref string) (string, error) { return nccl.ResolveImage(ctx, ref) }
)

// Run validates the nodes and prints the report.
func (o *Options) Run(ctx context.Context) error {
	if o.PrintManifest && o.GPUsPerNode > 0 && len(o.Nodes) > 0 {
		// Everything is known: print without touching the cluster.
		return o.printManifest(ctx, o.Nodes, o.GPUsPerNode, "")
	}
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return err
	}
	if o.kube == nil {
		if o.kube, err = o.cg.Kube(); err != nil {
			return cli.ClassifyClusterErr(err, md, "creating a client")
		}
	}
	if o.dyn == nil {
		if o.dyn, err = o.cg.Dynamic(); err != nil {
			return cli.ClassifyClusterErr(err, md, "creating a client")
		}
	}
	if o.configz == nil {
		o.configz = newConfigzFetcher(o.kube)
	}
	nodes, all, err := o.resolveNodes(ctx, md)
	if err != nil {
		return err
	}
	if o.PrintManifest {
		gpus := o.GPUsPerNode
		if gpus == 0 {
			gpus = minAllocatable(nodes)
		}
		var names []string
		for _, n := range nodes {
			names = append(names, n.Name)
		}
		return o.printManifest(ctx, names, gpus, poolName(nodes, o.PoolLabel))
	}
	progress := cli.NewProgress(o.ErrOut, cli.IsTerminal(o.ErrOut), o.Print.Quiet || o.Print.Structured())
	defer progress.Done()
	rep, unavailable := o.validate(ctx, nodes, all, progress)
	rep.Header = cli.NewHeader("GPUValidateReport", md)
	progress.Done()
	if err := o.print(rep); err != nil {
		return err
	}
	if len(unavailable) > 0 {
		err := cli.ClusterErr(fmt.Errorf("%s", strings.Join(unavailable, "; ")))
		for _, u := range unavailable {
			if strings.Contains(u, "get on nodes/proxy is required") {
				hint := "kubectl auth can-i get nodes --subresource=proxy"
				if md.Context != "" {
					hint += " --context " + md.Context
				}
				return cli.WithHint(err, hint+"  (or pass --config-drift=false)")
			}
		}
		return err
	}
	var sev []cli.Severity
	for _, it := range rep.Items {
		for _, f := range it.Findings {
			sev = append(sev, severity(f.Level))
		}
	}
	return cli.Findings(o.FailOn.Count(sev...))
}

func severity(l gpucheck.Level) cli.Severity {
	switch l {
	case gpucheck.LevelFail:
		return cli.SeverityBlocking
	case gpucheck.LevelWarning:
		return cli.SeverityWarning
	}
	return cli.SeverityInfo
}

// resolveNodes returns the nodes under test (sorted) and every node of the
// cluster (for pool majorities and baselines).
func (o *Options) resolveNodes(ctx context.Context, md cli.Metadata) ([]*corev1.Node, []corev1.Node, error) {
	list, err := o.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, cli.ClassifyClusterErr(err, md, "listing nodes")
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var out []*corev1.Node
	if o.Selector != "" {
		sel, err := o.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
		if err != nil {
			return nil, nil, cli.ClassifyClusterErr(err, md, "listing nodes")
		}
		for i := range sel.Items {
			out = append(out, byName[sel.Items[i].Name])
		}
		if len(out) == 0 {
			return nil, nil, cli.Usagef("no nodes match selector %q", o.Selector)
		}
	} else {
		seen := map[string]bool{}
		var missing []string
		for _, n := range o.Nodes {
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
			return nil, nil, cli.Usagef("node(s) not found: %s", strings.Join(missing, ", "))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, list.Items, nil
}

func poolName(nodes []*corev1.Node, label string) string {
	if len(nodes) == 0 {
		return ""
	}
	return gpucheck.PoolOf(nodes[0], label)
}

func minAllocatable(nodes []*corev1.Node) int {
	m := 0
	for i, n := range nodes {
		q := n.Status.Allocatable[gpucheck.GPUResource]
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
func (o *Options) validate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node, progress *cli.Progress) (*Report, []string) {
	var unavailable []string
	rep := &Report{}
	items := map[string]*NodeReport{}
	for _, n := range nodes {
		ready, msg := gpucheck.NodeReady(n)
		it := &NodeReport{Name: n.Name, Pool: gpucheck.PoolOf(n, o.PoolLabel), KubeletVersion: n.Status.NodeInfo.KubeletVersion, Ready: ready}
		if !ready {
			it.add(gpucheck.CheckReady, gpucheck.LevelFail, "node is not Ready: "+msg)
		}
		if n.Spec.Unschedulable {
			it.add(gpucheck.CheckReady, gpucheck.LevelInfo, "node is cordoned")
		}
		if o.KubeletVersion != "" && strings.TrimPrefix(it.KubeletVersion, "v") != strings.TrimPrefix(o.KubeletVersion, "v") {
			it.add(gpucheck.CheckVersion, gpucheck.LevelFail, fmt.Sprintf("kubelet %s, want %s", it.KubeletVersion, o.KubeletVersion))
		}
		items[n.Name] = it
		rep.Items = append(rep.Items, it)
	}

	if !o.ncclOnly {
		rep.Warnings = append(rep.Warnings, o.countGate(ctx, nodes, all, items, progress)...)
		if o.ConfigDrift {
			unavailable = append(unavailable, o.configGate(ctx, nodes, all, items)...)
		}
		if o.XID {
			unavailable = append(unavailable, o.xidGate(ctx, nodes, items, progress)...)
		}
		if o.DCGM {
			unavailable = append(unavailable, o.dcgmGate(ctx, nodes, items, progress)...)
		}
	}
	if o.NCCL {
		runs, un := o.ncclGate(ctx, nodes, items, progress)
		rep.NCCL = runs
		unavailable = append(unavailable, un...)
	}
	for _, it := range rep.Items {
		gpucheck.SortFindings(it.Findings)
		it.Status = gpucheck.StatusOf(it.Findings)
	}
	rep.Summary = summarize(rep)
	return rep, unavailable
}

// countGate checks GPU allocatable per node; it returns the warnings that
// belong in the report (what could not be counted), which are printed on
// stderr too.
func (o *Options) countGate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node, items map[string]*NodeReport, progress *cli.Progress) []string {
	var warnings []string
	dra, err := gpucheck.CountDRADevices(ctx, o.dyn, "")
	if err != nil {
		w := fmt.Sprintf("DRA devices not counted: %v", err)
		warnings = append(warnings, w)
		progress.Event("warning: %s", w)
	}
	pools := map[string][]corev1.Node{}
	for i := range all {
		p := gpucheck.PoolOf(&all[i], o.PoolLabel)
		pools[p] = append(pools[p], all[i])
	}
	for _, n := range nodes {
		it := items[n.Name]
		in := gpucheck.CountInput{Node: n, ExpectedFlag: o.ExpectedGPUs}
		if it.Pool != "" {
			in.PoolMajority, in.PoolSize = gpucheck.PoolMajority(pools[it.Pool])
			if in.PoolSize < 3 {
				in.PoolMajority = 0 // no majority in a pool this small
			}
		}
		if c, ok := dra.PerNode[n.Name]; ok {
			in.DRADevices = &c
		}
		count, fs := gpucheck.CheckCount(in)
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
func (o *Options) baselineFor(n *corev1.Node, all []corev1.Node, testing map[string]bool) *corev1.Node {
	if o.BaselineNode != "" {
		for i := range all {
			if all[i].Name == o.BaselineNode {
				return &all[i]
			}
		}
		return nil
	}
	pool := gpucheck.PoolOf(n, o.PoolLabel)
	var best *corev1.Node
	for i := range all {
		c := &all[i]
		if testing[c.Name] || pool == "" || gpucheck.PoolOf(c, o.PoolLabel) != pool {
			continue
		}
		if ok, _ := gpucheck.NodeReady(c); !ok {
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

func (o *Options) configGate(ctx context.Context, nodes []*corev1.Node, all []corev1.Node, items map[string]*NodeReport) []string {
	testing := map[string]bool{}
	for _, n := range nodes {
		testing[n.Name] = true
	}
	if o.BaselineNode != "" && o.baselineFor(nil, all, testing) == nil {
		return []string{fmt.Sprintf("baseline node %s not found", o.BaselineNode)}
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
		b, err := o.configz(ctx, name)
		if err == nil {
			var cfg map[string]any
			if cfg, err = gpucheck.ParseConfigz(b); err == nil {
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
		base := o.baselineFor(n, all, testing)
		if base == nil {
			it.add(gpucheck.CheckConfig, gpucheck.LevelInfo, "no baseline node (no node of this pool on an older kubelet; pass --baseline-node)")
			continue
		}
		if base.Name == n.Name {
			it.add(gpucheck.CheckConfig, gpucheck.LevelInfo, "node is its own baseline")
			continue
		}
		it.ConfigBaseline = base.Name
		bcfg, err := fetch(base.Name)
		if err == nil {
			var ncfg map[string]any
			if ncfg, err = fetch(n.Name); err == nil {
				diffs := gpucheck.DiffKubeletConfig(bcfg, ncfg, base.Status.NodeInfo.KubeletVersion, n.Status.NodeInfo.KubeletVersion)
				it.ConfigDiffs = diffs
				it.Findings = append(it.Findings, gpucheck.ConfigFindings(base.Name, diffs)...)
				continue
			}
		}
		if errors.Is(err, gpucheck.ErrKubeletRefused) {
			it.add(gpucheck.CheckConfig, gpucheck.LevelWarning, "kubelet config not checked: "+err.Error())
			unavailable = append(unavailable, "kubelet config: "+err.Error())
			continue
		}
		if errors.Is(err, gpucheck.ErrConfigzForbidden) || apierrors.IsForbidden(err) {
			forbidden = true
			it.add(gpucheck.CheckConfig, gpucheck.LevelWarning, "kubelet config not checked: forbidden (needs get on nodes/proxy)")
			continue
		}
		it.add(gpucheck.CheckConfig, gpucheck.LevelFail, "kubelet config not checked: "+err.Error())
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

func (o *Options) podRunner(progress *cli.Progress) *gpucheck.NodePodRunner {
	return &gpucheck.NodePodRunner{Kube: o.kube, Clock: o.clock, Timeout: o.Timeout, Parallel: o.Parallel,
		OnEvent: func(m string) { progress.Event("%s", m) }}
}

func (o *Options) xidSince(n *corev1.Node) time.Time {
	switch {
	case !o.since.IsZero():
		return o.since
	case o.sinceAgo > 0:
		return o.clock.Now().Add(-o.sinceAgo)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	return o.clock.Now().Add(-24 * time.Hour)
}

func (o *Options) xidGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport, progress *cli.Progress) []string {
	since := map[string]time.Time{}
	for _, n := range nodes {
		since[n.Name] = o.xidSince(n)
	}
	spec := gpucheck.NodePodSpec{Check: gpucheck.CheckXid, Namespace: o.namespace, RunID: newRunID(), Image: o.XidImage, HostRoot: true,
		CommandFor: func(node string) []string { return gpucheck.XidCommand(since[node]) }}
	var unavailable []string
	for _, r := range o.podRunner(progress).Run(ctx, spec, readyNames(nodes, items)) {
		it := items[r.Node]
		if r.Err != nil {
			it.add(gpucheck.CheckXid, gpucheck.LevelFail, "Xid check could not run: "+r.Err.Error())
			unavailable = append(unavailable, "xid: "+r.Err.Error())
			continue
		}
		evs, err := gpucheck.ParseKernelLog(strings.NewReader(r.Log), since[r.Node])
		if err != nil {
			it.add(gpucheck.CheckXid, gpucheck.LevelFail, "kernel log unreadable: "+err.Error())
			continue
		}
		if r.Phase == corev1.PodFailed && len(evs) == 0 {
			it.add(gpucheck.CheckXid, gpucheck.LevelFail, strings.TrimSpace("kernel log pod "+r.Pod+" failed without output "+r.Reason))
			continue
		}
		it.Xids = evs
		it.Findings = append(it.Findings, gpucheck.XidFindings(evs)...)
	}
	return unavailable
}

func (o *Options) dcgmGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport, progress *cli.Progress) []string {
	gpus := map[string]int{}
	for _, n := range nodes {
		q := n.Status.Allocatable[gpucheck.GPUResource]
		gpus[n.Name] = int(q.Value())
	}
	var targets []string
	for _, name := range readyNames(nodes, items) {
		if gpus[name] > 0 {
			targets = append(targets, name)
		} else {
			items[name].add(gpucheck.CheckDCGM, gpucheck.LevelWarning, "DCGM not run: no allocatable GPUs")
		}
	}
	spec := gpucheck.NodePodSpec{Check: gpucheck.CheckDCGM, Namespace: o.namespace, RunID: newRunID(), Image: o.DCGMImage,
		Command: gpucheck.DCGMCommand(), GPUsFor: func(node string) int { return gpus[node] }}
	var unavailable []string
	for _, r := range o.podRunner(progress).Run(ctx, spec, targets) {
		it := items[r.Node]
		if r.Err != nil {
			it.add(gpucheck.CheckDCGM, gpucheck.LevelFail, "DCGM check could not run: "+r.Err.Error())
			unavailable = append(unavailable, "dcgm: "+r.Err.Error())
			continue
		}
		res, err := gpucheck.ParseDCGM(strings.NewReader(r.Log))
		if err != nil {
			msg := fmt.Sprintf("no DCGM result in the log of pod %s (phase %s)", r.Pod, r.Phase)
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			it.add(gpucheck.CheckDCGM, gpucheck.LevelFail, msg)
			continue
		}
		it.DCGM = res
		it.Findings = append(it.Findings, gpucheck.DCGMFindings(res)...)
	}
	return unavailable
}

func (o *Options) image(ctx context.Context) (string, error) {
	if o.NoResolve {
		return o.Image, nil
	}
	return resolveImage(ctx, o.Image)
}

func (o *Options) jobSpec(ctx context.Context, nodes []string, gpus int, pool string) (nccl.JobSpec, error) {
	img, err := o.image(ctx)
	if err != nil {
		return nccl.JobSpec{}, cli.WithHint(cli.ClusterErr(err), "pass --no-resolve to use the image reference as given")
	}
	runID := newRunID()
	spec := nccl.JobSpec{
		Name: "gpu-validate-nccl-" + runID, Namespace: o.namespace, RunID: runID,
		Launcher: o.launcher, Fabric: o.fabric, Image: img, Nodes: nodes, GPUsPerNode: gpus,
		MaxBytes: o.gateSize, Deadline: o.Deadline,
		FabricOptions: nccl.FabricOptions{RDMAResource: o.RDMAResource, EFADevices: o.EFADevices, GKENetworks: o.GKENetworks},
	}
	if o.gateSize < 1<<30 {
		spec.MinBytes = o.gateSize
	}
	if o.launcher != nccl.LauncherMPIJob {
		if spec.SSHKey, err = nccl.NewSSHKey(nil); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

func (o *Options) printManifest(ctx context.Context, nodes []string, gpus int, _ string) error {
	if gpus <= 0 {
		return cli.Usagef("the nodes advertise no nvidia.com/gpu; pass --gpus-per-node")
	}
	spec, err := o.jobSpec(ctx, nodes, gpus, "")
	if err != nil {
		return err
	}
	m, err := nccl.Render(spec)
	if err != nil {
		return cli.UsageErr(err)
	}
	y, err := m.YAML()
	if err != nil {
		return err
	}
	_, err = o.Out.Write(y)
	return err
}

// ncclGate runs one test per pool over the nodes that passed the other
// gates and attaches the verdict to each of them.
func (o *Options) ncclGate(ctx context.Context, nodes []*corev1.Node, items map[string]*NodeReport, progress *cli.Progress) ([]NCCLRun, []string) {
	byPool := map[string][]*corev1.Node{}
	var pools []string
	for _, n := range nodes {
		it := items[n.Name]
		if gpucheck.StatusOf(it.Findings) == gpucheck.StatusFail {
			it.add(gpucheck.CheckNCCL, gpucheck.LevelInfo, "NCCL test skipped: the node failed an earlier gate")
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
		run, err := o.ncclPool(ctx, pool, byPool[pool], progress)
		if err != nil {
			unavailable = append(unavailable, fmt.Sprintf("nccl (pool %s): %v", pool, err))
			run.Error = err.Error()
		}
		for _, n := range byPool[pool] {
			it := items[n.Name]
			switch {
			case run.Error != "":
				it.add(gpucheck.CheckNCCL, gpucheck.LevelFail, "NCCL test could not finish: "+run.Error)
			case run.Gate.Verdict == nccl.VerdictFail:
				it.add(gpucheck.CheckNCCL, gpucheck.LevelFail, "NCCL all-reduce: "+strings.Join(run.Gate.Reasons, "; "))
			case run.Gate.Verdict == nccl.VerdictWarn:
				it.add(gpucheck.CheckNCCL, gpucheck.LevelWarning, "NCCL all-reduce: "+strings.Join(run.Gate.Reasons, "; "))
			default:
				it.add(gpucheck.CheckNCCL, gpucheck.LevelInfo, fmt.Sprintf("NCCL all-reduce busbw %.1f GB/s at %s (baseline %.1f, min %.1f)",
					run.Gate.BusBW, nccl.FormatBytes(run.Gate.SizeBytes), run.Gate.BaselineBusBW, run.Gate.MinBusBW))
			}
		}
		runs = append(runs, run)
	}
	return runs, unavailable
}

func (o *Options) ncclPool(ctx context.Context, pool string, nodes []*corev1.Node, progress *cli.Progress) (NCCLRun, error) {
	run := NCCLRun{Pool: pool, Launcher: string(o.launcher), Fabric: string(o.fabric)}
	for _, n := range nodes {
		run.Nodes = append(run.Nodes, n.Name)
	}
	gpus := o.GPUsPerNode
	if gpus == 0 {
		gpus = minAllocatable(nodes)
	}
	if gpus <= 0 {
		return run, fmt.Errorf("the nodes advertise no nvidia.com/gpu")
	}
	store := nccl.BaselineStore{Client: o.kube, Namespace: o.namespace}
	base, err := store.Get(ctx, pool)
	if err != nil {
		return run, err
	}
	run.Baseline = base
	spec, err := o.jobSpec(ctx, run.Nodes, gpus, pool)
	if err != nil {
		return run, err
	}
	run.Image = spec.Image
	m, err := nccl.Render(spec)
	if err != nil {
		return run, err
	}
	runner := &nccl.Runner{Kube: o.kube, Dynamic: o.dyn, Clock: o.clock, Timeout: o.Timeout, Keep: o.Keep,
		OnEvent: func(s string) { progress.Event("%s", s) }}
	res, err := runner.Run(ctx, m)
	if res != nil {
		run.Pod = res.Pod
		for _, c := range res.CleanupErrors {
			progress.Event("warning: not deleted: %s", c)
		}
	}
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource") {
			err = fmt.Errorf("%w (is the %s API installed?)", err, o.launcher)
		}
		return run, err
	}
	parsed, perr := nccl.ParseString(res.Log)
	if perr != nil && res.Phase == string(corev1.PodFailed) {
		return run, fmt.Errorf("test pod %s failed without results", res.Pod)
	}
	run.Gate = nccl.Gate(nccl.GateInput{Result: parsed, SizeBytes: o.gateSize, Baseline: base, Tolerance: o.tolerance, ExpectedRanks: m.ExpectedRanks()})
	if res.Phase == string(corev1.PodFailed) && run.Gate.Verdict != nccl.VerdictFail {
		run.Gate.Verdict = nccl.VerdictFail
		run.Gate.Reasons = append(run.Gate.Reasons, "the test pod failed")
	}
	if o.SaveBaseline && run.Gate.Wrong == 0 && run.Gate.OutOfBounds == 0 && run.Gate.BusBW > 0 && (parsed != nil && len(parsed.Errors) == 0) {
		b := nccl.Baseline{Pool: pool, BusBW: run.Gate.BusBW, SizeBytes: run.Gate.SizeBytes, Nodes: len(run.Nodes), GPUsPerNode: gpus,
			Fabric: string(o.fabric), Launcher: string(o.launcher), Image: spec.Image, RecordedAt: o.clock.Now().UTC(), RecordedOn: run.Nodes}
		if err := store.Save(ctx, b); err != nil {
			return run, err
		}
		run.BaselineSaved = true
		run.Baseline = &b
		run.Gate = nccl.Gate(nccl.GateInput{Result: parsed, SizeBytes: o.gateSize, Baseline: &b, Tolerance: o.tolerance, ExpectedRanks: m.ExpectedRanks()})
		progress.Event("saved baseline for pool %s: %s", pool, b.Summary())
	}
	return run, nil
}
