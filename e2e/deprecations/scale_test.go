//go:build e2e

package deprecationse2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
// reads metadata only), one with --helm-history. It needs E2E_SCALE=1;
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
		})
	}
}
