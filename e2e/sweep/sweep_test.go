//go:build e2e

// Package sweepe2e measures the multi-context plugins over a kubeconfig of
// a hundred contexts: fifty healthy ones on a real control plane and fifty
// that refuse or never answer, as a fleet sweep meets them.
package sweepe2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/fleetctx"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

const (
	healthy   = 50
	refused   = 25
	hangTCP   = 13 // accept the connection, never answer the TLS handshake
	hangTLS   = 12 // complete the handshake, never answer the request
	parallel  = 16
	timeout   = 5 * time.Second
	deadSlack = time.Second // timers and scheduling on a busy two-core machine
	// target is the judged median ratio of the sweep's wall to the floor's:
	// the slowest context plus 5% (measured 1.00-1.01 on a quiet machine
	// and on one with two CPU-bound processes beside it).
	target = 1.05
	// rssSlackMiB over twice a single-context run: the sweep keeps a
	// client, a transport and a discovery cache for each of a hundred
	// contexts, and reads up to sixteen clusters at once.
	rssSlackMiB = 64
)

// TestContextSweepScale runs kubectl skew, deprecations and pdb-blockers
// with --all-contexts --parallel 16 --request-timeout 5s over 100
// contexts (set E2E_SCALE=1): 50 healthy ones, all on one control plane
// through 50 cluster entries of their own, and 50 dead ones: 25 refused
// (a closed port), 13 that accept the TCP connection and never answer
// the TLS handshake, 12 that complete the handshake and never answer the
// request. Each dead or hanging endpoint is a port of its own whose
// connections this test times.
//
// The floor is the slowest single context run alone: the same plugin as a
// whole process against one healthy context, and at the same time one
// against one hanging context (which costs one --request-timeout and no
// CPU); its wall is the slower of the two. A sweep can take no less:
// it must wait out the hanging contexts, and it reads a healthy one the
// way the single run does. The target is the slowest context plus 5%:
// the median of five alternating pairwise ratios of sweep wall to floor
// wall within 1.05. Beside it, every hanging context must be given up
// within --request-timeout (+1 s), the sweep must exit 3 (a context could
// not be checked) with every dead context named and every healthy one
// reported, and its peak RSS must stay under twice a single healthy
// context's plus 64 MB.
func TestContextSweepScale(t *testing.T) {
	if os.Getenv("E2E_SCALE") == "" {
		t.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// A control plane of its own, started only when measuring.
	cp, err := harness.Start(ctx, harness.Options{KeepDir: os.Getenv("E2E_KEEP") != ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	plant(t, ctx, cp)

	eps := fleetctx.NewEndpoints(t, refused, hangTCP, hangTLS)
	kc := writeKubeconfig(t, cp, eps)
	if _, err := cp.WaitIdle(ctx, 3*time.Second, 0.1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// E2E_SCALE_HOLD=FILE keeps the contexts while FILE exists, to run the
	// plugins against them by hand.
	if hold := os.Getenv("E2E_SCALE_HOLD"); hold != "" {
		t.Logf("holding while %s exists; kubeconfig %s", hold, kc)
		for {
			if _, err := os.Stat(hold); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
	}

	for _, p := range []struct {
		name, bin string
		args      []string
	}{
		{"skew", "kubectl-skew", nil},
		{"deprecations", "kubectl-deprecations", nil},
		{"pdb-blockers", "kubectl-pdb_blockers", []string{"-l", harness.PoolLabel + "=sweep-a"}},
	} {
		t.Run(p.name, func(t *testing.T) {
			measure(t, ctx, eps, plugintest.Binary(t, p.bin), kc, p.args)
		})
	}
}

func measure(t *testing.T, ctx context.Context, eps *fleetctx.Endpoints, bin, kc string, extra []string) {
	common := append([]string{bin, "--kubeconfig", kc, "--request-timeout", timeout.String(), "-o", "json"}, extra...)
	args := func(more ...string) []string { return append(append([]string(nil), common...), more...) }

	single := bench.Side{Name: "one healthy context", KeepStdout: true,
		Procs: []bench.Proc{{Args: args("--context", "healthy-00")}}, Check: bench.Exits(0, 1)}
	floor := bench.Side{Name: "slowest context alone", KeepStdout: true, Procs: []bench.Proc{
		{Args: args("--context", "healthy-00")}, {Args: args("--context", "hang-tcp-00")}},
		Check: func(rs []plugintest.Result) error {
			if err := bench.Exits(0, 1)(rs[:1]); err != nil {
				return err
			}
			return bench.Exits(3)(rs[1:])
		}}
	var (
		mu   sync.Mutex
		held []time.Duration // the longest a hanging request was waited for, each sweep
	)
	sweep := bench.Side{Name: "sweep of 100 contexts", KeepStdout: true,
		Procs: []bench.Proc{{Args: args("--all-contexts", "--parallel", fmt.Sprint(parallel))}},
		Check: func(rs []plugintest.Result) error {
			if err := checkSweep(rs[0]); err != nil {
				return err
			}
			longest, err := eps.Settled()
			mu.Lock()
			held = append(held, longest)
			mu.Unlock()
			return err
		}}
	// The dead contexts alone, all fifty at --parallel 16: what they cost
	// a sweep, since a healthy context's work can hide none of it here.
	deadOnly := bench.Side{Name: "the 50 dead contexts alone",
		Procs: []bench.Proc{{Args: args("--contexts", strings.Join(eps.Names(), ","), "--parallel", fmt.Sprint(parallel))}},
		Check: bench.Exits(3)}
	// One run of each first: warm caches, and the single context's RSS.
	one := bench.Run(t, ctx, single)
	t.Logf("one healthy context: %s", one)
	eps.Reset()
	first := bench.Run(t, ctx, sweep)
	t.Logf("first sweep: %s; the longest a hanging request was waited for %s", first, held[0].Round(time.Millisecond))

	c := compare(t, ctx, eps, sweep, floor)
	// Not judged: the fifty healthy contexts alone. They share one
	// apiserver on this machine's cores, where a fleet's are apart, so
	// this shows how much of the sweep is the server's work times fifty
	// rather than the dead contexts or the fan-out.
	var healthyNames []string
	for i := range healthy {
		healthyNames = append(healthyNames, fmt.Sprintf("healthy-%02d", i))
	}
	// Its exit code is logged, not checked: fifty reads at once of one
	// apiserver's /metrics can outlast --request-timeout on two cores.
	alive := bench.Run(t, ctx, bench.Side{Name: "the 50 healthy contexts alone",
		Procs: []bench.Proc{{Args: args("--contexts", strings.Join(healthyNames, ","), "--parallel", fmt.Sprint(parallel))}}})
	t.Logf("the 50 healthy contexts alone at --parallel %d (one apiserver): %s, exit %d", parallel, alive, alive.Results[0].ExitCode)
	var dead []bench.Sample
	for range 3 {
		dead = append(dead, bench.Run(t, ctx, deadOnly))
		t.Logf("%s: %s", deadOnly.Name, dead[len(dead)-1])
	}
	deadWall := bench.MedianSample(dead).Wall
	var longest time.Duration
	for _, d := range held {
		longest = max(longest, d)
	}
	peak, bound := c.PeakKiB()<<10, 2*(one.PeakKiB<<10)+rssSlackMiB<<20
	t.Logf("dead-context cost: the 50 dead contexts alone at --parallel %d take %s (median of 3; --request-timeout %s); the longest a hanging request was waited for in a sweep: %s",
		parallel, deadWall.Round(time.Millisecond), timeout, longest.Round(time.Millisecond))
	t.Logf("sweep peak RSS %d MB, bound %d MB (twice one healthy context's %d MB + %d MB)", peak>>20, bound>>20, one.PeakKiB>>10, rssSlackMiB)
	if m := c.Median(); m > target {
		t.Errorf("median ratio of the sweep to the slowest context alone %.2f, target %.2f", m, target)
	}
	if deadWall > timeout+deadSlack || longest > timeout+deadSlack {
		t.Errorf("dead contexts cost more than --request-timeout %s + %s: %s for the 50 alone, a hanging request waited for %s",
			timeout, deadSlack, deadWall, longest)
	}
	if peak > bound {
		t.Errorf("sweep peak RSS %d MB over the bound %d MB", peak>>20, bound>>20)
	}
}

// compare is bench.Compare with the endpoints' counts reset before each
// sweep, so that they belong to the run being checked.
func compare(t *testing.T, ctx context.Context, eps *fleetctx.Endpoints, sweep, floor bench.Side) bench.Comparison {
	c := bench.Comparison{Plugin: sweep, Floor: floor}
	runSweep := func() bench.Sample {
		eps.Reset()
		return bench.Run(t, ctx, sweep)
	}
	for i := range bench.Pairs {
		var p, f bench.Sample
		if i%2 == 0 {
			p, f = runSweep(), bench.Run(t, ctx, floor)
		} else {
			f, p = bench.Run(t, ctx, floor), runSweep()
		}
		c.PluginRuns, c.FloorRuns = append(c.PluginRuns, p), append(c.FloorRuns, f)
		c.Ratios = append(c.Ratios, float64(p.Wall)/float64(max(f.Wall, time.Millisecond)))
		t.Logf("pair %d: %s %s | %s %s | ratio %.2f", i+1, sweep.Name, p, floor.Name, f, c.Ratios[i])
	}
	t.Logf("%s: median %s", sweep.Name, bench.MedianSample(c.PluginRuns))
	t.Logf("%s: median %s", floor.Name, bench.MedianSample(c.FloorRuns))
	t.Logf("median ratio to the floor: %.2f (%s against %s; target %.2f)", c.Median(), sweep.Name, floor.Name, target)
	return c
}

// checkSweep checks a sweep's exit code (3: some contexts could not be
// checked), that every context is in the list, every healthy one with a
// report and every dead one with its error on stderr.
func checkSweep(r plugintest.Result) error {
	if r.ExitCode != 3 {
		return fmt.Errorf("exit %d, want 3 (contexts could not be checked)\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 20))
	}
	var list struct {
		Items []struct {
			Context  string          `json:"context"`
			Error    string          `json:"error"`
			ExitCode int             `json:"exitCode"`
			Report   json.RawMessage `json:"report"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		return fmt.Errorf("output: %v\n%s", err, plugintest.LastLines(r.Stdout, 10))
	}
	if len(list.Items) != healthy+refused+hangTCP+hangTLS {
		return fmt.Errorf("%d contexts in the list, want %d", len(list.Items), healthy+refused+hangTCP+hangTLS)
	}
	good := 0
	for _, it := range list.Items {
		if strings.HasPrefix(it.Context, "healthy-") {
			if it.Error != "" || len(it.Report) == 0 || it.ExitCode > 1 {
				// A healthy context's exit 3 is an input it could not read
				// (a request that timed out): its report says which.
				rep := string(it.Report)
				if len(rep) > 600 {
					rep = rep[:600] + "..."
				}
				return fmt.Errorf("healthy context %s: exit %d, error %q, report %s", it.Context, it.ExitCode, it.Error, rep)
			}
			good++
			continue
		}
		if it.ExitCode != 3 || it.Error == "" || len(it.Report) != 0 {
			return fmt.Errorf("dead context %s: exit %d, error %q", it.Context, it.ExitCode, it.Error)
		}
		if !strings.Contains(r.Stderr, "context "+it.Context+":") {
			return fmt.Errorf("stderr does not name dead context %s\n%s", it.Context, plugintest.LastLines(r.Stderr, 10))
		}
	}
	if good != healthy {
		return fmt.Errorf("%d healthy contexts reported, want %d", good, healthy)
	}
	return nil
}

// plant gives the healthy cluster something to read: two pools of KWOK
// nodes a minor apart (skew), a Deployment whose PDB blocks a drain
// (pdb-blockers) and a Helm release record of a removed API
// (deprecations).
func plant(t *testing.T, ctx context.Context, cp *harness.ControlPlane) {
	t.Helper()
	if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "sweep-a", Nodes: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "sweep-b", Nodes: 2, KubeletVersion: "v1.36.0"}); err != nil {
		t.Fatal(err)
	}
	ns := "sweep"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateDeployment(ctx, harness.Deployment(ns, "trainer", 8, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreatePDB(ctx, harness.PDB(ns, "trainer", "trainer", 7), 8); err != nil {
		t.Fatal(err)
	}
	manifest := "---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\n"
	rec, err := json.Marshal(map[string]any{"name": "fleet", "namespace": ns, "version": 1,
		"info": map[string]any{"status": "deployed"}, "chart": map[string]any{"metadata": map[string]any{"name": "fleet", "version": "1.0.0"}},
		"manifest": manifest})
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(rec)
	_ = zw.Close()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.fleet.v1", Namespace: ns,
			Labels: map[string]string{"name": "fleet", "owner": "helm", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))},
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// writeKubeconfig writes the hundred contexts: healthy-NN on the control
// plane (a cluster entry each, as distinct clusters have), refused-NN on
// closed ports, hang-tcp-NN and hang-tls-NN on the endpoints.
func writeKubeconfig(t *testing.T, cp *harness.ControlPlane, eps *fleetctx.Endpoints) string {
	t.Helper()
	kc := fleetctx.NewKubeconfig()
	for i := range healthy {
		kc.AddLive(t, fmt.Sprintf("healthy-%02d", i), cp.Kubeconfig, "")
	}
	kc.AddEndpoints(eps)
	return kc.Write(t)
}
