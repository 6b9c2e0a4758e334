package fleetrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// Check results.
const (
	CheckPass    = "pass"
	CheckFail    = "fail"
	CheckWait    = "wait"
	CheckUnknown = "unknown"
	CheckSkip    = "skip"
)

// Check is one line of a gate.
type Check struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	Result  string `json:"result"`
	Message string `json:"message"`
	// Until is when a wait that only the clock ends is over (a window
	// opens, a freeze ends, a soak is done); unset for a wait on
	// something else (a ring, an approval, a cap).
	Until *time.Time `json:"until,omitempty"`
}

// GPUResource is the extended resource GPUs are counted by.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// NodeCounts is what one paged node list tells the checks.
type NodeCounts struct {
	Nodes, NotReady, GPUs int
}

// CountNodes lists the nodes (paged) and counts them, those not Ready and
// the allocatable GPUs.
func CountNodes(ctx context.Context, kc kubernetes.Interface) (NodeCounts, error) {
	var n NodeCounts
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return kc.CoreV1().Nodes().List(ctx, opts)
	})
	p.PageSize = 500
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(o runtime.Object) error {
		node := o.(*corev1.Node)
		n.Nodes++
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			n.NotReady++
		}
		if q, ok := node.Status.Allocatable[GPUResource]; ok {
			n.GPUs += int(q.Value())
		}
		return nil
	})
	return n, err
}

// requestTotal429 sums apiserver_request_total over code="429" in a
// /metrics text.
func requestTotal429(text []byte) (float64, error) {
	const name = "apiserver_request_total"
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(preflight.MetricLines(text, name))))
	if err != nil && len(fams) == 0 {
		return 0, err
	}
	sum := 0.0
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "code" && l.GetValue() == "429" {
				sum += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum, nil
}

// haltChecks evaluates the file's halt checks on one cluster. baselineGPUs
// is the GPU count the cluster was planned with; 0 skips gpu-allocatable
// (before the upgrade there is nothing to compare with). rateWindow is the
// time between the two /metrics reads of apiserver-429-rate.
//
// base reads the PromQL values of the cluster's pre-flight baseline for
// the promql check (nil: none recorded).
func haltChecks(ctx context.Context, kc kubernetes.Interface, checks []fleetfile.HaltCheck, cluster string, baselineGPUs int, rateWindow time.Duration, only map[string]bool, base promqlBaseline) []Check {
	var out []Check
	var counts *NodeCounts
	nodes := func() (*NodeCounts, error) {
		if counts != nil {
			return counts, nil
		}
		n, err := CountNodes(ctx, kc)
		if err != nil {
			return nil, err
		}
		counts = &n
		return counts, nil
	}
	for _, h := range checks {
		if only != nil && !only[h.Check] {
			continue
		}
		c := Check{Name: h.Check, Cluster: cluster, Result: CheckPass}
		switch h.Check {
		case "nodes-not-ready":
			n, err := nodes()
			if err != nil {
				c.Result, c.Message = CheckUnknown, "listing nodes: "+err.Error()
				break
			}
			limit := 0
			if h.MaxPercent != nil {
				limit = *h.MaxPercent
			}
			pct := 0.0
			if n.Nodes > 0 {
				pct = 100 * float64(n.NotReady) / float64(n.Nodes)
			}
			c.Message = fmt.Sprintf("%d of %d nodes not Ready (%.1f%%, at most %d%%)", n.NotReady, n.Nodes, pct, limit)
			if pct > float64(limit) {
				c.Result = CheckFail
			}
		case "gpu-allocatable":
			if baselineGPUs <= 0 {
				c.Result, c.Message = CheckSkip, "no GPU baseline to compare with"
				break
			}
			n, err := nodes()
			if err != nil {
				c.Result, c.Message = CheckUnknown, "listing nodes: "+err.Error()
				break
			}
			below := 0
			if h.BelowBaselinePercent != nil {
				below = *h.BelowBaselinePercent
			}
			floor := float64(baselineGPUs) * float64(100-below) / 100
			c.Message = fmt.Sprintf("%s allocatable, %d when planned (at least %.0f)", cli.Plural(n.GPUs, "GPU"), baselineGPUs, floor)
			if float64(n.GPUs) < floor {
				c.Result = CheckFail
			}
		case "apiserver-429-rate":
			limit := 0.0
			if h.PerSecondAbove != nil {
				limit = *h.PerSecondAbove
			}
			read := func() (float64, time.Time, error) {
				// That family only (see deprecations.MetricsPath).
				b, err := kc.CoreV1().RESTClient().Get().AbsPath("/metrics").Param("name[]", "apiserver_request_total").DoRaw(ctx)
				if err != nil {
					return 0, time.Time{}, err
				}
				v, err := requestTotal429(b)
				return v, time.Now(), err
			}
			v1, t1, err := read()
			if err == nil {
				select {
				case <-ctx.Done():
					err = ctx.Err()
				case <-time.After(rateWindow):
				}
			}
			var v2 float64
			var t2 time.Time
			if err == nil {
				v2, t2, err = read()
			}
			if err != nil {
				c.Result, c.Message = CheckUnknown, "reading /metrics: "+err.Error()
				break
			}
			rate := 0.0
			if d := t2.Sub(t1).Seconds(); d > 0 && v2 >= v1 {
				rate = (v2 - v1) / d
			}
			c.Message = fmt.Sprintf("%.2f answers 429 per second over %s (at most %.2f)", rate, t2.Sub(t1).Round(time.Second), limit)
			if rate > limit {
				c.Result = CheckFail
			}
		case "alerts":
			c.Result, c.Message = alertsCheck(ctx, h, cluster)
		case "promql":
			out = append(out, promqlChecks(ctx, h, cluster, base)...)
			continue
		default:
			// verify-regressions and gpu-validate are the verify and
			// gpu-validate steps' own verdicts: the failure budget and the
			// ring gate read them from the state.
			continue
		}
		out = append(out, c)
	}
	return out
}

// alertsCheck halts on the active alerts no silence or inhibition
// suppresses in the check's Alertmanager, filtered by its matchers and,
// with a cluster label, by the cluster's name.
func alertsCheck(ctx context.Context, h fleetfile.HaltCheck, cluster string) (string, string) {
	a := health.AlertmanagerAccess{URL: h.AlertmanagerURL, Matchers: append([]string(nil), h.Matchers...), AllAlerts: h.AllAlerts}
	if h.ClusterLabel != "" {
		a.Matchers = append(a.Matchers, fmt.Sprintf("%s=%q", h.ClusterLabel, cluster))
	}
	alerts, err := health.ReadAlerts(ctx, a)
	if err != nil {
		return CheckUnknown, err.Error()
	}
	if len(alerts) == 0 {
		return CheckPass, fmt.Sprintf("no active alert matching %s", strings.Join(a.QueryMatchers(), ", "))
	}
	msg := fmt.Sprintf("%s: %s", cli.Plural(len(alerts), "active alert"), alerts[0])
	if len(alerts) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(alerts)-1)
	}
	return CheckFail, msg
}
