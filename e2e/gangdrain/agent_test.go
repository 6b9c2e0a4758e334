//go:build e2e

package gangdraine2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint/agent"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
)

// The tests below run gpufleet-checkpoint-agent as a local process for a
// JobSet gang: it finds the JobSet from a real pod's labels (the file a
// downward-API volume would hold), and a scripted trainer answers through
// the shared directory, a temp dir.

const agentBin = "gpufleet-checkpoint-agent"

type agentProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  strings.Builder
	done chan struct{}
	code int
}

// startAgent runs the agent for the gang whose pods match selector.
func (e *env) startAgent(selector, dir string, extra ...string) *agentProc {
	e.t.Helper()
	pods := e.pods(selector)
	if len(pods) == 0 {
		e.t.Fatalf("no pods %s", selector)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	var b strings.Builder
	for k, v := range pods[0].Labels {
		fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(v))
	}
	labels := filepath.Join(e.t.TempDir(), "labels")
	if err := os.WriteFile(labels, []byte(b.String()), 0o644); err != nil {
		e.t.Fatal(err)
	}
	args := append([]string{"--kubeconfig", e.cp.Kubeconfig, "--namespace", e.ns, "--labels-file", labels, "--dir", dir,
		"--poll-interval", "200ms", "--heartbeat-interval", "500ms", "--file-poll-interval", "50ms"}, extra...)
	a := &agentProc{t: e.t, done: make(chan struct{})}
	a.cmd = exec.CommandContext(e.ctx, plugintest.Binary(e.t, agentBin), args...)
	a.cmd.Env = []string{"HOME=/tmp"}
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			a.mu.Lock()
			a.log.WriteString(sc.Text() + "\n")
			a.mu.Unlock()
		}
		err := a.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			a.code = ee.ExitCode()
		}
		close(a.done)
	}()
	e.t.Cleanup(func() { a.stop(syscall.SIGTERM) })
	a.waitLog("answering checkpoint-and-yield requests")
	return a
}

func (a *agentProc) logs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.log.String()
}

