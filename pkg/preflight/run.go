package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// DefaultEtcdQuota is etcd's own default backend quota
// (--quota-backend-bytes, 2 GiB).
const DefaultEtcdQuota = 2 << 30

// EtcdFailRatio is the share of the quota above which the etcd gate fails:
// this tool's policy (the seed document's "under 60% of quota"), not an
// upstream rule; etcd itself refuses writes only at the quota.
const EtcdFailRatio = 0.6

// Runner runs the gates against one cluster.
type Runner struct {
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	Ext       apiextclient.Interface
	// Target is the minor to reach.
	Target skew.Version
	// Compat is the addon compatibility table.
	Compat Compat
	// Calendar is the release calendar.
	Calendar skew.Calendar
	// EtcdQuota is etcd's backend quota in bytes; 0 takes the quota of
	// where etcd runs (EKS's 8 GiB, etcd's default 2 GiB on a control plane
	// of the cluster's own, none published by GKE and AKS).
	EtcdQuota int64
	// PoolLabel names node pools (pkg/skew's well-known labels when empty).
	PoolLabel string
	// Stream reads nodes, pods and PDBs for the drain gate with one
	// watch-list request each (pkg/eviction.LoadOptions.Stream); only a
	// real apiserver supports it.
	Stream bool
	// StreamTimeout bounds each such stream (0: none).
	StreamTimeout time.Duration
	// PageSize of the paged lists (500 when 0).
	PageSize int64
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Self is the pod this runs in (eviction.SelfFromEnv when nil): the
	// drain gate skips the pods of its Argo workflow, and says so.
	Self *eviction.Self
	// Kubectl returns the kubectl on PATH, for the inventory (nil skips).
	Kubectl func(ctx context.Context) (string, error)
	// Raw GETs a path of the apiserver (/metrics, /readyz/etcd); nil
	// makes the etcd gate and the metric source UNKNOWN.
	Raw func(ctx context.Context, path string) ([]byte, error)
	// Policy tunes the policy-continuity gates (policy.go).
	Policy PolicyOptions
	// Health picks and tunes the health gates (health.go).
	Health HealthOptions

	snapOnce sync.Once
	snap     *eviction.Snapshot
	snapErr  error
	// skipped says which pods of the running workflow the snapshot left out.
	skipped string

	crdOnce sync.Once
	crdList []*apiextv1.CustomResourceDefinition
	crdErr  error

	deployOnce sync.Once
	deploys    []*appsv1.Deployment
	deployErr  error

	dsOnce sync.Once
	dss    []*appsv1.DaemonSet
	dsErr  error

	hooksOnce sync.Once
	hooks     *crdmigrate.Webhooks
	hooksErr  error

	helmOnce sync.Once
	helmRes  dep.HelmResult
	helmErr  error
	pol      policyState

	vapOnce     sync.Once
	vapPolicies []admissionregv1.ValidatingAdmissionPolicy
	vapBindings []admissionregv1.ValidatingAdmissionPolicyBinding
	vapServed   bool
	vapErr      error
	vapWhat     string

	// inventory waits for Run's inventory (nil when it failed).
	inventory func() *skew.Inventory
}

// provider is the provider the inventory names (unknown when it has none
// or failed).
func (r *Runner) provider() skew.Provider {
	if r.inventory != nil {
		if inv := r.inventory(); inv != nil {
			return skew.DetectProvider(*inv).Provider
		}
	}
	return skew.ProviderUnknown
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) page() int64 {
	if r.PageSize > 0 {
		return r.PageSize
	}
	return 500
}

