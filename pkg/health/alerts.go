package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// AlertmanagerAccess says where Alertmanager's API v2 is and which alerts
// count.
type AlertmanagerAccess struct {
	// URL is Alertmanager's base URL (http://alertmanager.monitoring:9093),
	// the API under /api/v2.
	URL string `json:"url"`
	// Matchers filter the alerts (`severity="critical"`,
	// `cluster=~"prod-.*"`), in Alertmanager's own matcher syntax: each is
	// sent as a `filter` parameter and parsed by Alertmanager, so what
	// `amtool alert query` accepts works here. All must match.
	Matchers []string `json:"matchers,omitempty"`
	// AllAlerts counts the always-firing alerts too (AlwaysFiringMatcher
	// is added to the query unless it is set).
	AllAlerts bool `json:"allAlerts,omitempty"`
	// Timeout bounds the request (10 s when 0).
	Timeout time.Duration `json:"-"`
	// Client is the HTTP client (http.DefaultClient when nil).
	Client *http.Client `json:"-"`
}

// Alert is one active alert.
type Alert struct {
	// Fingerprint is Alertmanager's hash of the label set: the same alert
	// firing again has the same fingerprint.
	Fingerprint string            `json:"fingerprint"`
	Name        string            `json:"alertname"`
	Labels      map[string]string `json:"labels"`
	StartsAt    time.Time         `json:"startsAt"`
	// Summary is the summary (or description) annotation.
	Summary string `json:"summary,omitempty"`
}

// String is the alert in one line: its name, its other labels and since
// when it fires.
func (a Alert) String() string {
	var ls []string
	for k, v := range a.Labels {
		if k != "alertname" {
			ls = append(ls, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(ls)
	s := fmt.Sprintf("%s{%s} firing since %s", a.Name, strings.Join(ls, ","), a.StartsAt.UTC().Format(time.RFC3339))
	if a.Summary != "" {
		s += ": " + a.Summary
	}
	return s
}

// gettableAlert is the part of Alertmanager's API v2 gettableAlert this
// reads (alertmanager@v0.35.0 api/v2/openapi.yaml, definitions
// gettableAlert, alert and alertStatus).
type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Fingerprint string            `json:"fingerprint"`
	StartsAt    time.Time         `json:"startsAt"`
	Status      struct {
		State       string   `json:"state"`
		SilencedBy  []string `json:"silencedBy"`
		InhibitedBy []string `json:"inhibitedBy"`
		MutedBy     []string `json:"mutedBy"`
	} `json:"status"`
}

// AlwaysFiringMatcher leaves out the alerts that fire all the time by
// design. kube-prometheus-stack (and kube-prometheus, which generates its
// rules) ships them in its general.rules group
// (charts/kube-prometheus-stack/templates/prometheus/rules-1.14/general.rules.yaml
// at kube-prometheus-stack-88.5.3): Watchdog, `expr: vector(1)`, "always
// firing" to prove the alerting pipeline works, and InfoInhibitor, which
// fires beside any severity="info" alert to inhibit it; both severity
// "none". The chart's Alertmanager config routes Watchdog to its "null"
// receiver, which neither silences nor inhibits it, so Alertmanager lists
// it as active and unsuppressed: counted, it would fail every run of the
// gate and hold the fleet's alerts halt for good. AllAlerts keeps them.
const AlwaysFiringMatcher = `alertname!~"Watchdog|InfoInhibitor"`

// QueryMatchers are the matchers sent: Matchers, then AlwaysFiringMatcher
// unless AllAlerts.
func (a AlertmanagerAccess) QueryMatchers() []string {
	ms := append([]string(nil), a.Matchers...)
	if !a.AllAlerts {
		ms = append(ms, AlwaysFiringMatcher)
	}
	return ms
}

// AlertsQuery is the query ReadAlerts sends: GET /api/v2/alerts with
// active=true, silenced=false and inhibited=false (alertmanager@v0.35.0
// api/v2/openapi.yaml, operation getAlerts: silenced and inhibited default
// to true, "If false, excludes silenced/inhibited alerts"), and one filter
// parameter per matcher.
func (a AlertmanagerAccess) AlertsQuery() string {
	q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}}
	for _, m := range a.QueryMatchers() {
		q.Add("filter", m)
	}
	return "/api/v2/alerts?" + q.Encode()
}

// ReadAlerts lists the active alerts that no silence and no inhibition
// suppresses, filtered by the matchers, sorted by name and fingerprint.
func ReadAlerts(ctx context.Context, a AlertmanagerAccess) ([]Alert, error) {
	if a.URL == "" {
		return nil, errors.New("no Alertmanager URL")
	}
	u, err := url.Parse(strings.TrimRight(a.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Alertmanager URL %q: want http(s)://HOST[:PORT][/PATH]", a.URL)
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String()+a.AlertsQuery(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	hc := a.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("Alertmanager at %s: %w", a.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("Alertmanager at %s: %w", a.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		if resp.StatusCode == http.StatusBadRequest {
			return nil, fmt.Errorf("Alertmanager at %s rejected the query (check the matchers %q): %s", a.URL, a.Matchers, msg)
		}
		return nil, fmt.Errorf("Alertmanager at %s: %s: %s", a.URL, resp.Status, msg)
	}
	return parseAlerts(body)
}

// parseAlerts decodes a GET /api/v2/alerts answer, keeping the alerts that
// are not suppressed: neither silenced, inhibited nor muted (the query asks
// Alertmanager for those already; this holds it to them). The mutedBy
// check is defensive: Alertmanager v0.35.0 api/v2/api.go getAlertsHandler passes nil for
// the muted-by list (time-interval muting is not reported there), so it is
// empty in its answers. An unprocessed alert counts: nothing suppresses it
// yet.
func parseAlerts(body []byte) ([]Alert, error) {
	var raw []gettableAlert
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("decoding Alertmanager's alerts: %w", err)
	}
	out := []Alert{}
	for _, r := range raw {
		if r.Status.State == "suppressed" || len(r.Status.SilencedBy)+len(r.Status.InhibitedBy)+len(r.Status.MutedBy) > 0 {
			continue
		}
		s := r.Annotations["summary"]
		if s == "" {
			s = r.Annotations["description"]
		}
		out = append(out, Alert{Fingerprint: r.Fingerprint, Name: r.Labels["alertname"], Labels: r.Labels, StartsAt: r.StartsAt, Summary: s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out, nil
}
