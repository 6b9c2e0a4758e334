package skew

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetreport/metricstest"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// deployDocs reads a multi-document manifest of deploy/ as JSON documents.
func deployDocs(t *testing.T, rel string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", rel))
	if err != nil {
		t.Fatal(err)
	}
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := sigsyaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if strings.TrimSpace(string(js)) != "null" {
			out = append(out, js)
		}
	}
}

// decodeStrict decodes a document into obj, refusing unknown fields.
func decodeStrict(t *testing.T, rel string, doc []byte, obj any) {
	t.Helper()
	if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// TestFleetReportCronJob checks deploy/fleet-report/cronjob.yaml: the
// objects decode strictly, the command's flags are the real command's,
// the fleet file loads, and every cluster's context has its kubeconfig
// Secret mounted and listed in KUBECONFIG.
func TestFleetReportCronJob(t *testing.T) {
	const rel = "fleet-report/cronjob.yaml"
	docs := deployDocs(t, rel)
	if len(docs) != 3 {
		t.Fatalf("%s: %d documents, want a ServiceAccount, a ConfigMap and a CronJob", rel, len(docs))
	}
	var sa corev1.ServiceAccount
	var cm corev1.ConfigMap
	var cj batchv1.CronJob
	decodeStrict(t, rel, docs[0], &sa)
	decodeStrict(t, rel, docs[1], &cm)
	decodeStrict(t, rel, docs[2], &cj)
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken || len(pod.Containers) != 1 {
		t.Fatalf("pod spec: %+v", pod)
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Command, []string{"kubectl-skew", "fleet", "inventory"}) {
		t.Fatalf("command %v", c.Command)
	}
	// The args are flags of the real command.
	root := newCmd(cli.NewTestClientGetter(), genericiooptions.NewTestIOStreamsDiscard(), testDeps())
	inv, _, err := root.Find([]string{"fleet", "inventory"})
	if err != nil {
		t.Fatal(err)
	}
	cli.BindFlags(cli.NewClientGetter(genericiooptions.NewTestIOStreamsDiscard(), ConfigOptions), inv)
	if err := inv.ParseFlags(c.Args); err != nil {
		t.Fatalf("%s: args %v: %v", rel, c.Args, err)
	}
	for _, f := range []string{"filename", "push"} {
		if !inv.Flags().Changed(f) {
			t.Errorf("the CronJob does not set --%s", f)
		}
	}
	fleetPath, _ := inv.Flags().GetString("filename")
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
		if _, ok := mounts[v.Name]; !ok {
			t.Errorf("volume %s is not mounted", v.Name)
		}
	}
	fm := mounts["fleet"]
	if vols["fleet"].ConfigMap == nil || vols["fleet"].ConfigMap.Name != cm.Name || fleetPath != filepath.Join(fm.MountPath, "fleet.yaml") {
		t.Errorf("the fleet file %s is not the ConfigMap %s mounted at %s", fleetPath, cm.Name, fm.MountPath)
	}
	f, err := fleetfile.Load([]byte(cm.Data["fleet.yaml"]))
	if err != nil {
		t.Fatalf("%s: the fleet file: %v", rel, err)
	}
	var kubeconfig string
	for _, e := range c.Env {
		if e.Name == "KUBECONFIG" {
			kubeconfig = e.Value
		}
	}
	paths := strings.Split(kubeconfig, ":")
	var projected []string
	for _, s := range vols["targets"].Projected.Sources {
		for _, it := range s.Secret.Items {
			projected = append(projected, filepath.Join(mounts["targets"].MountPath, it.Path))
			if s.Secret.Name != strings.TrimSuffix(it.Path, ".kubeconfig")+"-kubeconfig" || it.Key != "value" {
				t.Errorf("secret %s item %+v: want <cluster>-kubeconfig with key value", s.Secret.Name, it)
			}
		}
	}
	for _, cl := range f.Spec.Clusters {
		p := filepath.Join(mounts["targets"].MountPath, cl.ContextName()+".kubeconfig")
		if !slices.Contains(paths, p) || !slices.Contains(projected, p) {
			t.Errorf("cluster %s: %s is not both mounted and in KUBECONFIG (%s)", cl.Name, p, kubeconfig)
		}
	}
	if st := f.Spec.Store; st == nil || !strings.HasPrefix(st.URL, "file://"+mounts["store"].MountPath) {
		t.Errorf("the fleet file's store %+v is not the mounted store volume", f.Spec.Store)
	}
}