// Run reads the inventory (required: /version and the nodes) and runs
// every gate, all at once. A gate that cannot read is UNKNOWN; only a
// failed inventory is an error. Nodes and pods are read once, by the drain
// gate's snapshot, for the inventory and every gate that needs them.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	res := &Result{}
	ev := &res.Evidence
	ev.Target = r.Target.MinorString()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		inv    skew.Inventory
		invErr error
		invWG  sync.WaitGroup
	)
	invWG.Add(1)
	go func() {
		defer invWG.Done()
		col := &skew.Collector{Client: r.Kube, PoolLabel: r.PoolLabel, PageSize: r.page(), Kubectl: r.Kubectl, Now: r.Now,
			Nodes: func(ctx context.Context) ([]*corev1.Node, bool) {
				snap, err := r.snapshot(ctx)
				if err != nil {
					return nil, false
				}
				return snap.Nodes, true
			},
			SystemPods: r.systemPods,
			DaemonSets: func(ctx context.Context) ([]*appsv1.DaemonSet, bool) {
				all, err := r.daemonSets(ctx)
				return inNamespace(all, metav1.NamespaceSystem), err == nil
			},
			Deployments: func(ctx context.Context) ([]*appsv1.Deployment, bool) {
				all, err := r.deployments(ctx)
				return inNamespace(all, metav1.NamespaceSystem), err == nil
			},
		}
		if inv, invErr = col.Collect(ctx); invErr != nil {
			// Without the inventory there is no report: stop the gates.
			cancel()
		}
	}()

	// /metrics is read once for the removed-API metric and etcd's size.
	var (
		metricsText []byte
		metricsErr  error
		metricsOnce sync.Once
	)
	readMetrics := func(ctx context.Context) ([]byte, error) {
		metricsOnce.Do(func() {
			if r.Raw == nil {
				metricsErr = errors.New("no REST client for /metrics")
				return
			}
			// Only the families the gates read: the whole exposition is
			// megabytes the apiserver writes for nothing.
			metricsText, metricsErr = r.Raw(ctx, dep.MetricsPath(append([]string{dep.DeprecatedAPIsMetric}, etcdSizeMetrics...)...))
		})
		return metricsText, metricsErr
	}

	r.inventory = func() *skew.Inventory {
		invWG.Wait()
		if invErr != nil {
			return nil
		}
		return &inv
	}
	type gateFn func(ctx context.Context) Gate
	var mu sync.Mutex
	gates := map[string]gateFn{
		GateSupport: func(context.Context) Gate { return r.supportGate() },
		GateRemovedAPIs: func(ctx context.Context) Gate {
			g, callers := r.removedAPIsGate(ctx, readMetrics)
			mu.Lock()
			ev.RemovedAPICallers = callers
			mu.Unlock()
			return g
		},
		GateAddons: func(ctx context.Context) Gate {
			// A support table's column depends on the platform, which the
			// inventory tells.
			g, addons := r.addonsGate(ctx, func() *skew.Inventory {
				invWG.Wait()
				if invErr != nil {
					return nil
				}
				return &inv
			})
			mu.Lock()
			ev.Addons = addons
			mu.Unlock()
			return g
		},
		GateWebhooks: r.webhooksGate,
		GateEtcd: func(ctx context.Context) Gate {
			// The quota and commands depend on where etcd runs, which the
			// inventory tells: judged once it is read.
			return r.etcdGate(ctx, readMetrics, r.inventory)
		},
		GateNodes: func(ctx context.Context) Gate {
			g, nodes := r.nodesGate(ctx)
			mu.Lock()
			ev.Nodes = nodes
			mu.Unlock()
			return g
		},
		GateSystemPods: func(ctx context.Context) Gate {
			g, pods, warnings := r.systemPodsGate(ctx)
			mu.Lock()
			ev.SystemPods, ev.SystemWarnings = pods, warnings
			ev.LastSystemWarning = lastWarning(warnings)
			mu.Unlock()
			return g
		},
		GateDrains:      r.drainsGate,
		GateCRDs:        r.crdsGate,
		GatePSA:         r.psaGate,
		GateLegacyToken: r.legacyTokenGate,
	}
	for name, fn := range r.policyGates(ev, &mu) {
		gates[name] = fn
	}
	for name, fn := range r.healthGates(ev, &mu, r.inventory) {
		gates[name] = fn
	}
	order := append(GateOrder[:len(GateOrder):len(GateOrder)], r.healthGateOrder()...)
	out := make([]Gate, len(order))
	var wg sync.WaitGroup
	for i, name := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := gates[name](ctx)
			g.Name = name
			out[i] = g
		}()
	}
	wg.Wait()
	invWG.Wait()
	if invErr != nil {
		return nil, invErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ev.CollectedAt = inv.CollectedAt
	ev.Inventory = inv
	res.Gates = out
	return res, nil
}

