package fleetreport

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/push"
	"github.com/prometheus/common/expfmt"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Metric names, each a gauge carrying the labels cluster and ring first.
// The _info metrics are constant 1 with their strings in labels, as
// kube-state-metrics' kube_node_info is; times are Unix seconds and
// durations seconds (https://prometheus.io/docs/practices/naming/).
const (
	MetricClusterInfo       = "gpufleet_cluster_info"
	MetricClusterUp         = "gpufleet_cluster_up"
	MetricClusterError      = "gpufleet_cluster_error_info"
	MetricPatchInfo         = "gpufleet_cluster_patch_info"
	MetricPatchLag          = "gpufleet_cluster_patch_lag_seconds"
	MetricPatchesBehind     = "gpufleet_cluster_patches_behind"
	MetricSupportInfo       = "gpufleet_cluster_support_info"
	MetricSupportEnd        = "gpufleet_cluster_support_end_timestamp_seconds"
	MetricMinorsBehind      = "gpufleet_cluster_minors_behind"
	MetricMaxSkew           = "gpufleet_cluster_max_skew_minors"
	MetricPoolsAtEdge       = "gpufleet_cluster_pools_at_skew_edge"
	MetricClusterNodes      = "gpufleet_cluster_nodes"
	MetricClusterGPUs       = "gpufleet_cluster_gpus"
	MetricPoolNodes         = "gpufleet_nodepool_nodes"
	MetricPoolAtEdge        = "gpufleet_nodepool_skew_edge"
	MetricPoolGPUs          = "gpufleet_nodepool_gpus"
	MetricPreflightInfo     = "gpufleet_cluster_preflight_info"
	MetricPreflightTime     = "gpufleet_cluster_preflight_timestamp_seconds"
	MetricCollectedTime     = "gpufleet_cluster_collected_timestamp_seconds"
	maxErrorLabel           = 200
	secondsPerDay           = 24 * 60 * 60
	defaultPushJob          = "gpufleet_fleet_inventory"
	metricsHelpDocReference = " (kubectl skew fleet inventory)"
)

type metric struct {
	desc   *prometheus.Desc
	labels []string
}

func newMetric(name, help string, labels ...string) metric {
	all := append([]string{"cluster", "ring"}, labels...)
	return metric{desc: prometheus.NewDesc(name, help+metricsHelpDocReference, all, nil), labels: all}
}

var metrics = struct {
	info, up, errInfo, patchInfo, patchLag, patches, supportInfo, supportEnd, minors, skew, atEdge, nodes, gpus,
	poolNodes, poolEdge, poolGPUs, pfInfo, pfTime, collected metric
}{
	info:        newMetric(MetricClusterInfo, "A cluster of the fleet, always 1: its context, provider and control-plane version.", "context", "provider", "version"),
	up:          newMetric(MetricClusterUp, "1 when the cluster was read, 0 when it could not be."),
	errInfo:     newMetric(MetricClusterError, "Why a cluster could not be read, always 1: the exit code and the error.", "exit_code", "error"),
	patchInfo:   newMetric(MetricPatchInfo, "The newest patch of the control plane's minor, always 1; lower_bound is true when the lag is at least the value shown.", "version", "latest", "latest_released", "as_of", "lower_bound"),
	patchLag:    newMetric(MetricPatchLag, "How long a newer patch of the control plane's minor has been out (0 when on the newest known); a lower bound when patch_info says so."),
	patches:     newMetric(MetricPatchesBehind, "How many patch releases the control plane is behind the newest of its minor."),
	supportInfo: newMetric(MetricSupportInfo, "The support window of the control plane's minor, always 1: status ok, edge, violation or unknown.", "minor", "status", "end_of_life"),
	supportEnd:  newMetric(MetricSupportEnd, "When patch support of the control plane's minor ends (release calendar)."),
	minors:      newMetric(MetricMinorsBehind, "How many minors the control plane is behind the newest released minor."),
	skew:        newMetric(MetricMaxSkew, "The most minors any component is behind the newest apiserver."),
	atEdge:      newMetric(MetricPoolsAtEdge, "How many node pools have their oldest kubelet exactly at the skew limit."),
	nodes:       newMetric(MetricClusterNodes, "Nodes of the cluster."),
	gpus:        newMetric(MetricClusterGPUs, "Allocatable GPUs of the cluster, every GPU resource."),
	poolNodes:   newMetric(MetricPoolNodes, "Nodes of a pool per kubelet version.", "pool", "kubelet_version"),
	poolEdge:    newMetric(MetricPoolAtEdge, "1 when the pool's oldest kubelet is exactly at the skew limit.", "pool"),
	poolGPUs:    newMetric(MetricPoolGPUs, "Allocatable GPUs of a pool by resource and GPU product label.", "pool", "resource", "product"),
	pfInfo:      newMetric(MetricPreflightInfo, "The saved pre-flight's verdict (ok, warn, unknown, fail, or error when it could not be read), always 1.", "verdict", "target"),
	pfTime:      newMetric(MetricPreflightTime, "When the saved pre-flight read the cluster."),
	collected:   newMetric(MetricCollectedTime, "When the cluster was read."),
}