func (a *agentProc) waitLog(sub string) {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(a.logs(), sub) {
		select {
		case <-a.done:
			a.t.Fatalf("agent exited %d before %q:\n%s", a.code, sub, a.logs())
		default:
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("agent never logged %q:\n%s", sub, a.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop signals the agent and waits for it; it logs what the agent printed.
func (a *agentProc) stop(sig syscall.Signal) {
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(sig)
	<-a.done
	a.t.Logf("agent (%v, exit %d):\n%s", sig, a.code, a.logs())
}

// rssKiB reads the agent's resident set size.
func (a *agentProc) rssKiB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return -1
}

// trainer is a scripted trainer speaking the file contract: it steps every
// 20ms, and on a request saves, writes ready.json and pauses.
type trainer struct {
	dir string
	// answer, when false, never writes an answer file.
	answer bool
	// progress touches the progress file while a request is open.
	progress bool
	// release, when set, holds the answer until it is closed.
	release chan struct{}

	mu              sync.Mutex
	step, saved     int
	stepsAfterSave  int
	requests        []string
	cancelled       string
	requestRemoved  bool
	sawRequestAt    time.Time
	withdrawnSeenAt time.Time
}

func (tr *trainer) run(ctx context.Context) {
	paused := false
	open := ""
	for ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		req, _, ok := agent.Dir(tr.dir).ReadRequest()
		tr.mu.Lock()
		switch {
		case ok && req.ID != open:
			open = req.ID
			tr.requests = append(tr.requests, req.ID)
			tr.sawRequestAt = time.Now()
		case !ok && open != "":
			tr.requestRemoved = true
			if b, err := os.ReadFile(filepath.Join(tr.dir, agent.CancelledFile)); err == nil {
				var c struct{ ID string }
				_ = json.Unmarshal(b, &c)
				tr.cancelled = c.ID
			}
			tr.withdrawnSeenAt = time.Now()
			if paused {
				// Withdrawn after ready.json: the drain clears its request
				// once the gang's pods are gone, so in a pod this process
				// would be gone too.
				tr.mu.Unlock()
				return
			}
			open = ""
		}
		tr.mu.Unlock()
		if open != "" && tr.progress {
			now := time.Now()
			_ = os.WriteFile(filepath.Join(tr.dir, agent.ProgressFile), nil, 0o644)
			_ = os.Chtimes(filepath.Join(tr.dir, agent.ProgressFile), now, now)
		}
		if open != "" && tr.answer && !paused {
			if tr.release != nil {
				select {
				case <-tr.release:
				default:
					continue
				}
			}
			tr.mu.Lock()
			tr.saved = tr.step
			data, _ := json.Marshal(map[string]any{"id": open, "step": tr.saved, "uri": fmt.Sprintf("file:///ckpt/%d", tr.saved)})
			tr.mu.Unlock()
			if err := agent.WriteFileAtomic(tr.dir, agent.ReadyFile, data); err != nil {
				panic(err)
			}
			paused = true
		}
		if !paused && open == "" || !paused && !tr.answer {
			tr.mu.Lock()
			tr.step++
			if tr.saved > 0 && tr.step > tr.saved {
				tr.stepsAfterSave++
			}
			tr.mu.Unlock()
		}
	}
}

func (e *env) startTrainer(tr *trainer) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { defer close(done); tr.run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func (tr *trainer) snapshot() trainer {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return trainer{step: tr.step, saved: tr.saved, stepsAfterSave: tr.stepsAfterSave, requests: append([]string(nil), tr.requests...),
		cancelled: tr.cancelled, requestRemoved: tr.requestRemoved, sawRequestAt: tr.sawRequestAt, withdrawnSeenAt: tr.withdrawnSeenAt}
}

func (e *env) jobSetAnnotations(name string) map[string]string {
	return e.jobSetObj(name).Annotations
}

// TestGangDrainAgentZeroWorkLost drains the node of a Kueue-admitted JobSet
// whose trainer answers through the agent: the gang stops at the step it
// saved.
func TestGangDrainAgentZeroWorkLost(t *testing.T) {
	e := newEnv(t, 1, 4*time.Minute)
	e.queues(8)
	e.jobSet("agent-ok", e.pool, 2, 4, "v1")
	sel := selJobSet("agent-ok")
	e.waitReady(sel, 2)
	dir := t.TempDir()
	a := e.startAgent(sel, dir)
	wantIn(t, a.logs(), "root object jobsets.jobset.x-k8s.io "+e.ns+"/agent-ok (from the pod's labels")
	time.Sleep(2 * time.Second) // idle: no request yet
	rss := a.rssKiB()
	// The trainer publishes a periodic checkpoint; plan reads it back.
	periodic := time.Now().Add(-10 * time.Minute).UTC().Truncate(time.Second)
	if err := agent.WriteFileAtomic(dir, agent.LastCheckpointFile, []byte(`{"at":"`+periodic.Format(time.RFC3339)+`","step":1}`)); err != nil {
		t.Fatal(err)
	}
	a.waitLog("published last checkpoint")
	pr := e.run("plan", e.nodes[0], "-o", "json")
	plan := decode[gangdrain.PlanReport](t, pr)
	if len(plan.Items) != 1 || plan.Items[0].Path != gang.PathProtocol || !plan.Items[0].LastCheckpoint.Equal(periodic) {
		t.Errorf("plan: %+v", plan.Items)
	}
	tr := &trainer{dir: dir, answer: true, progress: true}
	e.startTrainer(tr)
	r := e.run("run", e.nodes[0], "--on-timeout=abort", "--ack-timeout=60s", "--heartbeat-timeout=30s", "--poll-interval=250ms")
	if r.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\nagent:\n%s", r.ExitCode, r, a.logs())
	}
	wantIn(t, r.Stderr, "checkpoint ready-to-stop", "stopping as a unit (kueue-deactivate")
	e.waitGone(sel)
	s := tr.snapshot()
	ann := e.jobSetAnnotations("agent-ok")
	keys := checkpoint.DefaultKeys()
	if s.saved == 0 || ann[keys.Step()] != strconv.Itoa(s.saved) || ann[keys.URI()] != fmt.Sprintf("file:///ckpt/%d", s.saved) {
		t.Errorf("trainer saved step %d; object says step %q uri %q", s.saved, ann[keys.Step()], ann[keys.URI()])
	}
	if s.stepsAfterSave != 0 || s.step != s.saved {
		t.Errorf("work lost: %d steps after the checkpoint at %d (trainer at %d)", s.stepsAfterSave, s.saved, s.step)
	}
	if len(s.requests) != 1 {
		t.Errorf("trainer saw requests %v, want one", s.requests)
	}
	if s := nodeState(e.node(e.nodes[0])); s != gang.NodeDrained {
		t.Errorf("node state %s", s)
	}
	logs := a.logs()
	took := ""
	for _, l := range strings.Split(logs, "\n") {
		if i := strings.Index(l, "answering ready-to-stop, "); i >= 0 {
			took = strings.TrimSuffix(l[i+len("answering ready-to-stop, "):], " after the agent saw the request")
		}
	}
	if took == "" {
		t.Errorf("no ready-to-stop in the agent's log:\n%s", logs)
	}
	st, _ := os.Stat(plugintest.Binary(t, agentBin))
	t.Logf("MEASURED agent binary %d bytes, idle RSS %d KiB, request seen to ready-to-stop %s, drain run %s", st.Size(), rss, took, r.Duration.Round(time.Millisecond))
}

// TestGangDrainAgentRestart kills the agent (SIGKILL) while the trainer
// checkpoints; the restarted agent answers the same request, once.
func TestGangDrainAgentRestart(t *testing.T) {
	e := newEnv(t, 1, 4*time.Minute)
	sel := e.smallGang("agent-restart")
	dir := t.TempDir()
	first := e.startAgent(sel, dir)
	tr := &trainer{dir: dir, answer: true, progress: true, release: make(chan struct{})}
	e.startTrainer(tr)
	res := make(chan plugintest.Result, 1)
	go func() {
		res <- e.run("run", e.nodes[0], "--on-timeout=abort", "--ack-timeout=60s", "--heartbeat-timeout=30s", "--poll-interval=250ms")
	}()
	first.waitLog("written to request.json")
	first.stop(syscall.SIGKILL)
	close(tr.release) // the checkpoint completes while no agent runs
	second := e.startAgent(sel, dir)
	r := <-res
	if r.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\nagent:\n%s", r.ExitCode, r, second.logs())
	}
	second.waitLog("answering ready-to-stop")
	all := first.logs() + second.logs()
	if n := strings.Count(all, "written to request.json"); n != 1 {
		t.Errorf("request written %d times, want 1", n)
	}
	if n := strings.Count(all, "answering ready-to-stop"); n != 1 {
		t.Errorf("ready-to-stop answered %d times, want 1", n)
	}
	wantIn(t, second.logs(), "is already in request.json (agent restarted)")
	if s := tr.snapshot(); len(s.requests) != 1 || s.stepsAfterSave != 0 {
		t.Errorf("trainer: requests %v, %d steps after the checkpoint", s.requests, s.stepsAfterSave)
	}
	e.waitGone(sel)
}

// TestGangDrainAgentHeartbeatLapse: the trainer never writes a file, so the
// agent withholds the heartbeat and the drain's --on-timeout applies.
func TestGangDrainAgentHeartbeatLapse(t *testing.T) {
	e := newEnv(t, 1, 4*time.Minute)
	sel := e.smallGang("agent-silent")
	a := e.startAgent(sel, t.TempDir(), "--progress-timeout", "1s")
	r := e.run("run", e.nodes[0], "--on-timeout=stop", "--ack-timeout=60s", "--heartbeat-timeout=3s", "--poll-interval=250ms")
	if r.ExitCode != 0 {
		t.Fatalf("exit %d\n%s\nagent:\n%s", r.ExitCode, r, a.logs())
	}
	wantIn(t, r.Stderr, "checkpoint in-progress", "no heartbeat for", "stopping it anyway (--on-timeout=stop)")
	wantIn(t, a.logs(), "heartbeat withheld")
	if strings.Contains(a.logs(), "answering ready-to-stop") {
		t.Error("the agent answered ready-to-stop without the trainer's file")
	}
	e.waitGone(sel)
}

// TestGangDrainAgentWithdrawn: the trainer works but misses the deadline;
// --on-timeout=abort withdraws the request, which reaches the trainer as a
// removed request file and a cancelled file naming it.
func TestGangDrainAgentWithdrawn(t *testing.T) {
	e := newEnv(t, 1, 4*time.Minute)
	sel := e.smallGang("agent-withdrawn")
	dir := t.TempDir()
	a := e.startAgent(sel, dir)
	tr := &trainer{dir: dir, answer: false, progress: true}
	e.startTrainer(tr)
	r := e.run("run", e.nodes[0], "--on-timeout=abort", "--ack-timeout=60s", "--checkpoint-deadline=4s", "--poll-interval=250ms")
	if r.ExitCode != 4 {
		t.Fatalf("exit %d, want 4\n%s\nagent:\n%s", r.ExitCode, r, a.logs())
	}
	a.waitLog("withdrawn: removed request.json, wrote cancelled")
	deadline := time.Now().Add(30 * time.Second)
	for !tr.snapshot().requestRemoved && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	s := tr.snapshot()
	if !s.requestRemoved || len(s.requests) != 1 || s.cancelled != s.requests[0] {
		t.Errorf("trainer: requests %v removed %v cancelled %q", s.requests, s.requestRemoved, s.cancelled)
	}
	if n := len(e.pods(sel)); n != 2 {
		t.Errorf("%d gang pods, want 2 left running", n)
	}
	keys := checkpoint.DefaultKeys()
	ann := e.jobSetAnnotations("agent-withdrawn")
	if ann[keys.Request] != checkpoint.Cancelled {
		t.Errorf("request %q, want cancelled", ann[keys.Request])
	}
	// Recorded as it happened: withdrawn before the trainer answered, not
	// declined (the trainer declined nothing).
	deadline = time.Now().Add(30 * time.Second)
	for e.jobSetAnnotations("agent-withdrawn")[keys.Status()] != string(checkpoint.StatusWithdrawn) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	ann = e.jobSetAnnotations("agent-withdrawn")
	if st, msg := ann[keys.Status()], ann[keys.Message()]; st != string(checkpoint.StatusWithdrawn) ||
		!strings.Contains(msg, "withdrawn before the gang answered") || !strings.Contains(msg, "told to resume") {
		t.Errorf("status %q message %q, want withdrawn before the gang answered", st, msg)
	}
}

// TestGangDrainAgentExamples server-side dry-runs, with strict field
// validation, the example manifests of docs/checkpoint-and-yield.md: the
// JobSet one against the real JobSet CRD; for the PyTorchJob one, whose
// CRD the test control plane does not serve, its pod templates as pods.
func TestGangDrainAgentExamples(t *testing.T) {
	e := newEnv(t, 0, 2*time.Minute)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.cp.Client.Discovery()))
	dryRun := func(u *unstructured.Unstructured) error {
		u.SetNamespace(e.ns)
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			return err
		}
		_, err = e.dyn.Resource(m.Resource).Namespace(e.ns).Create(e.ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		return err
	}
	agentRole := loadRole(t, filepath.Join(root, "deploy", "rbac", "checkpoint-agent.yaml"))
	for _, file := range []string{"checkpoint-agent-jobset.yaml", "checkpoint-agent-pytorchjob.yaml"} {
		docs := readDocs(t, filepath.Join(root, "deploy", "examples", file))
		sidecars := 0
		for _, u := range docs {
			switch u.GetKind() {
			case "PyTorchJob":
				if _, err := e.cp.Client.Discovery().ServerResourcesForGroupVersion("kubeflow.org/v1"); err == nil {
					t.Errorf("kubeflow.org/v1 is served now: dry-run the PyTorchJob itself")
				}
				specs, _, _ := unstructured.NestedMap(u.Object, "spec", "pytorchReplicaSpecs")
				for _, name := range []string{"Master", "Worker"} {
					tmpl, ok, _ := unstructured.NestedMap(specs, name, "template")
					if !ok {
						t.Fatalf("%s: no %s template", file, name)
					}
					pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
						"metadata": map[string]any{"name": strings.ToLower(name)}, "spec": tmpl["spec"]}}
					if err := dryRun(pod); err != nil {
						t.Errorf("%s: %s pod template: %v", file, name, err)
					}
					sidecars += countSidecars(t, tmpl["spec"])
				}
				continue
			case "JobSet":
				rjs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
				for _, rj := range rjs {
					spec, _, _ := unstructured.NestedFieldNoCopy(rj.(map[string]any), "template", "spec", "template", "spec")
					sidecars += countSidecars(t, spec)
				}
			case "Role":
				if !strings.Contains(file, "pytorchjob") {
					var rules []any
					rules, _, _ = unstructured.NestedSlice(u.Object, "rules")
					b1, _ := json.Marshal(rules)
					b2, _ := json.Marshal(agentRole)
					if string(b1) != string(b2) {
						t.Errorf("%s: the Role differs from deploy/rbac/checkpoint-agent.yaml:\n%s\n%s", file, b1, b2)
					}
				}
			}
			if u.GetKind() == "ServiceAccount" {
				// Created for real: pods (the dry-run pod templates) must
				// name an existing service account.
				u.SetNamespace(e.ns)
				if _, err := e.cp.Client.CoreV1().ServiceAccounts(e.ns).Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := dryRun(u); err != nil {
				t.Errorf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
			}
		}
		if sidecars != 1 {
			t.Errorf("%s: %d native sidecars running the agent, want 1", file, sidecars)
		}
	}
}

// countSidecars counts the initContainers with restartPolicy Always that
// run the agent (the suite's image, whose entrypoint is the agent) and
// mount the shared directory.
func countSidecars(t *testing.T, spec any) int {
	t.Helper()
	m, _ := spec.(map[string]any)
	inits, _, _ := unstructured.NestedSlice(m, "initContainers")
	n := 0
	for _, c := range inits {
		cm := c.(map[string]any)
		image, _ := cm["image"].(string)
		if cm["restartPolicy"] != "Always" || cm["name"] != "checkpoint-agent" || !strings.Contains(image, "gpufleet/suite") {
			continue
		}
		mounts, _, _ := unstructured.NestedSlice(cm, "volumeMounts")
		for _, v := range mounts {
			if v.(map[string]any)["mountPath"] == "/var/run/gpufleet" {
				n++
			}
		}
	}
	return n
}

func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := rd.Read()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func loadRole(t *testing.T, path string) []any {
	t.Helper()
	for _, u := range readDocs(t, path) {
		if u.GetKind() == "Role" {
			rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
			return rules
		}
	}
	t.Fatalf("%s: no Role", path)
	return nil
}
