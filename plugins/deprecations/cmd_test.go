package deprecations

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	dep "github.com/gpufleet/upgrade-plugins/pkg/deprecations"
)

func runCmd(t *testing.T, cg cli.ClientGetter, stdin string, args ...string) (string, string, int) {
	t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name+".golden", got)
}

func TestCIFiles(t *testing.T) {
	cg := cli.NewTestClientGetter()
	out, errOut, code := runCmd(t, cg, "", "--ci", "-f", "testdata/ci", "--color", "never")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	golden(t, "ci.table", out)
	golden(t, "ci.stderr", errOut)
	// -o wide keeps SOURCE and WHO.
	out, _, _ = runCmd(t, cg, "", "--ci", "-f", "testdata/ci", "--color", "never", "-o", "wide")
	golden(t, "ci.wide", out)
	// One file: its path relative to the folder holding it.
	out, _, _ = runCmd(t, cg, "", "--ci", "-f", "testdata/ci/app.yaml", "--color", "never", "--no-headers")
	if !strings.HasPrefix(out, "FAIL   nightly   CronJob") || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "   app.yaml:1") {
		t.Errorf("one file:\n%s", out)
	}
	out, _, code = runCmd(t, cg, "", "--ci", "-f", "testdata/ci", "-o", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d", code)
	}
	golden(t, "ci.json", out)
	// With a target before the removal, the CronJob is only deprecated: exit 0.
	_, _, code = runCmd(t, cg, "", "-f", "testdata/ci/app.yaml", "--target-version", "v1.22", "-q")
	if code != cli.ExitOK {
		t.Errorf("v1.22: exit %d", code)
	}
	// --fail-on warning counts the deprecation.
	_, _, code = runCmd(t, cg, "", "-f", "testdata/ci/app.yaml", "--target-version", "v1.22", "-q", "--fail-on", "warning")
	if code != cli.ExitFindings {
		t.Errorf("--fail-on warning: exit %d", code)
	}
	// stdin
	out, _, code = runCmd(t, cg, "kind: Ingress\napiVersion: extensions/v1beta1\nmetadata: {name: w}\n", "-f", "-", "--target-version", "1.30", "-o", "yaml")
	if code != cli.ExitFindings || !strings.Contains(out, "name: w") || !strings.Contains(out, "location: <stdin>:1") {
		t.Errorf("stdin: exit %d\n%s", code, out)
	}
}

// TestCorpusTable pins the default table of a manifest scan of the shared
// corpus: NAME, paths relative to the scanned folder, no SOURCE or WHO.
func TestCorpusTable(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "corpus")
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Skipf("corpus not present at %s", dir)
	}
	out, _, code := runCmd(t, cli.NewTestClientGetter(), "", "-f", dir, "--target-version", "v1.37", "--color", "never")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d", code)
	}
	golden(t, "corpus.table", out)
	// Names, kinds, APIs and paths stay whole, so this table runs past 120
	// columns: REPLACEMENT, the one column that could be shortened, is
	// left to -o wide.
	if head := strings.SplitN(out, "\n", 2)[0]; strings.Contains(head, "REPLACEMENT") {
		t.Errorf("REPLACEMENT is kept beside names that fill the width:\n%s", head)
	}
	for _, whole := range []string{"derived/bom/metrics-server-v0.3.6-metrics-apiservice.json:2", "rbac.authorization.k8s.io/v1beta1",
		"metallb-system/controller", "? (apps/v1beta1, apps/v1beta2, extensions/v1beta1)"} {
		if !strings.Contains(out, whole+" ") && !strings.Contains(out, whole+"\n") {
			t.Errorf("the table lacks %q whole", whole)
		}
	}
	if strings.Contains(out, "../") {
		t.Error("a path is not relative to the scanned folder")
	}
	// ({{…}} is a template expression the scanner abbreviates, not a cut.)
	if strings.Contains(strings.ReplaceAll(out, "{{"+cli.ElisionMark+"}}", ""), cli.ElisionMark) {
		t.Error("a cell is shortened")
	}
	// -o wide carries every value whole.
	out, _, _ = runCmd(t, cli.NewTestClientGetter(), "", "-f", dir, "--target-version", "v1.37", "--color", "never", "-o", "wide")
	golden(t, "corpus.wide", out)
	for _, whole := range []string{"admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration",
		"discovery.k8s.io/v1 EndpointSlice", "? (apps/v1beta1, apps/v1beta2, extensions/v1beta1)",
		"public/kubernetes-examples-3c2ef9e/staging/volumes/azure_disk/claim/blob-based-disk/account-specified-hdd/storageclass-account-hdd.yaml:1"} {
		if !strings.Contains(out, whole) {
			t.Errorf("-o wide lacks %q", whole)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	cg := cli.NewTestClientGetter()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-f", "testdata/ci"}, "--target-version is required"},
		{[]string{"--source", "bogus"}, "unknown --source"},
		{[]string{"--target-version", "banana", "-f", "x"}, "invalid --target-version"},
		{[]string{"--ci"}, "--ci scans manifests"},
		{[]string{"--source", "audit", "--target-version", "v1.30"}, "needs --audit-log"},
		{[]string{"-f", "-", "--audit-log", "-", "--target-version", "v1.30"}, "stdin"},
		{[]string{"-o", "json", "--no-headers", "-f", "x", "--target-version", "v1.3"}, "--no-headers"},
	} {
		out, errOut, code := runCmd(t, cg, "", tc.args...)
		if code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want 2 (%s%s)", tc.args, code, out, errOut)
		}
	}
	// A rules file that does not parse is an input file refused (3),
	// naming the flag and the file once.
	err := runErr(cg, "--rules", "testdata/ci/broken.yaml", "-f", "x", "--target-version", "v1.30")
	if cli.ExitCode(err) != cli.ExitUnavailable || err == nil || !strings.HasPrefix(err.Error(), "--rules testdata/ci/broken.yaml: ") || strings.Count(err.Error(), "broken.yaml") != 1 {
		t.Errorf("--rules broken.yaml: exit %d: %v", cli.ExitCode(err), err)
	}
}