// unknown is the gate that could not read: the verb and resource when the
// server forbade it, else the reason.
func unknown(what string, err error) Gate {
	msg := fmt.Sprintf("could not %s: %v", what, err)
	var st apierrors.APIStatus
	if errors.As(err, &st) && apierrors.IsForbidden(err) {
		d := st.Status().Details
		res := what
		if d != nil && d.Kind != "" {
			res = d.Kind
			if d.Group != "" {
				res += "." + d.Group
			}
		}
		msg = fmt.Sprintf("forbidden: cannot %s (%s): %s", what, res, st.Status().Message)
	}
	return Gate{Status: StatusUnknown, Message: msg}
}

func (r *Runner) supportGate() Gate {
	s := r.Calendar.Support(r.Target, r.now())
	g := Gate{Message: s.Message, Evidence: []string{fmt.Sprintf("release calendar data from %s", s.CalendarDate)},
		Command: "kubectl skew plan --target v" + r.Target.MinorString()}
	if s.EndOfLife != "" {
		g.Evidence = append(g.Evidence, fmt.Sprintf("%s released %s, end of life %s", s.Minor, s.Released, s.EndOfLife))
	}
	switch s.Status {
	case skew.StatusOK:
		g.Status = StatusPass
	case skew.StatusEdge:
		g.Status = StatusWarn
	case skew.StatusViolation:
		g.Status = StatusFail
	default:
		g.Status = StatusUnknown
	}
	return g
}

// nodesGate checks every node is Ready, with the facts verify compares
// later. The nodes come from the drain gate's read (pkg/eviction.Load with
// NodeStatus), so they are listed once for both.
func (r *Runner) nodesGate(ctx context.Context) (Gate, []NodeFact) {
	snap, err := r.snapshot(ctx)
	if err != nil {
		return unknown("list nodes, pods and poddisruptionbudgets", err), nil
	}
	var facts []NodeFact
	for _, n := range snap.Nodes {
		pool, _ := skew.PoolOf(n.Labels, r.PoolLabel)
		ready, why := gpucheck.NodeReady(n)
		f := NodeFact{Name: n.Name, Pool: pool, Kubelet: n.Status.NodeInfo.KubeletVersion, Ready: ready}
		if !ready {
			f.NotReady = why
		}
		if q, ok := n.Status.Allocatable[gpucheck.GPUResource]; ok {
			f.GPUAllocatable = int(q.Value())
		}
		facts = append(facts, f)
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].Name < facts[j].Name })
	var bad []string
	for _, f := range facts {
		if !f.Ready {
			bad = append(bad, fmt.Sprintf("node %s (pool %s) not Ready: %s", f.Name, f.Pool, f.NotReady))
		}
	}
	if len(bad) > 0 {
		return Gate{Status: StatusFail, Message: fmt.Sprintf("%d of %s not Ready", len(bad), skew.Nodes(len(facts))), Evidence: capLines(bad),
			Command: "kubectl describe node " + firstWord(bad[0], "node ")}, facts
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("all %s Ready", skew.Nodes(len(facts))), Command: "kubectl get nodes"}, facts
}

// snapshot reads nodes (with their status and the inventory's
// annotations), pods (kube-system's whole) and PDBs once, with
// pkg/eviction.Load, for the inventory and the drain, node and
// kube-system pod gates.
func (r *Runner) snapshot(ctx context.Context) (*eviction.Snapshot, error) {
	r.snapOnce.Do(func() {
		r.snap, r.snapErr = eviction.Load(ctx, r.Kube, eviction.LoadOptions{Stream: r.Stream, StreamTimeout: r.StreamTimeout, PageSize: r.page(),
			NodeStatus: true, NodeAnnotations: skew.NodeAnnotations, KeepPods: metav1.NamespaceSystem})
		if r.snapErr == nil {
			self := eviction.SelfFromEnv()
			if r.Self != nil {
				self = *r.Self
			}
			r.skipped = r.snap.SkipRunningWorkflow(self)
		}
	})
	return r.snap, r.snapErr
}

