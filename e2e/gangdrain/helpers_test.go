//go:build e2e

package gangdraine2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

const bin = "kubectl-gang_drain"

var jobsetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

type env struct {
	t     *testing.T
	cp    *harness.ControlPlane
	ctx   context.Context
	ns    string
	pool  string
	nodes []string
	dyn   dynamic.Interface
}

// newEnv creates a namespace and a pool of n fake 8-GPU nodes for one test.
func newEnv(t *testing.T, n int, timeout time.Duration) *env {
	t.Helper()
	cp := harness.Shared(t)
	plugintest.BinDir(t) // build first: the deadline is for the test itself
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	ns := cp.Namespace(t)
	e := &env{t: t, cp: cp, ctx: ctx, ns: ns, pool: "gd-" + ns[len(ns)-5:], dyn: dynamic.NewForConfigOrDie(cp.Config)}
	e.addNodes(n)
	return e
}

// addNodes creates more nodes in the pool (names <pool>-<i>, continuing).
func (e *env) addNodes(n int) {
	e.t.Helper()
	pool := harness.GPUPool{Name: e.pool}
	var created []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", e.pool, len(e.nodes)+i)
		node := harness.GPUNode(name, pool, e.pool+"-rs0")
		if _, err := e.cp.Client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		created = append(created, name)
		e.t.Cleanup(func() {
			_ = e.cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	for _, name := range created {
		if err := harness.Eventually(e.ctx, "node "+name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			n, err := e.cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && harness.NodeReady(n), nil
		}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.nodes = append(e.nodes, created...)
}

func (e *env) kubeconfigArgs(args ...string) []string {
	return append(args, "--kubeconfig", e.cp.Kubeconfig)
}

// run runs the plugin and logs its stderr.
func (e *env) run(args ...string) plugintest.Result {
	e.t.Helper()
	r := plugintest.RunCmd(e.t, plugintest.Binary(e.t, bin), plugintest.Cmd{Args: e.kubeconfigArgs(args...), Timeout: 4 * time.Minute})
	e.t.Logf("$ kubectl gang-drain %s -> exit %d (%s)\n%s", strings.Join(args, " "), r.ExitCode, r.Duration.Round(time.Millisecond), r.Stderr)
	return r
}

// runUntil starts the plugin and kills it with sig as soon as a stderr line
// contains marker; it returns the exit code and stderr.
func (e *env) runUntil(marker string, sig syscall.Signal, args ...string) (int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugintest.Binary(e.t, bin), e.kubeconfigArgs(args...)...)
	cmd.Env = []string{"TERM=dumb", "HOME=/tmp"}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	var mu sync.Mutex
	sc := bufio.NewScanner(stderr)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		mu.Lock()
		b.WriteString(line + "\n")
		mu.Unlock()
		if !killed && strings.Contains(line, marker) {
			_ = cmd.Process.Signal(sig)
			killed = true
		}
	}
	err = cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + int(sig)
		}
	}
	e.t.Logf("$ kubectl gang-drain %s (signal %v on %q, killed %v) -> exit %d\n%s", strings.Join(args, " "), sig, marker, killed, code, b.String())
	if !killed {
		e.t.Fatalf("marker %q never appeared", marker)
	}
	return code, b.String()
}

func decode[T any](t *testing.T, r plugintest.Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("decoding output: %v\n%s", err, r)
	}
	return v
}

