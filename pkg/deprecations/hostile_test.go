package deprecations

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// gzipBomb returns a Helm release record (base64 text) whose gzip stream
// inflates to at least size bytes of one JSON string: a first member
// opening {"manifest":" and then copies of one member of 64 MiB of 'a'
// (gzip readers concatenate members), about 1 KiB per MiB compressed.
func gzipBomb(t testing.TB, size int64) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		return buf.Bytes()
	}
	var gz bytes.Buffer
	gz.Write(member([]byte(`{"name":"bomb","manifest":"`)))
	const chunk = 64 << 20
	filler := member(bytes.Repeat([]byte("a"), chunk))
	for n := int64(0); n < size; n += chunk {
		gz.Write(filler)
	}
	return []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))
}

// peakHeap runs fn while sampling the heap, and returns the highest
// HeapAlloc seen above the starting point and the bytes fn allocated in
// all (TotalAlloc).
func peakHeap(fn func()) (peak, total uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var max atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > before.HeapAlloc && ms.HeapAlloc-before.HeapAlloc > max.Load() {
				max.Store(ms.HeapAlloc - before.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return max.Load(), after.TotalAlloc - before.TotalAlloc
}

// TestDecodeReleaseGzipBomb: a record that inflates to 4 GiB is refused
// with an error naming the cap, after reading no more than the cap, and
// the whole decode allocates a small multiple of the cap, not gigabytes.
func TestDecodeReleaseGzipBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("inflates up to the cap")
	}
	bomb := gzipBomb(t, 4<<30)
	t.Logf("bomb: %d bytes of base64 inflating to 4 GiB", len(bomb))
	for _, tc := range []struct {
		max, budget int64
	}{
		{1 << 20, 16 << 20},            // a small cap
		{DefaultMaxRelease, 320 << 20}, // the default cap (64 MiB)
	} {
		var err error
		start := time.Now()
		peak, total := peakHeap(func() { _, err = DecodeRelease(bomb, tc.max) })
		t.Logf("cap %d MiB: peak heap %.1f MiB, allocated %.1f MiB in %s: %v", tc.max>>20,
			float64(peak)/(1<<20), float64(total)/(1<<20), time.Since(start).Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "decompresses to more than") {
			t.Errorf("cap %d: want the size-cap error, got %v", tc.max, err)
		}
		if int64(total) > tc.budget {
			t.Errorf("cap %d: allocated %d bytes, budget %d", tc.max, total, tc.budget)
		}
	}

	// Through the file scanner, as `kubectl deprecations -f` reads it: the
	// Secret manifest is reported as skipped with the cap, not fatal.
	secret := "apiVersion: v1\nkind: Secret\ntype: helm.sh/release.v1\nmetadata:\n  name: sh.helm.release.v1.bomb.v1\ndata:\n  release: " +
		base64.StdEncoding.EncodeToString(bomb) + "\n"
	s := &ManifestScanner{Table: apilifecycle.Builtin(), MaxRelease: 1 << 20}
	var res ManifestResult
	peak, total := peakHeap(func() { res = s.Scan("bomb.yaml", []byte(secret)) })
	t.Logf("-f with the bomb in a Secret: peak heap %.1f MiB, allocated %.1f MiB", float64(peak)/(1<<20), float64(total)/(1<<20))
	if !skippedWith(res, "decompresses to more than") {
		t.Errorf("bomb in a file not reported: %+v", res.Skipped)
	}
	if total > 64<<20 {
		t.Errorf("scanning the file allocated %d bytes", total)
	}
}

func skippedWith(res ManifestResult, s string) bool {
	for _, sk := range res.Skipped {
		if strings.Contains(sk.Reason, s) {
			return true
		}
	}
	return false
}

func scanWithin(t *testing.T, d time.Duration, name string, data []byte) ManifestResult {
	t.Helper()
	s := &ManifestScanner{Table: apilifecycle.Builtin()}
	done := make(chan ManifestResult, 1)
	go func() { done <- s.Scan(name, data) }()
	select {
	case res := <-done:
		return res
	case <-time.After(d):
		t.Fatalf("%s: scan still running after %s", name, d)
		return ManifestResult{}
	}
}

func hasFinding(res ManifestResult, apiVersion, kind string) bool {
	for _, f := range res.Findings {
		if f.APIVersion == apiVersion && f.Kind == kind {
			return true
		}
	}
	return false
}

