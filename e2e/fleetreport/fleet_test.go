//go:build e2e

// Package fleetreporte2e runs `kubectl skew fleet inventory` as a binary
// against three real control planes as kubeconfig contexts (canary, prod,
// training), a context on the training plane that RBAC forbids to list
// nodes, a context whose port refuses, one whose server never answers, and
// a cluster whose context is not in the kubeconfig; it checks every output,
// a push to a real Prometheus Pushgateway, and the HTML page in headless
// Chromium.
package fleetreporte2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"golang.org/x/sync/errgroup"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/fleetctx"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport/metricstest"
)

// timeout is --request-timeout: what the hanging cluster costs each run.
const timeout = 3 * time.Second

// fleet is the fleet file; lost is added for the run that checks a
// cluster whose context is missing.
const fleet = `apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: e2e}
spec:
  kubeconfig: fleet.kubeconfig
  clusters:
  - {name: canary, labels: {gpufleet.dev/ring: canary}}
  - {name: prod, labels: {gpufleet.dev/ring: prod, gpufleet.dev/dr-pair: east}}
  - {name: training, provider: kubeadm, labels: {gpufleet.dev/ring: training}}
  - {name: viewer, context: training-viewer, labels: {gpufleet.dev/ring: training}}
  - {name: reader, context: training-reader, labels: {gpufleet.dev/ring: training}}
  - {name: dead, context: refused-00, labels: {gpufleet.dev/ring: prod}}
  - {name: hanging, context: hang-tcp-00, labels: {gpufleet.dev/ring: prod, gpufleet.dev/dr-pair: east}}
  rings:
  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}}
  - {name: prod, selector: {matchLabels: {gpufleet.dev/ring: prod}}}
  - {name: training, selector: {matchLabels: {gpufleet.dev/ring: training}}}
  store: {url: "STORE"}
`

type env struct {
	dir, fleet, store string
}

