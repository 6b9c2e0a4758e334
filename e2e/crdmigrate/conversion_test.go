//go:build e2e

package crdmigratee2e

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// converter is a loopback HTTPS conversion webhook that converts between
// the fixture's versions by rewriting apiVersion. Once hanging, a review
// holding an object named hangFrom or later (in list order) gets no answer
// until the apiserver gives up on it; reviews of earlier objects are still
// answered, so where the run stops does not depend on timing.
type converter struct {
	mu       sync.Mutex
	hangFrom string
	hanging  bool
	// calls counts reviews, objects the objects in them; hung counts the
	// reviews left unanswered.
	calls, objects, hung int
	release              chan struct{}
	srv                  *httptest.Server
	url                  string
	caPEM                []byte
}

func (c *converter) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	var review apiextv1.ConversionReview
	if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "bad review", http.StatusBadRequest)
		return
	}
	converted := make([]runtime.RawExtension, 0, len(review.Request.Objects))
	hang := false
	c.mu.Lock()
	c.calls++
	c.objects += len(review.Request.Objects)
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			c.mu.Unlock()
			http.Error(rw, "bad object", http.StatusBadRequest)
			return
		}
		name, _ := obj["metadata"].(map[string]any)["name"].(string)
		if c.hanging && name >= c.hangFrom {
			hang = true
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		b, _ := json.Marshal(obj)
		converted = append(converted, runtime.RawExtension{Raw: b})
	}
	if hang {
		c.hung++
	}
	c.mu.Unlock()
	if hang {
		// The apiserver gives up, and closes the connection, after 30s.
		select {
		case <-req.Context().Done():
		case <-c.release:
		}
		return
	}
	review.Response = &apiextv1.ConversionResponse{UID: review.Request.UID, ConvertedObjects: converted, Result: metav1.Status{Status: metav1.StatusSuccess}}
	review.Request = nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

func (c *converter) set(hanging bool) {
	c.mu.Lock()
	c.hanging = hanging
	c.mu.Unlock()
}

// counts returns the reviews, the objects in them and the unanswered reviews.
func (c *converter) counts() (calls, objects, hung int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.objects, c.hung
}

func startConverter(t *testing.T, hangFrom string) *converter {
	t.Helper()
	c := &converter{hangFrom: hangFrom, release: make(chan struct{})}
	c.srv = httptest.NewUnstartedServer(c)
	c.srv.StartTLS()
	c.url = c.srv.URL + "/convert"
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.srv.Certificate().Raw})
	t.Cleanup(func() {
		close(c.release)
		c.srv.Close()
	})
	return c
}

