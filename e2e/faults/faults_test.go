//go:build e2e

package faultse2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// fixture is what every fault test runs the plugins against: one pool of
// two GPU nodes at the control plane's version, a Deployment on them with
// a PodDisruptionBudget, and a CRD.
type fixture struct {
	cp      *harness.ControlPlane
	ns      string
	nodes   []string
	podNode string // a node with a web pod
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

func setup(t *testing.T) *fixture {
	t.Helper()
	cp := harness.Shared(t)
	plugintest.BinDir(t)
	fixOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		f := &fixture{cp: cp, ns: "faults"}
		if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, nsObject(f.ns), metav1.CreateOptions{}); err != nil {
			fixErr = err
			return
		}
		nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "faults", Nodes: 2})
		if err != nil {
			fixErr = err
			return
		}
		for _, n := range nodes {
			f.nodes = append(f.nodes, n.Name)
		}
		d := harness.Deployment(f.ns, "web", 2, 1)
		d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: "faults"}
		// One web pod per node, always: with both on one node, draining it
		// would leave the second waiting for the PDB (minAvailable 1), and
		// the tests expect a node whose drain the PDB allows.
		d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: d.Spec.Selector,
		}}
		if _, err := cp.CreateDeployment(ctx, d); err != nil {
			fixErr = err
			return
		}
		if _, err := cp.CreatePDB(ctx, harness.PDB(f.ns, "web", "web", 1), 2); err != nil {
			fixErr = err
			return
		}
		// The commands look at the node of a web pod, so that they have a
		// pod (and an eviction) to deal with.
		pods, err := cp.Client.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) == 0 {
			fixErr = fmt.Errorf("web pods: %v (%d)", err, len(pods.Items))
			return
		}
		f.podNode = pods.Items[0].Spec.NodeName
		fix = f
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// invocation is one plugin command under test.
type invocation struct {
	name string // test name
	bin  string
	args []string
	// reads is how many reads the command may have in flight at once.
	reads int
}

// readOnly are the read-only commands of every plugin.
func (f *fixture) readOnly() []invocation {
	return []invocation{
		// nodes, kube-system pods, DaemonSets, Deployments, and the
		// PodDisruptionBudgets that mark nodes of stateful services
		{"skew", "kubectl-skew", nil, 5},
		{"pdb-blockers", "kubectl-pdb_blockers", []string{f.podNode}, 3}, // nodes, pods and PDBs at once
		// one per cluster source: metrics (its apiserver endpoints), objects, helm, crds
		{"deprecations", "kubectl-deprecations", nil, 4},
		{"crd-migrate-status", "kubectl-crd_migrate", []string{"status"}, 1},
		{"gpu-validate", "kubectl-gpu_validate", []string{"nodes", f.podNode, "--expected-gpus", "8"}, 1},
		{"gang-drain-plan", "kubectl-gang_drain", []string{"plan", f.podNode}, 1},
	}
}

