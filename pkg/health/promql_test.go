package health

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// recordedPrometheus serves the recorded answer of a real Prometheus
// v0.315.1 (testdata/prometheus-v0.315.1-queries.txt) for each query,
// keyed by the expression it was recorded with.
func recordedPrometheus(t *testing.T) (*httptest.Server, *[]string) {
	t.Helper()
	files := map[string]string{
		`sum(up{job="prometheus"})`:                           "one-sample",
		`up{job="absent"}`:                                    "no-sample",
		`up or label_replace(up, "copy", "yes", "job", ".*")`: "several",
		`scalar(sum(up))`:                                     "scalar",
		`rate(up[`:                                            "bad",
		`up[10s]`:                                             "matrix",
		`0/0`:                                                 "nan",
		`vector(1)/0`:                                         "inf",
		`-1/0`:                                                "neg-inf",
		`histogram_quantile(0.99, ` + testHistogram + `)`: "quantile-top-bucket",
		`histogram_quantile(1.5, ` + testHistogram + `)`:  "quantile-above-one",
	}
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		paths = append(paths, r.URL.Path)
		name, ok := files[r.Form.Get("query")]
		if !ok {
			t.Errorf("unexpected query %q", r.Form.Get("query"))
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		b, err := os.ReadFile("testdata/prometheus-v0.315.1-query-" + name + ".json")
		if err != nil {
			t.Error(err)
		}
		w.Header().Set("Content-Type", "application/json")
		if name == "bad" {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &paths
}

func TestQueryOneRecorded(t *testing.T) {
	srv, paths := recordedPrometheus(t)
	a := PrometheusAccess{URL: srv.URL + "/"}
	for _, tc := range []struct {
		expr, want, err string
	}{
		{`sum(up{job="prometheus"})`, "1", ""},
		{`scalar(sum(up))`, "1", ""},
		{`up{job="absent"}`, "", "no sample"},
		{`up or label_replace(up, "copy", "yes", "job", ".*")`, "", `2 samples (up{instance="127.0.0.1:19090", job="prometheus"}, up{copy="yes"`},
		{`rate(up[`, "", "rejected the query (check the expression): invalid parameter \"query\""},
		{`up[10s]`, "", "returns a matrix"},
		{`0/0`, "", "NaN"},
		{`vector(1)/0`, "", "the value is +Inf"},
		{`-1/0`, "", "the value is -Inf"},
	} {
		v, err := QueryOne(context.Background(), a, tc.expr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.err == "" && FormatValue(v) != tc.want:
			t.Errorf("%s = %v, want %s", tc.expr, v, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.expr, err, tc.err)
		}
	}
	for _, p := range *paths {
		if p != "/api/v1/query" {
			t.Errorf("path %s, want /api/v1/query", p)
		}
	}
	srv.Close()
	if _, err := QueryOne(context.Background(), a, "up"); err == nil || !strings.Contains(err.Error(), "Prometheus at "+srv.URL) {
		t.Errorf("Prometheus down: %v", err)
	}
	if _, err := QueryOne(context.Background(), PrometheusAccess{URL: "prometheus:9090"}, "up"); err == nil || !strings.Contains(err.Error(), "want http(s)://") {
		t.Errorf("bad URL: %v", err)
	}
}

func TestReadPromQLAndJudge(t *testing.T) {
	srv, _ := recordedPrometheus(t)
	f := func(v float64) *float64 { return &v }
	checks := []PromQLCheck{
		{Name: "ratio", Expr: `sum(up{job="prometheus"})`, MaxRatio: f(1.5)},
		{Name: "floor", Expr: `scalar(sum(up))`, Min: f(2)},
		{Name: "none", Expr: `up{job="absent"}`, Max: f(10)},
	}
	got := ReadPromQL(context.Background(), PrometheusAccess{URL: srv.URL}, checks)
	if len(got) != 3 || got[0].Value == nil || *got[0].Value != 1 || got[2].Value != nil || !strings.Contains(got[2].Unread, "no sample") {
		t.Fatalf("read: %+v", got)
	}
	for _, tc := range []struct {
		r            PromQLResult
		base         *float64
		verdict, msg string
	}{
		{got[0], f(1), PromQLPass, "ratio: now 1, baseline 1, at most 1.5 (1.5 x baseline)"},
		{got[0], f(0.5), PromQLFail, "ratio: now 1, baseline 0.5, at most 0.75 (1.5 x baseline)"},
		{got[0], nil, PromQLUnknown, "no baseline value"},
		{got[1], nil, PromQLFail, "floor: now 1, at least 2"},
		{got[2], f(1), PromQLUnknown, "none: no sample"},
		{PromQLResult{PromQLCheck: PromQLCheck{Name: "cap", Max: f(1)}, Value: f(1)}, nil, PromQLPass, "cap: now 1, at most 1"},
		{PromQLResult{PromQLCheck: PromQLCheck{Name: "cap", Max: f(1)}, Value: f(1.01)}, nil, PromQLFail, "at most 1"},
	} {
		v, msg := Judge(tc.r, tc.base)
		if v != tc.verdict || !strings.Contains(msg, tc.msg) {
			t.Errorf("Judge(%s, %v) = %s %q, want %s %q", tc.r.Name, tc.base, v, msg, tc.verdict, tc.msg)
		}
	}
}

func TestParsePromQLChecks(t *testing.T) {
	good := "- name: ttft\n  expr: histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))\n  maxRatio: 1.5\n- {name: up, expr: up, min: 1}\n"
	cs, err := ParsePromQLChecks([]byte(good))
	if err != nil || len(cs) != 2 || *cs[0].MaxRatio != 1.5 || *cs[1].Min != 1 {
		t.Fatalf("%+v %v", cs, err)
	}
	for _, tc := range []struct{ in, err string }{
		{"", "no check"},
		{"name: x", "want a YAML list"},
		{"- {name: x, expr: up}", `check 1: check "x": give exactly one of maxRatio, minRatio, max or min, got 0`},
		{"- {name: x, expr: up, max: 1, min: 0}", "got 2"},
		{"- {expr: up, max: 1}", "check 1: name is required"},
		{"- {name: x, max: 1}", `expr is required`},
		{"- {name: x, expr: up, maxRatio: 0}", "maxRatio must be positive"},
		{"- {name: x, expr: up, max: 1}\n- {name: x, expr: up, min: 1}", `check 2: name "x" used twice`},
		{"- {name: x, expr: up, maximum: 1}", `unknown field "maximum"`},
	} {
		if _, err := ParsePromQLChecks([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		}
	}
	if _, err := LoadPromQLChecks("testdata/none.yaml"); err == nil {
		t.Error("a missing file loads")
	}
}

func TestPromQLCommand(t *testing.T) {
	got := PromQLCommand(PrometheusAccess{URL: "http://u:secret@prom:9090/"}, `sum(x{a='b'})`)
	want := `curl -sG http://u:xxxxx@prom:9090/api/v1/query --data-urlencode 'query=sum(x{a='\''b'\''})'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestREADMEChecks: the example checks README.md shows (kept in
// testdata/promql-checks.yaml, which the README examples test feeds to
// --promql-checks) are valid, and README shows them as they are there.
func TestREADMEChecks(t *testing.T) {
	b, err := os.ReadFile("testdata/promql-checks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ParsePromQLChecks(b)
	if err != nil || len(cs) != 5 {
		t.Fatalf("%d checks, %v", len(cs), err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if !strings.Contains(string(readme), "expr: "+c.Expr+"\n") {
			t.Errorf("README does not show check %s as testdata has it: %s", c.Name, c.Expr)
		}
	}
}

// TestOnEmptyPass: onEmpty: pass turns an answer with no sample or NaN
// into a pass, and nothing else: a rejected query stays UNKNOWN.
func TestOnEmptyPass(t *testing.T) {
	srv, _ := recordedPrometheus(t)
	f := func(v float64) *float64 { return &v }
	checks := []PromQLCheck{
		{Name: "absent", Expr: `up{job="absent"}`, Max: f(1), OnEmpty: OnEmptyPass},
		{Name: "nan", Expr: `0/0`, MaxRatio: f(1.2), OnEmpty: OnEmptyPass},
		{Name: "rejected", Expr: `rate(up[`, Max: f(1), OnEmpty: OnEmptyPass},
		{Name: "default", Expr: `up{job="absent"}`, Max: f(1)},
	}
	want := []string{PromQLPass, PromQLPass, PromQLUnknown, PromQLUnknown}
	for i, r := range ReadPromQL(context.Background(), PrometheusAccess{URL: srv.URL}, checks) {
		if v, msg := Judge(r, nil); v != want[i] {
			t.Errorf("%s: %s %q, want %s", r.Name, v, msg, want[i])
		}
	}
	if err := (PromQLCheck{Name: "x", Expr: "up", Max: f(1), OnEmpty: "skip"}).Validate(); err == nil || !strings.Contains(err.Error(), `onEmpty must be "unknown" or "pass"`) {
		t.Errorf("bad onEmpty: %v", err)
	}
	base := []PromQLResult{{PromQLCheck: checks[1], Empty: true, Unread: "the value is NaN"}}
	if !EmptyAtBaseline(base, checks[1]) {
		t.Error("NaN at the baseline with onEmpty: pass: not seen")
	}
	edited := checks[1]
	edited.Expr = "1/0"
	if EmptyAtBaseline(base, edited) {
		t.Error("an edited expression matched the baseline's")
	}
	strict := checks[1]
	strict.OnEmpty = ""
	if EmptyAtBaseline(base, strict) {
		t.Error("onEmpty unset: an empty baseline accepted")
	}
}

// TestMinRatio: a drop below baseline x minRatio fails (an NCCL bus
// bandwidth that fell); no baseline value is UNKNOWN.
func TestMinRatio(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	c := PromQLCheck{Name: "busbw", Expr: "min(nccl_busbw_gbps)", MinRatio: f(0.9)}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Bound() != "at least 0.9 x baseline" || !c.Ratio() {
		t.Errorf("bound %q ratio %v", c.Bound(), c.Ratio())
	}
	for _, tc := range []struct {
		now     float64
		base    *float64
		verdict string
	}{
		{190, f(200), PromQLPass},
		{170, f(200), PromQLFail},
		{170, nil, PromQLUnknown},
	} {
		if v, msg := Judge(PromQLResult{PromQLCheck: c, Value: f(tc.now)}, tc.base); v != tc.verdict {
			t.Errorf("now %v base %v: %s %q, want %s", tc.now, tc.base, v, msg, tc.verdict)
		}
	}
	both := c
	both.Max = f(1)
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "exactly one of maxRatio, minRatio, max or min") {
		t.Errorf("two bounds: %v", err)
	}
}

// testHistogram is a histogram built in PromQL: 10 observations, 5 of
// them above the highest finite bound (le="1").
const testHistogram = `label_replace(vector(0), "le", "0.5", "", "") or label_replace(vector(5), "le", "1", "", "") or label_replace(vector(10), "le", "+Inf", "", "")`

// TestHistogramQuantileTopBucket: a quantile in the +Inf bucket is the
// highest finite bound, not +Inf (Prometheus v0.315.1 answers recorded in
// testdata), so a latency past that bound reads as the bound: a check
// passes while its max is at or above it, and a max below it still fails.
// Only a quantile above 1 gives +Inf, UNKNOWN naming that cause.
func TestHistogramQuantileTopBucket(t *testing.T) {
	srv, _ := recordedPrometheus(t)
	f := func(v float64) *float64 { return &v }
	got := ReadPromQL(context.Background(), PrometheusAccess{URL: srv.URL}, []PromQLCheck{
		{Name: "p99-capped", Expr: `histogram_quantile(0.99, ` + testHistogram + `)`, Max: f(2)},
		{Name: "p99-below-top", Expr: `histogram_quantile(0.99, ` + testHistogram + `)`, Max: f(0.9)},
		{Name: "phi", Expr: `histogram_quantile(1.5, ` + testHistogram + `)`, Max: f(2)},
	})
	if got[0].Value == nil || *got[0].Value != 1 {
		t.Fatalf("quantile in the +Inf bucket: value %v (%s), want 1, the highest finite bound", got[0].Value, got[0].Unread)
	}
	if v, msg := Judge(got[0], nil); v != PromQLPass {
		t.Errorf("max above the highest finite bound: %s %q, want pass (the value is capped there)", v, msg)
	}
	if v, msg := Judge(got[1], nil); v != PromQLFail {
		t.Errorf("max below the highest finite bound: %s %q, want fail", v, msg)
	}
	if v, msg := Judge(got[2], nil); v != PromQLUnknown || !strings.Contains(msg, "a quantile above 1") || strings.Contains(msg, "+Inf bucket") {
		t.Errorf("quantile 1.5: %s %q, want unknown naming a quantile above 1", v, msg)
	}
}

// TestInfinityIsUnknown: Prometheus answers +Inf for a division by zero
// and for histogram_quantile of a quantile above 1 (recorded above). It is no
// number: UNKNOWN with the reason, whatever onEmpty says (it is not an
// empty series), and a baseline of +Inf
// bounds nothing, so a maxRatio check against it is UNKNOWN, not a PASS.
func TestInfinityIsUnknown(t *testing.T) {
	srv, _ := recordedPrometheus(t)
	f := func(v float64) *float64 { return &v }
	got := ReadPromQL(context.Background(), PrometheusAccess{URL: srv.URL}, []PromQLCheck{
		{Name: "ttft", Expr: `vector(1)/0`, Max: f(2), OnEmpty: OnEmptyPass},
		{Name: "floor", Expr: `-1/0`, Min: f(0)},
	})
	for _, r := range got {
		if r.Value != nil || r.Empty {
			t.Errorf("%s: value %v, empty %v; want no value, not empty", r.Name, r.Value, r.Empty)
		}
		if v, msg := Judge(r, nil); v != PromQLUnknown || !strings.Contains(msg, "Inf") {
			t.Errorf("%s: %s %q, want unknown naming the infinity", r.Name, v, msg)
		}
	}
	inf := math.Inf(1)
	for _, c := range []PromQLCheck{{Name: "p99", MaxRatio: f(1.2)}, {Name: "bw", MinRatio: f(0.9)}} {
		v, msg := Judge(PromQLResult{PromQLCheck: c, Value: f(1e6)}, &inf)
		if v != PromQLUnknown || !strings.Contains(msg, "the baseline value is +Inf") {
			t.Errorf("%s against a +Inf baseline: %s %q", c.Name, v, msg)
		}
		if v, _ := Judge(PromQLResult{PromQLCheck: c, Value: &inf}, f(1)); v != PromQLUnknown {
			t.Errorf("%s: +Inf now: %s", c.Name, v)
		}
	}
}
