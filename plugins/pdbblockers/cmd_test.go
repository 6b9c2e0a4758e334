package pdbblockers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func loadObjects(t *testing.T, name string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".input.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(js, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", doc, err)
		}
		out = append(out, obj)
	}
	return out
}

type result struct {
	out, errOut string
	code        int
}

func run(t *testing.T, c *fake.Clientset, ns string, args ...string) result {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cg := cli.NewTestClientGetter().WithKube(c)
	if ns != "" {
		cg.NS, cg.NSExplicit = ns, true
	}
	cmd := NewCmdWithClock(cg, streams, clocktesting.NewFakePassiveClock(now))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		var fe *cli.FindingsError
		if !errors.As(err, &fe) {
			errOut.WriteString("error: " + err.Error() + "\n")
		}
	}
	return result{out: out.String(), errOut: errOut.String(), code: cli.ExitCode(err)}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name+".golden", got)
}

func TestRun_Golden(t *testing.T) {
	for _, format := range []string{"table", "wide", "json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			c := fake.NewClientset(loadObjects(t, "mixed")...)
			r := run(t, c, "", "gpu-1", "gpu-2", "-o", format, "--color", "never")
			if r.code != cli.ExitFindings {
				t.Errorf("exit %d, want 1; stderr %s", r.code, r.errOut)
			}
			golden(t, "mixed."+format, r.out)
			if format == "table" {
				golden(t, "mixed.stderr", r.errOut)
			}
		})
	}
}

func TestRun_Color(t *testing.T) {
	c := fake.NewClientset(loadObjects(t, "mixed")...)
	r := run(t, c, "", "gpu-2", "--color", "always")
	golden(t, "mixed.color", r.out)
}

func TestRun_Verdicts(t *testing.T) {
	c := fake.NewClientset(loadObjects(t, "mixed")...)
	r := run(t, c, "", "gpu-1", "gpu-2", "-o", "json", "--all-pods")
	var rep Report
	if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, it := range rep.Items {
		got[it.Namespace+"/"+it.Name] = string(it.Verdict) + " " + string(it.Eviction.Reason)
	}
	want := map[string]string{
		"kube-system/agent-1": "Ignored Evicted",
		"ml/web-abc-1":        "Now Evicted",
		"ml/web-abc-2":        "Later BudgetExhausted",
		"ml/db-0":             "Never BudgetExhausted",
		"ml/crash-xyz-1":      "Later BudgetExhausted",
		"ml/notebook":         "Never Evicted",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
	if rep.Summary.CordonedNodes != 1 || rep.Nodes[1].CordonedSince == nil {
		t.Errorf("cordon not reported: %+v", rep.Nodes)
	}
}

func TestRun_ExitCodes(t *testing.T) {
	objs := loadObjects(t, "mixed")
	tests := []struct {
		name string
		args []string
		ns   string
		code int
		err  string
	}{
		{name: "only the evictable node, fail on warning", args: []string{"gpu-1", "-q"}, code: 1},
		{name: "fail on blocking ignores waits", args: []string{"gpu-1", "-q", "--fail-on", "blocking"}, code: 0},
		{name: "flags that let pods go", args: []string{"gpu-2", "-q", "--fail-on", "blocking", "--force", "--delete-emptydir-data"}, code: 1},
		{name: "selector", args: []string{"-l", "nothing=here"}, code: 0, err: `no nodes match -l "nothing=here"`},
		{name: "all nodes", args: []string{"--all-nodes", "-q"}, code: 1},
		{name: "namespace alone checks every node", args: []string{"-q"}, ns: "kube-system", code: 0},
		{name: "missing node", args: []string{"gpu-9"}, code: 2, err: "node not found: gpu-9"},
		{name: "no node", args: []string{}, code: 2, err: "no nodes given: name them (NODE...), select them with -l SELECTOR or pass --all-nodes"},
		{name: "two ways of naming nodes", args: []string{"gpu-1", "--all-nodes"}, code: 2, err: "not several"},
		{name: "bad selector", args: []string{"-l", "a=(b"}, code: 2, err: `invalid label selector -l "a=(b"`},
		{name: "bad timeout", args: []string{"gpu-1", "--drain-timeout", "0s"}, code: 2, err: "--drain-timeout must be positive"},
		{name: "duplicate node", args: []string{"gpu-1", "gpu-1"}, code: 2, err: "given twice"},
		{name: "quiet json", args: []string{"gpu-1", "-q", "-o", "json"}, code: 2, err: "--quiet cannot be combined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, fake.NewClientset(objs...), tc.ns, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", r.code, tc.code, r.errOut)
			}
			if !strings.Contains(r.errOut, tc.err) {
				t.Errorf("stderr %q does not contain %q", r.errOut, tc.err)
			}
			if strings.Contains(strings.Join(tc.args, " "), "-q") && tc.code != 2 && r.out != "" {
				t.Errorf("-q printed %q", r.out)
			}
		})
	}
}

