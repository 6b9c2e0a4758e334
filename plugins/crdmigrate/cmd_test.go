package crdmigrate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	goldenfile "github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/crdmigrate"
)

func crd(group, plural string, storage string, stored []string, conv *apiextv1.CustomResourceConversion) *apiextv1.CustomResourceDefinition {
	c := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, UID: types.UID("uid-" + plural), Generation: 1},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextv1.NamespaceScoped,
			Names:      apiextv1.CustomResourceDefinitionNames{Plural: plural, Kind: "Thing", ListKind: "ThingList"},
			Conversion: conv,
		},
		Status: apiextv1.CustomResourceDefinitionStatus{StoredVersions: stored},
	}
	for _, v := range []string{"v1beta1", "v1"} {
		c.Spec.Versions = append(c.Spec.Versions, apiextv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == storage, Deprecated: v == "v1beta1"})
	}
	return c
}

func thing(group, plural, ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Thing",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": "5"},
	}}
}

// fixture: three CRDs; queues needs a migration, jobs is blocked by a
// conversion webhook without endpoints, flavors is up to date.
func fixture() *cli.TestClientGetter {
	return fixtureNamed(fixtureNames{group: "example.dev", migrate: "queues", blocked: "jobs", ok: "flavors", ns: "sys", conv: "conv", webhook: "queues.policy.dev", objectNS: "ml"})
}

// fixtureNames names fixture's group, CRDs, webhook service and namespaces.
type fixtureNames struct {
	group, migrate, blocked, ok, ns, conv, webhook, objectNS string
}

// fixtureNamed is fixture with the names of n.
func fixtureNamed(n fixtureNames) *cli.TestClientGetter {
	conv := &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
		ClientConfig:             &apiextv1.WebhookClientConfig{Service: &apiextv1.ServiceReference{Namespace: n.ns, Name: n.conv, Port: ptr.To[int32](443)}},
		ConversionReviewVersions: []string{"v1"},
	}}
	ext := apiextfake.NewSimpleClientset(
		crd(n.group, n.migrate, "v1", []string{"v1beta1", "v1"}, nil),
		crd(n.group, n.blocked, "v1", []string{"v1beta1", "v1"}, conv),
		crd(n.group, n.ok, "v1", []string{"v1"}, nil),
	)
	vwc := &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "policy"},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:         n.webhook,
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: n.ns, Name: "policy", Port: ptr.To[int32](443)}},
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{n.group}, APIVersions: []string{"v1beta1"}, Resources: []string{n.migrate}},
			}},
			FailurePolicy: ptr.To(admissionv1.Ignore),
		}},
	}
	kube := kubefake.NewClientset(vwc,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: n.ns, Name: n.conv}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}},
	)
	installConfigMapVersions(kube)
	scheme := runtime.NewScheme()
	lists := map[schema.GroupVersionResource]string{}
	for _, p := range []string{n.migrate, n.blocked, n.ok} {
		lists[schema.GroupVersionResource{Group: n.group, Version: "v1", Resource: p}] = "ThingList"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, lists)
	add := func(plural, name string) {
		gvr := schema.GroupVersionResource{Group: n.group, Version: "v1", Resource: plural}
		if err := dyn.Tracker().Create(gvr, thing(n.group, plural, n.objectNS, name), n.objectNS); err != nil {
			panic(err)
		}
	}
	for i := range 3 {
		add(n.migrate, fmt.Sprintf("q-%d", i))
	}
	add(n.blocked, "j-0")
	return cli.NewTestClientGetter().WithKube(kube).WithAPIExtensions(ext).WithDynamic(dyn)
}

// installConfigMapVersions gives ConfigMaps resource versions, as the
// apiserver does, so checkpoint updates work against the fake.
func installConfigMapVersions(k *kubefake.Clientset) {
	var mu sync.Mutex
	rv := 0
	bump := func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		rv++
		var obj runtime.Object
		switch a := a.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		}
		obj.(metav1.Object).SetResourceVersion(strconv.Itoa(rv))
		return false, nil, nil
	}
	k.PrependReactor("create", "configmaps", bump)
	k.PrependReactor("update", "configmaps", bump)
}

func run(t *testing.T, cg *cli.TestClientGetter, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	// As cli.Run prints it: a finding count is no error line.
	var fe *cli.FindingsError
	if err != nil && !errors.As(err, &fe) {
		fmt.Fprintf(errOut, "error: %v\n", err)
	}
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, name+".golden", got)
}

