package skew

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func testDeps() deps {
	return deps{
		now:     func() time.Time { return now },
		kubectl: func(context.Context) (string, error) { return "v1.36.3", nil },
		tags:    func(insecure bool) pkgskew.TagLister { return pkgskew.RemoteTagLister(insecure) },
	}
}

func gpuNode(name, pool, kubelet string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cloud.google.com/gke-nodepool": pool}},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}}}
}

func staticPod(component, node, tag string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: component + "-" + node, Namespace: "kube-system", Labels: map[string]string{"component": component}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: component, Image: "registry.k8s.io/" + component + ":" + tag}}}}
}

func daemonSet(name, image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}}}
}

func deployment(name, image string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: image}}}}}}
}

// cluster is the e2e scenario: apiserver 1.37, pools at 1.37, 1.35, 1.34 and 1.33.
func cluster(server string, objs ...runtime.Object) *fake.Clientset {
	base := []runtime.Object{
		gpuNode("a-0", "h100-a", "v1.37.2"), gpuNode("a-1", "h100-a", "v1.37.2"),
		gpuNode("b-0", "h100-b", "v1.35.4"),
		gpuNode("c-0", "h100-c", "v1.34.6"), gpuNode("c-1", "h100-c", "v1.34.6"),
		gpuNode("d-0", "h100-d", "v1.33.10-gke.100"),
		staticPod("kube-apiserver", "cp-0", "v1.37.2"), staticPod("kube-apiserver", "cp-1", "v1.37.2"),
		staticPod("kube-controller-manager", "cp-0", "v1.37.2"), staticPod("kube-scheduler", "cp-0", "v1.37.1"),
		daemonSet("kube-proxy", "registry.k8s.io/kube-proxy:v1.37.2"),
		deployment("coredns", "registry.k8s.io/coredns/coredns:v1.12.1"),
	}
	c := fake.NewClientset(append(base, objs...)...)
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: server}
	return c
}

type result struct {
	Out, Err string
	Code     int
}

func run(t *testing.T, cg cli.ClientGetter, stdin string, args ...string) result {
	t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	cmd := newCmd(cg, streams, testDeps())
	cmd.SetArgs(append([]string{}, args...))
	err := cmd.ExecuteContext(context.Background())
	code := cli.ExitCode(err)
	var fe *cli.FindingsError
	if err != nil && !errors.As(err, &fe) {
		errOut.WriteString("error: " + err.Error() + "\n")
	}
	return result{Out: out.String(), Err: errOut.String(), Code: code}
}

// golden checks got against testdata/name.golden; a default table (a name
// ending .table) must also fit the 120-column budget.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name+".golden", got)
	if strings.HasSuffix(name, ".table") {
		goldenfile.CheckFits(t, got, cli.DefaultTableWidth)
	}
}

func getter(c *fake.Clientset) *cli.TestClientGetter {
	return cli.NewTestClientGetter().WithKube(c)
}

func TestCheckGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"check.table", []string{"--color", "never"}, cli.ExitFindings},
		{"check.wide", []string{"-o", "wide", "--color", "never"}, cli.ExitFindings},
		{"check.json", []string{"-o", "json"}, cli.ExitFindings},
		{"check.yaml", []string{"-o", "yaml"}, cli.ExitFindings},
		{"check.color", []string{"--color", "always", "--no-headers"}, cli.ExitFindings},
		{"plan.table", []string{"plan", "--target", "v1.37", "--color", "never"}, cli.ExitFindings},
		{"plan.wide", []string{"plan", "--target", "1.37", "-o", "wide", "--color", "never"}, cli.ExitFindings},
		{"plan.json", []string{"plan", "--target", "v1.37.0", "-o", "json"}, cli.ExitFindings},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, getter(cluster("v1.37.2")), "", tc.args...)
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.Code, tc.code, r.Out, r.Err)
			}
			if r.Err != "" {
				t.Errorf("stderr: %s", r.Err)
			}
			golden(t, tc.name, r.Out)
		})
	}
}

