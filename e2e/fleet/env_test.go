//go:build e2e

package fleete2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
)

// The fleet's clusters: each a control plane of its own.
const (
	canary   = "canary"
	prod     = "prod"
	training = "training"
	// mgmt runs the workflow-controller and holds every cluster's
	// credentials; it is no upgrade target.
	mgmt   = "mgmt"
	argoNS = "argo"
	// oldKubelet is where every pool starts a scenario; the target is the
	// control planes' own v1.37.2, so each run upgrades the pools only (a
	// real apiserver cannot be swapped here).
	oldKubelet = "v1.34.2"
	target     = harness.KubeVersion
	bucket     = "fleet"
	// image is a digest-pinned image reference; the exec node runs the
	// commands with the suite's binaries instead of pulling it.
	image = "ghcr.io/gpufleet/suite@sha256:5f0e3a1c2b4d6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
)

// pools are each cluster's GPU pool (cloud.google.com/gke-nodepool).
var pools = map[string]string{canary: "gpu-a", prod: "gpu-a", training: "train"}

type fleetEnv struct {
	planes   map[string]*harness.ControlPlane
	mgmt     *harness.ControlPlane
	argo     *harness.ArgoController
	node     *harness.ExecNode
	s3       *harness.S3Server
	bins     harness.FleetBinaries
	dyn      dynamic.Interface
	dir      string
	kubectl  string
	env      []string // PATH and the store's credentials, for the commands the test runs
	took     map[string]time.Duration
	tookMu   sync.Mutex
	nodeLogs string
	// users are the people's kubeconfigs on the management cluster, by
	// user name (userKubeconfig).
	users   map[string]string
	usersMu sync.Mutex
}

func (e *fleetEnv) timed(what string, since time.Time) {
	e.tookMu.Lock()
	e.took[what] = time.Since(since).Round(100 * time.Millisecond)
	e.tookMu.Unlock()
}

func (e *fleetEnv) timings() string {
	var out []string
	for k, v := range e.took {
		out = append(out, k+" "+v.String())
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// s3Env are the credentials every store client (the test, the steps) uses
// with versitygw, the root credentials it was started with. The SDK's
// default checksums are kept to what an S3-compatible server without the
// 2025 checksum extensions answers.
var s3Env = []string{"AWS_ACCESS_KEY_ID=" + harness.S3AccessKey, "AWS_SECRET_ACCESS_KEY=" + harness.S3SecretKey, "AWS_REGION=us-east-1",
	"AWS_REQUEST_CHECKSUM_CALCULATION=when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION=when_required"}

func startFleetEnv(ctx context.Context, t *testing.T) (*fleetEnv, error) {
	e := &fleetEnv{planes: map[string]*harness.ControlPlane{}, took: map[string]time.Duration{}}
	var err error
	if e.dir, err = os.MkdirTemp("", "gpufleet-fleet-e2e-"); err != nil {
		return nil, err
	}
	began := time.Now()
	if e.bins, err = harness.EnsureFleetBinaries(func(f string, a ...any) { t.Logf(f, a...) }); err != nil {
		return e, err
	}
	e.timed("fleet binaries", began)
	// For the package's lifetime, not the first test's: the store is read
	// by every test of the shared environment.
	for _, kv := range s3Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return e, err
		}
	}
	// The four planes (three clusters and the management cluster) start
	// together. The management cluster is a plane of its own: when it is
	// also an upgrade target, the target's pre-flight sees the running step
	// pod (Argo's emptyDir) as a pod that blocks a drain and fails.
	began = time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := map[string]error{}
	for _, name := range []string{canary, prod, training, mgmt} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := harness.Options{}
			if name == training {
				opts.Kueue, opts.JobSet = true, true
			}
			opts.StartTimeout = 8 * time.Minute
			cp, err := harness.Start(ctx, opts)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs[name] = err
			case name == mgmt:
				e.mgmt = cp
			default:
				e.planes[name] = cp
			}
		}()
	}
	wg.Wait()
	e.timed("four control planes", began)
	for name, err := range errs {
		e.stop()
		return nil, fmt.Errorf("control plane %s: %w", name, err)
	}
	e.kubectl = e.mgmt.Binaries.Kubectl
	if e.dyn, err = dynamic.NewForConfig(e.mgmt.Config); err != nil {
		return e, err
	}
	for name, cp := range e.planes {
		if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: pools[name], Nodes: 2, KubeletVersion: oldKubelet}); err != nil {
			e.stop()
			return nil, fmt.Errorf("%s nodes: %w", name, err)
		}
	}
	began = time.Now()
	if e.argo, err = e.mgmt.StartArgo(ctx, e.bins, argoNS); err != nil {
		e.stop()
		return nil, err
	}
	e.timed("workflow-controller start", began)
	// Each cluster's kubeconfig in a Secret of the management cluster (the
	// fleet file's credentials, Cluster API's convention), read by the
	// steps with the management cluster's credentials.
	for name, cp := range e.planes {
		b, err := os.ReadFile(cp.Kubeconfig)
		if err != nil {
			return e, err
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: argoNS}, Data: map[string][]byte{"value": b}}
		if _, err := e.mgmt.Client.CoreV1().Secrets(argoNS).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return e, err
		}
	}
	if e.s3, err = harness.StartS3(ctx, e.bins, e.dir, bucket); err != nil {
		e.stop()
		return nil, err
	}
	// The provider's simulated pool upgrade: make build's democluster in
	// the plugins' directory, built here only when it is missing there (a
	// build here, even from a warm cache, is a link of about half a minute
	// on a busy machine).
	bin := plugintest.BinDir(t)
	demo := bin
	if _, err := os.Stat(filepath.Join(bin, "democluster")); err != nil {
		demo = filepath.Dir(plugintest.Tool(t, "./cmd/democluster"))
	}
	path := strings.Join([]string{bin, demo, filepath.Dir(e.kubectl), os.Getenv("PATH")}, string(os.PathListSeparator))
	e.env = append([]string{"PATH=" + path, "KUBECONFIG=" + e.mgmt.Kubeconfig}, s3Env...)
	e.nodeLogs = filepath.Join(e.dir, "pods")
	// In a cluster the step pods would have the management cluster's
	// in-cluster credentials; here KUBECONFIG stands in for them.
	if e.node, err = e.mgmt.StartExecNode(ctx, harness.ExecNodeOptions{Name: "fleet-exec", Labels: map[string]string{"gpufleet.dev/exec": "true"},
		Env: e.env, Dir: e.nodeLogs}); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