func (f *fixture) run(t *testing.T, kubeconfig string, inv invocation, extra ...string) plugintest.Result {
	t.Helper()
	args := append([]string{"--kubeconfig", kubeconfig, "--color", "never"}, inv.args...)
	args = append(args, extra...)
	r := plugintest.RunCmd(t, plugintest.Binary(t, inv.bin), plugintest.Cmd{Args: args, Timeout: 3 * time.Minute})
	t.Logf("$ %s %s -> exit %d in %s\n%s", inv.bin, strings.Join(args[2:], " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	return r
}

// oneLineError checks that stderr ends with exactly one "error:" line
// (then at most "hint:" lines), that nothing looks like a stack trace, and
// that a partial report printed before it does not claim a clean result.
func oneLineError(t *testing.T, r plugintest.Result) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	errs, last := 0, -1
	for i, l := range lines {
		if strings.HasPrefix(l, "error: ") {
			errs++
			last = i
		}
	}
	if errs != 1 {
		t.Errorf("want one error line on stderr, got %d\n%s", errs, r.Stderr)
	}
	if last >= 0 {
		for _, l := range lines[last+1:] {
			if !strings.HasPrefix(l, "hint: ") {
				t.Errorf("stderr goes on after the error line: %q", l)
			}
		}
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:", "internal error"} {
		if strings.Contains(r.Stderr, bad) {
			t.Errorf("stderr has %q (a stack trace or crash)\n%s", bad, r.Stderr)
		}
	}
	if out := r.Stdout + r.Stderr; strings.Contains(out, "No deprecated or removed APIs found for") && !strings.Contains(out, "in the sources that could be read") {
		t.Errorf("claims a clean result although sources failed\n%s", r.Stderr)
	}
}

// faulted counts the requests a rule answered.
func faulted(log []Entry) int {
	n := 0
	for _, e := range log {
		if e.Rule != "" {
			n++
		}
	}
	return n
}

// checkPacing checks that every request the proxy answered with
// Retry-After was retried no sooner than Retry-After: the next request for
// the same verb and URL started at least that long after the answer.
// One early re-send is tolerated: Go's HTTP/2 transport sends a GET again
// on a new connection by itself when the connection carrying an answer
// broke before the answer arrived, which the proxy logs as answered. A
// client that ignores Retry-After does it on every answer.
// It returns the shortest wait seen and how many retries it found.
func checkPacing(t *testing.T, log []Entry, retryAfter time.Duration) (time.Duration, int) {
	t.Helper()
	shortest, retries := time.Duration(0), 0
	var early []string
	for i, e := range log {
		if e.Rule == "" || e.Status == 0 {
			continue
		}
		for _, n := range log[i+1:] {
			if n.Method != e.Method || n.Path != e.Path || n.Start.Before(e.End) {
				continue
			}
			wait := n.Start.Sub(e.End)
			retries++
			if shortest == 0 || wait < shortest {
				shortest = wait
			}
			// client-go sleeps exactly Retry-After; allow clock slack only.
			if wait < retryAfter-50*time.Millisecond {
				early = append(early, fmt.Sprintf("%s %s retried %s after a %d with Retry-After %s", e.Method, e.Path, wait.Round(time.Millisecond), e.Status, retryAfter))
			}
			break
		}
	}
	if len(early) > 1 {
		t.Errorf("%d requests retried before Retry-After:\n%s", len(early), strings.Join(early, "\n"))
	} else if len(early) == 1 {
		t.Logf("one early re-send (the transport's, on a broken connection): %s", early[0])
	}
	return shortest, retries
}

func summarize(log []Entry) string {
	byStatus := map[int]int{}
	for _, e := range log {
		byStatus[e.Status]++
	}
	return fmt.Sprintf("%d requests %v", len(log), byStatus)
}

// TestFaultsThrottleStorm: the first three list calls of each read-only
// command are answered 429 with Retry-After: 1. Each command still gives
// the answer it gives without faults, and every retry waited Retry-After.
func TestFaultsThrottleStorm(t *testing.T) {
	f := setup(t)
	p := NewProxy(t, f.cp)
	kc := p.Kubeconfig(t)
	for _, inv := range f.readOnly() {
		t.Run(inv.name, func(t *testing.T) {
			p.Set()
			base := f.run(t, kc, inv)
			if base.ExitCode != 0 && base.ExitCode != 1 {
				t.Fatalf("without faults: %s", base)
			}
			baseReqs := len(p.Log())
			storm := &Rule{Name: "429", Match: IsList, Fault: TooMany(1), Times: 3}
			p.Set(storm)
			r := f.run(t, kc, inv)
			log := p.Log()
			if r.ExitCode != base.ExitCode {
				t.Errorf("exit %d under a short 429 storm, %d without\n%s", r.ExitCode, base.ExitCode, r)
			}
			if got := p.Hits(storm); got != 3 {
				t.Errorf("the storm faulted %d list calls, want 3 (does the command list at all?)", got)
			}
			shortest, retries := checkPacing(t, log, time.Second)
			if retries < 3 {
				t.Errorf("%d of 3 throttled calls retried\n%s", retries, summarize(log))
			}
			// Three waits of one second, if not in parallel: at least one.
			if r.Duration < time.Second {
				t.Errorf("finished in %s: did not wait for Retry-After", r.Duration)
			}
			if len(log) > baseReqs+3+3 {
				t.Errorf("%d requests under the storm, %d without: more than the 3 retries", len(log), baseReqs)
			}
			t.Logf("baseline %d requests in %s; storm %s in %s, %d retries, shortest wait %s",
				baseReqs, base.Duration.Round(time.Millisecond), summarize(log), r.Duration.Round(time.Millisecond), retries, shortest.Round(time.Millisecond))
		})
	}
}

// TestFaultsPersistentStorm: every request is answered 429 with
// Retry-After: 1, then 503 without and with Retry-After. Each command gives
// up with exit 3 and one error line, in bounded time and requests.
func TestFaultsPersistentStorm(t *testing.T) {
	f := setup(t)
	p := NewProxy(t, f.cp)
	kc := p.Kubeconfig(t)
	faults := []struct {
		name  string
		match Match
		fault Fault
	}{
		// Lists only: the command connects, then every read fails.
		{"lists-429", IsList, TooMany(1)},
		{"lists-503", IsList, Unavailable(0)},
		// Everything, /version included.
		{"all-503-retry-after", Any, Unavailable(1)},
		{"all-500", Any, Fault{Kind: Status, Code: http.StatusInternalServerError}},
	}
	for _, inv := range f.readOnly() {
		for _, fc := range faults {
			t.Run(inv.name+"/"+fc.name, func(t *testing.T) {
				p.Set(&Rule{Name: fc.name, Match: fc.match, Fault: fc.fault})
				r := f.run(t, kc, inv)
				log := p.Log()
				if r.ExitCode != 3 {
					t.Errorf("exit %d, want 3\n%s", r.ExitCode, r)
				}
				oneLineError(t, r)
				// client-go makes a call up to 11 times while the answer
				// has Retry-After (waiting it out each time), once without.
				// Each read in flight may spend that; nothing more, and
				// no read started after another one failed for good.
				// Eleven waits of one second bound the time from below;
				// the rest is slack for a loaded two-core machine, far
				// short of what a retry without end would take.
				perCall, maxTime := 11, 20*time.Second
				if fc.fault.RetryAfter == 0 {
					perCall, maxTime = 1, 5*time.Second
				}
				if n := faulted(log); n > perCall*inv.reads {
					t.Errorf("%d faulted requests (%s), want at most %d (%d reads in flight)", n, summarize(log), perCall*inv.reads, inv.reads)
				}
				if r.Duration > maxTime {
					t.Errorf("took %s, want at most %s", r.Duration, maxTime)
				}
				if fc.fault.RetryAfter > 0 {
					checkPacing(t, log, time.Duration(fc.fault.RetryAfter)*time.Second)
				}
				t.Logf("%s in %s", summarize(log), r.Duration.Round(time.Millisecond))
			})
		}
	}
}

// TestFaultsHangingServer: the proxy accepts every request and never
// answers. With --request-timeout 2s each command gives up with exit 3
// and one error line well before the test's own deadline.
func TestFaultsHangingServer(t *testing.T) {
	f := setup(t)
	p := NewProxy(t, f.cp)
	kc := p.Kubeconfig(t)
	for _, inv := range f.readOnly() {
		for _, m := range []struct {
			name  string
			match Match
		}{{"all", Any}, {"lists", IsList}} {
			t.Run(inv.name+"/"+m.name, func(t *testing.T) {
				p.Set(&Rule{Name: "hang", Match: m.match, Fault: Fault{Kind: Hang}})
				r := f.run(t, kc, inv, "--request-timeout", "2s")
				log := p.Log()
				if r.ExitCode != 3 {
					t.Errorf("exit %d, want 3\n%s", r.ExitCode, r)
				}
				oneLineError(t, r)
				// The reads in flight time out together; none starts after.
				if r.Duration > 5*time.Second {
					t.Errorf("took %s with --request-timeout 2s", r.Duration)
				}
				if n := faulted(log); n > inv.reads {
					t.Errorf("%d requests hung (%s), want at most %d", n, summarize(log), inv.reads)
				}
				t.Logf("%s in %s", summarize(log), r.Duration.Round(time.Millisecond))
			})
		}
	}
}

func nsObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gpufleet.dev/e2e": "true"}}}
}

