package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// TestBlobStoreVersityGW runs the store's contracts on a real S3 server
// that checks conditional writes: the Versity S3 Gateway v1.8.0 with its
// posix backend, built by `e2e/tools/build.sh versitygw` (e2e/fleet builds
// it and runs every store there). Of concurrent Updates from one ETag
// exactly one wins and the rest get 412, mapped to ErrConflict.
func TestBlobStoreVersityGW(t *testing.T) {
	s, srv := versityStore(t, "unit")
	storeContract(t, s)
	casContract(t, s)
	if t.Failed() {
		t.Log(srv.Log(4000))
	}
}

// TestRunnersRaceOnOneStepVersityGW is TestRunnersRaceOnOneStep with the
// store on versitygw: the claim's If-Match is what lets one runner in.
func TestRunnersRaceOnOneStepVersityGW(t *testing.T) {
	s, srv := versityStore(t, "race")
	h := newHarness(t, nil)
	if _, err := FreezePlan(context.Background(), s, h.p.Plan, false); err != nil {
		t.Fatal(err)
	}
	h.p.Store = s
	raceOneStep(t, h)
	if t.Failed() {
		t.Log(srv.Log(4000))
	}
}

// versityStore starts versitygw for the test and opens a store on it,
// skipping the test when the binary is not built.
func versityStore(t *testing.T, prefix string) (Store, *localcluster.S3Server) {
	t.Helper()
	bin := localcluster.VersityGWIn(localcluster.CacheDir())
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("versitygw is not built (%v): run e2e/tools/build.sh versitygw", err)
	}
	ctx := context.Background()
	srv, err := localcluster.StartVersityGW(ctx, bin, t.TempDir(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": localcluster.S3AccessKey, "AWS_SECRET_ACCESS_KEY": localcluster.S3SecretKey, "AWS_REGION": "us-east-1",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
		// As e2e/fleet runs: no response checksums, so a GetObject
		// whose ETag is not its body's (versitygw reads the two apart)
		// is caught by the store's own ETag check, not the SDK's.
		"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
	} {
		t.Setenv(k, v)
	}
	s, err := OpenStore(ctx, "s3://fleet/"+prefix+"?endpoint="+srv.Endpoint+"&use_path_style=true&disable_https=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, srv
}

// TestBlobStoreRetriesTransientFailures puts a proxy in front of versitygw
// that answers the first PutObjects with 503 SlowDown and 409
// ConditionalRequestConflict (the S3 error documents AWS sends for them),
// and the first GetObject with 500: each is retried (the 409 by the
// store's backoff alone: the SDK's retryer gives up on it, and without the
// store's retries the update fails), and a conditional update still wins
// once and only once.
func TestBlobStoreRetriesTransientFailures(t *testing.T) {
	bin := localcluster.VersityGWIn(localcluster.CacheDir())
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("versitygw is not built (%v): run e2e/tools/build.sh versitygw", err)
	}
	ctx := context.Background()
	srv, err := localcluster.StartVersityGW(ctx, bin, t.TempDir(), "fleet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	target, _ := url.Parse(srv.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	faults := map[string][]int{http.MethodPut: {503, 409}, http.MethodGet: {500}}
	var injected []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		var code int
		if q := faults[r.Method]; len(q) > 0 && strings.Contains(r.URL.Path, "/flaky/") {
			code, faults[r.Method] = q[0], q[1:]
			injected = append(injected, fmt.Sprintf("%s %d", r.Method, code))
		}
		mu.Unlock()
		if code == 0 {
			rp.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		errCode := map[int]string{503: "SlowDown", 409: "ConditionalRequestConflict", 500: "InternalError"}[code]
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(code)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, errCode)
	}))
	t.Cleanup(proxy.Close)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": localcluster.S3AccessKey, "AWS_SECRET_ACCESS_KEY": localcluster.S3SecretKey, "AWS_REGION": "us-east-1",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
		// As e2e/fleet runs: no response checksums, so a GetObject
		// whose ETag is not its body's (versitygw reads the two apart)
		// is caught by the store's own ETag check, not the SDK's.
		"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
	} {
		t.Setenv(k, v)
	}
	s, err := OpenStore(ctx, "s3://fleet/flaky?endpoint="+proxy.URL+"&use_path_style=true&disable_https=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	v1, err := s.Update(ctx, "k.json", []byte("one"), "")
	if err != nil {
		t.Fatalf("update through a 503 and a 409: %v (faults %v)", err, injected)
	}
	if _, err := s.Update(ctx, "k.json", []byte("two"), v1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "k.json", []byte("stale"), v1); !errors.Is(err, ErrConflict) {
		t.Fatalf("a stale update after retries: %v", err)
	}
	if b, err := s.Read(ctx, "k.json"); err != nil || string(b) != "two" {
		t.Fatalf("read %q %v", b, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(injected, ",") != "PUT 503,PUT 409,GET 500" {
		t.Fatalf("faults injected: %v", injected)
	}
}
