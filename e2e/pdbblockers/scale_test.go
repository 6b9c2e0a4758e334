//go:build e2e

package pdbblockerse2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
)

// TestPDBBlockersScale measures the plugin on 5,000 nodes, 50,000 pods and
// 5,000 PDBs (set E2E_SCALE=1; the objects take minutes to create). The
// nodes are plain objects KWOK does not manage; pods are bound with
// spec.nodeName and their status is written directly. It checks that the
// plugin makes a constant number of requests and none per pod (from the
// audit log), then measures it beside its floors with e2e/bench, five
// alternating pairs each: kubectl get --raw of nodes, pods and PDBs (three
// processes at once), -q (the cost of -o json apart), and a bare
// watch-list client reading the same three streams (hack/watchlist). The
// last is judged: median ratio within 1.5 and peak RSS under 300 MB.
// E2E_SCALE_NODES=N scales it down; E2E_SCALE_PROFILE=FILE writes the
// binary's CPU profile of one more run.
//
// It runs on a control plane of its own without the node lifecycle
// controller. No kubelet heartbeats for these nodes, so that controller
// would mark thousands of nodes NotReady over and over, spending both CPUs
// of a small machine during the measurement (1.7-2.5 s instead of 0.9-1.6 s
// at 20,000 pods when measured side by side). A real cluster's nodes
// heartbeat, and the plugin needs none of it.
func TestPDBBlockersScale(t *testing.T) {
	if os.Getenv("E2E_SCALE") == "" {
		t.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	nodes, podsPerNode, podsPerPDB, pdbsPerNamespace := 5000, 10, 10, 10
	if v, err := strconv.Atoi(os.Getenv("E2E_SCALE_NODES")); err == nil && v > 0 {
		nodes = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	cp, err := harness.Start(ctx, harness.Options{
		ControllerManagerArgs: []string{"--controllers=-node-lifecycle-controller"},
		KeepDir:               os.Getenv("E2E_KEEP") != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	kc := kubernetes.NewForConfigOrDie(cfg)

	prefix := "scale"
	start := time.Now()
	parallel(t, nodes, func(i int) error {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i), Labels: map[string]string{"pdbb-scale": prefix}}}
		_, err := kc.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		return err
	})
	// Ten PDBs and a hundred pods to a namespace, as teams share a cluster.
	// (With all of them in one namespace the disruption controller matches
	// every pod event against all 5,000 budgets and was still busy 25
	// minutes after the last pod was written.)
	pdbs := nodes * podsPerNode / podsPerPDB
	nsOf := func(pdb int) string { return fmt.Sprintf("team-%04d", pdb/pdbsPerNamespace) }
	parallel(t, (pdbs+pdbsPerNamespace-1)/pdbsPerNamespace, func(i int) error {
		_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsOf(i * pdbsPerNamespace)}}, metav1.CreateOptions{})
		return err
	})
	parallel(t, pdbs, func(i int) error {
		ns := nsOf(i)
		b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(int32(podsPerPDB - 1 - i%2))),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%05d", i)}}}}
		_, err := kc.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, b, metav1.CreateOptions{})
		return err
	})
	total := nodes * podsPerNode
	parallel(t, total, func(i int) error {
		ns := nsOf(i / podsPerPDB)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%06d", i), Namespace: ns,
			Labels: map[string]string{"app": fmt.Sprintf("app-%05d", i/podsPerPDB)}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("%s-%05d", prefix, i%nodes),
				Containers:  []corev1.Container{{Name: "main", Image: harness.PauseImage}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}
		created, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
		_, err = kc.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
	t.Logf("created %d nodes, %d pods, %d PDBs in %s", nodes, total, pdbs, time.Since(start).Round(time.Second))
	// Let the disruption controller compute the budgets.
	err = harness.Poll(ctx, "PDB status", 2*time.Second, 15*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := kc.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		done := 0
		for _, b := range l.Items {
			if b.Status.ObservedGeneration >= b.Generation && b.Status.ExpectedPods == int32(podsPerPDB) {
				done++
			}
		}
		return done == len(l.Items), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Measure once the controllers have caught up.
	waited, err := cp.WaitIdle(ctx, 5*time.Second, 0.1, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane idle after %s", waited.Round(time.Second))

	bin := plugintest.Binary(t, "kubectl-pdb_blockers")
	args := []string{bin, "--kubeconfig", cp.Kubeconfig, "-l", "pdbb-scale=" + prefix, "--force", "--request-timeout", "2m"}
	// One run with the audit log read: a constant number of requests, no
	// request per pod.
	mark := auditLines(t, cp.AuditLogPath)
	cpuBefore := cp.CPUTime()
	first := bench.Run(t, ctx, bench.Side{Name: "pdb-blockers -o json", Procs: []bench.Proc{{Args: append(args, "-o", "json")}}, KeepStdout: true})
	calls := auditCalls(t, cp.AuditLogPath, mark, "kubectl-pdb_blockers")
	t.Logf("audited run: %s, requests %v; control plane CPU meanwhile: %s", first, calls, cpuSince(cp, cpuBefore))
	if code := first.Results[0].ExitCode; code != 1 {
		t.Fatalf("exit %d, want 1 (budgets run out as the drain goes on)\n%s", code, first.Results[0].Stderr)
	}
	// One watch-list stream each of nodes, pods and PDBs, or, where the
	// server refuses one, a paged list: ceil(n/1000)+1 pages at most.
	if pages := (total/1000 + 1) + (nodes/1000 + 1) + (pdbs/1000 + 1) + 3; calls["get"]+calls["create"] > 2 || calls["list"]+calls["watch"] > pages {
		t.Errorf("requests %v: want a few paged lists and no request per pod", calls)
	}
	if calls["watch"] != 3 || calls["list"] != 0 {
		t.Errorf("requests %v: want one watch-list stream each of nodes, pods and PDBs", calls)
	}
	var rep pdbblockers.Report
	if err := json.Unmarshal([]byte(first.Results[0].Stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Pods != total || rep.Summary.Nodes != nodes {
		t.Errorf("summary %+v", rep.Summary)
	}
	t.Logf("summary: %+v", rep.Summary)

	exits := func(want int) func([]plugintest.Result) error {
		return func(rs []plugintest.Result) error {
			for _, r := range rs {
				if r.ExitCode != want {
					return fmt.Errorf("exit %d, want %d\n%s", r.ExitCode, want, plugintest.LastLines(r.Stderr, 20))
				}
			}
			return nil
		}
	}
	plugin := bench.Side{Name: "pdb-blockers -o json", Procs: []bench.Proc{{Args: append(args, "-o", "json")}}, Check: exits(1)}
	quiet := bench.Side{Name: "pdb-blockers -q", Procs: []bench.Proc{{Args: append(args, "-q")}}, Check: exits(1)}
	// The floors: the same three reads by a bare watch-list client (one
	// process, client-go's decoders, objects only counted), and as raw
	// JSON lists by kubectl, three processes at once.
	watchlist := bench.Side{Name: "watch-list client", Check: exits(0), Procs: []bench.Proc{{Args: []string{
		plugintest.Tool(t, "./hack/watchlist"), "--kubeconfig", cp.Kubeconfig, "nodes", "pods", "poddisruptionbudgets"}}}}
	raw := bench.Side{Name: "kubectl get --raw x3", Check: exits(0)}
	for _, path := range []string{"/api/v1/nodes?labelSelector=pdbb-scale%3D" + prefix, "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"} {
		raw.Procs = append(raw.Procs, bench.Proc{Args: []string{cp.Binaries.Kubectl, "--kubeconfig", cp.Kubeconfig, "get", "--raw", path}})
	}
	bench.Compare(t, ctx, plugin, raw, 0)
	// The output format's cost apart: -o json beside -q.
	bench.Compare(t, ctx, plugin, quiet, 0)
	// Judged last, against the floor that reads what the plugin reads.
	c := bench.Compare(t, ctx, plugin, watchlist, 0)
	if path := os.Getenv("E2E_SCALE_PROFILE"); path != "" {
		// The binary's own CPU profile of one more run.
		r := bench.Run(t, ctx, bench.Side{Name: "profiled", Procs: []bench.Proc{{Args: append(args, "-o", "json"), Env: []string{cli.ProfileEnv + "=" + path}}}})
		t.Logf("profiled run: %s; CPU profile in %s (go tool pprof %s %s)", r, path, bin, path)
	}
	// E2E_SCALE_HOLD=FILE keeps the objects while FILE exists, to run the
	// plugin against them by hand (kubeconfig in the log).
	if hold := os.Getenv("E2E_SCALE_HOLD"); hold != "" {
		t.Logf("holding while %s exists; kubeconfig %s, selector pdbb-scale=%s", hold, cp.Kubeconfig, prefix)
		for {
			if _, err := os.Stat(hold); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
	}
	if m, peak := c.Median(), c.PeakKiB()<<10; m > 1.5 || peak > 300<<20 {
		t.Errorf("over the targets: median ratio to the watch-list floor %.2f (target 1.5), peak RSS %d MB (target 300)", m, peak>>20)
	}
}

// cpuSince formats the CPU time each control-plane component used since
// before, busiest first.
func cpuSince(cp *harness.ControlPlane, before map[string]time.Duration) string {
	type use struct {
		name string
		d    time.Duration
	}
	var uses []use
	for name, d := range cp.CPUTime() {
		uses = append(uses, use{name, d - before[name]})
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].d > uses[j].d })
	var parts []string
	for _, u := range uses {
		parts = append(parts, fmt.Sprintf("%s %s", u.name, u.d.Round(10*time.Millisecond)))
	}
	return strings.Join(parts, ", ")
}

func parallel(t *testing.T, n int, fn func(int) error) {
	t.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func auditLines(t *testing.T, path string) int { return harness.AuditLines(t, path) }

// auditCalls counts the requests of a user agent after line skip, by verb
// (ResponseComplete stage only).
func auditCalls(t *testing.T, path string, skip int, agent string) map[string]int {
	t.Helper()
	time.Sleep(2 * time.Second) // the audit log is written asynchronously
	return harness.CountAudit(t, path, skip, agent, func(e harness.AuditEvent) string { return e.Verb })
}