func TestRun_ForbiddenNamespace(t *testing.T) {
	objs := append(loadObjects(t, "mixed"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}})
	c := fake.NewClientset(objs...)
	c.PrependReactor("list", "poddisruptionbudgets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "" || a.GetNamespace() == "ml" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, "", errors.New("denied"))
		}
		return false, nil, nil
	})
	r := run(t, c, "", "gpu-1", "-o", "json")
	if r.code != cli.ExitUnavailable {
		t.Errorf("exit %d, want 3", r.code)
	}
	if !strings.Contains(r.errOut, "could not read namespace ml;") {
		t.Errorf("stderr = %s", r.errOut)
	}
	var rep Report
	if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Forbidden) != 1 || rep.Forbidden[0].Namespace != "ml" || len(rep.Items) != 2 || rep.Items[0].Verdict != eviction.OutcomeUnknown {
		t.Errorf("report = %+v", rep)
	}
	r = run(t, c, "", "gpu-1", "-q", "--allow-partial")
	if r.code != cli.ExitFindings {
		t.Errorf("--allow-partial exit %d, want 1 (unknown verdicts are warnings)", r.code)
	}
}

func TestRun_ServerDryRun(t *testing.T) {
	c := fake.NewClientset(loadObjects(t, "mixed")...)
	var evictions []string
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ca := a.(k8stesting.CreateAction)
		evictions = append(evictions, ca.GetNamespace()+"/"+a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName())
		// The server disagrees about every pod: it says the budget is stale.
		return true, nil, pdbStale("web")
	})
	r := run(t, c, "", "gpu-1", "gpu-2", "-o", "json", "--server-dry-run", "--all-pods")
	var rep Report
	if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	// One dry run per budget: web (first pod only), db, crash.
	if diff := cmp.Diff([]string{"ml/web-abc-1", "ml/crash-xyz-1", "ml/db-0"}, evictions); diff != "" {
		t.Errorf("dry-run evictions (-want +got):\n%s", diff)
	}
	if rep.Summary.DryRuns != 3 || rep.Summary.DryRunDisagreements != 3 {
		t.Errorf("summary = %+v", rep.Summary)
	}
	if !strings.Contains(r.errOut, "disagree") {
		t.Errorf("stderr = %s", r.errOut)
	}
}