func (e *fleetEnv) stop() {
	if e.node != nil {
		e.node.Stop()
	}
	if e.argo != nil {
		e.argo.Stop()
	}
	if e.s3 != nil {
		e.s3.Stop()
	}
	var wg sync.WaitGroup
	planes := []*harness.ControlPlane{e.mgmt}
	for _, cp := range e.planes {
		planes = append(planes, cp)
	}
	for _, cp := range planes {
		if cp == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); cp.Stop() }()
	}
	wg.Wait()
	if os.Getenv("E2E_KEEP") == "" {
		_ = os.RemoveAll(e.dir)
	}
}

// s3Store is a store URL on the S3 server under prefix.
func (e *fleetEnv) s3Store(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&use_path_style=true&disable_https=true&region=us-east-1", bucket, prefix, e.s3.Endpoint)
}

// run runs a command of the suite as a user would, with the management
// cluster's kubeconfig.
func (e *fleetEnv) run(t *testing.T, name string, args ...string) plugintest.Result {
	t.Helper()
	bin := name
	if !filepath.IsAbs(name) {
		bin = filepath.Join(plugintest.BinDir(t), name)
	}
	return plugintest.RunCmd(t, bin, plugintest.Cmd{Args: append(args, "--kubeconfig", e.mgmt.Kubeconfig), Env: e.env, Timeout: 5 * time.Minute})
}

// skew runs kubectl-skew and fails unless it exits 0.
func (e *fleetEnv) skew(t *testing.T, args ...string) string {
	t.Helper()
	r := e.run(t, "kubectl-skew", args...)
	if r.ExitCode != 0 {
		t.Fatalf("kubectl skew %s: %s", strings.Join(args, " "), r)
	}
	return r.Stdout
}