// systemPods returns the whole pods of kube-system from the snapshot;
// false when the snapshot could not read them (the caller lists them
// itself, for the server's own answer).
func (r *Runner) systemPods(ctx context.Context) ([]*corev1.Pod, bool) {
	snap, err := r.snapshot(ctx)
	if err != nil {
		return nil, false
	}
	if _, forbidden := snap.ForbiddenPods[metav1.NamespaceSystem]; forbidden {
		return nil, false
	}
	return snap.KeptPods, true
}

// deployments lists the Deployments of every namespace once, for the
// addons gate, the inventory (kube-system's) and the removed-APIs gate
// (their managed fields).
func (r *Runner) deployments(ctx context.Context) ([]*appsv1.Deployment, error) {
	r.deployOnce.Do(func() {
		r.deploys, r.deployErr = listAll[*appsv1.Deployment](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.Kube.AppsV1().Deployments("").List(ctx, o)
		})
	})
	return r.deploys, r.deployErr
}

// daemonSets lists the DaemonSets of every namespace once, as deployments
// does the Deployments.
func (r *Runner) daemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	r.dsOnce.Do(func() {
		r.dss, r.dsErr = listAll[*appsv1.DaemonSet](ctx, r.page(), func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.Kube.AppsV1().DaemonSets("").List(ctx, o)
		})
	})
	return r.dss, r.dsErr
}

// listAll pages through one list and keeps its items of type T.
func listAll[T runtime.Object](ctx context.Context, pageSize int64, list pager.ListPageFunc) ([]T, error) {
	p := pager.New(list)
	p.PageSize = pageSize
	var out []T
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if v, ok := obj.(T); ok {
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// webhooks lists the admission webhook configurations once, for the
// webhooks gate and the removed-APIs gate.
func (r *Runner) webhooks(ctx context.Context) (*crdmigrate.Webhooks, error) {
	r.hooksOnce.Do(func() {
		r.hooks, r.hooksErr = crdmigrate.LoadWebhooks(ctx, r.Kube)
	})
	return r.hooks, r.hooksErr
}

// helm reads the deployed revision of every Helm release once, with
// pkg/deprecations' reader: the removed-APIs gate scans their manifests,
// the addons gate reads their charts.
func (r *Runner) helm(ctx context.Context) (dep.HelmResult, error) {
	r.helmOnce.Do(func() {
		r.helmRes, r.helmErr = (&dep.HelmReader{Kube: r.Kube, Scanner: &dep.ManifestScanner{Table: apilifecycle.Builtin()}, Metadata: r.Metadata, PageSize: r.page()}).Read(ctx)
	})
	return r.helmRes, r.helmErr
}

// inNamespace returns the objects of namespace ns.
func inNamespace[T metav1.Object](objs []T, ns string) []T {
	var out []T
	for _, o := range objs {
		if o.GetNamespace() == ns {
			out = append(out, o)
		}
	}
	return out
}

// firstWord returns the word after prefix in s.
func firstWord(s, prefix string) string {
	s = s[len(prefix):]
	for i, c := range s {
		if c == ' ' {
			return s[:i]
		}
	}
	return s
}

// capLines keeps evidence short: the first 20 lines and a count.
func capLines(ls []string) []string {
	if len(ls) <= 20 {
		return ls
	}
	out := append([]string(nil), ls[:20]...)
	return append(out, fmt.Sprintf("... and %d more", len(ls)-20))
}

// podProblem says what is wrong with a pod, or "".
func podProblem(p *corev1.Pod, now time.Time) string {
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			return "CrashLoopBackOff"
		}
	}
	switch p.Status.Phase {
	case corev1.PodPending:
		// A pod that has just been created is not a finding yet.
		if now.Sub(p.CreationTimestamp.Time) > 2*time.Minute {
			return "Pending"
		}
	case corev1.PodFailed:
		return "Failed"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ImagePullBackOff" || w.Reason == "ErrImagePull" || w.Reason == "CreateContainerConfigError") {
			return w.Reason
		}
	}
	return ""
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// systemPodsGate checks kube-system pods (kept whole by the drain gate's
// snapshot, listed only when it could not read them) and reads the
// Warning events there, per reason and object, for verify.
func (r *Runner) systemPodsGate(ctx context.Context) (Gate, []PodFact, []WarningFact) {
	pods, ok := r.systemPods(ctx)
	if !ok {
		list, err := r.Kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		if err != nil {
			return unknown("list pods in kube-system", err), nil, nil
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	now := r.now()
	var facts []PodFact
	var bad []string
	for _, p := range pods {
		f := PodFact{Name: p.Name, Phase: string(p.Status.Phase), Restarts: restarts(p), Problem: podProblem(p, now)}
		facts = append(facts, f)
		if f.Problem != "" {
			bad = append(bad, fmt.Sprintf("pod kube-system/%s: %s (%s)", p.Name, f.Problem, cli.Plural(int(f.Restarts), "restart")))
		}
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].Name < facts[j].Name })
	sort.Strings(bad)
	warnings, evErr := r.systemWarnings(ctx, pods)
	var notes []string
	if evErr != nil {
		notes = append(notes, fmt.Sprintf("Warning events in kube-system not read (verify cannot compare them): %v", evErr))
	}
	if len(bad) > 0 {
		name := strings.TrimSuffix(firstWord(bad[0], "pod kube-system/"), ":")
		return Gate{Status: StatusFail, Message: fmt.Sprintf("%d of %d kube-system pods unhealthy", len(bad), len(facts)), Evidence: append(capLines(bad), notes...),
			Command: fmt.Sprintf("kubectl -n kube-system describe pod %s && kubectl -n kube-system logs %s --previous", name, name)}, facts, warnings
	}
	return Gate{Status: StatusPass, Message: fmt.Sprintf("all %d kube-system pods healthy", len(facts)), Evidence: notes, Command: "kubectl -n kube-system get pods"}, facts, warnings
}

