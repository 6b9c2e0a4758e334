package crdmigrate

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/transient"
)

func TestRuleMatches(t *testing.T) {
	target := ruleTarget{group: testGroup, resource: "widgets", storage: "v2", versions: []string{"v1", "v2"}, namespaced: true}
	rule := func(ops []admissionv1.OperationType, groups, versions, resources []string, scope *admissionv1.ScopeType) admissionv1.RuleWithOperations {
		return admissionv1.RuleWithOperations{Operations: ops, Rule: admissionv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources, Scope: scope}}
	}
	upd := []admissionv1.OperationType{admissionv1.Update}
	cases := []struct {
		name   string
		rule   admissionv1.RuleWithOperations
		policy *admissionv1.MatchPolicyType
		want   bool
	}{
		{"exact", rule(upd, []string{testGroup}, []string{"v2"}, []string{"widgets"}, nil), nil, true},
		{"wildcards", rule([]admissionv1.OperationType{"*"}, []string{"*"}, []string{"*"}, []string{"*"}, nil), nil, true},
		{"all resources and subresources", rule(upd, []string{"*"}, []string{"*"}, []string{"*/*"}, nil), nil, true},
		{"create only", rule([]admissionv1.OperationType{admissionv1.Create}, []string{testGroup}, []string{"*"}, []string{"widgets"}, nil), nil, false},
		{"status subresource only", rule(upd, []string{testGroup}, []string{"*"}, []string{"widgets/status"}, nil), nil, false},
		{"other group", rule(upd, []string{"other.dev"}, []string{"*"}, []string{"widgets"}, nil), nil, false},
		{"old version, equivalent (default)", rule(upd, []string{testGroup}, []string{"v1"}, []string{"widgets"}, nil), nil, true},
		{"old version, exact policy", rule(upd, []string{testGroup}, []string{"v1"}, []string{"widgets"}, nil), ptr.To(admissionv1.Exact), false},
		{"cluster scope only", rule(upd, []string{testGroup}, []string{"*"}, []string{"widgets"}, ptr.To(admissionv1.ClusterScope)), nil, false},
		{"namespaced scope", rule(upd, []string{testGroup}, []string{"*"}, []string{"widgets"}, ptr.To(admissionv1.NamespacedScope)), nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := target.matches([]admissionv1.RuleWithOperations{tc.rule}, tc.policy); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func webhookConfig(name string, fp admissionv1.FailurePolicyType, cc admissionv1.WebhookClientConfig) *admissionv1.ValidatingWebhookConfiguration {
	return &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name: name + ".example.dev", ClientConfig: cc, FailurePolicy: &fp,
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{testGroup}, APIVersions: []string{"*"}, Resources: []string{"widgets"}},
			}},
		}},
	}
}

func service(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
}

func slice(ns, svc string, ready ...bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		Ports:      []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](9443)}},
	}
	for i, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0." + string(rune('1'+i))}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return s
}