// resetPools puts the named clusters' pools (every cluster's when none is
// named) back on the old kubelet, uncordoned, as a fresh fleet would be.
// A test that runs beside another names only the clusters its run touches.
func (e *fleetEnv) resetPools(t *testing.T, clusters ...string) {
	t.Helper()
	ctx := context.Background()
	if len(clusters) == 0 {
		clusters = []string{canary, prod, training}
	}
	for _, name := range clusters {
		cp := e.planes[name]
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: harness.PoolLabel + "=" + pools[name]})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			n.Status.NodeInfo.KubeletVersion = oldKubelet
			if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, &n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable {
				patch := []byte(`{"spec":{"unschedulable":false}}`)
				if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// scenario is one run of the programme.
type scenario struct {
	e     *fleetEnv
	name  string // the fleet's name
	run   string
	store string
	file  string
	dir   string
}

// newScenario writes a fleet file: the three clusters, the rings given as
// YAML, short soaks and retries, the demo's simulated pool upgrade as the
// provider's command.
func (e *fleetEnv) newScenario(t *testing.T, name, store, rings string, extra string) *scenario {
	t.Helper()
	s := &scenario{e: e, name: name, run: "r1", store: store, dir: t.TempDir()}
	s.file = filepath.Join(s.dir, "fleet.yaml")
	y := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: %s}
spec:
  target: {version: %s}
  clusters:
  - {name: canary, labels: {gpufleet.dev/ring: canary, gpufleet.dev/dr-pair: east}}
  - {name: prod, labels: {gpufleet.dev/ring: prod, gpufleet.dev/dr-pair: east}}
  - {name: training, labels: {gpufleet.dev/ring: training}}
  rings:
%s
  credentials: {secretNamespace: argo}
  haltOn:
  - {check: verify-regressions}
  - {check: gpu-validate}
  - {check: nodes-not-ready, maxPercent: 0}
  - {check: gpu-allocatable, belowBaselinePercent: 0}
  upgrade:
    stepDuration: 10s
    drain: {onTimeout: stop, ackTimeout: 3s}
    actions:
    - command:
        pool: "democluster upgrade-pool --kubeconfig {{.Kubeconfig}} --context {{.Context}} --selector {{.Selector}} --kubelet {{.Version}}"
  store: {url: %q}
  engine:
    argo: {namespace: argo, image: %q, nodeSelector: {gpufleet.dev/exec: "true"}, retryInterval: 2s, retryCap: 4s}
%s`, name, target, rings, store, image, extra)
	if err := os.WriteFile(s.file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// start plans and freezes the run, renders it, validates every object
// with Argo's own validation, and applies it: the run starts.
func (s *scenario) start(t *testing.T) string {
	t.Helper()
	plan := s.e.skew(t, "fleet", "plan", "-f", s.file, "--run", s.run)
	t.Logf("kubectl skew fleet plan -f fleet.yaml --run %s:\n%s", s.run, plan)
	rendered := s.e.skew(t, "fleet", "render", "-f", s.file, "--run", s.run, "--engine", "argo")
	out := filepath.Join(s.dir, "run.yaml")
	if err := os.WriteFile(out, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	v := plugintest.RunCmd(t, s.e.bins.Validate, plugintest.Cmd{Args: []string{out}})
	if v.ExitCode != 0 {
		t.Fatalf("Argo's validation refused the rendered run:\n%s", v)
	}
	t.Logf("Argo validation: %s", lastLine(v.Stdout))
	a := plugintest.RunCmd(t, s.e.kubectl, plugintest.Cmd{Args: []string{"--kubeconfig", s.e.mgmt.Kubeconfig, "apply", "-f", out}})
	if a.ExitCode != 0 {
		t.Fatalf("kubectl apply: %s", a)
	}
	return rendered
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func (s *scenario) workflowName() string { return fleetrun.WorkflowName(s.name, s.run) }

// workflow reads the run's Workflow phase and waiting suspend nodes.
func (s *scenario) workflow(t *testing.T) (string, []fleetrun.Resumed) {
	t.Helper()
	phase, waiting, err := fleetrun.WorkflowPhase(context.Background(), s.e.dyn, argoNS, s.workflowName())
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return phase, waiting
}

// waitFor evaluates cond whenever the run's Workflow changes (a watch:
// every step's start and end, every suspend, moves it) and at least once a
// second for what only the store shows, until cond holds; after timeout it
// fails with the run's status and the controller's log.
func (s *scenario) waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var changed <-chan watch.Event
	w, err := s.e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + s.workflowName()})
	if err == nil {
		defer w.Stop()
		changed = w.ResultChan()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			st := s.e.run(t, "kubectl-skew", "fleet", "status", "--store", s.store, "--run", s.run, "-o", "wide")
			t.Fatalf("waiting for %s: not after %s\n%s\n--- workflow-controller log\n%s", what, timeout, st.Stdout+st.Stderr, s.e.argo.Log(4000))
		case _, ok := <-changed:
			if !ok { // the watch ended (it times out server-side): the ticker goes on
				changed = nil
			}
		case <-tick.C:
		}
	}
}

// waitPhase waits for the Workflow to reach phase.
func (s *scenario) waitPhase(t *testing.T, phase string, timeout time.Duration) {
	t.Helper()
	s.waitFor(t, "workflow "+s.workflowName()+" "+phase, timeout, func() bool {
		p, _ := s.workflow(t)
		if p == "Failed" || p == "Error" {
			t.Fatalf("workflow %s ended %s\n%s", s.workflowName(), p, s.e.argo.Log(4000))
		}
		return p == phase
	})
}

// waiting reports whether a suspend node of this kind (and ring, cluster)
// waits for approve.
func (s *scenario) waiting(t *testing.T, kind, ring, cluster string) bool {
	_, w := s.workflow(t)
	for _, n := range w {
		if n.Kind == kind && (ring == "" || n.Ring == ring) && (cluster == "" || n.Cluster == cluster) {
			return true
		}
	}
	return false
}

// openStore opens the scenario's store from the test.
func (s *scenario) openStore(t *testing.T) fleetrun.Store {
	t.Helper()
	st, err := fleetrun.OpenStore(context.Background(), s.store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// states reads every cluster's state from the store.
func (s *scenario) states(t *testing.T) (*fleetrun.Plan, map[string]*fleetrun.ClusterState) {
	t.Helper()
	st := s.openStore(t)
	p, err := fleetrun.ReadPlan(context.Background(), st, s.run)
	if err != nil {
		t.Fatal(err)
	}
	states, err := fleetrun.ReadStates(context.Background(), st, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, states
}

// approve runs kubectl skew fleet approve as a person, with their own
// credentials.
func (s *scenario) approve(t *testing.T, who, ring, reason string) string {
	t.Helper()
	return s.e.skewAs(t, who, "fleet", "approve", "--store", s.store, "--run", s.run, "--ring", ring, "--reason", reason)
}

// nodesUpgraded checks a cluster's pool: every node on the target kubelet
// and schedulable.
func (e *fleetEnv) nodesUpgraded(t *testing.T, cluster string) {
	t.Helper()
	nodes, err := e.planes[cluster].Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: harness.PoolLabel + "=" + pools[cluster]})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Status.NodeInfo.KubeletVersion != target || n.Spec.Unschedulable {
			t.Errorf("%s node %s: kubelet %s, unschedulable %v; want %s and schedulable", cluster, n.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable, target)
		}
	}
}

// deleteRun removes a scenario's Workflow (its pods go with it), so later
// scenarios start on a quiet controller.
func (s *scenario) deleteRun(t *testing.T) {
	t.Helper()
	err := s.e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS).Delete(context.Background(), s.workflowName(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("deleting workflow %s: %v", s.workflowName(), err)
	}
}

// nodeStates lists a workflow's nodes that ran a given template (for
// assertions on retries and holds).
func (s *scenario) nodes(t *testing.T) []map[string]any {
	t.Helper()
	wf, err := s.e.dyn.Resource(fleetrun.WorkflowGVR).Namespace(argoNS).Get(context.Background(), s.workflowName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	var out []map[string]any
	for _, v := range m {
		if n, ok := v.(map[string]any); ok {
			out = append(out, n)
		}
	}
	return out
}

// execLog is the exec node's log of pods, for failure messages.
func (e *fleetEnv) execLog(t *testing.T, grep string) string {
	t.Helper()
	out, _ := exec.Command("bash", "-c", fmt.Sprintf("grep -l -- %q %s/*.log | head -3 | xargs -r tail -n 20", grep, e.nodeLogs)).CombinedOutput()
	return string(out)
}
