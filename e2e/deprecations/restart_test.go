//go:build e2e

package deprecationse2e

import (
	"context"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// requestLine matches client-go's -v=6 line for a finished request.
var requestLine = regexp.MustCompile(`url="([^"]+)" status="([^"]*)"`)

// secretList reads a -v=6 request line that lists Helm release Secrets:
// its URL and status ("" when no answer came).
func secretList(line string) (*url.URL, string, bool) {
	m := requestLine.FindStringSubmatch(line)
	if m == nil {
		return nil, "", false
	}
	u, err := url.Parse(m[1])
	if err != nil || !strings.HasSuffix(u.Path, "/secrets") || !strings.Contains(u.Query().Get("fieldSelector"), "helm.sh/release.v1") {
		return nil, "", false
	}
	return u, m[2], true
}

// TestDeprecationsAPIServerRestart restarts kube-apiserver while the Helm
// source is in the middle of its paged lists. The plugin retries the
// refused page from the same continue token and finishes with exactly the
// findings of an uninterrupted scan of the same records, and exit 1.
//
// Once the second page of Secrets is being answered (seen in the -v=6
// log), the plugin is paused (SIGSTOP) while the apiserver stops, and
// resumed while it is down, so its next request meets a dead server
// however fast the machine is; the apiserver then starts again.
func TestDeprecationsAPIServerRestart(t *testing.T) {
	cp := harness.Shared(t)
	ns := cp.Namespace(t)
	fleet := plantHelmFleet(t, cp, []string{ns}, 3000, 4096)
	args := []string{"--kubeconfig", cp.Kubeconfig, "-n", ns, "--source", "helm", "-o", "json"}

	base, baseRep := waitReport(t, startPlugin(t, nil, args...), 5*time.Minute)
	if base.ExitCode != 1 {
		t.Fatalf("uninterrupted scan: want exit 1\n%s", plugintest.LastLines(base.Stderr, 40))
	}
	want := fleet.helmItems(baseRep.Items)
	if len(want) != fleet.Deployed {
		t.Fatalf("uninterrupted scan: %d findings, want the %d planted", len(want), fleet.Deployed)
	}
	t.Logf("uninterrupted scan of %d records: %d findings in %s", fleet.Records, len(want), base.Duration.Round(time.Millisecond))

	// The second page's answer has started: the first is read, the list is
	// mid-way.
	secondPage := newLineWatcher(func(line string) bool {
		u, st, ok := secretList(line)
		return ok && st == "200 OK" && u.Query().Get("continue") != ""
	})
	p := startPlugin(t, secondPage, append(args, "-v=6")...)
	select {
	case line := <-secondPage.matched:
		t.Logf("second page answering: %s", line)
	case <-p.Done():
		t.Fatalf("plugin exited (%d) before its second page of Secrets\n%s", p.ExitCode(), plugintest.LastLines(secondPage.String(), 40))
	case <-time.After(2 * time.Minute):
		t.Fatalf("no second page of Secrets within 2m\n%s", plugintest.LastLines(secondPage.String(), 40))
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pausing the plugin: %v", err)
	}
	began := time.Now()
	cp.StopAPIServer()
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resuming the plugin: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %s", time.Since(began).Round(time.Millisecond))

	res, rep := waitReport(t, p, 5*time.Minute)
	if res.ExitCode != 1 {
		t.Fatalf("scan across an apiserver restart: want exit 1 (removed APIs found)\n%s", plugintest.LastLines(res.Stderr, 60))
	}
	for _, s := range rep.Sources {
		if s.Error != "" {
			t.Errorf("source %s failed: %s", s.Name, s.Error)
		}
	}
	if d := cmp.Diff(want, fleet.helmItems(rep.Items)); d != "" {
		t.Errorf("findings across the restart differ from the uninterrupted scan (-want +got):\n%s", d)
	}
	if len(rep.Items) != len(baseRep.Items) {
		t.Errorf("%d items across the restart, %d without", len(rep.Items), len(baseRep.Items))
	}

	// The failed page is retried from the continue token it had (or from
	// the first page when the server no longer accepts the token). The
	// failed request is the last list of Secrets logged before the first
	// retry (its status is logged as soon as headers arrive, or empty when
	// the connection was refused); its retry is the first answered after.
	lines := strings.Split(res.Stderr, "\n")
	retry := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "warning: list of Helm release Secrets failed, retry ")
	})
	if retry < 0 {
		t.Fatalf("stderr shows no retry of the Secrets list\n%s", plugintest.LastLines(res.Stderr, 60))
	}
	t.Logf("retry: %s", lines[retry])
	var failed, after *url.URL
	for i, l := range lines {
		u, status, ok := secretList(l)
		switch {
		case !ok:
		case i < retry:
			failed = u
		case after == nil && status == "200 OK":
			after = u
		}
	}
	switch {
	case failed == nil || after == nil:
		t.Errorf("no list of Secrets on both sides of the retry\n%s", plugintest.LastLines(res.Stderr, 60))
	case strings.Contains(res.Stderr, "continue token expired"):
		t.Logf("continue token expired across the restart; listed again from the first page")
	case failed.Query().Get("continue") == "":
		t.Errorf("the failed list of Secrets was a first page; the test needs the restart mid-list:\n%s", failed)
	case after.Query().Get("continue") != failed.Query().Get("continue"):
		t.Errorf("the retried list did not resume from its continue token:\nfailed:  %s\nretried: %s", failed, after)
	default:
		t.Logf("retried with the same continue token %q", after.Query().Get("continue"))
	}
}