func TestCheckExitCodes(t *testing.T) {
	healthy := func() cli.ClientGetter {
		c := fake.NewClientset(gpuNode("a-0", "a", "v1.37.2"), gpuNode("b-0", "b", "v1.34.0"))
		c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
		return getter(c)
	}
	forbiddenNodes := func() cli.ClientGetter {
		c := cluster("v1.37.2")
		c.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("rbac"))
		})
		return getter(c)
	}
	forbiddenKubeSystem := func() cli.ClientGetter {
		c := fake.NewClientset(gpuNode("a-0", "a", "v1.37.2"))
		c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
		c.PrependReactor("list", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetNamespace() == "kube-system" {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: a.GetResource().Resource}, "", errors.New("rbac"))
			}
			return false, nil, nil
		})
		return getter(c)
	}
	tests := []struct {
		name   string
		cg     func() cli.ClientGetter
		args   []string
		code   int
		out    string
		errOut string
		noOut  bool
		stdin  string
	}{
		{name: "healthy cluster with a pool at the edge", cg: healthy, code: 0, out: "WARN"},
		{name: "fail-on warning counts the edge", cg: healthy, args: []string{"--fail-on", "warning"}, code: 1},
		{name: "quiet", cg: healthy, args: []string{"-q", "--fail-on", "warning"}, code: 1, noOut: true},
		{name: "violation", cg: func() cli.ClientGetter { return getter(cluster("v1.37.2")) }, args: []string{"-q"}, code: 1, noOut: true},
		{name: "forbidden node list", cg: forbiddenNodes, code: 3, errOut: "listing nodes"},
		{name: "forbidden kube-system is a note", cg: forbiddenKubeSystem, code: 0, errOut: "note: listing pods in kube-system is forbidden", out: "not checked"},
		{name: "unreachable", cg: func() cli.ClientGetter {
			return &cli.TestClientGetter{Meta: cli.Metadata{Context: "x"}, Err: errors.New("dial tcp: connection refused")}
		}, code: 3},
		{name: "bad policy", cg: healthy, args: []string{"--policy", "n+1"}, code: 2, errOut: "--policy"},
		{name: "quiet json", cg: healthy, args: []string{"-q", "-o", "json"}, code: 2},
		{name: "bad fail-on", cg: healthy, args: []string{"--fail-on", "x"}, code: 2},
		{name: "bad chunk", cg: healthy, args: []string{"--chunk-size", "0"}, code: 2},
		// A file that cannot be read or is not what its flag takes is an
		// input refused: exit 3.
		{name: "missing calendar", cg: healthy, args: []string{"--calendar", "/nonexistent"}, code: 3, errOut: "--calendar /nonexistent: does not exist"},
		{name: "missing file", cg: healthy, args: []string{"--from-file", "/nonexistent"}, code: 3},
		{name: "not a report", cg: healthy, args: []string{"--from-file", "-"}, stdin: "kind: Pod\n", code: 3, errOut: "want a SkewReport"},
		{name: "policy n-1 passes at 1.37", cg: healthy, args: []string{"--policy", "n-1"}, code: 0, out: "within the fleet policy n-1 of 1.37"},
		{name: "plan without target", cg: healthy, args: []string{"plan"}, code: 2, errOut: "--target is required"},
		{name: "plan downgrade", cg: healthy, args: []string{"plan", "--target", "v1.36"}, code: 2, errOut: "downgrades are not planned"},
		{name: "plan bad target", cg: healthy, args: []string{"plan", "--target", "latest"}, code: 2},
		{name: "plan healthy", cg: healthy, args: []string{"plan", "--target", "v1.37", "--provider", "unknown"}, code: 0, out: "b      1       v1.34.0"},
		// The same nodes look like GKE, which keeps pools at most two
		// minors behind: pool b, three behind, is out of its policy.
		{name: "plan on GKE", cg: healthy, args: []string{"plan", "--target", "v1.37"}, code: 1, out: "b      1       v1.34.0"},
		{name: "plan unreachable", cg: func() cli.ClientGetter { return &cli.TestClientGetter{Err: errors.New("dial tcp: connection refused")} }, args: []string{"plan", "--target", "v1.38"}, code: 3},
		{name: "plan with kubelets newer than the apiserver", cg: func() cli.ClientGetter {
			c := fake.NewClientset(gpuNode("n-0", "n", "v1.37.0"))
			c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.36.2"}
			return getter(c)
		}, args: []string{"plan", "--target", "v1.37", "-o", "wide"}, code: 1, out: "newer than the apiserver"},
		{name: "unknown flag", cg: healthy, args: []string{"--bogus"}, code: 2},
		{name: "args", cg: healthy, args: []string{"extra"}, code: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.cg(), tc.stdin, tc.args...)
			if r.Code != tc.code {
				t.Fatalf("exit %d, want %d\n--- out\n%s--- err\n%s", r.Code, tc.code, r.Out, r.Err)
			}
			if tc.noOut && r.Out != "" {
				t.Errorf("stdout not empty: %q", r.Out)
			}
			if !strings.Contains(r.Out, tc.out) {
				t.Errorf("stdout lacks %q:\n%s", tc.out, r.Out)
			}
			if !strings.Contains(r.Err, tc.errOut) {
				t.Errorf("stderr lacks %q:\n%s", tc.errOut, r.Err)
			}
		})
	}
}

