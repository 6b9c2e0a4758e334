package preflight

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"
)

// readConfig reads the admission configuration as preflight does and
// round-trips it through YAML as the saved baseline does.
func readConfig(t *testing.T, kc *fake.Clientset) *AdmissionConfig {
	t.Helper()
	cfg, err := (&Runner{Kube: kc}).admissionConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out AdmissionConfig
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// Every way a webhook or a policy can be switched off without being
// deleted is caught, naming the control; what only widens it is not.
func TestVerifyAdmissionConfig(t *testing.T) {
	ctx := context.Background()
	base := readConfig(t, fixtureCluster())
	if regs, unchanged := verifyAdmissionConfig(base, readConfig(t, fixtureCluster())); len(regs) != 0 ||
		!unchanged["validatingwebhookconfiguration/policy"] || !unchanged["validatingadmissionpolicy/digests"] {
		t.Fatalf("unchanged: %+v %v", regs, unchanged)
	}
	ignore, exact := admissionv1.Ignore, admissionv1.Exact
	for _, tc := range []struct {
		name   string
		change func(kc *fake.Clientset)
		ref    string
		status Status
		says   string
	}{
		{"failurePolicy Ignore", func(kc *fake.Clientset) {
			updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) { w.FailurePolicy = &ignore })
		}, "validatingwebhookconfiguration/policy", StatusFail, "failurePolicy Ignore, was Fail"},
		{"operations other than CREATE dropped", func(kc *fake.Clientset) {
			updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) {
				w.Rules[0].Operations = []admissionv1.OperationType{admissionv1.Update}
			})
		}, "validatingwebhookconfiguration/policy", StatusFail, "no longer match CREATE configmaps/v1"},
		{"a webhook's namespaceSelector narrowed", func(kc *fake.Clientset) {
			updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) {
				w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml", "enforce": "yes"}}
			})
		}, "validatingwebhookconfiguration/policy", StatusFail, "no longer selects namespace ml, ml-restricted (namespaceSelector enforce=yes,team=ml, was team=ml)"},
		{"a namespace relabelled out of the selector", func(kc *fake.Clientset) {
			n, _ := kc.CoreV1().Namespaces().Get(ctx, "ml", metav1.GetOptions{})
			delete(n.Labels, "team")
			_, _ = kc.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		}, "validatingwebhookconfiguration/policy", StatusFail, "no longer selects namespace ml (namespaceSelector team=ml unchanged, the namespaces' labels changed)"},
		{"an objectSelector changed", func(kc *fake.Clientset) {
			updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) {
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "deny", "strict": "true"}}
			})
		}, "validatingwebhookconfiguration/policy", StatusFail, "objectSelector probe=deny,strict=true"},
		{"a matchCondition added", func(kc *fake.Clientset) {
			updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) {
				w.MatchConditions = []admissionv1.MatchCondition{{Name: "not-gpu", Expression: "!has(object.metadata.labels.gpu)"}}
			})
		}, "validatingwebhookconfiguration/policy", StatusFail, "matchConditions added or changed, which narrow what it sees: not-gpu"},
		{"the webhook deleted", func(kc *fake.Clientset) {
			_ = kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "policy", metav1.DeleteOptions{})
		}, "validatingwebhookconfiguration/policy", StatusFail, "gone since the baseline"},
		{"the binding audits", func(kc *fake.Clientset) {
			b, _ := kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "digests-ml", metav1.GetOptions{})
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit}
			_, _ = kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{})
		}, "validatingadmissionpolicy/digests", StatusFail, "(binding digests-ml): validationActions [Audit], was [Deny]: it no longer denies"},
		{"the binding's matchResources narrowed", func(kc *fake.Clientset) {
			b, _ := kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "digests-ml", metav1.GetOptions{})
			b.Spec.MatchResources.NamespaceSelector.MatchLabels["tier"] = "prod"
			_, _ = kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{})
		}, "validatingadmissionpolicy/digests", StatusFail, "no longer selects namespace ml, ml-restricted (the binding's matchResources namespaceSelector team=ml,tier=prod, was team=ml)"},
		{"kinds after the first dropped", func(kc *fake.Clientset) {
			p, _ := kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "digests", metav1.GetOptions{})
			p.Spec.MatchConstraints.ResourceRules[0].Resources = []string{"pods"}
			_, _ = kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
		}, "validatingadmissionpolicy/digests", StatusFail, "matchConstraints resourceRules no longer match CREATE deployments.apps/v1"},
		{"a validation changed", func(kc *fake.Clientset) {
			p, _ := kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "digests", metav1.GetOptions{})
			p.Spec.Validations[0].Expression = "true"
			p.Spec.MatchConstraints.MatchPolicy = &exact
			_, _ = kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
		}, "validatingadmissionpolicy/digests", StatusFail, "validations removed or changed: object.spec.containers.all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fixtureCluster()
			tc.change(kc)
			regs, unchanged := verifyAdmissionConfig(base, readConfig(t, kc))
			var got *Regression
			for i := range regs {
				if regs[i].Object == tc.ref {
					got = &regs[i]
				}
			}
			if got == nil || got.Status != tc.status || got.Kind != RegAdmissionConfig || !strings.Contains(got.Message, tc.says) || got.Command == "" {
				t.Errorf("want %s %s saying %q, got %+v", tc.status, tc.ref, tc.says, regs)
			}
			if unchanged[tc.ref] {
				t.Errorf("%s still counts as unchanged", tc.ref)
			}
		})
	}

	// Widening is no regression: more operations, no selector, a
	// matchCondition removed, a namespace added.
	kc := fixtureCluster()
	updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) {
		w.Rules[0].Operations = append(w.Rules[0].Operations, admissionv1.Update)
		w.Rules[0].Resources = append(w.Rules[0].Resources, "secrets")
		w.ObjectSelector = nil
		w.NamespaceSelector = nil
	})
	_, _ = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	if regs, _ := verifyAdmissionConfig(base, readConfig(t, kc)); len(regs) != 0 {
		t.Errorf("widened: %+v", regs)
	}

	// An addon release that moves its rules to a new version of the same
	// resource loses nothing under matchPolicy Equivalent (the v1 default):
	// requests to the old version still reach it.
	kc = fixtureCluster()
	updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) { w.Rules[0].APIVersions = []string{"v2"} })
	if regs, _ := verifyAdmissionConfig(base, readConfig(t, kc)); len(regs) != 0 {
		t.Errorf("rules moved to another version under Equivalent: %+v", regs)
	}
	// Another group is another resource.
	kc = fixtureCluster()
	updateHook(t, kc, func(w *admissionv1.ValidatingWebhook) { w.Rules[0].APIGroups = []string{"example.com"} })
	if regs, _ := verifyAdmissionConfig(base, readConfig(t, kc)); len(regs) != 1 || regs[0].Status != StatusFail {
		t.Errorf("rules moved to another group: %+v", regs)
	}
}

