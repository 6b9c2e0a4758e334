package health

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// PromQLCheck is one PromQL halt check: an expression that evaluates to one
// number, and exactly one bound on it.
type PromQLCheck struct {
	// Name identifies the check in reports and baselines, unique in a list.
	Name string `json:"name"`
	// Expr is the PromQL expression, sent to Prometheus as written. It must
	// return one sample (or a scalar): aggregate with sum(), max() or
	// histogram_quantile() over what it selects. Its window is the range
	// selector's ([5m]).
	Expr string `json:"expr"`
	// MaxRatio: the value may grow to the baseline's value times this ratio
	// (1.5 allows 50% more than before the upgrade).
	MaxRatio *float64 `json:"maxRatio,omitempty"`
	// MinRatio: the value may fall to the baseline's value times this
	// ratio (0.9 allows 10% less than before the upgrade: a bandwidth or a
	// throughput).
	MinRatio *float64 `json:"minRatio,omitempty"`
	// Max: the value may not exceed this.
	Max *float64 `json:"max,omitempty"`
	// Min: the value may not fall below this.
	Min *float64 `json:"min,omitempty"`
	// OnEmpty is the verdict when the query reads no sample or NaN now:
	// "unknown" (the default) or "pass", for a series that exists only
	// where and when there is traffic (a model server's latency histogram
	// on a cluster that serves none, or in a quiet window), so that it
	// does not hold a fleet's gate at UNKNOWN. An unreachable Prometheus,
	// a rejected query or several samples stay UNKNOWN whatever it says.
	OnEmpty string `json:"onEmpty,omitempty"`
}

// OnEmpty values.
const (
	OnEmptyUnknown = "unknown"
	OnEmptyPass    = "pass"
)

// Validate says what is wrong with the check, in the words of the file.
func (c PromQLCheck) Validate() error {
	if strings.TrimSpace(c.Name) == "" {
		return errors.New("name is required")
	}
	if strings.TrimSpace(c.Expr) == "" {
		return fmt.Errorf("check %q: expr is required", c.Name)
	}
	n := 0
	for _, b := range []*float64{c.MaxRatio, c.MinRatio, c.Max, c.Min} {
		if b != nil {
			n++
			if math.IsNaN(*b) || math.IsInf(*b, 0) {
				return fmt.Errorf("check %q: bounds must be finite numbers", c.Name)
			}
		}
	}
	if n != 1 {
		return fmt.Errorf("check %q: give exactly one of maxRatio, minRatio, max or min, got %d", c.Name, n)
	}
	if c.OnEmpty != "" && c.OnEmpty != OnEmptyUnknown && c.OnEmpty != OnEmptyPass {
		return fmt.Errorf("check %q: onEmpty must be %q or %q, got %q", c.Name, OnEmptyUnknown, OnEmptyPass, c.OnEmpty)
	}
	if c.MaxRatio != nil && *c.MaxRatio <= 0 {
		return fmt.Errorf("check %q: maxRatio must be positive, got %s", c.Name, FormatValue(*c.MaxRatio))
	}
	if c.MinRatio != nil && *c.MinRatio <= 0 {
		return fmt.Errorf("check %q: minRatio must be positive, got %s", c.Name, FormatValue(*c.MinRatio))
	}
	return nil
}

// Ratio says the check is judged against the baseline's value.
func (c PromQLCheck) Ratio() bool { return c.MaxRatio != nil || c.MinRatio != nil }

// Bound is the check's bound in words: "at most 1.5 x baseline",
// "at most 0.5", "at least 8".
func (c PromQLCheck) Bound() string {
	switch {
	case c.MaxRatio != nil:
		return "at most " + FormatValue(*c.MaxRatio) + " x baseline"
	case c.MinRatio != nil:
		return "at least " + FormatValue(*c.MinRatio) + " x baseline"
	case c.Max != nil:
		return "at most " + FormatValue(*c.Max)
	case c.Min != nil:
		return "at least " + FormatValue(*c.Min)
	}
	return "no bound"
}