// TestPlanFromFileMatchesLive saves the inventory with -o yaml and checks
// that the offline plan is byte for byte the live one.
func TestPlanFromFileMatchesLive(t *testing.T) {
	saved := run(t, getter(cluster("v1.37.2")), "", "-o", "yaml")
	if saved.Code != 1 {
		t.Fatalf("exit %d", saved.Code)
	}
	path := filepath.Join(t.TempDir(), "before.yaml")
	if err := os.WriteFile(path, []byte(saved.Out), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "table"} {
		live := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "v1.37", "-o", format)
		offline := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, "", "plan", "--from-file", path, "--target", "v1.37", "-o", format)
		if diff := cmp.Diff(live, offline); diff != "" {
			t.Errorf("%s: live vs offline (-live +offline)\n%s", format, diff)
		}
	}
	// The saved report checks offline like the live one too.
	again := run(t, &cli.TestClientGetter{Err: errors.New("must not touch the cluster")}, saved.Out, "--from-file", "-", "-o", "yaml")
	if diff := cmp.Diff(saved, again); diff != "" {
		t.Errorf("check from file (-live +offline)\n%s", diff)
	}
}

// TestPlanControlPlaneBehind plans 1.34 (kubelets 1.34 and 1.31) to 1.37
// from a saved report.
func TestPlanControlPlaneBehind(t *testing.T) {
	c := fake.NewClientset(gpuNode("t-0", "train", "v1.34.2"), gpuNode("t-1", "train", "v1.34.2"), gpuNode("o-0", "old", "v1.31.14"))
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.34.2"}
	saved := run(t, getter(c), "", "-o", "json")
	// 1.34 reached end of life on 2026-10-27: a violation; pool old is at the edge.
	if saved.Code != 1 || !strings.Contains(saved.Out, `"rule": "support-window"`) {
		t.Fatalf("exit %d\n%s", saved.Code, saved.Out)
	}
	// The nodes look like GKE, which keeps pools at most two minors behind:
	// pool old, three behind, is out of its policy and fixed first.
	r := run(t, cli.NewTestClientGetter(), saved.Out, "plan", "--from-file", "-", "--target", "v1.37", "-o", "json")
	if r.Code != 1 || !strings.Contains(r.Out, "beyond the limit of 2") {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	golden(t, "plan-behind.json", r.Out)
	tbl := run(t, cli.NewTestClientGetter(), saved.Out, "plan", "--from-file", "-", "--target", "v1.37", "--color", "never")
	golden(t, "plan-behind.table", tbl.Out)
}

func TestCalendarOverride(t *testing.T) {
	c := fake.NewClientset(gpuNode("a-0", "a", "v1.38.0"))
	c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.38.0"}
	// kubectl 1.36 against 1.38 violates; the calendar only informs.
	r := run(t, getter(c), "", "-o", "json")
	if r.Code != 1 || !strings.Contains(r.Out, "newer than the release calendar (data from 2026-09-15)") {
		t.Errorf("embedded calendar and 1.38: exit %d\n%s", r.Code, r.Out)
	}
	cal := filepath.Join(t.TempDir(), "cal.yaml")
	os.WriteFile(cal, []byte("dataDate: 2026-12-01\nreleases:\n- {minor: '1.38', released: 2026-11-20, endOfLife: 2027-01-10}\n"), 0o600)
	r = run(t, getter(c), "", "--calendar", cal, "--fail-on", "warning", "-o", "json")
	if r.Code != 1 || !strings.Contains(r.Out, "reaches end of life on 2027-01-10, in 39 days") {
		t.Errorf("calendar file: exit %d\n%s", r.Code, r.Out)
	}
}

const eksARN = "arn:aws:eks:us-east-1:123456789012:cluster/gpu-prod-h100-training"

func TestFleet(t *testing.T) {
	healthy := fake.NewClientset(gpuNode("a-0", "a", "v1.37.2"))
	healthy.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
	old := fake.NewClientset(gpuNode("a-0", "a", "v1.35.0"))
	old.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.35.0"}
	cg := cli.NewTestClientGetter().WithKube(cluster("v1.37.2"))
	cg.PerContext = map[string]*cli.TestClientGetter{
		"prod":    {KubeClient: healthy, Meta: cli.Metadata{Context: "prod", Server: "https://prod.invalid"}},
		"staging": {KubeClient: old, Meta: cli.Metadata{Context: "staging", Server: "https://staging.invalid"}},
		"dead":    {Meta: cli.Metadata{Context: "dead"}, Err: errors.New("dial tcp: connection refused")},
		// An EKS context is the cluster's ARN: it gives way in the table.
		eksARN: {KubeClient: old, Meta: cli.Metadata{Context: eksARN, Server: "https://eks.invalid"}},
	}
	r := run(t, cg, "", "--all-contexts", "--policy", "n-1", "--color", "never")
	if r.Code != 3 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	golden(t, "fleet.table", r.Out)
	if w := run(t, cg, "", "--all-contexts", "--policy", "n-1", "--color", "never", "-o", "wide"); !strings.Contains(w.Out, eksARN) {
		t.Errorf("-o wide lacks the whole context:\n%s", w.Out)
	}
	if !strings.Contains(r.Err, "error: context dead:") {
		t.Errorf("stderr: %s", r.Err)
	}
	r = run(t, cg, "", "--contexts", "prod,staging", "--policy", "n-1", "-o", "json")
	if r.Code != 1 {
		t.Fatalf("exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	golden(t, "fleet.json", r.Out)
	if !strings.Contains(r.Out, `"kind": "SkewReportList"`) || strings.Index(r.Out, `"context": "test"`) >= 0 {
		t.Errorf("fleet json:\n%s", r.Out)
	}
	if i, j := strings.Index(r.Out, `"context": "staging"`), strings.Index(r.Out, `"context": "prod"`); i < 0 || j < 0 || i > j {
		t.Errorf("staging (violation) must come before prod")
	}
	if r := run(t, cg, "", "--contexts", "nope"); r.Code != 2 {
		t.Errorf("unknown context: exit %d", r.Code)
	}
	if r := run(t, cg, "", "--contexts", "prod", "--from-file", filepath.Join("..", "..", "testdata", "runbook", "gke.yaml")); r.Code != 2 {
		t.Errorf("--from-file with --contexts: exit %d", r.Code)
	}
}

func TestCheckRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, tag := range []string{"v1.37.0", "v1.37.2", "v1.37.5", "v1.35.9"} {
		ref, _ := name.ParseReference(host+"/kube-apiserver:"+tag, name.Insecure)
		if err := remote.Write(ref, empty.Image); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, getter(cluster("v1.37.2")), "", "--check-registry", "--registry", "http://"+host, "-o", "json")
	if r.Code != 1 {
		t.Fatalf("exit %d\n%s", r.Code, r.Err)
	}
	for _, want := range []string{`"patchesBehind": 3`, `"latest": "v1.35.9"`, "3 patch releases behind v1.37.5", `"rule": "patch-currency"`} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("output lacks %s", want)
		}
	}
	r = run(t, getter(cluster("v1.37.2")), "", "--check-registry", "--registry", "http://127.0.0.1:1", "-o", "json")
	if r.Code != 1 || !strings.Contains(r.Err, "note: --check-registry") {
		t.Errorf("unreachable registry: exit %d\n%s", r.Code, r.Err)
	}
}

