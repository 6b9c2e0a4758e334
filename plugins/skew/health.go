package skew

import (
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// healthFlags are the flags of the health gates, shared by preflight and
// verify. Verify without them reads each source the way the baseline did.
type healthFlags struct {
	EtcdQuorum      bool
	EtcdEndpoints   []string
	EtcdCACert      string
	EtcdCert        string
	EtcdKey         string
	EtcdMaxLag      uint64
	AlertmanagerURL string
	AlertMatchers   []string
	AllAlerts       bool
	PrometheusURL   string
	PromQLChecks    string
	// The synthetic-app gate's flags.
	SyntheticApp          bool
	SyntheticAppNamespace string
	SyntheticAppImage     string
	SyntheticAppCommand   string
	SyntheticAppPort      int32
	SyntheticAppTimeout   time.Duration
	SyntheticAppDryRun    bool
	// NetworkPolicy is --network-policy.
	NetworkPolicy bool
	// The network probe's flags.
	ProbeNetwork        bool
	ProbeNetworkDryRun  bool
	ProbeNetworkImage   string
	ProbeNetworkTimeout time.Duration
	// WorkloadIdentity is --workload-identity.
	WorkloadIdentity bool
	// EKSCluster and EKSRegion name the EKS cluster whose Pod Identity
	// associations the workload-identity gate lists.
	EKSCluster string
	EKSRegion  string

	promqlChecks []health.PromQLCheck
	cmd          *cobra.Command
}

func (f *healthFlags) addFlags(cmd *cobra.Command) {
	f.cmd = cmd
	f.EtcdMaxLag = health.DefaultEtcdMaxLag
	fs := cmd.Flags()
	fs.BoolVar(&f.EtcdQuorum, "etcd-quorum", f.EtcdQuorum, "Run the etcd-quorum gate: member list (odd count, all started and reachable), raft index lag against the leader, one leader, alarms (NOSPACE, CORRUPT), read with etcd's client. Implied by --etcd-endpoints.")
	fs.StringSliceVar(&f.EtcdEndpoints, "etcd-endpoints", f.EtcdEndpoints, "etcd client URLs (default: the kube-apiserver pod's --etcd-servers).")
	fs.StringVar(&f.EtcdCACert, "etcd-cacert", f.EtcdCACert, "CA bundle of etcd's serving certificate (kubeadm: /etc/kubernetes/pki/etcd/ca.crt).")
	fs.StringVar(&f.EtcdCert, "etcd-cert", f.EtcdCert, "Client certificate signed by etcd's CA (kubeadm: /etc/kubernetes/pki/etcd/healthcheck-client.crt).")
	fs.StringVar(&f.EtcdKey, "etcd-key", f.EtcdKey, "Key of --etcd-cert.")
	fs.Uint64Var(&f.EtcdMaxLag, "etcd-max-lag", f.EtcdMaxLag, "Raft entries a member may be behind the leader's committed index before the etcd-quorum gate fails.")
	fs.StringVar(&f.AlertmanagerURL, "alertmanager-url", f.AlertmanagerURL, "Run the alerts gate: fail on active alerts no silence or inhibition suppresses, read from this Alertmanager's API v2 (http://alertmanager.monitoring:9093; or `kubectl port-forward -n monitoring svc/alertmanager-main 9093` and http://127.0.0.1:9093).")
	fs.StringArrayVar(&f.AlertMatchers, "alert-matcher", f.AlertMatchers, "Alertmanager matcher the alerts must match, in Alertmanager's syntax (severity=\"critical\", cluster=~\"prod-.*\"); repeatable, all must match.")
	fs.BoolVar(&f.AllAlerts, "all-alerts", f.AllAlerts, "Count Watchdog and InfoInhibitor too: by default the alerts gate adds the matcher alertname!~\"Watchdog|InfoInhibitor\", the alerts kube-prometheus-stack keeps firing by design.")
	fs.StringVar(&f.PrometheusURL, "prometheus-url", f.PrometheusURL, "Run the promql gate against this Prometheus' HTTP API (http://prometheus.monitoring:9090; or `kubectl port-forward -n monitoring svc/prometheus-k8s 9090` and http://127.0.0.1:9090), reached directly with no cluster credentials.")
	fs.StringVar(&f.PromQLChecks, "promql-checks", f.PromQLChecks, "YAML list of PromQL checks, each {name, expr, and one of maxRatio (value may grow to baseline x ratio), minRatio (may fall to baseline x ratio), max, min; onEmpty: pass to pass on no sample or NaN}; preflight --save records each value as the baseline, verify compares.")
	f.SyntheticAppNamespace, f.SyntheticAppImage, f.SyntheticAppPort, f.SyntheticAppTimeout = "default", health.DefaultProbeAppImage, health.DefaultProbeAppPort, health.DefaultProbeAppTimeout
	fs.BoolVar(&f.SyntheticApp, "synthetic-app", f.SyntheticApp, "Run the synthetic-app gate: CREATE a probe pod (a minimal HTTP server) and a Service in --synthetic-app-namespace, call it through the apiserver's service proxy (no network path to pods needed), then delete both; objects are labelled "+health.ProbeAppLabel+" and a run first deletes what an interrupted run left. Implied by the other --synthetic-app-* flags. See --synthetic-app-dry-run.")
	fs.BoolVar(&f.SyntheticAppDryRun, "synthetic-app-dry-run", f.SyntheticAppDryRun, "Send the synthetic app's pod and Service as server-side dry runs (dryRun=All: admission and RBAC judge them, nothing is stored or called); the gate is WARN.")
	fs.StringVar(&f.SyntheticAppNamespace, "synthetic-app-namespace", f.SyntheticAppNamespace, "Namespace the synthetic app is created in (bind deploy/rbac/skew-synthetic-app.yaml there).")
	fs.StringVar(&f.SyntheticAppImage, "synthetic-app-image", f.SyntheticAppImage, "Image of the synthetic app's HTTP server (a mirror of it where registry.k8s.io is not reachable).")
	fs.StringVar(&f.SyntheticAppCommand, "synthetic-app-command", f.SyntheticAppCommand, "Command of the synthetic app, split on spaces; it must answer GET / on --synthetic-app-port (default: /agnhost netexec --http-port=PORT).")
	fs.Int32Var(&f.SyntheticAppPort, "synthetic-app-port", f.SyntheticAppPort, "Port the synthetic app listens on.")
	fs.DurationVar(&f.SyntheticAppTimeout, "synthetic-app-timeout", f.SyntheticAppTimeout, "How long the synthetic app's pod may take to be Ready; still unscheduled then is UNKNOWN (no node could take it), scheduled and not Ready (Pending included) is FAIL.")
	fs.BoolVar(&f.NetworkPolicy, "network-policy", f.NetworkPolicy, "Run the network-policy gate: record every NetworkPolicy (and CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Calico NetworkPolicy and GlobalNetworkPolicy, crd.projectcalico.org/v1 and native projectcalico.org/v3, where their CRDs are served) by a digest of its spec, and the enforcing CNI's DaemonSet; verify fails on a policy gone or changed and on that DaemonSet gone or not ready.")
	f.ProbeNetworkImage, f.ProbeNetworkTimeout = health.DefaultProbeAppImage, health.DefaultProbeAppTimeout
	fs.BoolVar(&f.ProbeNetwork, "probe-network", f.ProbeNetwork, "With the network-policy gate (implied): CREATE a scratch namespace labelled "+health.NetworkProbeLabel+" with a server pod and a client pod (agnhost netexec), have the client dial the server through the apiserver's pod proxy with no policy, under a default-deny ingress NetworkPolicy (must not reach) and with a policy allowing the client (must reach), then delete the namespace; a run first deletes namespaces an interrupted run left. No node that runs pods (KWOK) is UNKNOWN. RBAC: deploy/rbac/skew-network-probe.yaml.")
	fs.BoolVar(&f.ProbeNetworkDryRun, "probe-network-dry-run", f.ProbeNetworkDryRun, "Send the network probe's namespace as a server-side dry run and list what --probe-network would create and delete; nothing is stored (the gate is WARN).")
	fs.StringVar(&f.ProbeNetworkImage, "probe-network-image", f.ProbeNetworkImage, "Image of the network probe's pods; it must run agnhost netexec (a mirror of it where registry.k8s.io is not reachable).")
	fs.DurationVar(&f.ProbeNetworkTimeout, "probe-network-timeout", f.ProbeNetworkTimeout, "How long the network probe's pods may take to be Ready, and each policy to take effect.")
	fs.BoolVar(&f.WorkloadIdentity, "workload-identity", f.WorkloadIdentity, "Run the workload-identity gate: for each ServiceAccount annotated "+health.AnnotationEKSRoleARN+" or "+health.AnnotationAzureClientID+", send a pod with it as a server-side dry run (dryRun=All, nothing is created) and record the token volume and environment the identity webhook injected; and, on GKE (the server version says so, or a node is labelled "+health.LabelGKEMetadataServer+"=true) even where no ServiceAccount is annotated "+health.AnnotationGKEServiceAccount+", the GKE metadata server's DaemonSet and the count of nodes labelled for it. Verify fails naming the ServiceAccount whose pods no longer get what they got at the baseline, and when the metadata server is not ready or fewer nodes are labelled for it than at the baseline. Needs create on pods (deploy/rbac/skew-probes.yaml).")
	fs.StringVar(&f.EKSCluster, "eks-cluster", f.EKSCluster, "EKS cluster whose Pod Identity associations the workload-identity gate lists too (EKS API ListPodIdentityAssociations and DescribePodIdentityAssociation, with the AWS SDK's default credentials; IAM: eks:ListPodIdentityAssociations, eks:DescribePodIdentityAssociation): each association's ServiceAccount gets a dry-run pod, and verify fails naming an association gone or whose pods no longer get AWS_CONTAINER_CREDENTIALS_FULL_URI. Implies --workload-identity; unreachable (no credentials, access denied) is UNKNOWN with the reason.")
	fs.StringVar(&f.EKSRegion, "eks-region", f.EKSRegion, "AWS region of --eks-cluster (default: AWS_REGION or the profile's region).")
	_ = cmd.MarkFlagFilename("promql-checks", "yaml", "yml")
	for _, n := range []string{"etcd-cacert", "etcd-cert", "etcd-key"} {
		_ = cmd.MarkFlagFilename(n, "crt", "pem", "key")
	}
}

func (f *healthFlags) changed(names ...string) bool {
	for _, n := range names {
		if f.cmd != nil && f.cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

func (f *healthFlags) validate() error {
	if f.EtcdMaxLag == 0 {
		return fmt.Errorf("--etcd-max-lag must be at least 1")
	}
	if f.AlertmanagerURL != "" {
		if u, err := url.Parse(f.AlertmanagerURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--alertmanager-url %q: want http(s)://HOST[:PORT][/PATH]", f.AlertmanagerURL)
		}
	}
	if len(f.AlertMatchers) > 0 && f.AlertmanagerURL == "" && f.cmd != nil && f.cmd.Name() == "preflight" {
		return fmt.Errorf("--alert-matcher needs --alertmanager-url")
	}
	if f.PrometheusURL != "" {
		if err := health.ValidatePrometheusURL(f.PrometheusURL); err != nil {
			return fmt.Errorf("--prometheus-url %q: want http(s)://HOST[:PORT][/PATH]", f.PrometheusURL)
		}
	}
	isPreflight := f.cmd != nil && f.cmd.Name() == "preflight"
	if isPreflight && (f.PrometheusURL == "") != (f.PromQLChecks == "") {
		return fmt.Errorf("--prometheus-url and --promql-checks go together: give both to run the promql gate")
	}
	if f.PromQLChecks != "" {
		b, err := cli.ReadInputFile("--promql-checks", f.PromQLChecks)
		if err != nil {
			return err
		}
		checks, err := health.ParsePromQLChecks(b)
		if err != nil {
			return cli.InputFileErr("--promql-checks", f.PromQLChecks, err)
		}
		f.promqlChecks = checks
	}
	if f.EKSRegion != "" && f.EKSCluster == "" && isPreflight {
		return fmt.Errorf("--eks-region needs --eks-cluster")
	}
	if f.SyntheticAppPort < 1 || f.SyntheticAppPort > 65535 {
		return fmt.Errorf("--synthetic-app-port must be 1-65535, got %d", f.SyntheticAppPort)
	}
	if f.SyntheticAppTimeout <= 0 {
		return fmt.Errorf("--synthetic-app-timeout must be positive, got %s", f.SyntheticAppTimeout)
	}
	if f.ProbeNetworkTimeout <= 0 {
		return fmt.Errorf("--probe-network-timeout must be positive, got %s", f.ProbeNetworkTimeout)
	}
	if f.SyntheticAppNamespace == "" {
		return fmt.Errorf("--synthetic-app-namespace must not be empty")
	}
	if (f.EtcdCert == "") != (f.EtcdKey == "") {
		return fmt.Errorf("--etcd-cert and --etcd-key go together: give both, or neither for an etcd without client certificates")
	}
	// etcd's client reads these files only when the gate runs: a path
	// that does not hold PEM is refused now, before the cluster is asked.
	for _, pf := range []struct{ flag, path string }{{"--etcd-cacert", f.EtcdCACert}, {"--etcd-cert", f.EtcdCert}, {"--etcd-key", f.EtcdKey}} {
		if pf.path == "" {
			continue
		}
		b, err := cli.ReadInputFile(pf.flag, pf.path)
		if err != nil {
			return err
		}
		if block, _ := pem.Decode(b); block == nil {
			return cli.InputFileErr(pf.flag, pf.path, errors.New("holds no PEM block (-----BEGIN ...-----)"))
		}
	}
	return nil
}

// apply sets the runner's health options from the flags, falling back to
// how the baseline read each source (base may be nil).
func (f *healthFlags) apply(r *preflight.Runner, base *preflight.HealthEvidence) {
	h := &r.Health
	etcdFlags := f.changed("etcd-quorum", "etcd-endpoints", "etcd-cacert", "etcd-cert", "etcd-key", "etcd-max-lag")
	switch {
	case etcdFlags:
		// Each flag given overrides; the rest come from how the baseline
		// reached etcd (verify --etcd-max-lag N keeps its endpoints and
		// certificates), as the alerts and promql flags do.
		h.EtcdQuorum = f.EtcdQuorum || len(f.EtcdEndpoints) > 0 || f.changed("etcd-cacert", "etcd-cert", "etcd-key", "etcd-max-lag")
		h.Etcd, h.EtcdMaxLag = health.EtcdAccess{}, f.EtcdMaxLag
		if base != nil && base.EtcdAccess != nil {
			h.Etcd = *base.EtcdAccess
		}
		if base != nil && (base.Etcd != nil || base.EtcdAccess != nil) && !f.changed("etcd-max-lag") {
			h.EtcdMaxLag = base.EtcdMaxLag
		}
		if f.changed("etcd-endpoints") {
			h.Etcd.Endpoints = f.EtcdEndpoints
		}
		if f.changed("etcd-cacert") {
			h.Etcd.CAFile = f.EtcdCACert
		}
		if f.changed("etcd-cert") {
			h.Etcd.CertFile = f.EtcdCert
		}
		if f.changed("etcd-key") {
			h.Etcd.KeyFile = f.EtcdKey
		}
	case base != nil && (base.Etcd != nil || base.EtcdAccess != nil || base.Unread[preflight.GateEtcdQuorum] != ""):
		h.EtcdQuorum, h.EtcdMaxLag = true, base.EtcdMaxLag
		if base.EtcdAccess != nil {
			h.Etcd = *base.EtcdAccess
		}
	}
	switch {
	case f.changed("alertmanager-url", "alert-matcher", "all-alerts"):
		h.Alerts = true
		h.Alertmanager = health.AlertmanagerAccess{URL: f.AlertmanagerURL, Matchers: f.AlertMatchers, AllAlerts: f.AllAlerts}
		if base != nil && base.Alertmanager != nil {
			if f.AlertmanagerURL == "" {
				h.Alertmanager.URL = base.Alertmanager.URL
			}
			if !f.changed("alert-matcher") {
				h.Alertmanager.Matchers = base.Alertmanager.Matchers
			}
			if !f.changed("all-alerts") {
				h.Alertmanager.AllAlerts = base.Alertmanager.AllAlerts
			}
		}
	case base != nil && base.Alertmanager != nil:
		h.Alerts, h.Alertmanager = true, *base.Alertmanager
	}
	// synthetic app: the flags override; verify without them runs it the
	// way the baseline did.
	switch {
	case f.changed("synthetic-app", "synthetic-app-dry-run", "synthetic-app-namespace", "synthetic-app-image", "synthetic-app-command", "synthetic-app-port", "synthetic-app-timeout"):
		h.SyntheticApp = !f.changed("synthetic-app") || f.SyntheticApp
		h.ProbeApp = health.ProbeAppOptions{Namespace: f.SyntheticAppNamespace, Image: f.SyntheticAppImage, Command: strings.Fields(f.SyntheticAppCommand),
			Port: f.SyntheticAppPort, Timeout: f.SyntheticAppTimeout, DryRun: f.SyntheticAppDryRun}
	case base != nil && base.ProbeAppOptions != nil:
		h.SyntheticApp, h.ProbeApp = true, *base.ProbeAppOptions
	}
	probeFlags := f.changed("probe-network", "probe-network-dry-run", "probe-network-image", "probe-network-timeout")
	switch {
	case f.changed("network-policy"):
		h.NetworkPolicy = f.NetworkPolicy
	case probeFlags && (!f.changed("probe-network") || f.ProbeNetwork):
		h.NetworkPolicy = true
	case base != nil && base.NetworkPolicy != nil:
		h.NetworkPolicy = true
	}
	// The network probe: the flags override; verify without them runs it
	// the way the baseline did.
	switch {
	case probeFlags:
		h.ProbeNetwork = !f.changed("probe-network") || f.ProbeNetwork
		h.NetworkProbe = health.NetworkProbeOptions{Image: f.ProbeNetworkImage, Timeout: f.ProbeNetworkTimeout, DryRun: f.ProbeNetworkDryRun}
	case base != nil && base.NetworkPolicy != nil && base.NetworkPolicy.ProbeOptions != nil:
		h.ProbeNetwork, h.NetworkProbe = true, *base.NetworkPolicy.ProbeOptions
	}
	switch {
	case f.changed("workload-identity"):
		h.WorkloadIdentity = f.WorkloadIdentity
	case f.EKSCluster != "":
		h.WorkloadIdentity = true
	case base != nil && base.WorkloadIdentity != nil:
		h.WorkloadIdentity = true
	}
	// EKS Pod Identity: the flags name the cluster; verify without them
	// lists the baseline's.
	switch {
	case f.EKSCluster != "":
		h.EKSPodIdentity = health.EKSPodIdentityAccess{Cluster: f.EKSCluster, Region: f.EKSRegion}
	case base != nil && base.WorkloadIdentity != nil && base.WorkloadIdentity.EKSPodIdentity != nil:
		h.EKSPodIdentity = *base.WorkloadIdentity.EKSPodIdentity
		if f.EKSRegion != "" {
			h.EKSPodIdentity.Region = f.EKSRegion
		}
	}
	// promql: the flags override, each falling back to the baseline's
	// Prometheus and checks.
	if f.changed("prometheus-url", "promql-checks") || (base != nil && base.Prometheus != nil) {
		h.PromQL = true
		h.Prometheus = health.PrometheusAccess{URL: f.PrometheusURL}
		if f.PrometheusURL == "" && base != nil && base.Prometheus != nil {
			h.Prometheus.URL = base.Prometheus.URL
		}
		h.PromQLChecks = f.promqlChecks
		if f.PromQLChecks == "" && base != nil {
			for _, r := range base.PromQL {
				h.PromQLChecks = append(h.PromQLChecks, r.PromQLCheck)
			}
		}
	}
}