// TestRun_ServerDryRunFirstEvictionPerBudget: the dry run goes to the
// first eviction per budget, which is listed even though it evicts now, and
// is compared with the pod's stand-alone prediction. web allows one
// disruption and has two pods on gpu-1: the drain evicts web-abc-1 and then
// rightly predicts web-abc-2 LATER, while a dry run (which spends no
// budget) rightly accepts either. The server below answers as the budgets
// stand: web accepts, db and crash are exhausted.
func TestRun_ServerDryRunFirstEvictionPerBudget(t *testing.T) {
	c := fake.NewClientset(loadObjects(t, "mixed")...)
	var evictions []string
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		evictions = append(evictions, a.GetNamespace()+"/"+name)
		if strings.HasPrefix(name, "web-") {
			return true, nil, nil
		}
		pdb := strings.SplitN(name, "-", 2)[0]
		return true, nil, budgetExhausted(pdb, 2, 1)
	})
	r := run(t, c, "", "gpu-1", "gpu-2", "-o", "json", "--server-dry-run")
	var rep Report
	if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.errOut)
	}
	if diff := cmp.Diff([]string{"ml/web-abc-1", "ml/crash-xyz-1", "ml/db-0"}, evictions); diff != "" {
		t.Errorf("dry-run evictions (-want +got):\n%s", diff)
	}
	byName := map[string]Item{}
	for _, it := range rep.Items {
		byName[it.Name] = it
	}
	web1, ok := byName["web-abc-1"]
	switch {
	case !ok:
		t.Errorf("web-abc-1, the dry-run pod, is not listed: %+v", rep.Items)
	case web1.DryRun == nil || !web1.DryRun.Agrees || web1.DryRun.Predicted.Reason != eviction.ReasonEvicted:
		t.Errorf("web-abc-1 dry run = %+v, want Evicted and agreeing", web1.DryRun)
	}
	if web2 := byName["web-abc-2"]; web2.Verdict != eviction.OutcomeLater || web2.DryRun != nil {
		t.Errorf("web-abc-2 = %s with dry run %+v, want Later (budget spent by the drain) and no dry run", web2.Verdict, web2.DryRun)
	}
	if rep.Summary.DryRuns != 3 || rep.Summary.DryRunDisagreements != 0 {
		t.Errorf("summary = %+v, want 3 dry runs, all agreeing", rep.Summary)
	}
	if strings.Contains(r.errOut, "disagree") {
		t.Errorf("stderr = %s", r.errOut)
	}
}

// budgetExhausted is the API server's refusal when a budget allows no
// disruption (pkg/registry/core/pod/storage/eviction.go, checkAndDecrement).
func budgetExhausted(name string, desired, current int) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", name, desired, current)}}
	return err
}

// pdbStale is the API server's refusal while a budget's status is stale.
func pdbStale(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: "The disruption budget " + name + " is still being processed by the server."}}
	return err
}

// TestRun_ServerDryRunThrottled: a 429 without a budget cause is the server
// throttling, not its verdict; the dry run is asked again after Retry-After.
func TestRun_ServerDryRunThrottled(t *testing.T) {
	c := fake.NewClientset(loadObjects(t, "mixed")...)
	calls := 0
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		calls++
		if calls == 1 {
			return true, nil, apierrors.NewTooManyRequests("too many requests, please try again later", 1)
		}
		return true, nil, nil
	})
	r := run(t, c, "", "gpu-1", "-o", "json", "--server-dry-run", "--all-pods")
	var rep Report
	if err := yaml.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("%d dry-run evictions, want 2 (the throttled one asked again)", calls)
	}
	for _, it := range rep.Items {
		if it.DryRun != nil && it.DryRun.Result.Reason == eviction.ReasonThrottled {
			t.Errorf("%s/%s: throttled dry run reported as the server's answer", it.Namespace, it.Name)
		}
	}
}

func TestHelpNamesProviderLimits(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cli.NewTestClientGetter(), streams)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"GKE", "EKS", "AKS", "Karpenter", "Exit codes:", "kubectl pdb-blockers"} {
		if !bytes.Contains(out.Bytes(), []byte(s)) {
			t.Errorf("help lacks %q", s)
		}
	}
}