// A denying binding without matchResources matches every request its
// policy matches; matchResources added since narrow it and are caught.
func TestVerifyAdmissionConfigBindingWithoutMatchResources(t *testing.T) {
	ctx := context.Background()
	withAll := func() *fake.Clientset {
		kc := fixtureCluster()
		_, err := kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "digests-all"},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "digests", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return kc
	}
	base := readConfig(t, withAll())
	if regs, _ := verifyAdmissionConfig(base, readConfig(t, withAll())); len(regs) != 0 {
		t.Fatalf("unchanged: %+v", regs)
	}
	pods := admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	for _, tc := range []struct {
		name string
		mr   *admissionv1.MatchResources
		says string
	}{
		{"a namespace selector", &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}}, "(binding digests-all): no longer selects namespace default, kube-system, legacy, open, prod"},
		{"fewer kinds than the policy", &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{pods}}, "(binding digests-all): the binding's matchResources resourceRules no longer match CREATE deployments.apps/v1"},
		{"an object selector", &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"strict": "true"}}}, "(binding digests-all): the binding's matchResources objectSelector strict=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := withAll()
			c := kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
			b, _ := c.Get(ctx, "digests-all", metav1.GetOptions{})
			b.Spec.MatchResources = tc.mr
			if _, err := c.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			regs, _ := verifyAdmissionConfig(base, readConfig(t, kc))
			if len(regs) != 1 || regs[0].Status != StatusFail || !strings.Contains(regs[0].Message, tc.says) {
				t.Errorf("want one FAIL saying %q, got %+v", tc.says, regs)
			}
		})
	}
}

func updateHook(t *testing.T, kc *fake.Clientset, f func(*admissionv1.ValidatingWebhook)) {
	t.Helper()
	c := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	v, err := c.Get(context.Background(), "policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f(&v.Webhooks[0])
	if _, err := c.Update(context.Background(), v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestResourceCovers(t *testing.T) {
	for _, tc := range []struct {
		x, a string
		want bool
	}{
		{"pods", "pods", true}, {"*", "pods", true}, {"*", "pods/exec", false}, {"*/*", "pods/exec", true},
		{"pods/*", "pods/exec", true}, {"*/exec", "pods/exec", true}, {"pods/*", "pods", false}, {"deployments", "pods", false},
		{"*", "*", true}, {"pods", "*", false}, {"*/scale", "*/*", false},
	} {
		if got := resourceCovers(tc.x, tc.a); got != tc.want {
			t.Errorf("resourceCovers(%q, %q) = %v", tc.x, tc.a, got)
		}
	}
}
