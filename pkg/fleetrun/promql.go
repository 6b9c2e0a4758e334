package fleetrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// promqlBaseline reads the PromQL values a cluster's pre-flight baseline
// recorded; ok is false while no baseline is recorded yet.
type promqlBaseline func(context.Context) (values []health.PromQLResult, ok bool, err error)

// promqlBaselineOf reads the baseline the cluster's first preflight step
// saved in the store (the whole `skew preflight --save` report).
func (p *Programme) promqlBaselineOf(st *ClusterState) promqlBaseline {
	return func(ctx context.Context) ([]health.PromQLResult, bool, error) {
		if st == nil || st.Baseline == "" {
			return nil, false, nil
		}
		b, err := p.Store.Read(ctx, st.Baseline)
		if err != nil {
			return nil, true, fmt.Errorf("reading the pre-flight baseline %s: %w", st.Baseline, err)
		}
		var rep struct {
			Evidence struct {
				Health *struct {
					PromQL []health.PromQLResult `json:"promql"`
				} `json:"health"`
			} `json:"evidence"`
		}
		if err := yaml.Unmarshal(b, &rep); err != nil {
			return nil, true, fmt.Errorf("decoding the pre-flight baseline %s: %w", st.Baseline, err)
		}
		if rep.Evidence.Health == nil {
			return nil, true, nil
		}
		return rep.Evidence.Health.PromQL, true, nil
	}
}

// promqlChecks runs the halt check's queries for one cluster, one Check
// each: an absolute bound is judged now; a ratio one (maxRatio, minRatio) against the value
// the cluster's pre-flight baseline recorded, and skipped before there is
// one. No single value is UNKNOWN, never a pass.
func promqlChecks(ctx context.Context, h fleetfile.HaltCheck, cluster string, base promqlBaseline) []Check {
	u, qs := h.PromQLFor(cluster)
	var values []health.PromQLResult
	recorded, berr := false, error(nil)
	if base != nil {
		values, recorded, berr = base(ctx)
	}
	res := health.ReadPromQL(ctx, health.PrometheusAccess{URL: u}, qs)
	out := make([]Check, 0, len(res))
	for _, r := range res {
		c := Check{Name: h.Check, Cluster: cluster}
		bv, changed := health.BaselineValue(values, r.PromQLCheck)
		verdict, msg := health.Judge(r, bv)
		switch {
		case r.Ratio() && r.Value != nil && berr != nil:
			verdict, msg = health.PromQLUnknown, r.Name+": "+berr.Error()
		case r.Ratio() && r.Value != nil && !recorded:
			verdict, msg = CheckSkip, fmt.Sprintf("%s: now %s, no pre-flight baseline to compare with yet", r.Name, health.FormatValue(*r.Value))
		case r.Ratio() && r.Value != nil && changed:
			verdict, msg = health.PromQLUnknown, health.ExprChangedMessage(r.Name)
		case r.Ratio() && r.Value != nil && bv == nil && health.EmptyAtBaseline(values, r.PromQLCheck):
			verdict, msg = health.PromQLPass, health.EmptyAtBaselineMessage(r.Name, *r.Value)
		case r.Ratio() && r.Value != nil && bv == nil:
			msg += " (the cluster's pre-flight baseline did not record it)"
		}
		c.Result = map[string]string{health.PromQLPass: CheckPass, health.PromQLFail: CheckFail, health.PromQLUnknown: CheckUnknown, CheckSkip: CheckSkip}[verdict]
		c.Message = msg
		out = append(out, c)
	}
	return out
}

// promqlFlags are the skew preflight flags that record the halt check's
// queries in the baseline, with the checks file written into dir; nil when
// the file has no promql halt check.
func promqlFlags(checks []fleetfile.HaltCheck, cluster, dir string) ([]string, error) {
	for _, h := range checks {
		if h.Check != "promql" {
			continue
		}
		u, qs := h.PromQLFor(cluster)
		b, err := yaml.Marshal(qs)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "promql-checks.yaml")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			return nil, err
		}
		return []string{"--prometheus-url", u, "--promql-checks", path}, nil
	}
	return nil, nil
}