func TestRulesCommand(t *testing.T) {
	cg := cli.NewTestClientGetter()
	out, _, code := runCmd(t, cg, "", "rules", "-o", "json")
	if code != 0 {
		t.Fatal(code)
	}
	var rep RulesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) < 150 || rep.Kind != "APILifecycleTable" {
		t.Errorf("%d items, kind %s", len(rep.Items), rep.Kind)
	}
	// The lifecycle list fits 120 columns with every API and kind whole:
	// the replacement is shortened, with the mark, and AVAILABLE left to
	// -o wide; -o wide has them all whole.
	out, _, _ = runCmd(t, cg, "", "rules")
	if !strings.HasPrefix(out, "API                                     KIND                               DEPRECATED   REMOVED   REPLACEMENT\n") ||
		!strings.Contains(out, cli.ElisionMark) || !strings.Contains(out, "admissionregistration.k8s.io/v1alpha1   ValidatingAdmissionPolicyBinding ") {
		t.Errorf("rules table:\n%s", out)
	}
	goldenfile.CheckWidth(t, out, cli.DefaultTableWidth)
	out, _, _ = runCmd(t, cg, "", "rules", "-o", "wide")
	if strings.Contains(out, cli.ElisionMark) || !strings.Contains(out, "admissionregistration.k8s.io/v1alpha1") || !strings.Contains(out, "ValidatingAdmissionPolicyBinding") {
		t.Errorf("rules -o wide is not whole:\n%s", out)
	}
	// The yaml output is a rules file.
	dir := t.TempDir()
	out, _, _ = runCmd(t, cg, "", "rules", "-o", "yaml")
	custom := strings.Replace(out, "items:\n", "items:\n- group: example.com\n  version: v1beta1\n  kind: Widget\n  deprecated: \"1.30\"\n  removed: \"1.32\"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(custom), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCmd(t, cg, "apiVersion: example.com/v1beta1\nkind: Widget\nmetadata: {name: w}\n", "--rules", filepath.Join(dir, "rules.yaml"), "-f", "-", "--target-version", "v1.33")
	if code != cli.ExitFindings || !strings.Contains(out, "Widget") {
		t.Errorf("custom rule: exit %d\n%s", code, out)
	}
	out, _, _ = runCmd(t, cg, "", "rules")
	if !strings.Contains(out, "policy/v1beta1") || !strings.Contains(out, "PodSecurityPolicy") {
		t.Errorf("table:\n%s", out)
	}
	// pluto's own file, in place.
	pluto := filepath.Join("..", "..", "..", "shared", "corpus", "peers", "pluto-versions.yaml")
	if _, err := os.Stat(pluto); err == nil {
		out, _, code = runCmd(t, cg, "", "rules", "--rules", pluto, "-o", "json")
		if code != 0 || !strings.Contains(out, "pluto-versions.yaml") {
			t.Errorf("pluto rules: exit %d", code)
		}
	}
}

