//go:build e2e

package crdmigratee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

// BenchmarkCRDMigrateScale migrates CRDs of several sizes with the
// client-side loop at --qps 500 and reports objects per second, the time
// of the whole command against the ideal time at that rate, and the
// plugin's peak RSS and CPU per object. Then, on the same objects, it
// measures the plugin beside its floor through e2e/bench (see
// compareWithFloor): five alternating pairs of the same command and of
// hack/rewrite, a bare client that reads every object and writes it back
// at the same --qps and --workers, printing both sides' median wall, CPU
// and peak RSS and the median ratio to the floor (no target is set for
// it). It needs E2E_SCALE=1 (creating the objects takes minutes);
// E2E_SCALE_SIZES picks the sizes (default 1000,5000,10000),
// E2E_SCALE_WORKERS the --workers (default 32), and E2E_SCALE_STRICT=1
// fails a size whose first migration takes more than 15% over the ideal.
// Run it once per size:
//
//	E2E_SCALE=1 go test -tags e2e -run '^$' -bench CRDMigrateScale -benchtime 1x -timeout 60m ./e2e/crdmigrate/
func BenchmarkCRDMigrateScale(b *testing.B) {
	if os.Getenv("E2E_SCALE") == "" {
		b.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	sizes := []int{1000, 5000, 10000}
	if s := os.Getenv("E2E_SCALE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("E2E_SCALE_SIZES: bad size %q", f)
			}
			sizes = append(sizes, n)
		}
	}
	const qps = 500
	workers := "32"
	if w := os.Getenv("E2E_SCALE_WORKERS"); w != "" {
		workers = w
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f := newFixture(b, fmt.Sprintf("scale%d-%d", n, i), n)
				// Start once the controllers have caught up with the
				// objects just written.
				if _, err := f.cp.WaitIdle(context.Background(), 2*time.Second, 0.1, 5*time.Minute); err != nil {
					b.Fatal(err)
				}
				before, t0 := f.cp.CPUTime(), time.Now()
				b.StartTimer()
				s := f.startMeasured(b, "run", f.crdName, "--method", "client", "--qps", strconv.Itoa(qps), "--workers", workers, "-o", "json")
				r := s.Wait(b, 30*time.Minute)
				b.StopTimer()
				wall := time.Since(t0).Seconds()
				after := f.cp.CPUTime()
				apiCPU := (after[harness.KubeAPIServer] - before[harness.KubeAPIServer]).Seconds()
				etcdCPU := (after[harness.Etcd] - before[harness.Etcd]).Seconds()
				var cpCPU float64 // every control-plane component
				for name, d := range after {
					cpCPU += (d - before[name]).Seconds()
				}
				if r.ExitCode != 0 {
					b.Fatalf("run: exit %d\n%s", r.ExitCode, r.Stderr)
				}
				rep := parseRun(b, r).Items[0]
				if rep.Processed != int64(n) || rep.Rewritten != int64(n) {
					b.Fatalf("run item = %+v", rep)
				}
				f.assertAllAtV2(b)
				// The ideal is every object written at --qps: n/qps (20 s for
				// 10,000). The dry run's estimate is a little less, as the
				// client's first burst costs no wait; but the apiserver
				// cannot take in a burst of 500 writes at once either.
				ideal := float64(n) / qps
				estimate := crdmigrate.EstimateRun(int64(n), crdmigrate.PageSize, qps, qps).Seconds
				// The plugin's CPU, with hack/peakrss's little.
				rssMiB, cpu := float64(s.PeakKiB())/1024, s.CPU().Seconds()
				b.ReportMetric(float64(n)/rep.Seconds, "objects/s")
				b.ReportMetric(rep.Seconds, "s/run")
				b.ReportMetric(wall, "s/command")
				b.ReportMetric(ideal, "ideal-s")
				b.ReportMetric(rssMiB, "peak-RSS-MiB")
				b.ReportMetric(cpu*1e6/float64(n), "plugin-CPU-µs/object")
				b.ReportMetric(apiCPU*1e6/float64(n), "apiserver-CPU-µs/object")
				b.ReportMetric(etcdCPU*1e6/float64(n), "etcd-CPU-µs/object")
				// busy is the share of the machine's CPUs the plugin and the
				// control plane used while the plugin ran: near 100% means
				// the run was bound by CPU, not by --qps.
				busy := (cpu + cpCPU) / (wall * float64(runtime.NumCPU())) * 100
				b.ReportMetric(busy, "CPU-busy-%")
				b.Logf("%d objects at --qps %d, %s workers: whole command %.1fs (ideal %.1fs, %+.0f%%), migration %.1fs (dry-run estimate %.1fs), %.0f objects/s, peak RSS %.1f MiB, CPU per object: plugin %.0fµs, kube-apiserver %.0fµs, etcd %.0fµs; %d CPUs %.0f%% busy",
					n, qps, workers, wall, ideal, (wall/ideal-1)*100, rep.Seconds, estimate, float64(n)/rep.Seconds, rssMiB, cpu*1e6/float64(n), apiCPU*1e6/float64(n), etcdCPU*1e6/float64(n), runtime.NumCPU(), busy)
				if os.Getenv("E2E_SCALE_STRICT") != "" && wall > ideal*1.15 {
					b.Errorf("%d objects took %.1fs, more than 15%% over the ideal %.1fs", n, wall, ideal)
				}
				compareWithFloor(b, f, qps, workers)
			}
		})
	}
}