// systemWarnings reads the Warning events of kube-system, grouped per
// reason and object (nil when none).
func (r *Runner) systemWarnings(ctx context.Context, pods []*corev1.Pod) ([]WarningFact, error) {
	evs, err := r.Kube.CoreV1().Events(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		return nil, err
	}
	controllers := map[string]string{}
	if dss, err := r.daemonSets(ctx); err == nil {
		for _, d := range inNamespace(dss, metav1.NamespaceSystem) {
			controllers[d.Name] = "daemonset/" + d.Name
		}
	}
	if deps, err := r.deployments(ctx); err == nil {
		for _, d := range inNamespace(deps, metav1.NamespaceSystem) {
			if _, ds := controllers[d.Name]; !ds {
				controllers[d.Name] = "deployment/" + d.Name
			}
		}
	}
	out := warningFacts(evs.Items, pods, controllers)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// lastWarning is the newest of the Warning events (nil when none).
func lastWarning(fs []WarningFact) *time.Time {
	var last time.Time
	for _, f := range fs {
		if f.Last.After(last) {
			last = f.Last
		}
	}
	if last.IsZero() {
		return nil
	}
	return &last
}

// readAll drains a reader (used by Raw implementations).
func readAll(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	var b bytes.Buffer
	_, err := io.Copy(&b, io.LimitReader(rc, 256<<20))
	return b.Bytes(), err
}

// RawFromStream adapts a stream opener to Runner.Raw.
func RawFromStream(open func(ctx context.Context, path string) (io.ReadCloser, error)) func(ctx context.Context, path string) ([]byte, error) {
	return func(ctx context.Context, path string) ([]byte, error) {
		rc, err := open(ctx, path)
		if err != nil {
			return nil, err
		}
		return readAll(rc)
	}
}