// TestCRDMigrateConversionWebhookTimeout: a conversion webhook that stops
// answering in the middle of a run stops it with exit 4 after a bounded
// number of tries, naming the object (or the page) and the conversion
// webhook that timed out; storedVersions is not trimmed and the checkpoint
// holds the first page not done. Once the webhook answers again, running
// the same command resumes and finishes.
//
// A CRD has no timeoutSeconds for its conversion webhook: the apiserver
// waits a fixed 30s for it, so the run's --request-timeout (3s here) is what
// bounds each try. Reads at v2 of objects stored at v1 go through the
// webhook one object at a time, lists included (the apiserver converts as
// it decodes from etcd), and so does every update of one (the apiserver
// reads the stored object first). The next page is listed while the current
// one is written, so the hang surfaces on an update or on a list depending
// on where it starts: both cases are run.
func TestCRDMigrateConversionWebhookTimeout(t *testing.T) {
	const (
		workers = 8
		retries = 2
	)
	cases := []struct {
		name, group string
		// hangFrom is the first object the webhook hangs on, armAt the
		// pages the checkpoint records when the test arms it. --qps 50
		// with --burst 1 makes a page of 500 updates take 10s or more, so
		// arming lands long before the run gets to hangFrom.
		hangFrom string
		armAt    int64
		// wantPages is the page count the stopped run's checkpoint holds.
		wantPages int64
	}{
		// Armed after page 1, while the updates of page 2 (listed with
		// page 1) work towards w-00750.
		{name: "update", group: "convupdate", hangFrom: "w-00750", armAt: 1, wantPages: 1},
		// Armed when the run starts (after pre-flight, which reads every
		// object): pages 1 and 2 are listed and written, the list of page
		// 3, sent when page 2 starts, hangs.
		{name: "list", group: "convlist", hangFrom: "w-01000", armAt: 0, wantPages: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.group, 1200)
			conv := startConverter(t, tc.hangFrom)
			withWebhook := f.crdAtV2.DeepCopy()
			withWebhook.Spec.Conversion = &apiextv1.CustomResourceConversion{
				Strategy: apiextv1.WebhookConverter,
				Webhook: &apiextv1.WebhookConversion{
					ClientConfig:             &apiextv1.WebhookClientConfig{URL: &conv.url, CABundle: conv.caPEM},
					ConversionReviewVersions: []string{"v1"},
				},
			}
			if err := f.cp.ApplyCRDs(context.Background(), withWebhook); err != nil {
				t.Fatal(err)
			}
			// Put conversion back to None first, so the CRD and namespace
			// can be deleted when the test ends.
			t.Cleanup(func() { _ = f.cp.ApplyCRDs(context.Background(), f.crdAtV2) })
			// Wait until reads at v2 go through the webhook and pre-flight
			// (counting, reading and a dry-run update, all converted)
			// passes, so that the run below gets past it.
			if err := harness.Eventually(context.Background(), "pre-flight through the conversion webhook", 60*time.Second, func(ctx context.Context) (bool, error) {
				_, objects, _ := conv.counts()
				if objects == 0 {
					return false, nil
				}
				r := f.run(t, "run", f.crdName, "--method", "client", "--dry-run=server")
				if r.ExitCode != 0 {
					t.Logf("pre-flight not passing yet: %s", r)
				}
				return r.ExitCode == 0, nil
			}); err != nil {
				t.Fatal(err)
			}

			s := f.start(t, "run", f.crdName, "--method", "client", "--qps", "50", "--burst", "1", "--workers", strconv.Itoa(workers),
				"--retries", strconv.Itoa(retries), "--request-timeout", "3s", "-o", "json")
			f.waitForPages(t, s, tc.armAt)
			conv.set(true)
			armed := time.Now()
			_, _, hungBefore := conv.counts()
			r := s.Wait(t, 3*time.Minute)
			calls, objects, hung := conv.counts()
			hung -= hungBefore
			t.Logf("stopped %s after the webhook was armed; webhook: %d reviews (%d objects) in all, %d unanswered during the run",
				time.Since(armed).Round(time.Millisecond), calls, objects, hung)
			if r.ExitCode != 4 {
				t.Fatalf("run with a conversion webhook hanging midway: want exit 4\n%s", r)
			}
			// Every try of a request that hangs costs one unanswered review:
			// at most one request per worker and the list of the next page,
			// each tried 1+retries times. A run that kept retrying would
			// leave far more.
			if hung < 1 || hung > (workers+1)*(retries+1) {
				t.Errorf("%d reviews went unanswered during the run, want 1..%d", hung, (workers+1)*(retries+1))
			}
			gr := "widgets." + f.group
			stoppedAt := ""
			switch tc.name {
			case "update":
				m := regexp.MustCompile(`rewriting ` + regexp.QuoteMeta(gr+" "+f.ns+"/") + `(w-\d+) stopped the migration`).FindStringSubmatch(r.Stderr)
				if m == nil || m[1] < tc.hangFrom {
					t.Errorf("stderr should name an object from %s on that the update stopped at:\n%s", tc.hangFrom, r.Stderr)
				} else {
					stoppedAt = m[1]
				}
			case "list":
				if want := "listing page 3 of " + gr + " (after " + f.ns + "/w-00999)"; !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr should name the page whose list stopped the run (%q):\n%s", want, r.Stderr)
				}
			}
			for _, want := range []string{
				"timed out, most likely waiting for the conversion webhook of " + f.crdName + " at " + conv.url,
				"hint: kubectl crd-migrate run " + f.crdName,
			} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
				}
			}
			if rep := parseRun(t, r).Items[0]; rep.Outcome != "error" {
				t.Errorf("outcome = %q, want error", rep.Outcome)
			}
			if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
				t.Fatalf("storedVersions after a stopped run = %v, want [v1 v2]", sv)
			}
			cp := f.checkpoint(t)
			if cp == nil || cp.Pages != tc.wantPages || cp.Processed != 500*tc.wantPages || cp.Continue == "" {
				t.Fatalf("checkpoint after the stop = %+v, want page %d next", cp, tc.wantPages+1)
			}
			if stoppedAt != "" && stoppedAt < fmt.Sprintf("w-%05d", 500*cp.Pages) {
				t.Errorf("the run stopped at %s, in a page the checkpoint counts as done (%d pages)", stoppedAt, cp.Pages)
			}
			// Through etcd: the objects the webhook hangs on are still at v1.
			hangIdx, _ := strconv.Atoi(strings.TrimPrefix(tc.hangFrom, "w-"))
			if got := f.storedAt(t); got[f.group+"/v1"] == 0 || got[f.group+"/v1"] > f.objects-hangIdx {
				t.Errorf("objects in etcd by apiVersion after the stop = %v, want 1..%d at v1", got, f.objects-hangIdx)
			}

			if tc.name == "update" {
				// Still hanging: running again passes pre-flight (page 1,
				// which it reads, is at v2 now, and the count comes from
				// the first page's remainingItemCount), resumes, and stops
				// again on the list of page 2, keeping the checkpoint.
				r := f.run(t, "run", f.crdName, "--method", "client", "--retries", "1", "--request-timeout", "3s")
				for _, want := range []string{
					"listing page 2 of " + gr + " (resuming from the checkpoint): timed out, most likely waiting for the conversion webhook of " + f.crdName + " at " + conv.url,
					"hint: kubectl crd-migrate run " + f.crdName,
				} {
					if r.ExitCode != 4 || !strings.Contains(r.Stderr, want) {
						t.Errorf("run while the webhook still hangs: want exit 4 and %q\n%s", want, r)
					}
				}
				if again := f.checkpoint(t); again == nil || again.Continue != cp.Continue || again.Processed != cp.Processed {
					t.Fatalf("checkpoint after the second stop = %+v, want %+v", again, cp)
				}
				if sv := f.storedVersions(t); !slices.Equal(sv, []string{"v1", "v2"}) {
					t.Fatalf("storedVersions after the second stop = %v, want [v1 v2]", sv)
				}
			}

			conv.set(false)
			r = f.run(t, "run", f.crdName, "--method", "client", "--qps", "1000", "--workers", "8", "-o", "json")
			if r.ExitCode != 0 {
				t.Fatalf("run after the webhook answers again: want exit 0\n%s", r)
			}
			if rep := parseRun(t, r).Items[0]; !rep.Resumed || rep.Processed != int64(f.objects) {
				t.Errorf("resumed run = %+v", rep)
			}
			f.assertAllAtV2(t)
		})
	}
}