// TestFaultsEvictionThrottled: the first two eviction POSTs are answered
// 429 with Retry-After: 1, as the apiserver does while a
// PodDisruptionBudget's status is stale. pdb-blockers --server-dry-run and
// gang-drain run both retry after Retry-After and give the answer they give
// without it.
func TestFaultsEvictionThrottled(t *testing.T) {
	f := setup(t)
	p := NewProxy(t, f.cp)
	kc := p.Kubeconfig(t)
	// retried false: the command is known not to retry yet, and the test
	// only reports it (see the pdb-blockers subtest).
	check := func(t *testing.T, inv invocation, want, throttled int, retried bool, extra ...string) {
		t.Helper()
		errorf := t.Errorf
		if !retried {
			errorf = t.Logf
		}
		rule := &Rule{Name: "429-eviction", Match: PathSuffix("/eviction", http.MethodPost), Fault: TooMany(1), Times: throttled}
		p.Set(rule)
		r := f.run(t, kc, inv, extra...)
		log := p.Log()
		if r.ExitCode != want {
			t.Errorf("exit %d, want %d\n%s", r.ExitCode, want, r)
		}
		if got := p.Hits(rule); got != throttled {
			t.Fatalf("%d evictions throttled, want %d (no eviction sent?)\n%s", got, throttled, summarize(log))
		}
		shortest, retries := checkPacing(t, log, time.Second)
		if retries != throttled {
			errorf("%d of %d throttled evictions retried\n%s", retries, throttled, summarize(log))
		}
		if strings.Contains(r.Stderr, "disagree with the prediction") {
			errorf("a throttled dry run was taken for the server's answer\n%s", r.Stderr)
		}
		if n := len(log); n > 40 {
			t.Errorf("%s: more than 40 requests", summarize(log))
		}
		t.Logf("%s in %s, %d retries, shortest wait %s", summarize(log), r.Duration.Round(time.Millisecond), retries, shortest.Round(time.Millisecond))
	}

	t.Run("pdb-blockers-server-dry-run", func(t *testing.T) {
		// pdb-blockers asks a throttled dry run again after Retry-After
		// instead of taking the 429 for the server's verdict.
		check(t, invocation{bin: "kubectl-pdb_blockers", args: []string{f.podNode, "-n", f.ns}}, 0, 1, true, "--all-pods", "--server-dry-run")
	})

	t.Run("gang-drain-run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ns := f.cp.Namespace(t)
		nodes, err := f.cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "faults-gd", Nodes: 1})
		if err != nil {
			t.Fatal(err)
		}
		node := nodes[0].Name
		t.Cleanup(func() { _ = f.cp.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
		d := harness.Deployment(ns, "svc", 2, 1)
		d.Spec.Template.Spec.NodeSelector = map[string]string{harness.PoolLabel: "faults-gd"}
		if _, err := f.cp.CreateDeployment(ctx, d); err != nil {
			t.Fatal(err)
		}
		check(t, invocation{bin: "kubectl-gang_drain", args: []string{"run", node, "--poll-interval=250ms"}}, 0, 2, true)
		n, err := f.cp.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil || !n.Spec.Unschedulable {
			t.Errorf("node %s not cordoned after the run (%v)", node, err)
		}
		pods, err := f.cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) != 0 {
			t.Errorf("pods left on %s after the run: %v %v", node, pods, err)
		}
	})
}