// setup starts the three control planes at once, plants their pools,
// writes the kubeconfig, the fleet file and the canary's saved pre-flight.
func setup(t *testing.T) env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	pools := map[string][]harness.GPUPool{
		"canary": {{Name: "h100", Nodes: 2}},
		// Three minors behind the apiserver: at the edge of the policy.
		"prod":     {{Name: "a100", Nodes: 2, KubeletVersion: "v1.34.6", Product: "NVIDIA-A100-SXM4-80GB"}, {Name: "h100", Nodes: 1}},
		"training": {{Name: "b200", Nodes: 3, GPUsPerNode: 4, KubeletVersion: "v1.36.3", Product: "NVIDIA-B200"}},
	}
	names := []string{"canary", "prod", "training"}
	cps := make([]*harness.ControlPlane, len(names))
	g, gctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			cp, err := harness.Start(gctx, harness.Options{KeepDir: os.Getenv("E2E_KEEP") != ""})
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			cps[i] = cp
			for _, p := range pools[name] {
				if _, err := cp.CreateGPUNodes(gctx, p); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	for _, cp := range cps {
		if cp != nil {
			t.Cleanup(cp.Stop)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	eps := fleetctx.NewEndpoints(t, 1, 1, 0)
	kc := fleetctx.NewKubeconfig()
	for i, name := range names {
		kc.AddLive(t, name, cps[i].Kubeconfig, "")
	}
	// A user no role binds: /version answers, the node list is forbidden.
	kc.AddLive(t, "training-viewer", cps[2].Kubeconfig, "gpufleet-e2e-viewer")
	// A user bound to the roles deploy/rbac/fleet-inventory.yaml ships.
	grantInventory(t, ctx, cps[2], "gpufleet-e2e-inventory")
	kc.AddLive(t, "training-reader", cps[2].Kubeconfig, "gpufleet-e2e-inventory")
	kc.AddEndpoints(eps)
	dir := t.TempDir()
	if err := os.Rename(kc.Write(t), filepath.Join(dir, "fleet.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	e := env{dir: dir, fleet: filepath.Join(dir, "fleet.yaml"), store: filepath.Join(dir, "store")}
	writeFile(t, e.fleet, strings.Replace(fleet, "STORE", "file://"+e.store, 1))
	// The canary's pre-flight, saved where the fleet programme saves it,
	// by the real command.
	r := skew(t, e, "preflight", "--kubeconfig", filepath.Join(dir, "fleet.kubeconfig"), "--context", "canary", "--target", "v1.38", "-o", "json")
	if r.ExitCode > 1 || !strings.Contains(r.Stdout, `"kind": "SkewPreflightReport"`) {
		t.Fatalf("kubectl skew preflight: %s", r)
	}
	writeFile(t, filepath.Join(e.store, fleetreport.PreflightKey("canary")), r.Stdout)
	return e
}

// grantInventory creates the roles of deploy/rbac/fleet-inventory.yaml
// and binds them to user.
func grantInventory(t *testing.T, ctx context.Context, cp *harness.ControlPlane, user string) {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "rbac", "fleet-inventory.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "\n---\n")
	var cr rbacv1.ClusterRole
	var role rbacv1.Role
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), &cr) != nil || yaml.UnmarshalStrict([]byte(docs[1]), &role) != nil {
		t.Fatalf("deploy/rbac/fleet-inventory.yaml: want a ClusterRole and a Role")
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	rbac := cp.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.Roles(role.Namespace).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(role.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = harness.Eventually(ctx, "RBAC for "+user, 30*time.Second, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "daemonsets", Group: "apps", Namespace: "kube-system"}}}
		got, err := cp.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skew(t *testing.T, e env, args ...string) plugintest.Result {
	t.Helper()
	r := plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-skew"), plugintest.Cmd{Args: args, Timeout: 2 * time.Minute})
	t.Logf("$ kubectl skew %s -> exit %d in %s", strings.Join(args, " "), r.ExitCode, r.Duration.Round(time.Millisecond))
	return r
}

func inventory(t *testing.T, e env, fleetFile string, args ...string) plugintest.Result {
	t.Helper()
	return skew(t, e, append([]string{"fleet", "inventory", "-f", fleetFile, "--request-timeout", timeout.String()}, args...)...)
}

// TestFleetInventory is the whole scenario on one set of control planes.
func TestFleetInventory(t *testing.T) {
	e := setup(t)
	var rep fleetreport.Report
	t.Run("json", func(t *testing.T) {
		r := inventory(t, e, e.fleet, "-o", "json")
		if r.ExitCode != 3 {
			t.Fatalf("exit %d, want 3 (clusters could not be read)\n%s", r.ExitCode, r)
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatal(err)
		}
		checkReport(t, &rep, r.Stderr)
	})
	t.Run("yaml", func(t *testing.T) {
		r := inventory(t, e, e.fleet, "-o", "yaml")
		var y fleetreport.Report
		if err := yaml.UnmarshalStrict([]byte(r.Stdout), &y); err != nil || r.ExitCode != 3 {
			t.Fatalf("exit %d: %v\n%s", r.ExitCode, err, r)
		}
		if y.APIVersion != "gpufleet.dev/v1alpha3" || y.Kind != "FleetInventory" || len(y.Clusters) != len(rep.Clusters) {
			t.Errorf("yaml report: %s %s, %d clusters", y.APIVersion, y.Kind, len(y.Clusters))
		}
		for i, c := range y.Clusters {
			if i < len(rep.Clusters) && (c.Name != rep.Clusters[i].Name || c.Version != rep.Clusters[i].Version || c.GPUs != rep.Clusters[i].GPUs) {
				t.Errorf("yaml row %d %+v differs from json %+v", i, c, rep.Clusters[i])
			}
		}
	})
	t.Run("table", func(t *testing.T) {
		r := inventory(t, e, e.fleet, "-o", "wide")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if r.ExitCode != 3 || len(lines) != 8 || !strings.HasPrefix(lines[0], "CLUSTER") {
			t.Fatalf("exit %d, %d lines\n%s", r.ExitCode, len(lines), r)
		}
		for _, want := range []string{"canary", "a100=v1.34.6", "b200=v1.36.3", "refused-00", "hang-tcp-00", "training-viewer"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("the table lacks %q\n%s", want, r.Stdout)
			}
		}
	})
	t.Run("lost context", func(t *testing.T) {
		lost := filepath.Join(e.dir, "lost.yaml")
		body, _ := os.ReadFile(e.fleet)
		writeFile(t, lost, strings.Replace(string(body), "  rings:\n", "  - {name: lost, context: no-such-context}\n  rings:\n", 1))
		r := inventory(t, e, lost, "-o", "json")
		var got fleetreport.Report
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil || r.ExitCode != 2 {
			t.Fatalf("exit %d, want 2: %v\n%s", r.ExitCode, err, r)
		}
		if len(got.Clusters) != 8 || got.Summary.Reachable != 4 || !strings.Contains(r.Stderr, `error: cluster lost: context "no-such-context" is not in the kubeconfig`) {
			t.Errorf("%d rows, %d read\n%s", len(got.Clusters), got.Summary.Reachable, r.Stderr)
		}
	})
	t.Run("malformed fleet file", func(t *testing.T) {
		bad := filepath.Join(e.dir, "bad.yaml")
		writeFile(t, bad, "apiVersion: gpufleet.dev/v1alpha1\nkind: Fleet\nmetadata: {name: e2e}\nspec:\n  clusters:\n  - {name: canary, labels: {gpufleet.dev/ring: canary}, ring: x}\n")
		r := inventory(t, e, bad)
		if r.ExitCode != 3 || r.Stdout != "" || strings.Count(r.Stderr, "error: ") != 1 || !strings.Contains(r.Stderr, `unknown field "spec.clusters[0].ring"`) {
			t.Errorf("want exit 3 (a file a flag names that is not what the flag takes) and one error line naming the field: %s", r)
		}
	})
	t.Run("prometheus", func(t *testing.T) {
		r := inventory(t, e, e.fleet, "-o", "prometheus")
		if r.ExitCode != 3 {
			t.Fatalf("exit %d\n%s", r.ExitCode, r)
		}
		fams := metricstest.Parse(t, r.Stdout, metricstest.OpenMetrics)
		checkMetrics(t, fams, nil)
	})
	t.Run("push", func(t *testing.T) {
		url := startPushgateway(t)
		r := inventory(t, e, e.fleet, "-q", "--push", url)
		if r.ExitCode != 3 || r.Stdout != "" {
			t.Fatalf("exit %d\n%s", r.ExitCode, r)
		}
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		checkMetrics(t, metricstest.Parse(t, string(body), expfmt.NewFormat(expfmt.TypeTextPlain)), map[string]string{"job": "gpufleet_fleet_inventory", "fleet": "e2e"})
	})
	t.Run("html in chromium", func(t *testing.T) {
		r := inventory(t, e, e.fleet, "-o", "html")
		if r.ExitCode != 3 {
			t.Fatalf("exit %d\n%s", r.ExitCode, r)
		}
		checkPage(t, r.Stdout, &rep)
	})
}

// checkReport checks the rows every output carries.
func checkReport(t *testing.T, rep *fleetreport.Report, stderr string) {
	t.Helper()
	by := map[string]fleetreport.Cluster{}
	var order []string
	for _, c := range rep.Clusters {
		by[c.Name] = c
		order = append(order, c.Name)
	}
	if want := []string{"canary", "prod", "training", "viewer", "reader", "dead", "hanging"}; !slices.Equal(order, want) {
		t.Fatalf("rows %v, want %v", order, want)
	}
	canary := by["canary"]
	if canary.Error != "" || canary.Ring != "canary" || canary.Version != "v1.37.2" || canary.Nodes != 2 || canary.GPUs != 16 ||
		canary.Patch == nil || canary.Patch.Latest != "v1.37.2" || canary.Support == nil || canary.Support.EndOfLife != "2027-10-28" {
		t.Errorf("canary: %+v", canary)
	}
	if p := canary.Preflight; p == nil || p.Verdict == "" || p.Target != "1.38" || p.CollectedAt == nil || p.Error != "" {
		t.Errorf("canary's saved pre-flight: %+v", p)
	}
	prod := by["prod"]
	if prod.MaxSkew != 3 || !slices.Equal(prod.PoolsAtEdge, []string{"a100"}) || prod.GPUs != 24 || len(prod.Pools) != 2 {
		t.Errorf("prod: %+v", prod)
	}
	for _, p := range prod.Pools {
		if p.Name == "a100" && (len(p.GPUs) != 1 || p.GPUs[0].Product != "NVIDIA-A100-SXM4-80GB" || p.GPUs[0].Allocatable != 16 || p.Kubelets[0].Version != "v1.34.6") {
			t.Errorf("prod pool a100: %+v", p)
		}
	}
	training := by["training"]
	if training.Provider != "kubeadm" || training.ProviderSource != "fleet file" || training.GPUs != 12 || training.Preflight != nil {
		t.Errorf("training: %+v", training)
	}
	// Under the shipped read-only roles the row is whole: versions of the
	// static pods and addons read too (no notes), the same GPUs.
	if reader := by["reader"]; reader.Error != "" || reader.GPUs != 12 || len(reader.Notes) != 0 || reader.Version != "v1.37.2" {
		t.Errorf("reader (deploy/rbac/fleet-inventory.yaml): %+v", reader)
	}
	for name, want := range map[string]string{
		"viewer":  `cannot list resource "nodes"`,
		"dead":    "connection refused",
		"hanging": "",
	} {
		c := by[name]
		if c.Error == "" || !strings.Contains(c.Error, want) || c.ExitCode != 3 || c.Ring == "" {
			t.Errorf("%s: exit %d, error %q; want exit 3 and %q", name, c.ExitCode, c.Error, want)
		}
		if !strings.Contains(stderr, "error: cluster "+name+": ") {
			t.Errorf("stderr does not name %s:\n%s", name, stderr)
		}
	}
	if s := rep.Summary; s.Clusters != 7 || s.Reachable != 4 || s.Errors != 3 || s.GPUs != 64 {
		t.Errorf("summary: %+v", s)
	}
}

// checkMetrics checks the series of each cluster, with extra labels when
// they went through the Pushgateway.
func checkMetrics(t *testing.T, fams metricstest.Families, extra map[string]string) {
	t.Helper()
	find := func(name string, want map[string]string) (float64, bool) {
		for k, v := range extra {
			want[k] = v
		}
		return fams.Value(name, want)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{fleetreport.MetricClusterUp, map[string]string{"cluster": "canary", "ring": "canary"}, 1},
		{fleetreport.MetricClusterUp, map[string]string{"cluster": "hanging", "ring": "prod"}, 0},
		{fleetreport.MetricClusterUp, map[string]string{"cluster": "viewer", "ring": "training"}, 0},
		{fleetreport.MetricClusterInfo, map[string]string{"cluster": "training", "provider": "kubeadm", "version": "v1.37.2"}, 1},
		{fleetreport.MetricMaxSkew, map[string]string{"cluster": "prod"}, 3},
		{fleetreport.MetricPoolAtEdge, map[string]string{"cluster": "prod", "pool": "a100"}, 1},
		{fleetreport.MetricPoolGPUs, map[string]string{"cluster": "training", "pool": "b200", "resource": "nvidia.com/gpu", "product": "NVIDIA-B200"}, 12},
		{fleetreport.MetricPoolNodes, map[string]string{"cluster": "prod", "pool": "a100", "kubelet_version": "v1.34.6"}, 2},
		{fleetreport.MetricSupportInfo, map[string]string{"cluster": "canary", "minor": "1.37", "status": "ok"}, 1},
		{fleetreport.MetricPreflightInfo, map[string]string{"cluster": "canary", "target": "1.38"}, 1},
	} {
		if got, ok := find(tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	if _, ok := find(fleetreport.MetricPatchLag, map[string]string{"cluster": "canary"}); !ok {
		t.Errorf("no %s for canary", fleetreport.MetricPatchLag)
	}
}

// startPushgateway runs the real Pushgateway, built from the module proxy
// by e2e/tools/build.sh pushgateway, on a free loopback port.
func startPushgateway(t *testing.T) string {
	t.Helper()
	bin := plugintest.ToolBinary(t, "pushgateway", "PUSHGATEWAY_VERSION")
	return plugintest.StartServer(t, "Pushgateway", bin, "/-/ready", func(addr string) []string {
		return []string{"--web.listen-address=" + addr}
	})
}