func TestColorGoldenHasANSI(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "check.color.golden"))
	if err != nil {
		t.Skip("golden not written yet")
	}
	if !bytes.Contains(b, []byte("\x1b[31mFAIL\x1b[0m")) {
		t.Error("colour golden lacks a red FAIL")
	}
}

// A sweep asks the local kubectl its version once, not once a context.
func TestFleetAsksKubectlOnce(t *testing.T) {
	cg := cli.NewTestClientGetter().WithKube(cluster("v1.37.2"))
	cg.PerContext = map[string]*cli.TestClientGetter{}
	for _, name := range []string{"a", "b", "c", "d"} {
		kc := fake.NewClientset(gpuNode("a-0", "a", "v1.37.2"))
		kc.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.37.2"}
		cg.PerContext[name] = &cli.TestClientGetter{KubeClient: kc, Meta: cli.Metadata{Context: name}}
	}
	var asked atomic.Int32
	d := testDeps()
	d.kubectl = func(context.Context) (string, error) { asked.Add(1); return "v1.36.3", nil }
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := newCmd(cg, streams, d)
	cmd.SetArgs([]string{"--contexts", "a,b,c,d", "-o", "json"})
	if err := cmd.ExecuteContext(context.Background()); cli.ExitCode(err) > cli.ExitFindings {
		t.Fatalf("%v\n%s%s", err, out, errOut)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("kubectl version asked %d times for 4 contexts, want once", n)
	}
	if got := strings.Count(out.String(), `"name": "kubectl"`); got != 4 {
		t.Errorf("kubectl reported in %d of 4 contexts\n%s", got, out)
	}
}

