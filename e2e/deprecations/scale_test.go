//go:build e2e

package deprecationse2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

// BenchmarkDeprecationsHelmScale plants 2,000 Helm release records (800
// releases over four namespaces, one to four revisions each, a few KB of
// manifest per record) and runs `--source helm -o json`, then the same
// with --helm-history. It reports the wall time, the plugin's peak RSS and
// CPU, and the requests the plugin made, counted in the apiserver audit
// log; it fails unless the findings are exactly the planted ones and the
// Secrets are read with paged lists of ceil(records/page) pages, never a
// request per release: two passes for the deployed revisions (the first
// reads metadata only), one with --helm-history. Each mode is then
// measured beside its floor, the real `helm list -A` reading the same
// records (compareHelmList), and prints "median ratio to the floor". It
// needs E2E_SCALE=1;
// E2E_SCALE_RECORDS changes the number of records:
//
//	E2E_SCALE=1 go test -tags e2e -run '^$' -bench DeprecationsHelmScale -benchtime 1x -timeout 30m ./e2e/deprecations/
func BenchmarkDeprecationsHelmScale(b *testing.B) {
	if os.Getenv("E2E_SCALE") == "" {
		b.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	records := 2000
	if s := os.Getenv("E2E_SCALE_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("E2E_SCALE_RECORDS: bad number %q", s)
		}
		records = n
	}
	cp := harness.Shared(b)
	var namespaces []string
	for range 4 {
		namespaces = append(namespaces, cp.Namespace(b))
	}
	fleet := plantHelmFleet(b, cp, namespaces, records, 2048)
	pages := (fleet.Records + deprecations.DefaultPageSize - 1) / deprecations.DefaultPageSize

	for _, mode := range []struct {
		name    string
		args    []string
		want    int
		decoded int
		passes  int
	}{
		{"deployed", nil, fleet.Deployed, fleet.Releases, 2},
		{"history", []string{"--helm-history"}, fleet.History, fleet.Records, 1},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				offset := fileSize(b, cp.AuditLogPath)
				b.StartTimer()
				p := plugintest.StartMeasured(b, binary, append([]string{"--kubeconfig", cp.Kubeconfig, "--source", "helm", "-o", "json"}, mode.args...)...)
				res, rep := waitReport(b, p, 10*time.Minute)
				b.StopTimer()
				if res.ExitCode != 1 {
					b.Fatalf("want exit 1 (removed APIs planted)\n%s", plugintest.LastLines(res.Stderr, 40))
				}
				for _, s := range rep.Sources {
					if s.Error != "" {
						b.Fatalf("source %s failed: %s", s.Name, s.Error)
					}
				}
				if got := len(fleet.helmItems(rep.Items)); got != mode.want {
					b.Fatalf("%d findings in the planted releases, want exactly %d", got, mode.want)
				}
				// The audit backend writes an event once its response is
				// complete: wait until the count settles.
				var req auditRequests
				for tries := 0; tries < 20; tries++ {
					time.Sleep(250 * time.Millisecond)
					next := countAudit(b, cp.AuditLogPath, offset, binary+"/")
					if tries > 0 && next.Total == req.Total {
						break
					}
					req = next
				}
				lists := req.ByVerb["list secrets"]
				if lists != mode.passes*pages || req.ByVerb["get secrets"] != 0 || req.Total > mode.passes*pages+20 {
					b.Errorf("requests %v (%d in all): want %d paged lists of secrets (%d passes of %d pages) and no request per release",
						req.ByVerb, req.Total, mode.passes*pages, mode.passes, pages)
				}
				// The plugin's CPU, with hack/peakrss's little.
				rssMiB, cpu := float64(p.PeakKiB())/1024, p.CPU().Seconds()
				wall := res.Duration.Seconds()
				b.ReportMetric(wall, "s/run")
				b.ReportMetric(rssMiB, "peak-RSS-MiB")
				b.ReportMetric(cpu, "plugin-CPU-s")
				b.ReportMetric(float64(req.Total), "requests")
				b.ReportMetric(float64(lists), "secret-lists")
				b.ReportMetric(float64(mode.want), "findings")
				var by []string
				for k, v := range req.ByVerb {
					by = append(by, fmt.Sprintf("%s=%d", k, v))
				}
				b.Logf("%s: %d records (%d releases, %d decoded) in %d namespaces: %.2fs wall, peak RSS %.1f MiB, plugin CPU %.2fs, %d requests (%s), %d findings",
					mode.name, fleet.Records, fleet.Releases, mode.decoded, len(namespaces), wall, rssMiB, cpu, req.Total, strings.Join(slices.Sorted(slices.Values(by)), " "), mode.want)
			}
			b.StopTimer()
			compareHelmList(b, cp, fleet, mode.args)
		})
	}
}

// compareHelmList measures the plugin beside its floor, `helm list -A`:
// the real helm client reading the same records. Helm's secret driver
// lists every release Secret of the cluster in one request and decodes
// each record, every revision (List in helm.sh/helm/v4
// pkg/storage/driver/secrets.go, v4.3.2), which is at least what the
// plugin must read and decode; it scans no manifest for API versions.
// Whole processes, alternating, the median of five pairwise ratios.
func compareHelmList(b *testing.B, cp *harness.ControlPlane, fleet helmFleet, extra []string) {
	home := b.TempDir()
	helmEnv := []string{"HOME=" + home, "HELM_DRIVER=secret", "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}
	plugin := bench.Side{Name: "kubectl deprecations --source helm",
		Procs: []bench.Proc{{Args: append([]string{plugintest.Binary(b, binary), "--kubeconfig", cp.Kubeconfig, "--source", "helm", "-o", "json"}, extra...)}},
		Check: func(rs []plugintest.Result) error {
			if rs[0].ExitCode != 1 {
				return fmt.Errorf("exit %d, want 1 (removed APIs planted)\n%s", rs[0].ExitCode, plugintest.LastLines(rs[0].Stderr, 20))
			}
			return nil
		}}
	floor := bench.Side{Name: "helm list -A", KeepStdout: true,
		Procs: []bench.Proc{{Args: []string{helmBinary(b), "--kubeconfig", cp.Kubeconfig, "list", "-A", "-o", "json", "--max", fmt.Sprint(fleet.Releases + 1000)}, Env: helmEnv}},
		Check: func(rs []plugintest.Result) error {
			var releases []json.RawMessage
			if rs[0].ExitCode != 0 || json.Unmarshal([]byte(rs[0].Stdout), &releases) != nil {
				return fmt.Errorf("exit %d\n%s", rs[0].ExitCode, plugintest.LastLines(rs[0].Stderr, 20))
			}
			// Every planted release decoded (others' may be there too).
			if len(releases) < fleet.Releases {
				return fmt.Errorf("helm listed %d releases, want at least the %d planted", len(releases), fleet.Releases)
			}
			return nil
		}}
	c := bench.Compare(b, context.Background(), plugin, floor, 0)
	b.ReportMetric(c.Median(), "ratio-to-helm-list")
}
