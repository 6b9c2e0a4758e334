// Package metricstest reads the fleet report's metrics back in tests:
// exposition text parsed by Prometheus' own decoders (OpenMetrics from -o
// prometheus, the text format from a Pushgateway's /metrics), and series
// looked up by name and labels.
package metricstest

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Families are metric families by name.
type Families map[string]*dto.MetricFamily

// Parse decodes text in format; a parse error fails the test.
func Parse(t testing.TB, text string, format expfmt.Format) Families {
	t.Helper()
	dec := expfmt.NewDecoder(strings.NewReader(text), format)
	fams := Families{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return fams
			}
			t.Fatalf("parsing %s: %v\n%s", format, err, text)
		}
		fams[mf.GetName()] = &mf
	}
}

// OpenMetrics is the format of -o prometheus.
var OpenMetrics = expfmt.NewFormat(expfmt.TypeOpenMetrics)

// Value returns the gauge value of the first series of name whose labels
// include every one of want.
func (f Families) Value(name string, want map[string]string) (float64, bool) {
	mf := f[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// Labels returns each metric's label names.
func (f Families) Labels() map[string][]string {
	out := map[string][]string{}
	for name, mf := range f {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if !slices.Contains(out[name], l.GetName()) {
					out[name] = append(out[name], l.GetName())
				}
			}
		}
	}
	return out
}