// TestFleetInventoryRBAC checks that target.yaml binds its ServiceAccount
// to the roles of deploy/rbac/fleet-inventory.yaml, with a token Secret.
func TestFleetInventoryRBAC(t *testing.T) {
	roles := deployDocs(t, "rbac/fleet-inventory.yaml")
	var cr rbacv1.ClusterRole
	var role rbacv1.Role
	decodeStrict(t, "rbac/fleet-inventory.yaml", roles[0], &cr)
	decodeStrict(t, "rbac/fleet-inventory.yaml", roles[1], &role)
	for _, r := range append(slices.Clone(cr.Rules), role.Rules...) {
		for _, v := range r.Verbs {
			if v != "list" {
				t.Errorf("rule %+v: the inventory only lists", r)
			}
		}
	}
	docs := deployDocs(t, "fleet-report/target.yaml")
	var sa corev1.ServiceAccount
	var tok corev1.Secret
	var crb rbacv1.ClusterRoleBinding
	var rb rbacv1.RoleBinding
	for _, d := range docs {
		var meta struct{ Kind string }
		_ = json.Unmarshal(d, &meta)
		switch meta.Kind {
		case "ServiceAccount":
			decodeStrict(t, "target.yaml", d, &sa)
		case "Secret":
			decodeStrict(t, "target.yaml", d, &tok)
		case "ClusterRoleBinding":
			decodeStrict(t, "target.yaml", d, &crb)
		case "RoleBinding":
			decodeStrict(t, "target.yaml", d, &rb)
		}
	}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}
	if crb.RoleRef.Name != cr.Name || !slices.Contains(crb.Subjects, subject) || rb.RoleRef.Name != role.Name || rb.Namespace != role.Namespace || !slices.Contains(rb.Subjects, subject) {
		t.Errorf("bindings %+v %+v do not bind %+v to %s", crb, rb, subject, cr.Name)
	}
	if tok.Type != corev1.SecretTypeServiceAccountToken || tok.Annotations[corev1.ServiceAccountNameKey] != sa.Name || tok.Namespace != sa.Namespace {
		t.Errorf("token Secret %+v", tok)
	}
}

// metricLabels runs a report with every field through the real encoder
// and returns each metric's label names.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	cal := pkgskew.DefaultCalendar()
	v := pkgskew.MustParseVersion("v1.36.1")
	lag, sup := cal.PatchLag(v, at), cal.Support(v, at)
	rep := &fleetreport.Report{Clusters: []fleetreport.Cluster{
		{Name: "a", Context: "a", Ring: "prod", Provider: "eks", Version: "v1.36.1", Patch: &lag, Support: &sup, MaxSkew: 3, PoolsAtEdge: []string{"p"},
			Nodes: 1, GPUs: 8, CollectedAt: &at, Pools: []fleetreport.Pool{{Name: "p", Nodes: 1, Kubelets: []pkgskew.VersionCount{{Version: "v1.33.1", Nodes: 1}}, AtEdge: true,
				GPUs: []pkgskew.GPUCount{{Resource: "nvidia.com/gpu", Product: "H100", Nodes: 1, Allocatable: 8}}}},
			Preflight: &fleetreport.Preflight{Verdict: "ok", Target: "1.37", CollectedAt: &at}},
		{Name: "b", Context: "b", Ring: "prod", Error: "refused", ExitCode: 3},
	}}
	var buf bytes.Buffer
	if err := fleetreport.WriteMetrics(&buf, rep); err != nil {
		t.Fatal(err)
	}
	return metricstest.Parse(t, buf.String(), metricstest.OpenMetrics).Labels()
}

var (
	metricRE   = regexp.MustCompile(`gpufleet_[a-z_]+`)
	matcherRE  = regexp.MustCompile(`(gpufleet_[a-z_]+)\{([^}]*)\}`)
	labelRE    = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
	byRE       = regexp.MustCompile(`by \(([^)]*)\) \((gpufleet_[a-z_]+)`)
	legendRE   = regexp.MustCompile(`\{\{\s*([a-z_]+)\s*\}\}`)
	valuesRE   = regexp.MustCompile(`label_values\((gpufleet_[a-z_]+),\s*([a-z_]+)\)`)
	pushLabels = []string{"job", "instance", "fleet"} // added by the Pushgateway's grouping key
)

// TestGrafanaDashboard checks that every query of
// deploy/fleet-report/grafana-dashboard.json names metrics the report
// writes, and only labels they carry.
func TestGrafanaDashboard(t *testing.T) {
	labels := metricLabels(t)
	has := func(metric, label string) bool {
		return slices.Contains(labels[metric], label) || slices.Contains(pushLabels, label)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "fleet-report", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("no panels")
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := metricRE.FindAllString(q.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no gpufleet metric", p.Title, q.Expr)
			}
			for _, n := range names {
				used[n] = true
				if _, ok := labels[n]; !ok {
					t.Errorf("panel %q: %s is not a metric of the report", p.Title, n)
				}
			}
			for _, m := range matcherRE.FindAllStringSubmatch(q.Expr, -1) {
				for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
					if !has(m[1], l[1]) {
						t.Errorf("panel %q: %s has no label %s", p.Title, m[1], l[1])
					}
				}
			}
			for _, m := range byRE.FindAllStringSubmatch(q.Expr, -1) {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); !has(m[2], l) {
						t.Errorf("panel %q: %s has no label %s to group by", p.Title, m[2], l)
					}
				}
			}
			for _, l := range legendRE.FindAllStringSubmatch(q.Legend, -1) {
				ok := false
				for _, n := range names {
					ok = ok || has(n, l[1])
				}
				if !ok {
					t.Errorf("panel %q: legend {{%s}} is no label of %v", p.Title, l[1], names)
				}
			}
		}
	}
	for _, v := range dash.Templating.List {
		for _, m := range valuesRE.FindAllStringSubmatch(v.Definition, -1) {
			if !has(m[1], m[2]) {
				t.Errorf("variable %q: %s has no label %s", v.Definition, m[1], m[2])
			}
		}
	}
	for _, core := range []string{fleetreport.MetricClusterUp, fleetreport.MetricPatchLag, fleetreport.MetricSupportEnd, fleetreport.MetricMaxSkew, fleetreport.MetricPoolGPUs} {
		if !used[core] {
			t.Errorf("the dashboard does not show %s", core)
		}
	}
}