func TestInspectorStatus(t *testing.T) {
	svcRef := func(name string) admissionv1.WebhookClientConfig {
		return admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "sys", Name: name, Port: ptr.To[int32](443)}}
	}
	cases := []struct {
		name        string
		stored      []string
		objects     int
		kube        []runtime.Object
		conversion  *apiextv1.CustomResourceConversion
		wantVerdict Verdict
		wantReasons []string
		wantHealth  []string
	}{
		{name: "up to date", stored: []string{"v2"}, objects: 3, wantVerdict: VerdictUpToDate},
		{name: "old version stored", stored: []string{"v1", "v2"}, objects: 3, wantVerdict: VerdictMigrationNeeded,
			wantReasons: []string{"storedVersions still lists v1 (storage version v2)"}},
		{name: "healthy webhook", stored: []string{"v1", "v2"}, objects: 3,
			kube:        []runtime.Object{webhookConfig("ok", admissionv1.Fail, svcRef("ok")), service("sys", "ok"), slice("sys", "ok", true, false)},
			wantVerdict: VerdictMigrationNeeded, wantReasons: []string{"storedVersions still lists v1 (storage version v2)"}, wantHealth: []string{"ok/1"}},
		{name: "webhook without ready endpoints blocks", stored: []string{"v1", "v2"}, objects: 3,
			kube:        []runtime.Object{webhookConfig("down", admissionv1.Fail, svcRef("down")), service("sys", "down"), slice("sys", "down", false)},
			wantVerdict: VerdictBlocked,
			wantReasons: []string{"storedVersions still lists v1 (storage version v2)", "validating webhook down.example.dev (down) at service sys/down:443 is down: no ready endpoints"},
			wantHealth:  []string{"fail/0"}},
		{name: "missing service with failurePolicy Ignore does not block", stored: []string{"v1", "v2"}, objects: 3,
			kube:        []runtime.Object{webhookConfig("ign", admissionv1.Ignore, svcRef("gone"))},
			wantVerdict: VerdictMigrationNeeded,
			wantReasons: []string{"storedVersions still lists v1 (storage version v2)", "validating webhook ign.example.dev is down but has failurePolicy Ignore: writes skip it"},
			wantHealth:  []string{"fail/0"}},
		{name: "url webhook is unknown", stored: []string{"v1", "v2"}, objects: 3,
			kube:        []runtime.Object{webhookConfig("url", admissionv1.Fail, admissionv1.WebhookClientConfig{URL: ptr.To("https://10.1.1.1/validate")})},
			wantVerdict: VerdictMigrationNeeded, wantReasons: []string{"storedVersions still lists v1 (storage version v2)"}, wantHealth: []string{"unknown/0"}},
		{name: "conversion webhook down blocks", stored: []string{"v1", "v2"}, objects: 3,
			kube: []runtime.Object{service("sys", "conv")},
			conversion: &apiextv1.CustomResourceConversion{Strategy: apiextv1.WebhookConverter, Webhook: &apiextv1.WebhookConversion{
				ClientConfig: &apiextv1.WebhookClientConfig{Service: &apiextv1.ServiceReference{Namespace: "sys", Name: "conv"}}}},
			wantVerdict: VerdictBlocked,
			wantReasons: []string{"storedVersions still lists v1 (storage version v2)", "conversion webhook at service sys/conv:443 is down: no ready endpoints"}},
		{name: "a down webhook does not block a CRD without objects", stored: []string{"v1", "v2"}, objects: 0,
			kube:        []runtime.Object{webhookConfig("down", admissionv1.Fail, svcRef("down"))},
			wantVerdict: VerdictMigrationNeeded, wantReasons: []string{"storedVersions still lists v1 (storage version v2)"}, wantHealth: []string{"fail/0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd := testCRDObj(tc.stored...)
			if tc.conversion != nil {
				crd.Spec.Conversion = tc.conversion
			}
			e := newEnv(crd, newWidgetServer(tc.objects, func(int) string { return "v1" }), tc.kube...)
			got, err := (&Inspector{Clients: e.c, Checkpoints: e.store()}).Status(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("got %d statuses", len(got))
			}
			st := got[0]
			if st.Verdict != tc.wantVerdict || st.Objects != int64(tc.objects) {
				t.Errorf("verdict %s, objects %d; want %s, %d", st.Verdict, st.Objects, tc.wantVerdict, tc.objects)
			}
			if diff := cmp.Diff(tc.wantReasons, st.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
			var health []string
			for _, h := range st.Webhooks {
				health = append(health, string(h.Health)+"/"+string(rune('0'+h.ReadyEndpoints)))
			}
			if diff := cmp.Diff(tc.wantHealth, health); diff != "" {
				t.Errorf("webhook health (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"v1", "v2"}, st.ServedVersions); diff != "" {
				t.Errorf("served (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"v1"}, st.DeprecatedVersions); diff != "" {
				t.Errorf("deprecated (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetCRDs_NotFound(t *testing.T) {
	e := newEnv(testCRDObj("v2"), nil)
	_, err := GetCRDs(context.Background(), e.ext, []string{testCRD, "nope.example.dev"})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !strings.Contains(err.Error(), `"nope.example.dev" not found`) {
		t.Errorf("err = %v", err)
	}
}

func TestPreflight(t *testing.T) {
	t.Run("dry-run write rejected", func(t *testing.T) {
		srv := newWidgetServer(5, func(int) string { return "v1" })
		srv.failUpdate = func(string, int) error {
			return errors.New(`admission webhook "v.example.dev" denied the request: no`)
		}
		_, err := preflight(testCRDObj("v1", "v2"), srv)
		var pe *PreflightError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "a dry-run update of widgets ml/w-00000 failed") {
			t.Fatalf("err = %v", err)
		}
		if len(srv.updates) != 0 {
			t.Errorf("pre-flight wrote objects: %v", srv.updates)
		}
	})
	t.Run("ok", func(t *testing.T) {
		srv := newWidgetServer(5, func(int) string { return "v1" })
		plan, err := preflight(testCRDObj("v1", "v2"), srv)
		if err != nil || plan.Status.Objects != 5 || plan.Probe != "dry-run update of ml/w-00000 ok" {
			t.Fatalf("plan %+v, err %v", plan, err)
		}
		if got := srv.storedCounts(); got["v1"] != 5 {
			t.Errorf("pre-flight changed objects: %v", got)
		}
	})
}

// preflight runs Preflight on crd in a fake cluster whose widgets srv
// serves.
func preflight(crd *apiextv1.CustomResourceDefinition, srv *widgetServer) (*Plan, error) {
	e := newEnv(crd, srv)
	hooks, _ := LoadWebhooks(context.Background(), e.kube)
	got, _ := e.ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), testCRD, metav1.GetOptions{})
	return Preflight(context.Background(), e.c, hooks, got)
}

// refused is how a request fails while the apiserver restarts.
func refused(verb string) error {
	return &url.Error{Op: verb, URL: "https://apiserver/apis/" + testGroup + "/v2/namespaces/ml/widgets", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
}

// TestPreflight_RidesOutRestart: reads (and the dry-run write) that got no
// answer are tried again, so an apiserver restart does not refuse a run.
func TestPreflight_RidesOutRestart(t *testing.T) {
	defer func(p transient.Policy) { readRetry = p }(readRetry)
	var waits int
	readRetry.Sleep = func(context.Context, time.Duration) error { waits++; return nil }
	srv := newWidgetServer(5, func(int) string { return "v1" })
	lists := 0
	srv.failList = func(string) error {
		if lists++; lists <= 2 {
			return refused("Get")
		}
		return nil
	}
	srv.failUpdate = func(_ string, attempt int) error {
		if attempt == 1 {
			return refused("Put")
		}
		return nil
	}
	plan, err := preflight(testCRDObj("v1", "v2"), srv)
	if err != nil || plan.Status.Objects != 5 || plan.Probe != "dry-run update of ml/w-00000 ok" {
		t.Fatalf("plan %+v, err %v", plan, err)
	}
	if waits != 3 {
		t.Errorf("retried %d times, want 3 (two lists, one dry run)", waits)
	}
	if got := srv.storedCounts(); got["v1"] != 5 {
		t.Errorf("pre-flight changed objects: %v", got)
	}
}

func TestDetectInTree(t *testing.T) {
	cases := []struct {
		name      string
		resources []*metav1.APIResourceList
		want      string
	}{
		{"none", nil, ""},
		{"v1beta1", []*metav1.APIResourceList{{GroupVersion: "storagemigration.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "storageversionmigrations"}}}}, "v1beta1"},
		{"v1 preferred", []*metav1.APIResourceList{
			{GroupVersion: "storagemigration.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "storageversionmigrations"}}},
			{GroupVersion: "storagemigration.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "storageversionmigrations"}}},
		}, "v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := kubefake.NewClientset()
			k.Resources = tc.resources
			got, err := DetectInTree(k.Discovery())
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// fakeController advances StorageVersionMigrations in the dynamic fake each
// time the migrator sleeps, as kube-controller-manager would.
func fakeController(e *env, steps []func(obj *unstructured.Unstructured)) func(ctx context.Context, d time.Duration) error {
	i := 0
	return func(ctx context.Context, _ time.Duration) error {
		l, err := e.dyn.Resource(SVMResource("v1")).List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 || i >= len(steps) {
			i++
			return ctx.Err()
		}
		obj := &l.Items[0]
		steps[i](obj)
		i++
		_, err = e.dyn.Resource(SVMResource("v1")).UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	}
}

func setCond(obj *unstructured.Unstructured, typ, msg string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": typ, "status": "True", "message": msg})
	_ = unstructured.SetNestedSlice(obj.Object, conds, "status", "conditions")
	_ = unstructured.SetNestedField(obj.Object, "123", "status", "resourceVersion")
}

func TestInTree(t *testing.T) {
	var clock time.Time
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	t.Run("succeeds and trims", func(t *testing.T) {
		e := newEnv(testCRDObj("v1", "v2"), nil)
		// generateName is not honoured by the fake; give the object a name.
		e.dyn.PrependReactor("create", "storageversionmigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
			obj := a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured)
			obj.SetName(obj.GetGenerateName() + "x1")
			return false, nil, nil
		})
		var progress []Progress
		m := &InTree{Clients: e.c, Version: "v1", Now: now, TrimWait: time.Second, OnProgress: func(p Progress) { progress = append(progress, p) }}
		m.Sleep = fakeController(e, []func(*unstructured.Unstructured){
			func(o *unstructured.Unstructured) {
				setCond(o, "Running", "The migration is running, 40/100 objects not yet migrated")
			},
			func(o *unstructured.Unstructured) {
				_ = unstructured.SetNestedSlice(o.Object, nil, "status", "conditions")
				setCond(o, "Running", "The migration is running, 100 objects verified migrated")
				setCond(o, "Succeeded", "Migration completed")
			},
		})
		res, err := m.Run(context.Background(), testCRD)
		if err != nil {
			t.Fatal(err)
		}
		if res.Method != MethodInTree || res.Migration != "crd-migrate-widgets-x1" || res.Processed != 100 {
			t.Errorf("result = %+v", res)
		}
		if diff := cmp.Diff([]Progress{{CRD: testCRD, Processed: 60, Total: 100}}, progress); diff != "" {
			t.Errorf("progress (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"v2"}, e.storedVersions()); diff != "" {
			t.Errorf("storedVersions (-want +got):\n%s", diff)
		}
	})
	t.Run("failed", func(t *testing.T) {
		e := newEnv(testCRDObj("v1", "v2"), nil)
		e.dyn.PrependReactor("create", "storageversionmigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
			a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured).SetName("svm-1")
			return false, nil, nil
		})
		m := &InTree{Clients: e.c, Version: "v1", Now: now}
		m.Sleep = fakeController(e, []func(*unstructured.Unstructured){
			func(o *unstructured.Unstructured) { setCond(o, "Failed", "1/3 not yet migrated. webhook denied") },
		})
		_, err := m.Run(context.Background(), testCRD)
		var fe *InTreeFailedError
		if !errors.As(err, &fe) || fe.Migration != "svm-1" || !strings.Contains(err.Error(), "webhook denied") {
			t.Fatalf("err = %v", err)
		}
		if diff := cmp.Diff([]string{"v1", "v2"}, e.storedVersions()); diff != "" {
			t.Errorf("storedVersions (-want +got):\n%s", diff)
		}
	})
	t.Run("no controller", func(t *testing.T) {
		e := newEnv(testCRDObj("v1", "v2"), nil)
		e.dyn.PrependReactor("create", "storageversionmigrations", func(a k8stesting.Action) (bool, runtime.Object, error) {
			a.(k8stesting.CreateAction).GetObject().(*unstructured.Unstructured).SetName("svm-1")
			return false, nil, nil
		})
		m := &InTree{Clients: e.c, Version: "v1", Now: now, AckTimeout: 5 * time.Second, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
		_, err := m.Run(context.Background(), testCRD)
		if !errors.Is(err, ErrNoController) {
			t.Fatalf("err = %v, want ErrNoController", err)
		}
		l, _ := e.dyn.Resource(SVMResource("v1")).List(context.Background(), metav1.ListOptions{})
		if len(l.Items) != 0 {
			t.Errorf("the unpicked migration was left behind: %v", l.Items)
		}
	})
}