func TestRun_Contexts(t *testing.T) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cg := cli.NewTestClientGetter()
	blocked := cli.NewTestClientGetter().WithKube(fake.NewClientset(loadObjects(t, "mixed")...))
	blocked.Meta.Context = "blocked"
	clean := cli.NewTestClientGetter().WithKube(fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-2"}}))
	clean.Meta.Context = "clean"
	cg.PerContext = map[string]*cli.TestClientGetter{"blocked": blocked, "clean": clean}
	cmd := NewCmdWithClock(cg, streams, clocktesting.NewFakePassiveClock(now))
	cmd.SetArgs([]string{"gpu-1", "gpu-2", "--contexts", "clean,blocked,test", "-o", "json"})
	err := cmd.ExecuteContext(context.Background())
	if code := cli.ExitCode(err); code != cli.ExitUnavailable {
		t.Fatalf("exit %d (%v), want 3: context test is unreachable", code, err)
	}
	golden(t, "contexts.json", out.String())
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Context  string  `json:"context"`
			Error    string  `json:"error"`
			ExitCode int     `json:"exitCode"`
			Report   *Report `json:"report"`
		} `json:"items"`
	}
	if err := yaml.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if list.Kind != "PDBBlockersReportList" || len(list.Items) != 3 {
		t.Fatalf("kind %s, %d items", list.Kind, len(list.Items))
	}
	byName := map[string]int{}
	for i, it := range list.Items {
		byName[it.Context] = i
	}
	if it := list.Items[byName["clean"]]; it.ExitCode != 0 || it.Report == nil || it.Report.Summary.Nodes != 2 {
		t.Errorf("clean: %+v", it)
	}
	b := list.Items[byName["blocked"]]
	if b.ExitCode != cli.ExitFindings || b.Report == nil || b.Report.Summary.Never == 0 {
		t.Fatalf("blocked: exit %d, report %+v", b.ExitCode, b.Report)
	}
	fixes := 0
	for _, it := range b.Report.Items {
		for _, bl := range it.Blockers {
			if strings.HasPrefix(bl.Fix, "kubectl ") {
				fixes++
				if !strings.HasSuffix(bl.Fix, " --context blocked") {
					t.Errorf("fix %q does not name its context", bl.Fix)
				}
			}
		}
		if it.BreakGlass != nil && !strings.HasSuffix(it.BreakGlass.Command, " --context blocked") {
			t.Errorf("break-glass %q does not name its context", it.BreakGlass.Command)
		}
	}
	if fixes == 0 {
		t.Error("no fixes in the blocked context")
	}
	if it := list.Items[byName["test"]]; it.ExitCode != cli.ExitUnavailable || it.Error == "" {
		t.Errorf("test: %+v", it)
	}
	if !strings.Contains(errOut.String(), "error: context test:") {
		t.Errorf("stderr %q", errOut)
	}

	// The table names the context in its first column.
	streams, _, out, _ = genericiooptions.NewTestIOStreams()
	cmd = NewCmdWithClock(cg, streams, clocktesting.NewFakePassiveClock(now))
	cmd.SetArgs([]string{"gpu-1", "gpu-2", "--contexts", "blocked", "--color", "never"})
	if code := cli.ExitCode(cmd.ExecuteContext(context.Background())); code != cli.ExitFindings {
		t.Fatalf("exit %d, want 1", code)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "CONTEXT ") || !strings.HasPrefix(lines[1], "blocked ") {
		t.Errorf("table:\n%s", out)
	}

	// --context and --contexts do not mix.
	streams, _, _, _ = genericiooptions.NewTestIOStreams()
	cmd = NewCmdWithClock(cg, streams, clocktesting.NewFakePassiveClock(now))
	cmd.SetArgs([]string{"gpu-1", "--contexts", "blocked", "--parallel", "0"})
	if code := cli.ExitCode(cmd.ExecuteContext(context.Background())); code != cli.ExitUsage {
		t.Errorf("--parallel 0: exit %d, want 2", code)
	}
}

// TestWriteJSONMatchesPrintStructured checks the chunked, parallel encoder
// against the suite's JSON printer on reports of several chunks.
func TestWriteJSONMatchesPrintStructured(t *testing.T) {
	for _, n := range []int{0, 1, 3*1024 + 7} {
		r := newReport(cli.Metadata{Context: "c"}, now)
		for i := 0; i < n; i++ {
			r.Items = append(r.Items, Item{Node: "n", Namespace: "ml", Name: "p-" + strings.Repeat("x", i%7),
				Verdict: eviction.OutcomeLater, Blockers: []eviction.Blocker{{Message: "waits <for> & more", Fix: "kubectl get pdb"}}})
		}
		var got bytes.Buffer
		if err := writeJSON(&got, r); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := cli.PrintStructured(&want, cli.OutputJSON, r); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("%d items: writeJSON differs from PrintStructured (%d vs %d bytes)", n, got.Len(), want.Len())
		}
		if n > 0 && !strings.Contains(got.String(), "waits <for> & more") {
			t.Error("HTML characters escaped")
		}
	}
}

