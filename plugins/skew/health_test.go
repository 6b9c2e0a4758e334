package skew

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/health"
	"github.com/gpufleet/upgrade-plugins/pkg/preflight"
)

// TestPromQLFlagErrors: a bad --promql-checks file or --prometheus-url is
// one line that says what to fix, exit 2, before anything is read.
func TestPromQLFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good.yaml", "- {name: up, expr: up, min: 1}\n")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", file("nobound.yaml", "- {name: x, expr: up}\n")},
			`error: --promql-checks ` + filepath.Join(dir, "nobound.yaml") + `: check 1: check "x": give exactly one of maxRatio, minRatio, max or min, got 0`},
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", file("map.yaml", "name: x\n")}, "want a YAML list of {name, expr, maxRatio|max|min}: an object where another type belongs"},
		{[]string{"--prometheus-url", "http://prom:9090", "--promql-checks", filepath.Join(dir, "missing.yaml")}, "--promql-checks " + filepath.Join(dir, "missing.yaml") + ": does not exist"},
		{[]string{"--prometheus-url", "prom:9090", "--promql-checks", good}, `--prometheus-url "prom:9090": want http(s)://HOST[:PORT][/PATH]`},
		{[]string{"--promql-checks", good}, "--prometheus-url and --promql-checks go together"},
		{[]string{"--prometheus-url", "http://prom:9090"}, "--prometheus-url and --promql-checks go together"},
	} {
		r := run(t, getter(cluster("v1.37.2")), "", append([]string{"preflight", "--target", "v1.37"}, tc.args...)...)
		// A checks file that cannot be used is an input refused (3); a
		// flag alone or a bad URL is a usage error (2).
		want := cli.ExitUsage
		if strings.Contains(tc.err, "--promql-checks /") || strings.Contains(tc.err, "want a YAML list") {
			want = cli.ExitUnavailable
		}
		if r.Code != want || !strings.Contains(r.Err, tc.err) || strings.Count(strings.TrimSpace(r.Err), "\n") != 0 || r.Out != "" {
			t.Errorf("%q: exit %d, stderr %q, want exit %d and one line with %q", tc.args, r.Code, r.Err, want, tc.err)
		}
	}
}

// TestSyntheticAppFlags: the --synthetic-app-* flags turn the gate on with
// their values; verify without them runs it the way the baseline did; a
// bad value is one usage line.
func TestSyntheticAppFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--synthetic-app-port", "0"}, "--synthetic-app-port must be 1-65535, got 0"},
		{[]string{"--synthetic-app-timeout", "0s"}, "--synthetic-app-timeout must be positive"},
		{[]string{"--synthetic-app-namespace", ""}, "--synthetic-app-namespace must not be empty"},
	} {
		r := run(t, getter(cluster("v1.37.2")), "", append([]string{"preflight", "--target", "v1.37"}, tc.args...)...)
		if r.Code != cli.ExitUsage || !strings.Contains(r.Err, tc.err) || strings.Count(strings.TrimSpace(r.Err), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q, want exit 2 and one line with %q", tc.args, r.Code, r.Err, tc.err)
		}
	}
	parse := func(args ...string) *healthFlags {
		f := &healthFlags{}
		cmd := &cobra.Command{Use: "verify"}
		f.addFlags(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if err := f.validate(); err != nil {
			t.Fatal(err)
		}
		return f
	}
	r := &preflight.Runner{}
	parse().apply(r, nil)
	if r.Health.SyntheticApp {
		t.Errorf("no flag: the gate runs")
	}
	r = &preflight.Runner{}
	parse("--synthetic-app-dry-run", "--synthetic-app-command", "python3 -m http.server 9000", "--synthetic-app-port", "9000").apply(r, nil)
	if o := r.Health.ProbeApp; !r.Health.SyntheticApp || !o.DryRun || o.Port != 9000 || strings.Join(o.Command, "|") != "python3|-m|http.server|9000" ||
		o.Namespace != "default" || o.Image != health.DefaultProbeAppImage || o.Timeout != health.DefaultProbeAppTimeout {
		t.Errorf("flags: %+v on=%v", o, r.Health.SyntheticApp)
	}
	r = &preflight.Runner{}
	parse("--synthetic-app=false", "--synthetic-app-port", "9000").apply(r, nil)
	if r.Health.SyntheticApp {
		t.Errorf("--synthetic-app=false: the gate runs")
	}
	r = &preflight.Runner{}
	base := &preflight.HealthEvidence{ProbeAppOptions: &health.ProbeAppOptions{Namespace: "probes", Port: 9000}}
	parse().apply(r, base)
	if !r.Health.SyntheticApp || r.Health.ProbeApp.Namespace != "probes" {
		t.Errorf("verify without flags: want the baseline's run, got %+v on=%v", r.Health.ProbeApp, r.Health.SyntheticApp)
	}
}

