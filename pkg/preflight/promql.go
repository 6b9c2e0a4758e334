package preflight

import (
	"context"
	"fmt"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// promqlGate runs each PromQL check against Prometheus (pkg/health): a
// check with an absolute bound (max, min) is judged now; a ratio check
// (maxRatio, minRatio) records its value as the baseline verify compares
// with. A query that
// gives no single number is UNKNOWN with the reason, never a pass.
func (r *Runner) promqlGate(ctx context.Context) (Gate, []health.PromQLResult) {
	a := r.Health.Prometheus
	if len(r.Health.PromQLChecks) == 0 {
		return Gate{Status: StatusUnknown, Message: "no PromQL check: pass --promql-checks FILE"}, nil
	}
	var res []health.PromQLResult
	if a.URL == "" {
		for _, c := range r.Health.PromQLChecks {
			res = append(res, health.PromQLResult{PromQLCheck: c, Unread: "no Prometheus URL: pass --prometheus-url"})
		}
	} else {
		res = health.ReadPromQL(ctx, a, r.Health.PromQLChecks)
	}
	g := Gate{Status: StatusPass}
	var fails, unknowns []string
	var failCmd, unknownCmd string
	for _, c := range res {
		verdict, msg := health.Judge(c, nil)
		if c.Ratio() && c.Value != nil {
			verdict, msg = health.PromQLPass, fmt.Sprintf("%s: %s recorded as the baseline (verify: %s)", c.Name, health.FormatValue(*c.Value), c.Bound())
		}
		switch verdict {
		case health.PromQLFail:
			fails = append(fails, c.Name)
			g.Evidence = append(g.Evidence, "FAIL "+msg)
			if failCmd == "" {
				failCmd = health.PromQLCommand(a, c.Expr)
			}
		case health.PromQLUnknown:
			unknowns = append(unknowns, c.Name)
			g.Evidence = append(g.Evidence, "UNKNOWN "+msg)
			if unknownCmd == "" && a.URL != "" {
				unknownCmd = health.PromQLCommand(a, c.Expr)
			}
		default:
			g.Evidence = append(g.Evidence, "PASS "+msg)
		}
	}
	switch {
	case len(fails) > 0:
		g.Command = failCmd
		g.Status, g.Message = StatusFail, fmt.Sprintf("%d of %s out of bounds, first %s", len(fails), cli.Plural(len(res), "PromQL check"), fails[0])
	case len(unknowns) > 0:
		g.Command = unknownCmd
		g.Status, g.Message = StatusUnknown, fmt.Sprintf("%d of %s gave no single value, first %s", len(unknowns), cli.Plural(len(res), "PromQL check"), unknowns[0])
	default:
		g.Message = cli.Plural(len(res), "PromQL check") + " within bounds or recorded as the baseline"
	}
	return g, res
}

// verifyPromQL judges each check read now against the baseline's value:
// out of bounds is a FAIL naming the baseline and the value now; a check
// that gives no single value now, or a ratio check without a baseline
// value, is UNKNOWN.
func verifyPromQL(b, n *HealthEvidence) []Regression {
	if n.Prometheus == nil {
		return nil
	}
	var base []health.PromQLResult
	if b != nil {
		base = b.PromQL
	}
	var out []Regression
	for _, c := range n.PromQL {
		bv, changed := health.BaselineValue(base, c.PromQLCheck)
		verdict, msg := health.Judge(c, bv)
		if c.Ratio() && c.Value != nil && changed {
			msg = health.ExprChangedMessage(c.Name)
		} else if c.Ratio() && c.Value != nil && bv == nil && health.EmptyAtBaseline(base, c.PromQLCheck) {
			verdict, msg = health.PromQLPass, health.EmptyAtBaselineMessage(c.Name, *c.Value)
		} else if c.Ratio() && c.Value != nil && bv == nil {
			why := "the baseline has no such check"
			for _, x := range base {
				if x.Name == c.Name && x.Unread != "" {
					why = "the baseline could not read it: " + x.Unread
				}
			}
			msg = fmt.Sprintf("%s: now %s, no baseline value to compare with (%s)", c.Name, health.FormatValue(*c.Value), why)
		}
		switch verdict {
		case health.PromQLFail:
			out = append(out, Regression{Kind: RegPromQL, Object: c.Name, Message: msg, Command: health.PromQLCommand(*n.Prometheus, c.Expr)})
		case health.PromQLUnknown:
			out = append(out, Regression{Kind: RegPromQL, Status: StatusUnknown, Object: c.Name, Message: msg, Command: health.PromQLCommand(*n.Prometheus, c.Expr)})
		}
	}
	return out
}