// compareWithFloor runs `kubectl crd-migrate run` again as a whole process
// beside its floor, hack/rewrite (a bare client that lists the objects and
// writes each back as read, nothing else), at the same --qps and --workers,
// five alternating pairs through e2e/bench. Before every run, of either
// side, the CRD's storage version moves to its other version (v2 <-> v1), so
// that every run is a real migration: each object is stored again in etcd
// at the new version, which the test checks through etcd. Before a plugin
// run the checkpoint is deleted too (storedVersions holds both versions
// after the move), so the plugin migrates every object again.
func compareWithFloor(b *testing.B, f *fixture, qps int, workers string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	n := f.objects
	storage := "v2"
	flip := func() error {
		next := map[string]string{"v1": "v2", "v2": "v1"}[storage]
		if err := f.setStorage(ctx, b, next); err != nil {
			return err
		}
		storage = next
		return nil
	}
	reset := func() error {
		if err := flip(); err != nil {
			return err
		}
		if sv := f.storedVersions(b); len(sv) != 2 {
			return fmt.Errorf("storedVersions %v after moving storage to %s, want both versions", sv, storage)
		}
		err := f.cp.Client.CoreV1().ConfigMaps(f.checkpNS).Delete(ctx, crdmigrate.CheckpointName(f.crdName), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	q := strconv.Itoa(qps)
	plugin := bench.Side{
		Name: "crd-migrate run",
		Procs: []bench.Proc{{Args: append([]string{plugintest.Binary(b, binary)},
			f.args("run", f.crdName, "--method", "client", "--qps", q, "--workers", workers, "-o", "json")...)}},
		Before: reset,
		Check: func(rs []plugintest.Result) error {
			var rep runReport
			if r := rs[0]; r.ExitCode != 0 {
				return fmt.Errorf("exit %d\n%s", r.ExitCode, plugintest.LastLines(r.Stderr, 20))
			} else if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil || len(rep.Items) != 1 {
				return fmt.Errorf("run report: %v (items %d)\n%s", err, len(rep.Items), r.Stdout)
			}
			if it := rep.Items[0]; it.Processed != int64(n) {
				return fmt.Errorf("run item = %+v, want %d processed", it, n)
			}
			return nil
		},
		KeepStdout: true,
	}
	floor := bench.Side{
		Name:   "bare rewrite",
		Before: flip,
		Procs: []bench.Proc{{Args: []string{plugintest.Tool(b, "./hack/rewrite"), "--kubeconfig", f.cp.Kubeconfig,
			"--namespace", f.ns, "--qps", q, "--workers", workers, f.group + "/v1/" + f.plural}}},
		Check: func(rs []plugintest.Result) error {
			if r := rs[0]; r.ExitCode != 0 || strings.TrimSpace(r.Stdout) != fmt.Sprintf("rewritten %d", n) {
				return fmt.Errorf("exit %d, stdout %q, want \"rewritten %d\"\n%s", r.ExitCode, r.Stdout, n, plugintest.LastLines(r.Stderr, 20))
			}
			return nil
		},
		KeepStdout: true,
	}
	c := bench.Compare(b, ctx, plugin, floor, 0)
	if got, want := f.storedAt(b), map[string]int{f.group + "/" + storage: n}; fmt.Sprint(got) != fmt.Sprint(want) {
		b.Errorf("objects in etcd by apiVersion after the pairs = %v, want %v", got, want)
	}
	b.ReportMetric(c.Median(), "ratio-to-floor")
	b.Logf("%d objects, each run moving all of them to the other storage version, --qps %d, %s workers, median of %d pairs: %s %s; %s %s",
		n, qps, workers, len(c.Ratios), plugin.Name, bench.MedianSample(c.PluginRuns), floor.Name, bench.MedianSample(c.FloorRuns))
}