func helmSecret(t *testing.T) *corev1.Secret {
	js, _ := json.Marshal(map[string]any{"name": "web", "namespace": "apps", "version": 2, "info": map[string]any{"status": "deployed"},
		"manifest": "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n", "config": map[string]any{"token": "t0ps3cret"}})
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(js)
	_ = zw.Close()
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v2", Namespace: "apps",
		Labels: map[string]string{"name": "web", "owner": "helm", "status": "deployed", "version": "2"}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(b.Bytes()))}}
}

func TestClusterSources(t *testing.T) {
	kc := fake.NewClientset(helmSecret(t))
	fd := kc.Discovery().(*fakediscovery.FakeDiscovery)
	fd.FakedServerVersion = &version.Info{GitVersion: "v1.24.3"}
	fd.Resources = []*metav1.APIResourceList{{GroupVersion: "policy/v1", APIResources: []metav1.APIResource{{Name: "poddisruptionbudgets", Kind: "PodDisruptionBudget", Verbs: []string{"list"}}}}}
	cg := cli.NewTestClientGetter().WithKube(kc).WithAPIExtensions(apiextfake.NewClientset())
	cg.Meta.ServerVersion = "v1.24.3"
	out, errOut, code := runCmd(t, cg, "", "--source", "helm,crds", "-o", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TargetVersion != "1.25" || len(rep.Items) != 1 {
		t.Fatalf("report: %s", out)
	}
	it := rep.Items[0]
	if it.Kind != "PodDisruptionBudget" || it.Status != "removed" || it.Severity != cli.SeverityBlocking ||
		it.ReplacementServed == nil || !*it.ReplacementServed || it.Who != "helm release apps/web" {
		t.Errorf("item: %+v", it)
	}
	if strings.Contains(out, "t0ps3cret") {
		t.Error("values leaked")
	}
	// The metric source needs a real REST client: a failing source is exit 3,
	// and the other sources still report.
	out, errOut, code = runCmd(t, cg, "", "--source", "metrics,helm", "--color", "never")
	if code != cli.ExitUnavailable || !strings.Contains(out, "PodDisruptionBudget") || !strings.Contains(errOut, "metrics") {
		t.Errorf("failing metrics: exit %d\n%s\n%s", code, out, errOut)
	}
	// An unreachable cluster is exit 3.
	bad := cli.NewTestClientGetter()
	bad.Err = context.DeadlineExceeded
	if _, _, code := runCmd(t, bad, "", "--source", "crds"); code != cli.ExitUnavailable {
		t.Errorf("unreachable: exit %d", code)
	}
}

func TestKustomize(t *testing.T) {
	out, errOut, code := runCmd(t, cli.NewTestClientGetter(), "", "-k", "testdata/kustomize", "--target-version", "v1.30", "-o", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Items) != 1 || rep.Items[0].Name != "team-nightly" || rep.Items[0].Location != "kustomize testdata/kustomize:1" {
		t.Errorf("items %+v", rep.Items)
	}
	if _, _, code := runCmd(t, cli.NewTestClientGetter(), "", "-k", "testdata/ci", "--target-version", "v1.30"); code != cli.ExitUnavailable {
		t.Errorf("not a kustomization: exit %d, want 3 (input unreadable)", code)
	}
}

// --contexts reads each context's cluster sources against its own server's
// next minor, reports them in one list, and exits with the worst outcome;
// an unreachable context does not stop the others.
func TestContexts(t *testing.T) {
	getter := func(name, server string, objs ...runtime.Object) *cli.TestClientGetter {
		kc := fake.NewClientset(objs...)
		fd := kc.Discovery().(*fakediscovery.FakeDiscovery)
		fd.FakedServerVersion = &version.Info{GitVersion: server}
		g := cli.NewTestClientGetter().WithKube(kc).WithAPIExtensions(apiextfake.NewClientset())
		g.Meta.Context, g.Meta.ServerVersion = name, server
		return g
	}
	cg := cli.NewTestClientGetter()
	down := cli.NewTestClientGetter()
	down.Err = context.DeadlineExceeded
	cg.PerContext = map[string]*cli.TestClientGetter{
		"old":   getter("old", "v1.24.3", helmSecret(t)),
		"clean": getter("clean", "v1.36.1"),
		"down":  down,
	}
	out, errOut, code := runCmd(t, cg, "", "--source", "helm,crds", "--contexts", "old,clean,down", "-o", "json")
	if code != cli.ExitUnavailable {
		t.Fatalf("exit %d, want 3 (context down is unreachable)\n%s\n%s", code, out, errOut)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Context  string  `json:"context"`
			Error    string  `json:"error"`
			ExitCode int     `json:"exitCode"`
			Report   *Report `json:"report"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if list.Kind != "DeprecationsReportList" || len(list.Items) != 3 {
		t.Fatalf("list: %s", out)
	}
	old, clean, bad := list.Items[0], list.Items[1], list.Items[2]
	if old.Context != "old" || old.ExitCode != cli.ExitFindings || old.Report == nil || old.Report.TargetVersion != "1.25" || len(old.Report.Items) != 1 {
		t.Errorf("context old: %+v", old)
	}
	if clean.ExitCode != cli.ExitOK || clean.Report == nil || clean.Report.TargetVersion != "1.37" || len(clean.Report.Items) != 0 {
		t.Errorf("context clean: %+v", clean)
	}
	if bad.Context != "down" || bad.ExitCode != cli.ExitUnavailable || bad.Error == "" || bad.Report != nil {
		t.Errorf("context down: %+v", bad)
	}
	if !strings.Contains(errOut, "context down") {
		t.Errorf("stderr does not name the failing context:\n%s", errOut)
	}

	// The table leads with the context.
	out, _, code = runCmd(t, cg, "", "--source", "helm", "--contexts", "old,clean", "--color", "never")
	if code != cli.ExitFindings || !strings.HasPrefix(out, "CONTEXT") || !strings.Contains(out, "\nold ") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	// Contexts named as GKE and EKS name them: CONTEXT stays whole (it is
	// what --context takes), WHO is shortened and REPLACEMENT left to -o
	// wide; -o wide has every value whole.
	gke, eks := "gke_gpufleet-prod_us-central1_training-a100-ring2", "arn:aws:eks:us-west-2:123456789012:cluster/inference-h100-ring1"
	long := cli.NewTestClientGetter()
	long.PerContext = map[string]*cli.TestClientGetter{gke: getter(gke, "v1.24.3", helmSecret(t)), eks: getter(eks, "v1.24.9", helmSecret(t))}
	out, _, code = runCmd(t, long, "", "--source", "helm", "--contexts", gke+","+eks, "--color", "never")
	if code != cli.ExitFindings {
		t.Errorf("long contexts: exit %d\n%s", code, out)
	}
	golden(t, "contexts.table", out)
	if head := strings.SplitN(out, "\n", 2)[0]; strings.Contains(head, "REPLACEMENT") || !strings.Contains(out, gke+" ") || !strings.Contains(out, eks+" ") {
		t.Errorf("long contexts: a context is cut, or REPLACEMENT kept beside them:\n%s", out)
	}
	out, _, _ = runCmd(t, long, "", "--source", "helm", "--contexts", gke+","+eks, "--color", "never", "-o", "wide")
	golden(t, "contexts.wide", out)
	js, _, _ := runCmd(t, long, "", "--source", "helm", "--contexts", gke+","+eks, "-o", "json")
	golden(t, "contexts.json", js)
	if !strings.Contains(out, gke) || !strings.Contains(out, eks) || strings.Contains(out, cli.ElisionMark) {
		t.Errorf("-o wide does not carry the contexts whole:\n%s", out)
	}

	// Files are not per context.
	cmd := NewCmd(cg, genericiooptions.NewTestIOStreamsDiscard())
	cmd.SetArgs([]string{"--contexts", "old", "-f", "testdata", "--target-version", "v1.30"})
	if err := cmd.ExecuteContext(context.Background()); cli.ExitCode(err) != cli.ExitUsage || !strings.Contains(err.Error(), "run of their own") {
		t.Errorf("--contexts with -f: %v", err)
	}
}

// TestRulesMapKubeAPIs pins `rules -o mapkubeapis` and reads it back the
// way helm-mapkubeapis does (sigs.k8s.io/yaml into its Mapping fields).
func TestRulesMapKubeAPIs(t *testing.T) {
	out, errOut, code := runCmd(t, cli.NewTestClientGetter(), "", "rules", "-o", "mapkubeapis")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "rules.mapkubeapis", out)
	var m struct {
		Mappings []struct {
			DeprecatedAPI       string `json:"deprecatedAPI"`
			NewAPI              string `json:"newAPI"`
			DeprecatedInVersion string `json:"deprecatedInVersion"`
			RemovedInVersion    string `json:"removedInVersion"`
		} `json:"mappings"`
	}
	if err := sigsyaml.UnmarshalStrict([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range m.Mappings {
		if x.DeprecatedAPI == "apiVersion: batch/v1beta1\nkind: CronJob\n" {
			found = x.NewAPI == "apiVersion: batch/v1\nkind: CronJob\n" && x.DeprecatedInVersion == "v1.21" && x.RemovedInVersion == "v1.25"
		}
		if strings.Contains(x.DeprecatedAPI, "kind: Endpoints\n") {
			t.Errorf("v1 Endpoints maps to another kind and must be left out: %+v", x)
		}
		if !strings.HasPrefix(x.DeprecatedAPI, "apiVersion: ") || (x.NewAPI == "" && x.RemovedInVersion == "") {
			t.Errorf("mapping %+v", x)
		}
	}
	if !found || len(m.Mappings) < 100 {
		t.Errorf("%d mappings, CronJob found %v", len(m.Mappings), found)
	}
}

// TestNotScannedExit: a manifest that does not parse is listed, counted in
// the summary and makes the exit code 3, with or without findings; it is
// never a clean exit 0.
func TestNotScannedExit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bad.yaml", "apiVersion: v1\nkind: [Pod\nmetadata: {name: \n")
	cg := cli.NewTestClientGetter()
	// Nothing read from the path at all: refused, with what was read and
	// the first document that does not parse, and no report.
	out, errOut, code := runCmd(t, cg, "", "-f", dir, "--target", "v1.37", "--color", "never")
	err := runErr(cg, "-f", dir, "--target", "v1.37")
	if code != cli.ExitUnavailable || out != "" || err == nil || !strings.Contains(err.Error(), "holds no Kubernetes object that could be read (0 objects read, 1 document not scanned, the first: ") ||
		!strings.Contains(err.Error(), "bad.yaml:1: does not parse") {
		t.Errorf("broken file alone: exit %d, want 3 and no report: %v\n%s%s", code, err, out, errOut)
	}
	write("ok.yaml", "apiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: a}\n")
	out, errOut, _ = runCmd(t, cg, "", "-f", dir, "--target", "v1.37", "--color", "never")
	if !strings.Contains(out, "1 not scanned") || !strings.Contains(errOut, "not scanned: bad.yaml:1: does not parse") {
		t.Errorf("broken file not listed and counted:\n%s%s", out, errOut)
	}
	out, _, _ = runCmd(t, cg, "", "-f", dir, "--target", "v1.37", "-o", "json")
	if !strings.Contains(out, `"notScanned": 1`) {
		t.Errorf("-o json summary does not count it:\n%s", out)
	}
	if out, errOut, code = runCmd(t, cg, "", "-f", dir, "--target", "v1.37"); code != cli.ExitUnavailable {
		t.Errorf("broken file beside a finding: exit %d, want 3 (the worst wins)\n%s%s", code, out, errOut)
	}
	if err := os.Remove(filepath.Join(dir, "bad.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, _, code = runCmd(t, cg, "", "-f", dir, "--target", "v1.37"); code != cli.ExitFindings {
		t.Errorf("finding alone: exit %d, want 1", code)
	}
}

// TestTargetOutsideData: a target the lifecycle data cannot judge is a
// usage error with a hint naming a target that works.
func TestTargetOutsideData(t *testing.T) {
	cg := cli.NewTestClientGetter()
	newest := dep.BuiltinRelease().Add(dep.KnownAhead)
	for _, target := range []string{"v" + newest.Add(1).String(), "v1.99", "v2.0"} {
		_, errOut, code := runCmd(t, cg, "", "-f", "testdata/ci", "--target", target)
		if code != cli.ExitUsage {
			t.Errorf("--target %s: exit %d, want 2\n%s", target, code, errOut)
		}
	}
	if _, errOut, code := runCmd(t, cg, "", "-f", "testdata/ci", "--target", "v"+newest.String()); code != cli.ExitFindings {
		t.Errorf("--target v%s: exit %d, want 1\n%s", newest, code, errOut)
	}
}
