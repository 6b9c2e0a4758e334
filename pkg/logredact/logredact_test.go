package logredact

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// captureKlog sends klog's output to the returned buffer until the test
// ends; -v is set through the returned flags (0 again afterwards).
func captureKlog(t *testing.T) (*bytes.Buffer, *flag.FlagSet) {
	t.Helper()
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(&buf)
	t.Cleanup(func() { _ = fs.Set("v", "0"); klog.SetOutput(nil) })
	return &buf, fs
}

// TestBodiesWithheld drives the logger the way client-go's rest package
// does at -v=9 (logBody: V(8), "Response Body", "body", <text>) and checks
// that the body never reaches klog's output while other -v=8 lines do.
func TestBodiesWithheld(t *testing.T) {
	buf, fs := captureKlog(t)
	_ = fs.Set("v", "9")

	const canary = "c2VjcmV0LWNhbmFyeQ==" // what a Secret's data looks like on the wire
	ctx := Context(context.Background())
	l := klog.FromContext(ctx)
	if !l.V(8).Enabled() {
		t.Fatal("-v=9 did not enable V(8) through the wrapped logger")
	}
	l.V(8).WithCallDepth(2).Info("Response Body", "body", `{"kind":"Secret","data":{"k":"`+canary+`"}}`)
	l.V(8).Info("Request Body", "body", []byte(canary))
	l.WithValues("verb", "GET").V(8).Info("Response Body", "body", canary)
	l.WithName("x").V(8).Info("Response Body", canary) // a malformed pair
	l.V(6).Info("HTTP", "verb", "GET", "url", "https://k/api/v1/secrets", "status", "200 OK")
	klog.Flush()

	out := buf.String()
	if strings.Contains(out, canary) {
		t.Fatalf("a body reached the log:\n%s", out)
	}
	if n := strings.Count(out, Withheld); n != 4 {
		t.Errorf("want 4 withheld bodies, got %d:\n%s", n, out)
	}
	if !strings.Contains(out, "https://k/api/v1/secrets") {
		t.Errorf("the URL line was lost:\n%s", out)
	}
	if !strings.Contains(out, "logredact_test.go") {
		t.Errorf("call site not reported as the caller's:\n%s", out)
	}

	// -v below 8 logs nothing of the kind.
	buf.Reset()
	_ = fs.Set("v", "7")
	l.V(8).Info("Response Body", "body", canary)
	klog.Flush()
	if buf.Len() != 0 {
		t.Errorf("V(8) logged at -v=7: %s", buf.String())
	}
}

// TestCancelledRequestsQuiet drives the logger the way client-go's rest
// package does when a request's context is cancelled while its body is
// read (transformResponse: Error(err, "Unexpected error when reading
// response body")): nothing below -v=4, the line at -v=4, and other errors
// always.
func TestCancelledRequestsQuiet(t *testing.T) {
	buf, fs := captureKlog(t)

	l := klog.FromContext(Context(context.Background()))
	cancelled := fmt.Errorf("reading body: %w", context.Canceled)
	l.Error(cancelled, "Unexpected error when reading response body")
	l.Error(errors.New("connection reset by peer"), "Unexpected error when reading response body")
	klog.Flush()
	if out := buf.String(); strings.Contains(out, "context canceled") || !strings.Contains(out, "connection reset by peer") {
		t.Errorf("at -v=0 want only the other error:\n%s", out)
	}

	buf.Reset()
	_ = fs.Set("v", "4")
	l.Error(cancelled, "Unexpected error when reading response body")
	klog.Flush()
	if !strings.Contains(buf.String(), "context canceled") {
		t.Errorf("at -v=4 the cancelled request is not logged:\n%s", buf.String())
	}
}
