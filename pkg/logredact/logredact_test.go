package logredact

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestBodiesWithheld drives the logger the way client-go's rest package
// does at -v=9 (logBody: V(8), "Response Body", "body", <text>) and checks
// that the body never reaches klog's output while other -v=8 lines do.
func TestBodiesWithheld(t *testing.T) {
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("v", "9")
	klog.SetOutput(&buf)
	t.Cleanup(func() { _ = fs.Set("v", "0"); klog.SetOutput(nil) })

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