// collector exposes a report as constant metrics.
type collector struct{ rep *Report }

func (c collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, cl := range c.rep.Clusters {
		emit := func(m metric, v float64, more ...string) {
			ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, v, append([]string{cl.Name, cl.Ring}, more...)...)
		}
		emit(metrics.info, 1, cl.Context, cl.Provider, cl.Version)
		if cl.Error != "" {
			emit(metrics.up, 0)
			emit(metrics.errInfo, 1, strconv.Itoa(cl.ExitCode), truncate(cl.Error, maxErrorLabel))
		} else {
			emit(metrics.up, 1)
			clusterMetrics(cl, emit)
		}
		if p := cl.Preflight; p != nil {
			verdict := p.Verdict
			if p.Error != "" {
				verdict = cli.StatusError.JSONWord()
			}
			emit(metrics.pfInfo, 1, verdict, p.Target)
			if p.CollectedAt != nil {
				emit(metrics.pfTime, float64(p.CollectedAt.Unix()))
			}
		}
	}
}

func clusterMetrics(cl Cluster, emit func(metric, float64, ...string)) {
	if p := cl.Patch; p != nil && p.Latest != "" {
		emit(metrics.patchInfo, 1, cl.Version, p.Latest, p.Released, p.AsOf, strconv.FormatBool(p.AtLeast))
		emit(metrics.patchLag, float64(p.DaysBehind*secondsPerDay))
		emit(metrics.patches, float64(p.PatchesBehind))
	}
	if s := cl.Support; s != nil {
		emit(metrics.supportInfo, 1, s.Minor, string(s.Status), s.EndOfLife)
		if t, err := time.Parse("2006-01-02", s.EndOfLife); err == nil {
			emit(metrics.supportEnd, float64(t.Unix()))
		}
		emit(metrics.minors, float64(s.MinorsBehind))
	}
	emit(metrics.skew, float64(cl.MaxSkew))
	emit(metrics.atEdge, float64(len(cl.PoolsAtEdge)))
	emit(metrics.nodes, float64(cl.Nodes))
	emit(metrics.gpus, float64(cl.GPUs))
	if cl.CollectedAt != nil {
		emit(metrics.collected, float64(cl.CollectedAt.Unix()))
	}
	for _, p := range cl.Pools {
		for _, k := range p.Kubelets {
			emit(metrics.poolNodes, float64(k.Nodes), p.Name, k.Version)
		}
		if p.UnknownKubelets > 0 {
			emit(metrics.poolNodes, float64(p.UnknownKubelets), p.Name, "unknown")
		}
		edge := 0.0
		if p.AtEdge {
			edge = 1
		}
		emit(metrics.poolEdge, edge, p.Name)
		for _, g := range p.GPUs {
			emit(metrics.poolGPUs, float64(g.Allocatable), p.Name, g.Resource, g.Product)
		}
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Registry returns a registry holding the report's metrics.
func Registry(rep *Report) (*prometheus.Registry, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(collector{rep}); err != nil {
		return nil, err
	}
	return reg, nil
}

// WriteMetrics writes the report as OpenMetrics text.
func WriteMetrics(w io.Writer, rep *Report) error {
	reg, err := Registry(rep)
	if err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("gathering the metrics: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		return c.Close()
	}
	return nil
}

// Push sends the report's metrics to a Prometheus Pushgateway at url,
// replacing the metrics of the group job (and fleet, when named), so a
// cluster that left the fleet leaves the gateway with the next push.
func Push(ctx context.Context, url, job string, rep *Report) error {
	reg, err := Registry(rep)
	if err != nil {
		return err
	}
	if job == "" {
		job = defaultPushJob
	}
	p := push.New(url, job).Gatherer(reg)
	if rep.Metadata.Fleet != "" {
		p = p.Grouping("fleet", rep.Metadata.Fleet)
	}
	if err := p.PushContext(ctx); err != nil {
		return fmt.Errorf("pushing to %s: %w", url, err)
	}
	return nil
}
