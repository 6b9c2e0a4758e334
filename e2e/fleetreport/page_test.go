//go:build e2e

package fleetreporte2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
)

// chromium is Debian's package (apt-get install chromium; `make e2e`
// installs it when absent).
const chromium = "/usr/bin/chromium"

// checkPage opens the page in headless Chromium, served from a loopback
// server that answers only the page itself, and checks the rendered DOM
// (a row per cluster, a timeline row per cluster with a drawn support
// window for each cluster read, a version-spread bar per ring) and that
// the page asked for nothing but itself. E2E_SCREENSHOT=FILE saves a
// PNG of it (README's picture).
func checkPage(t *testing.T, page string, rep *fleetreport.Report) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no %s: apt-get install chromium (make e2e installs it)", chromium)
	}
	var (
		mu     sync.Mutex
		served []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/fleet.html" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	pageURL := srv.URL + "/fleet.html"

	// The flags that start Debian's Chromium as root on a machine with no
	// network but loopback, without it reaching out on its own.
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0], chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1400, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	var requests []string
	// Listen starts the browser; the actions below get a deadline of
	// their own, as a deadline on the first call would end the browser.
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	tctx, tcancel := context.WithTimeout(ctx, 90*time.Second)
	defer tcancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(pageURL), chromedp.WaitReady(chromedp.CSS("#spread"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	strs := func(expr string) []string {
		v, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("chromium: %s: %v", expr, err)
		}
		return v
	}
	rows := strs(`Array.from(document.querySelectorAll('#clusters tr.cluster')).map(e => e.dataset.cluster)`)
	timeline := strs(`Array.from(document.querySelectorAll('#timeline g.timeline-row')).map(e => e.dataset.cluster)`)
	ringBars := strs(`Array.from(document.querySelectorAll('#spread g.ring-spread')).filter(g => g.querySelector('rect.minor').getBoundingClientRect().width > 0).map(g => g.dataset.ring)`)
	windows, err := chromedp.Run(tctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll('#timeline rect.support-window')).map(r => r.getBoundingClientRect().width)`))
	if err != nil {
		t.Fatal(err)
	}
	nowLine, err := chromedp.Run(tctx, chromedp.Evaluate[int](`document.querySelectorAll('#timeline line.now').length`))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	var names, read []string
	rings := map[string]bool{}
	for _, c := range rep.Clusters {
		names = append(names, c.Name)
		if c.Support != nil {
			read = append(read, c.Name)
		}
		rings[c.Ring] = true
	}
	if !slices.Equal(rows, names) || !slices.Equal(timeline, names) {
		t.Errorf("rendered rows %v and timeline rows %v, want %v", rows, timeline, names)
	}
	if len(windows) != len(read) || slices.ContainsFunc(windows, func(w float64) bool { return w <= 0 }) || nowLine != 1 {
		t.Errorf("support windows drawn %v for %v; now line %d", windows, read, nowLine)
	}
	if len(ringBars) != len(rings) {
		t.Errorf("version spread drawn for rings %v, want %d rings", ringBars, len(rings))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range requests {
		if u != pageURL {
			t.Errorf("the page requested %s", u)
		}
	}
	if !slices.Equal(served, []string{"/fleet.html"}) {
		t.Errorf("the server was asked for %v, want only the page", served)
	}
	if out := os.Getenv("E2E_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Error(err)
		}
	}
}