// ValidatePromQLChecks validates each check and that names are unique.
func ValidatePromQLChecks(checks []PromQLCheck) error {
	if len(checks) == 0 {
		return errors.New("no check: want a list of {name, expr, and one of maxRatio, minRatio, max, min}")
	}
	seen := map[string]bool{}
	for i, c := range checks {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("check %d: %w", i+1, err)
		}
		if seen[c.Name] {
			return fmt.Errorf("check %d: name %q used twice", i+1, c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// ParsePromQLChecks reads a YAML (or JSON) list of checks, rejecting
// unknown fields, and validates it.
func ParsePromQLChecks(data []byte) ([]PromQLCheck, error) {
	var checks []PromQLCheck
	if err := yaml.UnmarshalStrict(data, &checks); err != nil {
		return nil, fmt.Errorf("want a YAML list of {name, expr, maxRatio|max|min}: %v", err)
	}
	if err := ValidatePromQLChecks(checks); err != nil {
		return nil, err
	}
	return checks, nil
}

// LoadPromQLChecks reads and validates a checks file.
func LoadPromQLChecks(path string) ([]PromQLCheck, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	checks, err := ParsePromQLChecks(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return checks, nil
}

// PrometheusAccess says where Prometheus' HTTP API is. The URL is reached
// directly: no cluster credentials are used.
type PrometheusAccess struct {
	// URL is Prometheus' base URL (http://prometheus.monitoring:9090), the
	// API under /api/v1.
	URL string `json:"url"`
	// Timeout bounds each query (30 s when 0).
	Timeout time.Duration `json:"-"`
	// Client is the HTTP client (a default one when nil).
	Client *http.Client `json:"-"`
}

// PromQLResult is one check and the value its query returned now.
type PromQLResult struct {
	PromQLCheck
	// Value is the single sample's value (nil when not read).
	Value *float64 `json:"value,omitempty"`
	// Unread says why there is no value: Prometheus unreachable, the
	// query rejected, no sample or several.
	Unread string `json:"unread,omitempty"`
	// Empty says the query was answered with no sample or NaN (the case
	// OnEmpty decides).
	Empty bool `json:"empty,omitempty"`
}

// emptyError is an answer with no number in it: no sample, or NaN.
type emptyError struct{ msg string }

func (e emptyError) Error() string { return e.msg }

// ValidatePrometheusURL checks that u is http(s)://HOST[:PORT][/PATH].
func ValidatePrometheusURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("Prometheus URL %q: want http(s)://HOST[:PORT][/PATH]", u)
	}
	return nil
}

// QueryOne runs expr as an instant query at the current time through
// Prometheus' HTTP API (GET /api/v1/query, prometheus@v0.315.1
// docs/querying/api.md "Instant queries") with client_golang's API client,
// and returns the one number it evaluates to: the value of a scalar, or of
// an instant vector of exactly one sample. No sample, several, a NaN, an
// infinity or another result type is an error that says so.
func QueryOne(ctx context.Context, a PrometheusAccess, expr string) (float64, error) {
	if a.URL == "" {
		return 0, errors.New("no Prometheus URL")
	}
	if err := ValidatePrometheusURL(a.URL); err != nil {
		return 0, err
	}
	c, err := promapi.NewClient(promapi.Config{Address: strings.TrimRight(a.URL, "/"), Client: a.Client})
	if err != nil {
		return 0, fmt.Errorf("Prometheus at %s: %w", redact(a.URL), err)
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, _, err := promv1.NewAPI(c).Query(ctx, expr, time.Now(), promv1.WithTimeout(timeout))
	if err != nil {
		var pe *promv1.Error
		if errors.As(err, &pe) && pe.Type == promv1.ErrBadData {
			return 0, fmt.Errorf("Prometheus at %s rejected the query (check the expression): %s", redact(a.URL), pe.Msg)
		}
		return 0, fmt.Errorf("Prometheus at %s: %w", redact(a.URL), err)
	}
	return oneValue(v)
}

// oneValue is the single number of a query result.
func oneValue(v model.Value) (float64, error) {
	var f float64
	switch r := v.(type) {
	case *model.Scalar:
		f = float64(r.Value)
	case model.Vector:
		switch len(r) {
		case 0:
			return 0, emptyError{"no sample: the expression selects no series now (check the metric name and labels, or that Prometheus scrapes them)"}
		case 1:
			f = float64(r[0].Value)
		default:
			ls := make([]string, 0, 3)
			for i, s := range r {
				if i == 3 {
					ls = append(ls, "...")
					break
				}
				ls = append(ls, s.Metric.String())
			}
			return 0, fmt.Errorf("%d samples (%s), want one: aggregate with sum(), max() or histogram_quantile()", len(r), strings.Join(ls, ", "))
		}
	default:
		return 0, fmt.Errorf("the expression returns a %s, want an instant vector of one sample or a scalar", v.Type())
	}
	if math.IsNaN(f) {
		return 0, emptyError{"the value is NaN (a ratio or quantile over no events)"}
	}
	if math.IsInf(f, 0) {
		// Not empty: a division by zero, or histogram_quantile with a
		// quantile above 1 (v0.315.1 answers +Inf, recorded), so onEmpty: pass must not pass
		// it. Nor is it a number to record: JSON has no infinity. A
		// quantile that falls in the +Inf bucket is not +Inf: "If a
		// quantile is located in the highest bucket, the upper bound of
		// the second highest bucket is returned" (Prometheus v0.315.1
		// docs/querying/functions.md, histogram_quantile; held by
		// TestHistogramQuantileTopBucket against its recorded answers), so
		// a latency past the highest finite bound reads as that bound.
		return 0, fmt.Errorf("the value is %s (a division by zero, or histogram_quantile of a quantile above 1): no number to compare", FormatValue(f))
	}
	return f, nil
}

// ReadPromQL runs each check's query, in order; a check whose query gives
// no single number carries the reason in Unread.
func ReadPromQL(ctx context.Context, a PrometheusAccess, checks []PromQLCheck) []PromQLResult {
	out := make([]PromQLResult, 0, len(checks))
	for _, c := range checks {
		r := PromQLResult{PromQLCheck: c}
		v, err := QueryOne(ctx, a, c.Expr)
		if err != nil {
			r.Unread = err.Error()
			r.Empty = errors.As(err, new(emptyError))
		} else {
			r.Value = &v
		}
		out = append(out, r)
	}
	return out
}

// Verdicts of Judge.
const (
	PromQLPass    = "pass"
	PromQLFail    = "fail"
	PromQLUnknown = "unknown"
)

// Judge compares the value read now with the check's bound; base is the
// value the baseline recorded (nil when none), which only maxRatio needs.
// No value now, or no baseline for maxRatio, is unknown with the reason,
// never a pass. The message names the value, the baseline and the bound.
func Judge(now PromQLResult, base *float64) (string, string) {
	c := now.PromQLCheck
	if now.Value == nil {
		why := now.Unread
		if why == "" {
			why = "not read"
		}
		if now.Empty && c.OnEmpty == OnEmptyPass {
			return PromQLPass, fmt.Sprintf("%s: %s; onEmpty: pass", c.Name, why)
		}
		return PromQLUnknown, fmt.Sprintf("%s: %s", c.Name, why)
	}
	v := *now.Value
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return PromQLUnknown, fmt.Sprintf("%s: the value is %s: no number to compare", c.Name, FormatValue(v))
	}
	if base != nil && (math.IsInf(*base, 0) || math.IsNaN(*base)) {
		// +Inf x ratio bounds nothing: every value would pass maxRatio.
		return PromQLUnknown, fmt.Sprintf("%s: now %s, the baseline value is %s: nothing to compare with; take a new baseline", c.Name, FormatValue(v), FormatValue(*base))
	}
	baseText := ""
	if base != nil {
		baseText = ", baseline " + FormatValue(*base)
	}
	switch {
	case c.MaxRatio != nil:
		if base == nil {
			return PromQLUnknown, fmt.Sprintf("%s: now %s, no baseline value to compare with (maxRatio %s)", c.Name, FormatValue(v), FormatValue(*c.MaxRatio))
		}
		limit := *base * *c.MaxRatio
		msg := fmt.Sprintf("%s: now %s%s, at most %s (%s x baseline)", c.Name, FormatValue(v), baseText, FormatValue(limit), FormatValue(*c.MaxRatio))
		if v > limit {
			return PromQLFail, msg
		}
		return PromQLPass, msg
	case c.MinRatio != nil:
		if base == nil {
			return PromQLUnknown, fmt.Sprintf("%s: now %s, no baseline value to compare with (minRatio %s)", c.Name, FormatValue(v), FormatValue(*c.MinRatio))
		}
		limit := *base * *c.MinRatio
		msg := fmt.Sprintf("%s: now %s%s, at least %s (%s x baseline)", c.Name, FormatValue(v), baseText, FormatValue(limit), FormatValue(*c.MinRatio))
		if v < limit {
			return PromQLFail, msg
		}
		return PromQLPass, msg
	case c.Max != nil:
		msg := fmt.Sprintf("%s: now %s%s, at most %s", c.Name, FormatValue(v), baseText, FormatValue(*c.Max))
		if v > *c.Max {
			return PromQLFail, msg
		}
		return PromQLPass, msg
	case c.Min != nil:
		msg := fmt.Sprintf("%s: now %s%s, at least %s", c.Name, FormatValue(v), baseText, FormatValue(*c.Min))
		if v < *c.Min {
			return PromQLFail, msg
		}
		return PromQLPass, msg
	}
	return PromQLUnknown, c.Name + ": no bound (maxRatio, minRatio, max or min)"
}

// EmptyAtBaseline says base read check c (same name and expression) as
// empty and c passes on empty: a maxRatio check with a value now then has
// nothing to compare with, which onEmpty: pass accepts.
func EmptyAtBaseline(base []PromQLResult, c PromQLCheck) bool {
	if c.OnEmpty != OnEmptyPass {
		return false
	}
	for _, b := range base {
		if b.Name == c.Name && b.Expr == c.Expr {
			return b.Empty
		}
	}
	return false
}

// EmptyAtBaselineMessage is the verdict's message then.
func EmptyAtBaselineMessage(name string, now float64) string {
	return fmt.Sprintf("%s: now %s, the baseline read no sample or NaN (onEmpty: pass): nothing to compare with", name, FormatValue(now))
}

// BaselineValue is the value base recorded for the check c, matched by
// name and expression, nil when base has none. changed says base has a
// check of that name with another expression: a value of a different
// query is no baseline for a ratio.
func BaselineValue(base []PromQLResult, c PromQLCheck) (v *float64, changed bool) {
	for _, b := range base {
		if b.Name != c.Name {
			continue
		}
		if b.Expr != c.Expr {
			return nil, true
		}
		return b.Value, false
	}
	return nil, false
}

// ExprChangedMessage is the UNKNOWN of a maxRatio check whose expression
// differs from the one its baseline value was read with.
func ExprChangedMessage(name string) string {
	return name + ": expression changed since the baseline; take a new baseline to compare with"
}

// PromQLCommand is the query as a curl command, for a human to run.
func PromQLCommand(a PrometheusAccess, expr string) string {
	return fmt.Sprintf("curl -sG %s/api/v1/query --data-urlencode %s", strings.TrimRight(redact(a.URL), "/"), ShellQuote("query="+expr))
}

// FormatValue prints a value the way the checks' messages do.
func FormatValue(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		return p.Redacted()
	}
	return u
}

// ShellQuote quotes s for a POSIX shell, for the commands the gates print.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
