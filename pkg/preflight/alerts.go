package preflight

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// alertsCommand is the request the alerts gate sends, as a curl command.
func alertsCommand(a *health.AlertmanagerAccess) string {
	if a == nil {
		return ""
	}
	cmd := fmt.Sprintf("curl -sG %s/api/v2/alerts -d active=true -d silenced=false -d inhibited=false", strings.TrimRight(a.URL, "/"))
	for _, m := range a.QueryMatchers() {
		cmd += " --data-urlencode " + health.ShellQuote("filter="+m)
	}
	return cmd
}

// alertsGate reads the active alerts no silence or inhibition suppresses
// from Alertmanager's API v2 (pkg/health.ReadAlerts), filtered by the
// matchers, and fails on any. Unreachable or refused: UNKNOWN.
func (r *Runner) alertsGate(ctx context.Context) (Gate, []health.Alert) {
	a := r.Health.Alertmanager
	cmd := alertsCommand(&a)
	if a.URL == "" {
		return Gate{Status: StatusUnknown, Message: "no Alertmanager URL: pass --alertmanager-url", Command: cmd}, nil
	}
	if u, err := url.Parse(a.URL); err == nil && u.User != nil {
		cmd = alertsCommand(&health.AlertmanagerAccess{URL: u.Redacted(), Matchers: a.Matchers, AllAlerts: a.AllAlerts})
	}
	alerts, err := health.ReadAlerts(ctx, a)
	if err != nil {
		return Gate{Status: StatusUnknown, Message: err.Error(), Command: cmd}, nil
	}
	scope := "matching " + strings.Join(a.QueryMatchers(), ", ")
	if len(a.QueryMatchers()) == 0 {
		scope = "(no matcher: every alert counts)"
	}
	if len(alerts) == 0 {
		return Gate{Status: StatusPass, Message: "no active, unsilenced, uninhibited alert " + scope, Command: cmd}, alerts
	}
	ev := make([]string, len(alerts))
	for i, al := range alerts {
		ev[i] = al.String()
	}
	return Gate{Status: StatusFail, Evidence: ev, Command: cmd,
		Message: fmt.Sprintf("%s %s, first %s", cli.Plural(len(alerts), "active alert"), scope, alerts[0].Name)}, alerts
}

// verifyAlerts: an alert firing now that did not fire at the baseline
// (by fingerprint, Alertmanager's hash of its labels) is a regression.
func verifyAlerts(b, n *HealthEvidence) []Regression {
	if n.Alertmanager == nil || n.Unread[GateAlerts] != "" {
		return nil
	}
	had := map[string]bool{}
	if b != nil {
		for _, a := range b.Alerts {
			had[a.Fingerprint] = true
		}
	}
	var out []Regression
	for _, a := range n.Alerts {
		if !had[a.Fingerprint] {
			out = append(out, Regression{Kind: RegAlert, Object: a.Name, Message: "alert firing: " + a.String(), Command: alertsCommand(n.Alertmanager)})
		}
	}
	return out
}
