package deprecations

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

// The heavy benchmarks copy the corpus ten times or write a gigabyte of
// audit log at benchmark time, so they run only with DEPRECATIONS_BENCH=1:
//
//	DEPRECATIONS_BENCH=1 go test -run '^$' -bench . -benchtime 3x ./plugins/deprecations

func heavy(b *testing.B) {
	b.Helper()
	if os.Getenv("DEPRECATIONS_BENCH") == "" {
		b.Skip("set DEPRECATIONS_BENCH=1 to run the heavy benchmarks")
	}
}

var corpusDir = filepath.Join("..", "..", "..", "shared", "corpus")

// copyCorpus copies the corpus n times under dir and returns the file count.
// It copies with cp rather than in this process: Linux counts the parent's
// peak RSS into the ru_maxrss of a child it starts (the child shares the
// parent's memory until exec), so reading 58 MB here would show up as the
// plugin's peak RSS in BenchmarkCorpusTenfoldProcess.
func copyCorpus(b *testing.B, dir string, n int) int {
	b.Helper()
	if _, err := os.Stat(filepath.Join(corpusDir, "README.md")); err != nil {
		b.Skipf("corpus not present at %s", corpusDir)
	}
	files := 0
	for i := 0; i < n; i++ {
		dst := filepath.Join(dir, fmt.Sprintf("copy-%02d", i))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("cp", "-R", corpusDir+"/.", dst).CombinedOutput(); err != nil {
			b.Fatalf("copying the corpus: %v\n%s", err, out)
		}
		err := filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return files
}

// buildBinary builds kubectl-deprecations once into dir the way make build
// and the release archives do: without cgo and stripped (a cgo build of
// the same code measured about 25 MB more peak RSS on the corpus).
func buildBinary(b *testing.B, dir string) string {
	b.Helper()
	bin := filepath.Join(dir, "kubectl-deprecations")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", dir+"/", "../../cmd/kubectl-deprecations", "../../hack/peakrss")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runProcess runs the binary under hack/peakrss (built into the same
// folder; see there why) and returns its wall time and peak RSS.
func runProcess(b *testing.B, bin string, args ...string) (time.Duration, int64) {
	b.Helper()
	cmd := exec.Command(filepath.Join(filepath.Dir(bin), "peakrss"), append([]string{bin}, args...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() > 1) {
		b.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	var kib int64
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if _, err := fmt.Sscanf(lines[len(lines)-1], "peakrss: %d", &kib); err != nil {
		b.Fatalf("no peak RSS from hack/peakrss: %q", lines[len(lines)-1])
	}
	return d, kib * 1024
}

// BenchmarkCorpusTenfoldProcess runs the whole binary on the corpus copied
// ten times, like pluto's measured 2.2 s and 51 MB; it reports seconds and
// peak RSS per run.
func BenchmarkCorpusTenfoldProcess(b *testing.B) {
	heavy(b)
	dir := b.TempDir()
	files := copyCorpus(b, filepath.Join(dir, "corpus"), 10)
	bin := buildBinary(b, dir)
	b.ResetTimer()
	var worst int64
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d, rss := runProcess(b, bin, "--target-version", "v1.37", "-f", filepath.Join(dir, "corpus"), "-o", "json")
		total += d
		worst = max(worst, rss)
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(worst)/(1<<20), "peakRSS-MB")
	b.ReportMetric(float64(files), "files")
}

// BenchmarkCorpusScale scans the corpus copied 1, 5 and 10 times in process,
// to show the time grows linearly with the input.
func BenchmarkCorpusScale(b *testing.B) {
	heavy(b)
	for _, n := range []int{1, 5, 10} {
		b.Run(fmt.Sprintf("x%d", n), func(b *testing.B) {
			dir := b.TempDir()
			copyCorpus(b, dir, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := &dep.ManifestScanner{}
				if _, err := s.ScanPaths(context.Background(), []string{dir}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// writeAuditLog writes about size bytes of synthetic audit events, one in
// ten on a deprecated API, from a few hundred callers.
func writeAuditLog(b *testing.B, path string, size int64) int64 {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	var n int64
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; n < size; i++ {
		ts := base.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		var line string
		if i%10 == 0 {
			line = fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%08x-0000-4000-8000-000000000000","stage":"ResponseComplete","requestURI":"/apis/resource.k8s.io/v1beta1/namespaces/ns-%d/resourceclaims?limit=500","verb":"list","user":{"username":"system:serviceaccount:ns-%d:driver","groups":["system:serviceaccounts","system:authenticated"]},"sourceIPs":["10.0.%d.%d"],"userAgent":"dra-driver/v0.%d (linux/amd64)","objectRef":{"resource":"resourceclaims","namespace":"ns-%d","apiGroup":"resource.k8s.io","apiVersion":"v1beta1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"%s","stageTimestamp":"%s","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":"RBAC","k8s.io/deprecated":"true","k8s.io/removed-release":"1.38"}}`,
				i, i%50, i%50, i%200, i%250, i%7, i%50, ts, ts)
		} else {
			line = fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%08x-0000-4000-8000-000000000000","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/ns-%d/pods/p-%d","verb":"get","user":{"username":"system:node:node-%d","groups":["system:nodes","system:authenticated"]},"sourceIPs":["10.1.%d.%d"],"userAgent":"kubelet/v1.37.2 (linux/amd64) kubernetes/abcdef","objectRef":{"resource":"pods","namespace":"ns-%d","name":"p-%d","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"%s","stageTimestamp":"%s","annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}`,
				i, i%50, i, i%500, i%200, i%250, i%50, i, ts, ts)
		}
		k, _ := w.WriteString(line + "\n")
		n += int64(k)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkAuditLogGigabyte reads 1 GB of audit log in process (MB/s and
// heap after the run) and as a whole process (seconds and peak RSS).
func BenchmarkAuditLogGigabyte(b *testing.B) {
	heavy(b)
	dir := b.TempDir()
	path := filepath.Join(dir, "audit.log")
	size := writeAuditLog(b, path, 1<<30)
	bin := buildBinary(b, dir)
	b.SetBytes(size)
	b.ResetTimer()
	var worst int64
	var total time.Duration
	for i := 0; i < b.N; i++ {
		d, rss := runProcess(b, bin, "--source", "audit", "--audit-log", path, "--target-version", "v1.37", "-o", "json")
		total += d
		worst = max(worst, rss)
	}
	b.StopTimer()
	b.ReportMetric(total.Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(worst)/(1<<20), "peakRSS-MB")
	// In process, the heap stays flat: it holds the callers, not the log.
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := (&dep.AuditReader{}).Read(context.Background(), []string{path}, nil)
	if err != nil {
		b.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(len(res.Findings)), "callers")
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heapInUse-MB")
}