// jobSet returns a JobSet of workers ranks asking gpus GPUs each, placed in
// the pool; with queue set it is created for Kueue. protocol labels it.
func (e *env) jobSet(name, queue string, workers int32, gpus int, protocol string) *jobsetv1alpha2.JobSet {
	js := harness.TrainingJobSet(e.ns, name, queue, workers, gpus)
	if protocol != "" {
		js.Labels[checkpoint.DefaultKeys().Protocol()] = protocol
	}
	spec := &js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	spec.NodeSelector = map[string]string{harness.PoolLabel: e.pool}
	created, err := e.cp.JobSetClient().JobsetV1alpha2().JobSets(e.ns).Create(e.ctx, js, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return created
}

func (e *env) waitReady(selector string, n int) {
	e.t.Helper()
	if err := e.cp.WaitPodsReady(e.ctx, e.ns, selector, n, 2*time.Minute); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) pods(selector string) []corev1.Pod {
	e.t.Helper()
	list, err := e.cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

func (e *env) waitGone(selector string) {
	e.t.Helper()
	if err := harness.Eventually(e.ctx, "pods "+selector+" gone", 90*time.Second, func(ctx context.Context) (bool, error) {
		list, err := e.cp.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.cp.Client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) jobSetObj(name string) *jobsetv1alpha2.JobSet {
	e.t.Helper()
	js, err := e.cp.JobSetClient().JobsetV1alpha2().JobSets(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return js
}

// responder runs a checkpoint.Responder for a JobSet in the background
// until the test ends or stop is called.
func (e *env) responder(name string, cp checkpoint.CheckpointFunc) (stop func()) {
	ctx, cancel := context.WithCancel(e.ctx)
	r := &checkpoint.Responder{
		Client: e.dyn, Keys: checkpoint.DefaultKeys(),
		Target:            checkpoint.Target{Resource: jobsetGVR, Namespace: e.ns, Name: name},
		Checkpoint:        cp,
		PollInterval:      200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	stop = func() { cancel(); <-done }
	e.t.Cleanup(stop)
	return sync.OnceFunc(stop)
}

func selJobSet(name string) string { return "jobset.sigs.k8s.io/jobset-name=" + name }

func nodeState(n *corev1.Node) gang.NodeState { return gang.NodeState(n.Annotations[gang.AnnState]) }

func ptrTrue(b *bool) bool { return ptr.Deref(b, false) }

// checkDeletedPods holds the record of the pods gang-drain deleted itself
// (on each JobSet gang's root and in the run report) to the audit log of
// the run's requests after line mark: the pods in namespace ns whose
// delete from gang-drain the API server accepted are exactly those
// recorded, its accepted finalizer patches as many as recorded, each
// re-read of a pod follows a refused write, and nothing is left
// unconfirmed. It waits for the audit log (written asynchronously) to
// hold the recorded requests.
func checkDeletedPods(t *testing.T, ctx context.Context, cp *harness.ControlPlane, dyn dynamic.Interface, ns string, rep gangdrain.RunReport, mark int) {
	t.Helper()
	want := map[string]bool{}
	unfinalized := 0
	for _, g := range rep.Gangs {
		if g.Kind != gang.KindJobSet {
			continue
		}
		js, err := dyn.Resource(jobsetGVR).Namespace(ns).Get(ctx, g.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := gang.ParseDeletedPods(js.GetAnnotations()[gang.AnnDeletedPods])
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rec, g.DeletedPods) {
			t.Errorf("gang %s: record on the JobSet %+v, in the report %+v", g.Key, rec, g.DeletedPods)
		}
		if rec == nil {
			continue
		}
		if rec.Run != rep.RunID || rec.Deleting != nil || rec.Unconfirmed != nil || rec.Count != rec.Deleted.Len() {
			t.Errorf("gang %s: record %+v", g.Key, rec)
		}
		for _, n := range rec.Deleted.Names() {
			want[n] = true
		}
		unfinalized += rec.Unfinalized
	}
	var got map[string]bool
	var patches, gets, refused int
	var lines []string
	err := harness.Eventually(ctx, "the audit log to hold gang-drain's pod writes", 30*time.Second, func(context.Context) (bool, error) {
		got, patches, gets, refused, lines = map[string]bool{}, 0, 0, 0, nil
		for _, e := range harness.AuditEvents(t, cp.AuditLogPath, mark, "kubectl-gang_drain/") {
			if e.Resource != "pods" || e.Subresource != "" || e.Namespace != ns {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s %s %d", e.Verb, e.Name, e.Code))
			accepted := e.Code >= 200 && e.Code < 300
			switch {
			case e.Verb == "delete" && accepted:
				got[e.Name] = true
			case e.Verb == "patch" && accepted:
				patches++
			case e.Verb == "get":
				gets++
			}
			if (e.Verb == "delete" || e.Verb == "patch") && !accepted {
				refused++
			}
		}
		for n := range want {
			if !got[n] {
				return false, nil
			}
		}
		return patches >= unfinalized, nil
	})
	if err != nil {
		t.Errorf("%v: recorded %d deletes and %d finalizer patches; the audit log has %v", err, len(want), unfinalized, lines)
		return
	}
	if !reflect.DeepEqual(want, got) || patches != unfinalized || gets > refused {
		t.Errorf("recorded deletes %v and %d finalizer patches; accepted in the audit log: deletes %v, %d patches, %d gets after %d refused writes", want, unfinalized, got, patches, gets, refused)
	}
	t.Logf("gang-drain deleted %d pod(s) itself (%d finalizer patches), as recorded", len(got), patches)
}