// BenchmarkWriteJSON encodes a report shaped like the 50,000-pod scale run:
// 42,500 pods waiting on a spent budget, each with its budget and two
// blockers.
func BenchmarkWriteJSON(b *testing.B) {
	r := newReport(cli.Metadata{Context: "c"}, now)
	for i := 0; i < 42500; i++ {
		pdb := "app-" + strings.Repeat("0", 5)
		r.Items = append(r.Items, Item{Node: "scale-00001", Namespace: "ml-training", Name: "p-002001", PDBs: []string{pdb},
			Verdict: eviction.OutcomeLater, Severity: cli.SeverityWarning,
			Eviction: eviction.Result{Reason: eviction.ReasonBudgetExhausted, Code: 429, Message: "The disruption budget " + pdb + " needs 9 healthy pods and has 9 currently", PDB: pdb, DesiredHealthy: ptr.To[int32](9), CurrentHealthy: ptr.To[int32](9)},
			Budget:   &eviction.Budget{Name: pdb, CurrentHealthy: 9, DesiredHealthy: 9, ExpectedPods: 10, Spent: 1, UnhealthyPodEvictionPolicy: "IfHealthyBudget"},
			Blockers: []eviction.Blocker{
				{Kind: "BudgetSpentByDrain", Outcome: eviction.OutcomeLater, PDB: pdb, Message: "this drain already evicted 1 pod under the budget, which allowed 1; it waits for their replacements to become Ready", Fix: "kubectl get pdb " + pdb + " -n ml-training -w"},
				{Kind: "NoController", Outcome: eviction.OutcomeNow, Message: "pod has no controller: --force evicts it and nothing recreates it", FixWarning: "the pod is deleted for good"},
			}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		var n countingWriter
		if err := writeJSON(&n, r); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(n))
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// TestRun_SkipsTheRunningWorkflow: a fleet step checks the pool its own
// Argo workflow pod runs on (the management cluster upgraded by its own
// run). Its pod and its siblings are not counted, and the output says so;
// another workflow's pod still is.
func TestRun_SkipsTheRunningWorkflow(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mgmt-1", Labels: map[string]string{"pool": "system"}}}
	pod := func(name, wf string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "argo", Name: name,
			Labels:          map[string]string{eviction.ArgoWorkflowLabel: wf},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: wf, Controller: ptr.To(true)}}},
			// Argo's executor shares var-run-argo, an emptyDir, with the main
			// container: a drain without --delete-emptydir-data refuses it.
			Spec:   corev1.PodSpec{NodeName: "mgmt-1", Volumes: []corev1.Volume{{Name: "var-run-argo", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	objs := func(extra ...runtime.Object) []runtime.Object {
		return append([]runtime.Object{node, pod("ring-r1-pdb-1", "ring-r1"), pod("ring-r1-gate-2", "ring-r1")}, extra...)
	}
	args := []string{"-l", "pool=system", "--fail-on", "blocking", "-o", "json"}
	// Not in a pod of the workflow: its pods are counted as they are.
	t.Setenv("POD_NAMESPACE", "argo")
	t.Setenv("POD_NAME", "laptop")
	base := run(t, fake.NewClientset(objs()...), "", args...)
	if base.code != 1 || strings.Contains(base.out, `"skipped"`) || !strings.Contains(base.out, "ring-r1-pdb-1") {
		t.Fatalf("outside the workflow: exit %d\n%s", base.code, base.out)
	}
	t.Setenv("POD_NAME", "ring-r1-pdb-1")
	r := run(t, fake.NewClientset(objs()...), "", args...)
	if r.code != 0 || strings.Contains(r.out, `"name": "ring-r1-`) {
		t.Errorf("exit %d, the workflow's pods listed:\n%s", r.code, r.out)
	}
	const note = "skipped 2 pods of the running workflow argo/ring-r1 (ring-r1-gate-2, ring-r1-pdb-1)"
	if !strings.Contains(r.out, `"skipped": "`+note) || !strings.Contains(r.errOut, "Note: "+note) {
		t.Errorf("the skip is not said:\nstdout %s\nstderr %s", r.out, r.errOut)
	}
	// Another workflow's pod on the node is still judged.
	r = run(t, fake.NewClientset(objs(pod("other-1", "other"))...), "", args...)
	if !strings.Contains(r.out, "other-1") {
		t.Errorf("another workflow's pod is not judged:\n%s", r.out)
	}
}

// TestRun_DemoNames pins the default table for names as long as the demo
// cluster's: node, pod and budget names are what a user acts on and stay
// whole, so REASON, which no longer fits beside them within the
// 120-column budget and FIX's reserve, is left to -o wide; FIX is never
// cut (a longer one runs past the budget), and -o wide carries every
// value whole. Names that leave room keep REASON, shortened
// (TestRun_MixedFits).
func TestRun_DemoNames(t *testing.T) {
	nodes := []string{"gke-gpufleet-prod-h100-c-8f3a2b1c-q7xk", "gke-gpufleet-prod-h100-c-8f3a2b1c-z2mp"}
	r := run(t, fake.NewClientset(loadObjects(t, "demo")...), "", append(nodes, "--color", "never")...)
	if r.code != cli.ExitFindings {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	golden(t, "demo.table", r.out)
	table := strings.SplitN(r.out, "\n\n", 2)[0]
	lines := strings.Split(table, "\n")
	if strings.Contains(table, cli.ElisionMark) {
		t.Errorf("a name is shortened:\n%s", table)
	}
	if strings.Contains(lines[0], "REASON") {
		t.Errorf("REASON is kept although the names leave it no room within %d columns:\n%s", cli.DefaultTableWidth, table)
	}
	for _, name := range append(nodes, "inference/llm-serve-canary-5f6b7c8d9e-p4v9w", "training/llama-pretrain-checkpoint-store-0", "llama-pretrain-checkpoint-store") {
		if !strings.Contains(table, name+"   ") {
			t.Errorf("%s is not whole in its column:\n%s", name, table)
		}
	}
	wide := run(t, fake.NewClientset(loadObjects(t, "demo")...), "", append(nodes, "--color", "never", "-o", "wide")...)
	golden(t, "demo.wide", wide.out)
	if strings.Contains(wide.out, cli.ElisionMark) {
		t.Errorf("-o wide shortens a value:\n%s", wide.out)
	}
	// Every fix is whole in both views.
	for _, want := range []string{
		"kubectl get pdb llm-serve -n inference -w",
		`kubectl patch pdb llm-serve-canary -n inference --type merge -p '{"spec":{"unhealthyPodEvictionPolicy":"AlwaysAllow"}}'`,
		"kubectl scale statefulset/llama-pretrain-checkpoint-store -n training --replicas=3",
		"kubectl drain gke-gpufleet-prod-h100-c-8f3a2b1c-z2mp --ignore-daemonsets --timeout=7260s",
	} {
		if !strings.Contains(r.out, want) || !strings.Contains(wide.out, want) {
			t.Errorf("a fix is cut: %q", want)
		}
	}
}

// TestRun_MixedFits: with short names, REASON stays and is shortened so
// that every column before FIX fits the 120-column budget with FIX's
// reserve; names stay whole.
func TestRun_MixedFits(t *testing.T) {
	r := run(t, fake.NewClientset(loadObjects(t, "mixed")...), "", "gpu-1", "gpu-2", "--color", "never")
	table := strings.SplitN(r.out, "\n\n", 2)[0]
	lines := strings.Split(table, "\n")
	fix := strings.Index(lines[0], "FIX")
	if !strings.Contains(lines[0], "REASON") || fix < 0 || fix+fixReserve > cli.DefaultTableWidth {
		t.Fatalf("REASON missing, or FIX at column %d leaves less than its reserve of %d:\n%s", fix, fixReserve, table)
	}
	if !strings.Contains(table, cli.ElisionMark) {
		t.Errorf("no reason is shortened:\n%s", table)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 3 || strings.Contains(f[0]+f[1]+f[2], cli.ElisionMark) {
			t.Errorf("a name is cut: %q", l)
		}
	}
}
