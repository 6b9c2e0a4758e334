//go:build e2e

package fleetreporte2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/fleetctx"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
)

// The scale run's fleet, as the sweep run's: healthy contexts on one
// control plane and dead ones that refuse or hang.
type scaleFleet struct {
	healthy, refused, hangTCP, hangTLS, pairs int
}

var (
	fullScale = scaleFleet{healthy: 50, refused: 25, hangTCP: 13, hangTLS: 12, pairs: bench.Pairs}
	// smallScale (E2E_SCALE_SMALL=1) proves the run works in a minute.
	smallScale = scaleFleet{healthy: 5, refused: 2, hangTCP: 2, hangTLS: 1, pairs: 1}
)

const (
	scaleParallel = 16
	scaleTimeout  = 5 * time.Second
	// scaleTarget is the judged median ratio of the fleet report's wall to
	// the slowest single context's.
	scaleTarget = 1.10
	deadSlack   = time.Second // timers and scheduling on a busy two-core machine
)

// TestFleetInventoryScale measures `kubectl skew fleet inventory -o
// prometheus --all-contexts --parallel 16 --request-timeout 5s` over 100
// contexts (set E2E_SCALE=1): 50 healthy ones on one control plane through
// 50 cluster entries of their own, 25 refused, 13 that never answer the
// TLS handshake and 12 that never answer the request, the dead contexts
// of the sweep run (e2e/fleetctx).
//
// The floor is the slowest single context alone, as the sweep run's: the
// same command as a whole process for one healthy context and, at the same
// time, one for one hanging context (one --request-timeout, no CPU); its
// wall is the slower of the two. The target is the median of five
// alternating pairwise ratios of the fleet's wall to the floor's within
// 1.10. Beside it: every hanging context is given up within
// --request-timeout (+1 s), the run exits 3 with every cluster a series
// (50 up, 50 down), and its peak RSS is reported with the single healthy
// context's.
func TestFleetInventoryScale(t *testing.T) {
	if os.Getenv("E2E_SCALE") == "" {
		t.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	sc := fullScale
	if os.Getenv("E2E_SCALE_SMALL") != "" {
		sc = smallScale
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cp, err := harness.Start(ctx, harness.Options{KeepDir: os.Getenv("E2E_KEEP") != ""})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	for _, p := range []harness.GPUPool{{Name: "scale-a", Nodes: 4}, {Name: "scale-b", Nodes: 2, KubeletVersion: "v1.36.3"}} {
		if _, err := cp.CreateGPUNodes(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	eps := fleetctx.NewEndpoints(t, sc.refused, sc.hangTCP, sc.hangTLS)
	kb := fleetctx.NewKubeconfig()
	for i := range sc.healthy {
		kb.AddLive(t, fmt.Sprintf("healthy-%02d", i), cp.Kubeconfig, "")
	}
	kb.AddEndpoints(eps)
	kc := kb.Write(t)
	if _, err := cp.WaitIdle(ctx, 3*time.Second, 0.1, 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	bin := plugintest.Binary(t, "kubectl-skew")
	args := func(more ...string) []string {
		return append([]string{bin, "fleet", "inventory", "--kubeconfig", kc, "--request-timeout", scaleTimeout.String(), "-o", "prometheus"}, more...)
	}
	total := sc.healthy + sc.refused + sc.hangTCP + sc.hangTLS
	single := bench.Side{Name: "one healthy context", Procs: []bench.Proc{{Args: args("--contexts", "healthy-00")}}, Check: bench.Exits(0)}
	floor := bench.Side{Name: "slowest context alone", Procs: []bench.Proc{
		{Args: args("--contexts", "healthy-00")}, {Args: args("--contexts", "hang-tcp-00")}},
		Check: func(rs []plugintest.Result) error {
			if err := bench.Exits(0)(rs[:1]); err != nil {
				return err
			}
			return bench.Exits(3)(rs[1:])
		}}
	var (
		mu   sync.Mutex
		held []time.Duration
	)
	fleet := bench.Side{Name: fmt.Sprintf("fleet inventory of %d contexts", total), KeepStdout: true,
		Procs:  []bench.Proc{{Args: args("--all-contexts", "--parallel", fmt.Sprint(scaleParallel))}},
		Before: func() error { eps.Reset(); return nil },
		Check: func(rs []plugintest.Result) error {
			if err := checkScaleMetrics(rs[0], sc.healthy, total); err != nil {
				return err
			}
			longest, err := eps.Settled()
			mu.Lock()
			held = append(held, longest)
			mu.Unlock()
			return err
		}}
	one := bench.Run(t, ctx, single)
	t.Logf("one healthy context: %s", one)
	first := bench.Run(t, ctx, fleet)
	t.Logf("first fleet run: %s", first)

	c := bench.Compare(t, ctx, fleet, floor, sc.pairs)
	var longest time.Duration
	for _, d := range held {
		longest = max(longest, d)
	}
	t.Logf("fleet inventory -o prometheus over %d contexts (%d healthy) at --parallel %d: peak RSS %d MB (one healthy context alone: %d MB); the longest a hanging request was waited for: %s",
		total, sc.healthy, scaleParallel, c.PeakKiB()>>10, one.PeakKiB>>10, longest.Round(time.Millisecond))
	if m := c.Median(); m > scaleTarget {
		t.Errorf("median ratio of the fleet report to the slowest context alone %.2f, target %.2f", m, scaleTarget)
	}
	if longest > scaleTimeout+deadSlack {
		t.Errorf("a hanging request was waited for %s, more than --request-timeout %s + %s", longest, scaleTimeout, deadSlack)
	}
}

// checkScaleMetrics checks a fleet run: exit 3 (clusters could not be
// read), every context a gpufleet_cluster_up series, the healthy ones 1
// and the others 0, each dead one named on stderr.
func checkScaleMetrics(r plugintest.Result, healthy, total int) error {
	if r.ExitCode != 3 {
		return fmt.Errorf("exit %d, want 3\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 20))
	}
	up, down := 0, 0
	for _, line := range strings.Split(r.Stdout, "\n") {
		if !strings.HasPrefix(line, fleetreport.MetricClusterUp+"{") {
			continue
		}
		switch {
		case strings.HasSuffix(line, " 1.0"):
			up++
		case strings.HasSuffix(line, " 0.0"):
			down++
			name := line[strings.Index(line, `cluster="`)+len(`cluster="`):]
			name = name[:strings.IndexByte(name, '"')]
			if !strings.Contains(r.Stderr, "error: cluster "+name+": ") {
				return fmt.Errorf("stderr does not name %s\n%s", name, plugintest.LastLines(r.Stderr, 10))
			}
		}
	}
	if up != healthy || up+down != total || !strings.HasSuffix(r.Stdout, "# EOF\n") {
		return fmt.Errorf("%d clusters up and %d down, want %d of %d\n%s", up, down, healthy, total, plugintest.LastLines(r.Stdout, 5))
	}
	return nil
}
