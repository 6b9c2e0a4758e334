package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const converterURL = "https://convert.example.dev/convert"

// testCRDWithConverter is testCRDObj converting through a webhook.
func testCRDWithConverter(stored ...string) *apiextv1.CustomResourceDefinition {
	crd := testCRDObj(stored...)
	u := converterURL
	crd.Spec.Conversion = &apiextv1.CustomResourceConversion{
		Strategy: apiextv1.WebhookConverter,
		Webhook: &apiextv1.WebhookConversion{
			ClientConfig:             &apiextv1.WebhookClientConfig{URL: &u},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	return crd
}

// timeoutErr is what the client sees when its --request-timeout runs out.
type timeoutErr struct{}

func (timeoutErr) Error() string {
	return "net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
}
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func clientTimeout(verb, name string) error {
	return &url.Error{Op: verb, URL: "https://apiserver/apis/" + testGroup + "/v2/namespaces/ml/widgets/" + name + "?timeout=3s", Err: timeoutErr{}}
}

// streamReset is how a request can fail when the apiserver's own deadline
// fires at the same moment as the client's.
var streamReset = errors.New("stream error: stream ID 1339; INTERNAL_ERROR; received from peer")

func TestIsTimeout(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{clientTimeout("Put", "w"), true},
		{apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0), true},
		{apierrors.NewInternalError(errors.New(`conversion webhook for example.gpufleet.dev/v1, Kind=Widget failed: Post "https://convert.example.dev/convert?timeout=30s": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`)), true},
		{fmt.Errorf("listing widgets: %w", context.DeadlineExceeded), true},
		{errors.New("unexpected error when reading response body. Please retry. Original error: net/http: request canceled (Client.Timeout or context cancellation while reading body)"), true},
		{context.Canceled, false},
		{streamReset, false},
		{apierrors.NewInternalError(errors.New(`conversion webhook for example.gpufleet.dev/v1, Kind=Widget failed: connection refused`)), false},
		{nil, false},
	}
	for _, tc := range cases {
		if got := IsTimeout(tc.err); got != tc.want {
			t.Errorf("IsTimeout(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestMigratorRun_ConversionWebhookTimeout: a CRD whose conversion webhook
// stops answering makes its updates (or its lists) time out. The run stops
// after the retries, on the object or page, with an error naming the
// webhook; the checkpoint holds the first page not done and storedVersions
// is untouched; a later run resumes and finishes.
func TestMigratorRun_ConversionWebhookTimeout(t *testing.T) {
	cases := []struct {
		name string
		// setup makes the webhook hang from some point on.
		setup func(*widgetServer)
		// tries returns how often the failing request was sent.
		tries       func(*widgetServer) int
		wantIn      string
		wantObject  bool
		wantPages   int64
		wantResumed string
	}{
		{
			name: "an update times out",
			setup: func(s *widgetServer) {
				s.failUpdate = func(name string, _ int) error {
					if name == "w-00600" {
						return clientTimeout("Put", name)
					}
					return nil
				}
			},
			tries:       func(s *widgetServer) int { return s.attempts["w-00600"] },
			wantIn:      "rewriting widgets.example.gpufleet.dev ml/w-00600 stopped the migration of widgets.example.gpufleet.dev after",
			wantObject:  true,
			wantPages:   1,
			wantResumed: "c:500",
		},
		{
			name: "the last try of an update is a reset stream",
			setup: func(s *widgetServer) {
				s.failUpdate = func(name string, attempt int) error {
					switch {
					case name != "w-00600":
						return nil
					case attempt < 4:
						return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
					}
					return streamReset
				}
			},
			tries:       func(s *widgetServer) int { return s.attempts["w-00600"] },
			wantIn:      "ml/w-00600 stopped the migration",
			wantObject:  true,
			wantPages:   1,
			wantResumed: "c:500",
		},
		{
			name: "the list of a page times out",
			setup: func(s *widgetServer) {
				s.failList = func(cont string) error {
					if cont == "c:1000" {
						return clientTimeout("Get", "")
					}
					return nil
				}
			},
			tries: func(s *widgetServer) int {
				n := 0
				for _, c := range s.lists {
					if c == "c:1000" {
						n++
					}
				}
				return n
			},
			wantIn:      "migration of widgets.example.gpufleet.dev stopped after 1000 of 1203 objects: listing page 3 of widgets.example.gpufleet.dev (after ml/w-00999): timed out",
			wantPages:   2,
			wantResumed: "c:1000",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWidgetServer(1203, func(int) string { return "v1" })
			tc.setup(srv)
			e := newEnv(testCRDWithConverter("v1", "v2"), srv)
			ns := &noSleep{}
			_, err := newMigrator(e, ns).Run(context.Background(), testCRD)
			var (
				cwe *ConversionWebhookError
				oe  *ObjectError
				se  *StoppedError
			)
			if !errors.As(err, &cwe) || cwe.Target != converterURL {
				t.Fatalf("err = %v, want a *ConversionWebhookError naming %s", err, converterURL)
			}
			if tc.wantObject && !errors.As(err, &oe) || !tc.wantObject && !errors.As(err, &se) {
				t.Fatalf("err = %T %v", err, err)
			}
			msg := err.Error()
			for _, want := range []string{tc.wantIn, "timed out, most likely waiting for the conversion webhook of " + testCRD + " at " + converterURL, "waits up to 30s"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q:\n%s", want, msg)
				}
			}
			// Retry{Attempts: 3}: the first try and three retries, no more.
			if n := tc.tries(srv); n != 4 {
				t.Errorf("the failing request was sent %d times, want 4", n)
			}
			if diff := cmp.Diff([]string{"v1", "v2"}, e.storedVersions()); diff != "" {
				t.Errorf("storedVersions after a stopped run (-want +got):\n%s", diff)
			}
			cp, err := e.store().Load(context.Background(), testCRD)
			if err != nil || cp == nil {
				t.Fatalf("checkpoint = %v, %v", cp, err)
			}
			if cp.Continue != tc.wantResumed || cp.Pages != tc.wantPages || cp.Processed != 500*tc.wantPages || cp.Phase != PhaseMigrating {
				t.Errorf("checkpoint = %+v, want page %d next", cp, tc.wantPages+1)
			}

			if tc.wantObject {
				// Still hanging: a resumed run stops again at the same page
				// (the fake's list of it hangs now too).
				srv.failList = func(cont string) error {
					if cont == tc.wantResumed {
						return clientTimeout("Get", "")
					}
					return nil
				}
				_, err := newMigrator(e, ns).Run(context.Background(), testCRD)
				if err == nil || !strings.Contains(err.Error(), "listing page 2 of widgets.example.gpufleet.dev (resuming from the checkpoint): timed out") {
					t.Errorf("resumed run while the webhook hangs: err = %v", err)
				}
				if again, _ := e.store().Load(context.Background(), testCRD); again == nil || again.Continue != cp.Continue || again.Processed != cp.Processed {
					t.Errorf("checkpoint after a second stop = %+v, want %+v", again, cp)
				}
			}

			// The webhook answers again: the next run resumes there.
			srv.failUpdate, srv.failList, srv.lists = nil, nil, nil
			res, err := newMigrator(e, ns).Run(context.Background(), testCRD)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Resumed || res.Processed != 1203 || srv.lists[0] != tc.wantResumed {
				t.Errorf("resumed result = %+v, lists %v", res, srv.lists)
			}
			if got := srv.storedCounts(); got["v1"] != 0 {
				t.Errorf("objects still at v1: %v", got)
			}
			if diff := cmp.Diff([]string{"v2"}, e.storedVersions()); diff != "" {
				t.Errorf("storedVersions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMigratorRun_TimeoutWithoutConverter: without a conversion webhook a
// timeout is reported as it is.
func TestMigratorRun_TimeoutWithoutConverter(t *testing.T) {
	srv := newWidgetServer(20, func(int) string { return "v1" })
	srv.failUpdate = func(name string, _ int) error {
		if name == "w-00010" {
			return clientTimeout("Put", name)
		}
		return nil
	}
	e := newEnv(testCRDObj("v1", "v2"), srv)
	_, err := newMigrator(e, &noSleep{}).Run(context.Background(), testCRD)
	var oe *ObjectError
	var cwe *ConversionWebhookError
	if !errors.As(err, &oe) || errors.As(err, &cwe) || strings.Contains(err.Error(), "conversion webhook") {
		t.Fatalf("err = %v, want an *ObjectError that does not blame a conversion webhook", err)
	}
}

// TestPreflight_ConversionWebhookTimeout: a conversion webhook that does
// not answer before the run is named in the pre-flight refusal.
func TestPreflight_ConversionWebhookTimeout(t *testing.T) {
	srv := newWidgetServer(5, func(int) string { return "v1" })
	srv.failList = func(string) error { return clientTimeout("Get", "") }
	_, err := preflight(testCRDWithConverter("v1", "v2"), srv)
	var pe *PreflightError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "timed out, most likely waiting for the conversion webhook of "+testCRD+" at "+converterURL) {
		t.Fatalf("err = %v", err)
	}
	if len(srv.updates) != 0 {
		t.Errorf("pre-flight wrote objects: %v", srv.updates)
	}
	// A timeout is an answer: pre-flight reports it at once.
	if len(srv.lists) != 1 {
		t.Errorf("pre-flight listed %d times, want 1", len(srv.lists))
	}
}

func TestConversionWebhookTarget(t *testing.T) {
	svc := testCRDObj()
	svc.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
		ClientConfig: &apiextv1.WebhookClientConfig{Service: &apiextv1.ServiceReference{Namespace: "sys", Name: "conv"}},
	}}
	for _, tc := range []struct {
		crd  *apiextv1.CustomResourceDefinition
		want string
	}{
		{testCRDObj(), ""},
		{testCRDWithConverter(), converterURL},
		{svc, "service sys/conv:443"},
	} {
		if got := ConversionWebhookTarget(tc.crd); got != tc.want {
			t.Errorf("ConversionWebhookTarget = %q, want %q", got, tc.want)
		}
	}
}