// TestFleetRenderRefusesATag: --image must name the suite image by digest;
// a tag alone is a one-line usage error before anything is read.
func TestFleetRenderRefusesATag(t *testing.T) {
	r := run(t, cli.NewTestClientGetter(), "", "fleet", "render", "-f", "../../pkg/fleetrun/testdata/fleet.yaml", "--run", "r1", "--image", "ghcr.io/gpufleet/suite:v0.1.0")
	if r.Code != cli.ExitUsage || !strings.HasPrefix(r.Err, `error: --image "ghcr.io/gpufleet/suite:v0.1.0": a tag without digest`) || !strings.Contains(r.Err, "make image prints") || r.Out != "" {
		t.Errorf("exit %d\nstdout %s\nstderr %s", r.Code, r.Out, r.Err)
	}
}

// TestPlanRelativeTarget: --target +N is N minors after the apiserver, as
// kubectl deprecations takes it, and plans exactly what the release does.
func TestPlanRelativeTarget(t *testing.T) {
	rel := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "+1", "-o", "json")
	abs := run(t, getter(cluster("v1.37.2")), "", "plan", "--target", "v1.38", "-o", "json")
	if rel.Code != abs.Code || rel.Err != abs.Err {
		t.Fatalf("+1: exit %d %q; v1.37: exit %d %q", rel.Code, rel.Err, abs.Code, abs.Err)
	}
	strip := func(s string) string {
		return regexp.MustCompile(`"(collectedAt|generatedAt|time)": "[^"]*"`).ReplaceAllString(s, "")
	}
	if strip(rel.Out) != strip(abs.Out) || !strings.Contains(rel.Out, `"target": "1.38"`) {
		t.Errorf("+1 from 1.37 plans differently from v1.38:\n%s", rel.Out)
	}
	for _, bad := range []string{"+0", "+x", "+", "latest"} {
		if r := run(t, getter(cluster("v1.36.4")), "", "plan", "--target", bad); r.Code != cli.ExitUsage || !strings.Contains(r.Err, "want +1, +2") {
			t.Errorf("--target %s: exit %d %q", bad, r.Code, r.Err)
		}
	}
}

// TestReadReportEmptyFile: a file with no report in it says how to make one.
func TestReadReportEmptyFile(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, getter(cluster("v1.37.2")), "", "-f", empty)
	if r.Code != cli.ExitUnavailable || r.Err != "error: -f "+empty+": holds nothing to read (0 bytes besides white space)\n" {
		t.Errorf("exit %d: %s", r.Code, r.Err)
	}
}

// TestSupportPhraseWithoutAnEndDate: a minor older than the calendar's
// first row is out of support with no date, never "since )".
func TestSupportPhraseWithoutAnEndDate(t *testing.T) {
	if got := supportPhrase(pkgskew.Support{Minor: "1.25", Status: pkgskew.StatusViolation}); got != "1.25 out of support" {
		t.Errorf("got %q", got)
	}
	if got := supportPhrase(pkgskew.Support{Minor: "1.30", Status: pkgskew.StatusViolation, SupportEnds: "2025-06-28"}); got != "1.30 out of support since 2025-06-28" {
		t.Errorf("got %q", got)
	}
}