// TestNetworkPolicyFlag: --network-policy turns the gate on; verify
// without it runs it when the baseline recorded it.
func TestNetworkPolicyFlag(t *testing.T) {
	parse := func(args ...string) *healthFlags {
		f := &healthFlags{}
		cmd := &cobra.Command{Use: "verify"}
		f.addFlags(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		args []string
		base *preflight.HealthEvidence
		want bool
	}{
		{nil, nil, false},
		{[]string{"--network-policy"}, nil, true},
		{nil, &preflight.HealthEvidence{NetworkPolicy: &preflight.NetworkPolicyEvidence{}}, true},
		{[]string{"--network-policy=false"}, &preflight.HealthEvidence{NetworkPolicy: &preflight.NetworkPolicyEvidence{}}, false},
		{nil, &preflight.HealthEvidence{}, false},
	} {
		r := &preflight.Runner{}
		parse(tc.args...).apply(r, tc.base)
		if r.Health.NetworkPolicy != tc.want {
			t.Errorf("%q, baseline %+v: gate on %v, want %v", tc.args, tc.base, r.Health.NetworkPolicy, tc.want)
		}
	}
}

// TestWorkloadIdentityFlag: --workload-identity turns the gate on; verify
// without it runs it when the baseline recorded it.
func TestWorkloadIdentityFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		base *preflight.HealthEvidence
		want bool
	}{
		{nil, nil, false},
		{[]string{"--workload-identity"}, nil, true},
		{nil, &preflight.HealthEvidence{WorkloadIdentity: &preflight.WorkloadIdentityEvidence{}}, true},
		{[]string{"--workload-identity=false"}, &preflight.HealthEvidence{WorkloadIdentity: &preflight.WorkloadIdentityEvidence{}}, false},
		{nil, &preflight.HealthEvidence{NetworkPolicy: &preflight.NetworkPolicyEvidence{}}, false},
	} {
		f := &healthFlags{}
		cmd := &cobra.Command{Use: "verify"}
		f.addFlags(cmd)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		r := &preflight.Runner{}
		f.apply(r, tc.base)
		if r.Health.WorkloadIdentity != tc.want {
			t.Errorf("%q, baseline %+v: gate on %v, want %v", tc.args, tc.base, r.Health.WorkloadIdentity, tc.want)
		}
	}
}

// TestProbeNetworkAndEKSFlags: --probe-network implies the network-policy
// gate and --eks-cluster the workload-identity gate; verify without them
// runs each the way the baseline did.
func TestProbeNetworkAndEKSFlags(t *testing.T) {
	parse := func(args ...string) *healthFlags {
		f := &healthFlags{}
		cmd := &cobra.Command{Use: "verify"}
		f.addFlags(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	r := &preflight.Runner{}
	parse("--probe-network-dry-run").apply(r, nil)
	if !r.Health.NetworkPolicy || !r.Health.ProbeNetwork || !r.Health.NetworkProbe.DryRun {
		t.Errorf("--probe-network-dry-run: %+v", r.Health)
	}
	r = &preflight.Runner{}
	parse().apply(r, &preflight.HealthEvidence{NetworkPolicy: &preflight.NetworkPolicyEvidence{ProbeOptions: &health.NetworkProbeOptions{Image: "mirror/agnhost:2.52"}}})
	if !r.Health.ProbeNetwork || r.Health.NetworkProbe.Image != "mirror/agnhost:2.52" {
		t.Errorf("verify without flags: %+v", r.Health)
	}
	r = &preflight.Runner{}
	parse("--eks-cluster", "train-prod", "--eks-region", "us-west-2").apply(r, nil)
	if !r.Health.WorkloadIdentity || r.Health.EKSPodIdentity != (health.EKSPodIdentityAccess{Cluster: "train-prod", Region: "us-west-2"}) {
		t.Errorf("--eks-cluster: %+v", r.Health)
	}
	r = &preflight.Runner{}
	parse().apply(r, &preflight.HealthEvidence{WorkloadIdentity: &preflight.WorkloadIdentityEvidence{EKSPodIdentity: &health.EKSPodIdentityAccess{Cluster: "train-prod", Region: "us-west-2"}}})
	if !r.Health.WorkloadIdentity || r.Health.EKSPodIdentity.Cluster != "train-prod" {
		t.Errorf("verify without flags: %+v", r.Health)
	}
}

// TestEtcdFlagsOverrideTheBaseline: verify with one etcd flag keeps how
// the baseline reached etcd and overrides only that flag.
func TestEtcdFlagsOverrideTheBaseline(t *testing.T) {
	parse := func(args ...string) *healthFlags {
		f := &healthFlags{}
		cmd := &cobra.Command{Use: "verify"}
		f.addFlags(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	acc := &health.EtcdAccess{Endpoints: []string{"https://10.0.0.5:2379"}, CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key"}
	base := &preflight.HealthEvidence{Etcd: &health.EtcdQuorum{}, EtcdAccess: acc, EtcdMaxLag: 500}
	for _, tc := range []struct {
		args    []string
		want    health.EtcdAccess
		wantLag uint64
	}{
		{nil, *acc, 500},
		{[]string{"--etcd-max-lag", "2000"}, *acc, 2000},
		{[]string{"--etcd-endpoints", "https://10.0.0.6:2379"}, health.EtcdAccess{Endpoints: []string{"https://10.0.0.6:2379"}, CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key"}, 500},
		{[]string{"--etcd-cert", "d.crt", "--etcd-key", "d.key"}, health.EtcdAccess{Endpoints: acc.Endpoints, CAFile: "ca.crt", CertFile: "d.crt", KeyFile: "d.key"}, 500},
	} {
		r := &preflight.Runner{}
		parse(tc.args...).apply(r, base)
		if !r.Health.EtcdQuorum || !reflect.DeepEqual(r.Health.Etcd, tc.want) || r.Health.EtcdMaxLag != tc.wantLag {
			t.Errorf("%q: gate on %v, access %+v lag %d; want %+v lag %d", tc.args, r.Health.EtcdQuorum, r.Health.Etcd, r.Health.EtcdMaxLag, tc.want, tc.wantLag)
		}
	}
	r := &preflight.Runner{}
	parse("--etcd-max-lag", "2000").apply(r, nil)
	if !r.Health.EtcdQuorum || len(r.Health.Etcd.Endpoints) != 0 || r.Health.EtcdMaxLag != 2000 {
		t.Errorf("no baseline: got on=%v %+v lag %d", r.Health.EtcdQuorum, r.Health.Etcd, r.Health.EtcdMaxLag)
	}
}
