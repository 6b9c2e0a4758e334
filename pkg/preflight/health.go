package preflight

import (
	"context"
	"net/url"
	"sync"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// The health gates read the systems operators already run (etcd itself,
// Alertmanager, Prometheus) and prove that workloads still run (a
// synthetic app deployed, called and deleted), reach
// their identity and stay fenced by network policy. Each runs only when
// asked (HealthOptions), after the built-in gates; preflight records what
// it read in Evidence.Health and verify compares (verifyHealth).
const (
	GateEtcdQuorum = "etcd-quorum"
	GateAlerts     = "alerts"
	GatePromQL     = "promql"
)

// HealthOptions say which health gates run and how they reach their source.
type HealthOptions struct {
	// EtcdQuorum runs the etcd-quorum gate.
	EtcdQuorum bool
	// Etcd reaches etcd's client port; with no Endpoints they are read from
	// the kube-apiserver pod's --etcd-servers.
	Etcd health.EtcdAccess
	// EtcdMaxLag is the raft entries a member may be behind the leader
	// (health.DefaultEtcdMaxLag when 0).
	EtcdMaxLag uint64
	// Alerts runs the alerts gate against Alertmanager.
	Alerts bool
	// Alertmanager is where the alerts gate reads and which alerts count.
	Alertmanager health.AlertmanagerAccess
	// PromQL runs the promql gate against Prometheus.
	PromQL bool
	// Prometheus is where the promql gate queries.
	Prometheus health.PrometheusAccess
	// PromQLChecks are the checks it runs.
	PromQLChecks []health.PromQLCheck
	// SyntheticApp runs the synthetic-app gate (probeapp.go): it creates a
	// pod and a Service and deletes them.
	SyntheticApp bool
	// ProbeApp says what the probe app runs, where, and whether only as a
	// dry run.
	ProbeApp health.ProbeAppOptions
	// NetworkPolicy runs the network-policy gate (netpol.go).
	NetworkPolicy bool
	// ProbeNetwork has the network-policy gate prove a deny denies and an
	// allow allows with two pods in a scratch namespace
	// (health.RunNetworkProbe); NetworkProbe says how.
	ProbeNetwork bool
	NetworkProbe health.NetworkProbeOptions
	// WorkloadIdentity runs the workload-identity gate (identity.go): a
	// dry-run pod per ServiceAccount with an identity binding.
	WorkloadIdentity bool
	// EKSPodIdentity, with a Cluster, has the workload-identity gate list
	// that EKS cluster's Pod Identity associations too.
	EKSPodIdentity health.EKSPodIdentityAccess
	// EKSClient replaces the client built from the SDK's default
	// configuration (tests).
	EKSClient health.EKSPodIdentityAPI
}

// HealthEvidence is what the health gates read, saved with the baseline.
type HealthEvidence struct {
	// Etcd is the etcd quorum as read (nil when not read).
	Etcd *health.EtcdQuorum `json:"etcd,omitempty"`
	// EtcdMaxLag is the threshold it was judged with.
	EtcdMaxLag uint64 `json:"etcdMaxLag,omitempty"`
	// EtcdAccess is how it was read (endpoints and certificate paths), for
	// verify to read it again the same way.
	EtcdAccess *health.EtcdAccess `json:"etcdAccess,omitempty"`
	// Alerts are the active alerts read (empty when none fired).
	Alerts []health.Alert `json:"alerts,omitempty"`
	// Alertmanager is where they were read and with which matchers (nil
	// when the alerts gate did not run).
	Alertmanager *health.AlertmanagerAccess `json:"alertmanager,omitempty"`
	// PromQL are the PromQL checks with the values read (each check's
	// definition travels with its value, for verify to run it again).
	PromQL []health.PromQLResult `json:"promql,omitempty"`
	// Prometheus is where they were read (nil when the promql gate did
	// not run).
	Prometheus *health.PrometheusAccess `json:"prometheus,omitempty"`
	// ProbeApp is what the synthetic-app gate found (nil when it did not
	// run); ProbeAppOptions how it ran, for verify to run it again.
	ProbeApp        *health.ProbeAppResult  `json:"probeApp,omitempty"`
	ProbeAppOptions *health.ProbeAppOptions `json:"probeAppOptions,omitempty"`
	// NetworkPolicy is what the network-policy gate read (nil when it did
	// not run).
	NetworkPolicy *NetworkPolicyEvidence `json:"networkPolicy,omitempty"`
	// WorkloadIdentity is what the workload-identity gate read (nil when
	// it did not run).
	WorkloadIdentity *WorkloadIdentityEvidence `json:"workloadIdentity,omitempty"`
	// Unread says, per gate, what could not be read.
	Unread map[string]string `json:"unread,omitempty"`
}

// healthGateOrder is the order of the health gates the options ask for.
func (r *Runner) healthGateOrder() []string {
	var out []string
	if r.Health.EtcdQuorum {
		out = append(out, GateEtcdQuorum)
	}
	if r.Health.Alerts {
		out = append(out, GateAlerts)
	}
	if r.Health.PromQL {
		out = append(out, GatePromQL)
	}
	if r.Health.SyntheticApp {
		out = append(out, GateProbeApp)
	}
	if r.Health.NetworkPolicy {
		out = append(out, GateNetworkPolicy)
	}
	if r.Health.WorkloadIdentity {
		out = append(out, GateWorkloadIdentity)
	}
	return out
}

// healthGates returns the health gates asked for, each storing its evidence
// in ev.Health under mu; inv waits for the inventory (nil when it failed).
func (r *Runner) healthGates(ev *Evidence, mu *sync.Mutex, inv func() *skew.Inventory) map[string]func(context.Context) Gate {
	order := r.healthGateOrder()
	if len(order) == 0 {
		return nil
	}
	he := &HealthEvidence{}
	ev.Health = he
	unread := func(name string, g Gate) {
		if g.Status == StatusUnknown {
			if he.Unread == nil {
				he.Unread = map[string]string{}
			}
			he.Unread[name] = g.Message
		}
	}
	gates := map[string]func(context.Context) Gate{}
	if r.Health.EtcdQuorum {
		gates[GateEtcdQuorum] = func(ctx context.Context) Gate {
			g, q, acc := r.etcdQuorumGate(ctx, inv)
			mu.Lock()
			defer mu.Unlock()
			he.Etcd, he.EtcdMaxLag, he.EtcdAccess = q, r.etcdMaxLag(), acc
			unread(GateEtcdQuorum, g)
			return g
		}
	}
	if r.Health.Alerts {
		gates[GateAlerts] = func(ctx context.Context) Gate {
			g, alerts := r.alertsGate(ctx)
			mu.Lock()
			defer mu.Unlock()
			acc := r.Health.Alertmanager
			if u, err := url.Parse(acc.URL); err == nil && u.User != nil {
				// Never store a password in the baseline.
				acc.URL = u.Redacted()
			}
			he.Alerts, he.Alertmanager = alerts, &acc
			unread(GateAlerts, g)
			return g
		}
	}
	if r.Health.PromQL {
		gates[GatePromQL] = func(ctx context.Context) Gate {
			g, res := r.promqlGate(ctx)
			mu.Lock()
			defer mu.Unlock()
			acc := r.Health.Prometheus
			if u, err := url.Parse(acc.URL); err == nil && u.User != nil {
				acc.URL = u.Redacted()
			}
			// Each check's UNKNOWN is its own verify item (verifyPromQL),
			// so the gate is not listed in Unread.
			he.PromQL, he.Prometheus = res, &acc
			return g
		}
	}
	if r.Health.SyntheticApp {
		gates[GateProbeApp] = func(ctx context.Context) Gate {
			g, res := r.probeAppGate(ctx)
			mu.Lock()
			defer mu.Unlock()
			// Its UNKNOWN is its own verify item (verifyProbeApp), so the
			// gate is not listed in Unread.
			o := r.Health.ProbeApp
			he.ProbeApp, he.ProbeAppOptions = res, &o
			return g
		}
	}
	if r.Health.NetworkPolicy {
		gates[GateNetworkPolicy] = func(ctx context.Context) Gate {
			g, np := r.networkPolicyGate(ctx)
			g = r.withProbe(ctx, g, np)
			mu.Lock()
			defer mu.Unlock()
			// What it could not read is its own verify item
			// (verifyNetworkPolicy).
			he.NetworkPolicy = np
			return g
		}
	}
	if r.Health.WorkloadIdentity {
		gates[GateWorkloadIdentity] = func(ctx context.Context) Gate {
			g, wi := r.workloadIdentityGate(ctx)
			mu.Lock()
			defer mu.Unlock()
			// What it could not read is its own verify item
			// (verifyWorkloadIdentity).
			he.WorkloadIdentity = wi
			return g
		}
	}
	return gates
}

// Regression kinds of the health gates.
const (
	RegEtcdQuorum   = "etcd-quorum"
	RegHealthUnread = "health-unread"
	RegAlert        = "alert"
	RegPromQL       = "promql"
)

// verifyHealth compares the health evidence: an etcd problem now is a
// FAIL whether or not the baseline had it; the other sources' problems are
// regressions as each source's verify says; a source read at the baseline
// and not now is UNKNOWN.
func verifyHealth(base, now Evidence) []Regression {
	b, n := base.Health, now.Health
	if n == nil {
		return nil
	}
	var out []Regression
	if n.Etcd != nil {
		// Every problem is a FAIL, whether or not the baseline had it: an
		// alarm (NOSPACE leaves etcd read-only, CORRUPT unsafe), an even
		// member count, a member down or behind is no state to go on
		// upgrading in; the baseline only says it is not new.
		had := map[string]bool{}
		if b != nil && b.Etcd != nil {
			for _, p := range b.Etcd.Problems(b.EtcdMaxLag) {
				had[p] = true
			}
		}
		for _, p := range n.Etcd.Problems(n.EtcdMaxLag) {
			msg := p
			if had[p] {
				msg += " (already so at the baseline)"
			}
			out = append(out, Regression{Kind: RegEtcdQuorum, Status: StatusFail, Object: "etcd", Message: msg, Command: etcdQuorumCommand(n.EtcdAccess)})
		}
	}
	out = append(out, verifyAlerts(b, n)...)
	out = append(out, verifyPromQL(b, n)...)
	out = append(out, verifyProbeApp(b, n)...)
	if b != nil {
		out = append(out, verifyNetworkPolicy(b.NetworkPolicy, n.NetworkPolicy)...)
		out = append(out, verifyWorkloadIdentity(b.WorkloadIdentity, n.WorkloadIdentity)...)
	}
	if b != nil {
		for gate, why := range n.Unread {
			if _, was := b.Unread[gate]; !was {
				out = append(out, Regression{Kind: RegHealthUnread, Status: StatusUnknown, Object: gate,
					Message: gate + " was read at the baseline and cannot be read now: " + why})
			}
		}
	}
	return out
}
