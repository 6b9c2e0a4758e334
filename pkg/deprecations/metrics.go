package deprecations

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// DeprecatedAPIsMetric is the apiserver gauge that is 1 for every deprecated
// API requested since the instance started.
const DeprecatedAPIsMetric = "apiserver_requested_deprecated_apis"

// MetricNote explains the limits of the metric source in reports.
const MetricNote = "the metric is kept per apiserver instance and resets when it restarts"

// ReadMetrics reads the Prometheus text exposition of one apiserver
// instance and returns a finding per apiserver_requested_deprecated_apis
// series. Only the lines of that metric are parsed, so the rest of the
// exposition cannot break the read; instance names the apiserver in
// locations.
func ReadMetrics(r io.Reader, instance string) ([]Finding, error) {
	var filtered bytes.Buffer
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Bytes()
		t := bytes.TrimLeft(l, " \t")
		if bytes.HasPrefix(t, []byte(DeprecatedAPIsMetric)) && (len(t) == len(DeprecatedAPIsMetric) ||
			t[len(DeprecatedAPIsMetric)] == '{' || t[len(DeprecatedAPIsMetric)] == ' ') {
			filtered.Write(t)
			filtered.WriteByte('\n')
			continue
		}
		if bytes.HasPrefix(t, []byte("#")) && bytes.Contains(t, []byte(" "+DeprecatedAPIsMetric+" ")) {
			filtered.Write(t)
			filtered.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics of %s: %w", instance, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&filtered)
	if err != nil {
		return nil, fmt.Errorf("parsing %s of %s: %w", DeprecatedAPIsMetric, instance, err)
	}
	fam := fams[DeprecatedAPIsMetric]
	if fam == nil {
		return nil, nil
	}
	var out []Finding
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		v := 0.0
		switch {
		case m.GetGauge() != nil:
			v = m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			v = m.GetUntyped().GetValue()
		case m.GetCounter() != nil:
			v = m.GetCounter().GetValue()
		}
		if v == 0 || labels["version"] == "" {
			continue
		}
		f := Finding{
			Source: SourceMetrics, Location: "apiserver " + instance,
			APIVersion: apilifecycle.JoinAPIVersion(labels["group"], labels["version"]),
			Resource:   labels["resource"], Subresource: labels["subresource"],
			Detail: MetricNote,
		}
		f.server = &serverLifecycle{removed: labels["removed_release"]}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.Join([]string{out[i].APIVersion, out[i].Resource, out[i].Subresource}, "/") <
			strings.Join([]string{out[j].APIVersion, out[j].Resource, out[j].Subresource}, "/")
	})
	return out, nil
}

// MetricsPath is the apiserver's /metrics path that asks for the named
// metric families only. Prometheus' Go client filters its exposition by
// name[] parameters since v1.24.0 (prometheus/client_golang#1925), which
// kube-apiserver v1.37 is built with: there the answer to
// name[]=apiserver_requested_deprecated_apis is a few hundred bytes
// instead of the 3.6 MB whole exposition that took the apiserver 60 ms of
// CPU to write for each read. An apiserver on an older client ignores the
// parameters and answers everything, which the readers filter themselves.
func MetricsPath(families ...string) string {
	if len(families) == 0 {
		return "/metrics"
	}
	q := url.Values{"name[]": families}
	return "/metrics?" + q.Encode()
}

// MetricsSource fetches the /metrics text of one apiserver instance.
type MetricsSource struct {
	// Instance names the apiserver in reports.
	Instance string
	// Fetch returns the exposition.
	Fetch func(ctx context.Context) (io.ReadCloser, error)
}

// ScrapeMetrics reads apiserver_requested_deprecated_apis from every
// source; a failing instance is returned as a Skipped entry and does not
// stop the others. It fails only when no instance could be read.
func ScrapeMetrics(ctx context.Context, sources []MetricsSource) ([]Finding, []Skipped, error) {
	var (
		out     []Finding
		skipped []Skipped
		lastErr error
		ok      int
	)
	for _, s := range sources {
		body, err := s.Fetch(ctx)
		if err != nil {
			lastErr = fmt.Errorf("reading /metrics of %s: %w", s.Instance, err)
			skipped = append(skipped, Skipped{Source: SourceMetrics, File: s.Instance, Reason: lastErr.Error()})
			continue
		}
		fs, err := ReadMetrics(body, s.Instance)
		body.Close()
		if err != nil {
			lastErr = err
			skipped = append(skipped, Skipped{Source: SourceMetrics, File: s.Instance, Reason: err.Error()})
			continue
		}
		ok++
		out = append(out, fs...)
	}
	if ok == 0 && lastErr != nil {
		return nil, skipped, lastErr
	}
	return out, skipped, nil
}