func TestStatus(t *testing.T) {
	cases := []struct {
		name     string
		args     []string
		golden   string
		wantCode int
	}{
		{"table of every CRD", []string{"--color", "never"}, "status.table", cli.ExitFindings},
		{"status subcommand, wide", []string{"status", "-o", "wide", "--color", "never"}, "status.wide", cli.ExitFindings},
		{"json", []string{"status", "-o", "json"}, "status.json", cli.ExitFindings},
		{"colour", []string{"status", "queues.example.dev", "flavors.example.dev", "--color", "always"}, "status.color", cli.ExitFindings},
		{"up to date CRD only", []string{"status", "flavors.example.dev", "--color", "never"}, "status-ok.table", cli.ExitOK},
		{"fail only on blocked", []string{"status", "queues.example.dev", "--fail-on", "blocking", "-q"}, "", cli.ExitOK},
		{"blocked fails at blocking", []string{"status", "jobs.example.dev", "--fail-on", "blocking", "-q"}, "", cli.ExitFindings},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, fixture(), tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out, errOut)
			}
			if tc.golden != "" {
				golden(t, tc.golden, out)
			} else if out != "" {
				t.Errorf("stdout with -q: %q", out)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "name at least one CRD, or give --all"},
		{[]string{"run", "--all", "a.b"}, "not both"},
		{[]string{"run", "a.b", "--method", "fast"}, `unknown --method "fast"`},
		{[]string{"run", "a.b", "--qps", "0"}, "--qps must be positive"},
		{[]string{"run", "a.b", "--workers", "0"}, "--workers must be between 1 and 256"},
		{[]string{"run", "a.b", "-o", "json", "-q"}, "--quiet cannot be combined"},
		{[]string{"status", "queues"}, "is not a CustomResourceDefinition name"},
		{[]string{"status", "--fail-on", "never"}, "unknown --fail-on"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := run(t, fixture(), tc.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

func TestStatus_MissingCRD(t *testing.T) {
	_, errOut, code := run(t, fixture(), "status", "nope.example.dev")
	if code != cli.ExitUnavailable || !strings.Contains(errOut, `customresourcedefinition "nope.example.dev" not found`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestRunDryRun(t *testing.T) {
	cg := fixture()
	out, errOut, code := run(t, cg, "run", "--all", "--dry-run=server", "--qps", "2", "-o", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d (jobs is blocked), stderr %s", code, errOut)
	}
	golden(t, "dry-run.json", out)
	// Nothing changed: no writes of any kind.
	for _, a := range cg.DynamicClient.(*dynamicfake.FakeDynamicClient).Actions() {
		if a.GetVerb() == "update" {
			if u, ok := a.(k8stesting.UpdateActionImpl); !ok || len(u.UpdateOptions.DryRun) == 0 {
				t.Errorf("dry run sent a real update: %v", a)
			}
		}
	}
	for _, a := range cg.KubeClient.(*kubefake.Clientset).Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("dry run wrote: %v", a)
		}
	}
}

// TestRunDryRunClient: --dry-run=client (and a bare --dry-run) only
// reads, sending no dry-run update either; an unknown value is exit 2.
func TestRunDryRunClient(t *testing.T) {
	for _, flag := range []string{"--dry-run=client", "--dry-run"} {
		cg := fixture()
		out, errOut, code := run(t, cg, "run", "--all", flag, "-o", "json")
		if code != cli.ExitFindings || !strings.Contains(out, "no dry-run update sent (--dry-run=client)") {
			t.Fatalf("%s: exit %d, stderr %s\n%s", flag, code, errOut, out)
		}
		for _, a := range cg.DynamicClient.(*dynamicfake.FakeDynamicClient).Actions() {
			if a.GetVerb() != "get" && a.GetVerb() != "list" {
				t.Errorf("%s wrote: %v", flag, a)
			}
		}
	}
	_, errOut, code := run(t, fixture(), "run", "--all", "--dry-run=maybe")
	if code != cli.ExitUsage || !strings.Contains(errOut, `unknown --dry-run value "maybe": want none, client or server`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestRun(t *testing.T) {
	cg := fixture()
	out, errOut, code := run(t, cg, "run", "queues.example.dev", "--method", "client", "-o", "json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var rep RunReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Items) != 1 {
		t.Fatalf("report: %v\n%s", err, out)
	}
	golden(t, "run.json", goldenfile.Steady(out, "runID", "seconds", "startedAt", "finishedAt"))
	it := rep.Items[0]
	if it.Outcome != OutcomeMigrated || it.Processed != 3 || !slices.Equal(it.StoredVersionsAfter, []string{"v1"}) {
		t.Errorf("item = %+v", it)
	}
	got, _ := cg.ExtClient.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "queues.example.dev", metav1.GetOptions{})
	if !slices.Equal(got.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions = %v", got.Status.StoredVersions)
	}
	for _, want := range []string{"pre-flight checks", "run " + it.RunID + " rewrites objects at v1", "all 3 objects done", "status.storedVersions is now [v1]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("progress lines lack %q:\n%s", want, errOut)
		}
	}
	// The checkpoint is gone after a finished run.
	if _, err := cg.KubeClient.CoreV1().ConfigMaps("kube-system").Get(context.Background(), crdmigrate.CheckpointName("queues.example.dev"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("checkpoint left behind: %v", err)
	}
}

func TestRun_PreflightRefuses(t *testing.T) {
	cg := fixture()
	out, errOut, code := run(t, cg, "run", "jobs.example.dev", "--method", "client")
	if code != cli.ExitFindings || !strings.Contains(errOut, "pre-flight check of jobs.example.dev failed, nothing was changed: conversion webhook at service sys/conv:443 is down: no ready endpoints") ||
		strings.Contains(out, "needs a migration") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

func TestRun_StopsOnObjectExit4(t *testing.T) {
	cg := fixture()
	cg.DynamicClient.(*dynamicfake.FakeDynamicClient).PrependReactor("update", "queues", func(a k8stesting.Action) (bool, runtime.Object, error) {
		u := a.(k8stesting.UpdateActionImpl)
		if len(u.UpdateOptions.DryRun) == 0 && u.Object.(*unstructured.Unstructured).GetName() == "q-1" {
			return true, nil, apierrors.NewBadRequest(`admission webhook "v.policy.dev" denied the request: frozen`)
		}
		return false, nil, nil
	})
	out, errOut, code := run(t, cg, "run", "queues.example.dev", "--method", "client", "--workers", "1", "--color", "never")
	if code != cli.ExitIncomplete || !strings.Contains(errOut, "rewriting queues.example.dev ml/q-1 stopped the migration") {
		t.Errorf("exit %d\nstderr %s", code, errOut)
	}
	if !strings.Contains(out, "ERROR") {
		t.Errorf("table does not say ERROR:\n%s", out)
	}
	got, _ := cg.ExtClient.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), "queues.example.dev", metav1.GetOptions{})
	if !slices.Equal(got.Status.StoredVersions, []string{"v1beta1", "v1"}) {
		t.Errorf("storedVersions after a stopped run = %v", got.Status.StoredVersions)
	}
}

func TestRun_InTreeNotServed(t *testing.T) {
	_, errOut, code := run(t, fixture(), "run", "queues.example.dev", "--method", "in-tree")
	if code != cli.ExitUnavailable || !strings.Contains(errOut, "does not serve storagemigration.k8s.io") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(crdmigrate.Progress{CRD: "queues.example.dev", Processed: 250, Total: 1000, Session: 250}, 5e9)
	want := "queues.example.dev [######..................] 250/1000  25% 50 obj/s ETA 15s"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	_ = bytes.MinRead
}

func TestStatus_Contexts(t *testing.T) {
	cg := fixture()
	cg.PerContext = map[string]*cli.TestClientGetter{
		"broken": {Meta: cli.Metadata{Context: "broken"}, Err: errors.New("connection refused")},
	}
	out, errOut, code := run(t, cg, "status", "queues.example.dev", "--all-contexts", "--color", "never")
	if code != cli.ExitUnavailable {
		t.Fatalf("exit %d, want 3 (one context unreachable)\n%s\n%s", code, out, errOut)
	}
	golden(t, "status-contexts.table", out)
	js, _, _ := run(t, cg, "status", "queues.example.dev", "--all-contexts", "-o", "json")
	golden(t, "status-contexts.json", js)
	if !strings.Contains(errOut, "error: context broken:") {
		t.Errorf("stderr does not name the broken context:\n%s", errOut)
	}
	out, _, code = run(t, cg, "status", "queues.example.dev", "--contexts", "test", "-o", "json")
	var list cli.ReportList
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != cli.ExitFindings || list.Kind != "CRDStatusReportList" || len(list.Items) != 1 || list.Items[0].ExitCode != cli.ExitFindings {
		t.Errorf("exit %d, err %v, list %+v", code, err, list)
	}
	_, errOut, code = run(t, cg, "status", "--contexts", "nope")
	if code != cli.ExitUsage || !strings.Contains(errOut, `context "nope" is not in the kubeconfig`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

// TestTables_LongNames pins status, the dry-run plan and the run table for
// CRDs named as Kueue names its own, with its webhook service: each fits
// 120 columns with every name whole (reasons shortened with the mark,
// STORED and the run's METHOD left to -o wide), and -o wide carries every value
// whole.
func TestTables_LongNames(t *testing.T) {
	long := fixtureNames{group: "kueue.x-k8s.io", migrate: "provisioningrequestconfigs", blocked: "workloadpriorityclasses",
		ok: "resourceflavors", ns: "kueue-system", conv: "kueue-webhook-service", webhook: "vprovisioningrequestconfig.kb.io", objectNS: "training"}
	for _, tc := range []struct {
		golden string
		args   []string
		whole  []string
	}{
		{"long-status", []string{"status"}, []string{"workloadpriorityclasses.kueue.x-k8s.io",
			"conversion webhook at service kueue-system/kueue-webhook-service:443 is down: no ready endpoints"}},
		{"long-plan", []string{"run", "--all", "--dry-run=server"}, []string{"workloadpriorityclasses.kueue.x-k8s.io",
			"conversion webhook at service kueue-system/kueue-webhook-service:443 is down: no ready endpoints"}},
		{"long-run", []string{"run", "provisioningrequestconfigs.kueue.x-k8s.io", "--method", "client"}, []string{"provisioningrequestconfigs.kueue.x-k8s.io"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, _ := run(t, fixtureNamed(long), append(tc.args, "--color", "never")...)
			// A run's id and duration change from run to run.
			pin := !strings.HasSuffix(tc.golden, "-run")
			if pin {
				golden(t, tc.golden+".table", out)
			}
			goldenfile.CheckWidth(t, strings.SplitN(out, "\n\n", 2)[0], cli.DefaultTableWidth)
			for _, name := range []string{"provisioningrequestconfigs.kueue.x-k8s.io", "workloadpriorityclasses.kueue.x-k8s.io"} {
				if strings.Contains(strings.Join(tc.args, " "), "--all") || tc.golden == "long-status" || strings.Contains(strings.Join(tc.args, " "), name) {
					if !strings.Contains(out, name) {
						t.Errorf("the name %s is not whole:\n%s", name, out)
					}
				}
			}
			if pin && !strings.Contains(out, cli.ElisionMark) {
				t.Errorf("nothing is marked as shortened:\n%s\n%s", out, errOut)
			}
			out, _, _ = run(t, fixtureNamed(long), append(tc.args, "--color", "never", "-o", "wide")...)
			if pin {
				golden(t, tc.golden+".wide", out)
			}
			for _, w := range tc.whole {
				if !strings.Contains(out, w) || strings.Contains(out, cli.ElisionMark) {
					t.Errorf("-o wide lacks %q whole:\n%s", w, out)
				}
			}
		})
	}
}

// A CRDMigrationReport's outcome is the table's status word in lower case
// (gpufleet.dev/v1alpha2); a report saved by gpufleet.dev/v1alpha1 with
// its CamelCase outcomes still reads, and an unknown word is refused.
func TestRunOutcomeWords(t *testing.T) {
	for _, o := range []Outcome{OutcomeMigrated, OutcomeNothingToDo, OutcomeFailed, OutcomeIncomplete} {
		if w := outcomeWord(o); string(o) != w.JSONWord() || !w.Valid() {
			t.Errorf("outcome %q is not its table word %s in lower case", o, w)
		}
	}
	for old, want := range map[string]Outcome{"Migrated": OutcomeMigrated, "NothingToDo": OutcomeNothingToDo, "Failed": OutcomeFailed, "Incomplete": OutcomeIncomplete, "done": OutcomeMigrated} {
		var it RunItem
		if err := json.Unmarshal([]byte(`{"crd":"queues.example.dev","outcome":"`+old+`"}`), &it); err != nil || it.Outcome != want {
			t.Errorf("outcome %q read as %q (%v), want %q", old, it.Outcome, err, want)
		}
	}
	var it RunItem
	if err := json.Unmarshal([]byte(`{"outcome":"Done"}`), &it); err == nil {
		t.Errorf("outcome Done read as %q, want an error", it.Outcome)
	}
}