// TestManifestHostileLongLine: a 10 MB manifest on one line (flow style)
// and a 10 MB value on one line in block style are scanned, not refused
// as a too-long line, and the deprecated object in each is found.
func TestManifestHostileLongLine(t *testing.T) {
	big := strings.Repeat("x", 10<<20)
	flow := []byte(`{apiVersion: batch/v1beta1, kind: CronJob, metadata: {name: big, annotations: {a: "` + big + `"}}}`)
	block := []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: big\n  annotations:\n    a: " + big + "\n---\napiVersion: extensions/v1beta1\nkind: Ingress\nmetadata:\n  name: after\n")
	jsonLine := []byte(`{"apiVersion":"batch/v1beta1","kind":"CronJob","metadata":{"name":"big","annotations":{"a":"` + big + `"}}}`)
	for name, data := range map[string][]byte{"flow.yaml": flow, "block.yaml": block, "line.json": jsonLine} {
		start := time.Now()
		res := scanWithin(t, 30*time.Second, name, data)
		t.Logf("%s: %d bytes in %s, skipped %+v", name, len(data), time.Since(start).Round(time.Millisecond), res.Skipped)
		if !hasFinding(res, "batch/v1beta1", "CronJob") {
			t.Errorf("%s: CronJob not found; skipped %+v", name, res.Skipped)
		}
	}
	if res := scanWithin(t, 30*time.Second, "block.yaml", block); !hasFinding(res, "extensions/v1beta1", "Ingress") {
		t.Errorf("the document after the long line was lost: %+v", res.Skipped)
	}
}

// TestManifestHostileNesting: 100,000 levels of [ (and of {, and of
// block-style sequences) neither overflow the stack nor hang; the file
// is reported as not parsing, and a later file in the same run still is
// scanned.
func TestManifestHostileNesting(t *testing.T) {
	const depth = 100_000
	inputs := map[string][]byte{
		"brackets.yaml": []byte(strings.Repeat("[", depth)),
		"braces.json":   []byte(strings.Repeat(`{"a":`, depth)),
		"closed.json":   []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth)),
		"flowmap.yaml":  []byte("apiVersion: batch/v1beta1\nkind: CronJob\nspec: " + strings.Repeat("{a: ", depth) + "\n"),
		"block.yaml":    []byte(blockNesting(20_000)),
		"aliases.yaml":  []byte(billionLaughs()),
	}
	for name, data := range inputs {
		start := time.Now()
		res := scanWithin(t, 30*time.Second, name, data)
		t.Logf("%s: %s, findings %d, skipped %+v", name, time.Since(start).Round(time.Millisecond), len(res.Findings), trimSkipped(res.Skipped))
		if len(res.Skipped) == 0 && len(res.Findings) == 0 && name != "closed.json" {
			t.Errorf("%s: neither reported nor scanned", name)
		}
	}
}

func blockNesting(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: batch/v1beta1\nkind: CronJob\nspec:\n")
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat(" ", i+1))
		b.WriteString("- \n")
	}
	return b.String()
}

// billionLaughs is the YAML alias bomb: nine levels of nine aliases.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: lol\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	prev := "a"
	for _, c := range "bcdefghi" {
		b.WriteString(string(c) + ": &" + string(c) + " [")
		for i := 0; i < 9; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = string(c)
	}
	return b.String()
}

func trimSkipped(s []Skipped) []Skipped {
	out := make([]Skipped, len(s))
	for i, sk := range s {
		if len(sk.Reason) > 160 {
			sk.Reason = sk.Reason[:160] + "..."
		}
		out[i] = sk
	}
	return out
}

// TestManifestInvalidUTF8: invalid UTF-8 in names, values and keys is
// scanned (the deprecated object is still found) and every string the
// scan reports is valid UTF-8, so -o json and the table stay readable.
func TestManifestInvalidUTF8(t *testing.T) {
	inputs := map[string][]byte{
		"name.yaml":   []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: \xff\xfe-job\n  namespace: t\xc3\x28am\n"),
		"value.yaml":  []byte("apiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: ok\n  annotations:\n    a: \"\xed\xa0\x80\"\n"),
		"kind.yaml":   []byte("apiVersion: batch/v1beta1\xff\nkind: Cron\xffJob\nmetadata:\n  name: ok\n"),
		"name.json":   []byte("{\"apiVersion\":\"batch/v1beta1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"\xff\xfe\"}}"),
		"latin1.yaml": []byte("# caf\xe9\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: caf\xe9\n"),
	}
	for name, data := range inputs {
		res := scanWithin(t, 10*time.Second, name, data)
		for _, f := range res.Findings {
			for _, s := range []string{f.Name, f.Namespace, f.Location, f.APIVersion, f.Kind, f.Detail, f.Who} {
				if !utf8.ValidString(s) {
					t.Errorf("%s: finding holds invalid UTF-8 %q: %+v", name, s, f)
				}
			}
		}
		for _, sk := range res.Skipped {
			if !utf8.ValidString(sk.Reason) || !utf8.ValidString(sk.File) {
				t.Errorf("%s: skip reason holds invalid UTF-8: %q", name, sk.Reason)
			}
		}
		t.Logf("%s: findings %d skipped %+v", name, len(res.Findings), res.Skipped)
		if name != "kind.yaml" && !hasFinding(res, "batch/v1beta1", "CronJob") && len(res.Skipped) == 0 {
			t.Errorf("%s: CronJob neither found nor the file reported", name)
		}
	}
}
