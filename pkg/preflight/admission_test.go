package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// The built-in pod variants are what they claim to be, judged by Pod
// Security's own evaluator at every policy version it knows.
func TestProbePodsAgainstPodSecurity(t *testing.T) {
	ev, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := func(level psaapi.Level, ver psaapi.Version, variant string) bool {
		spec := probePodSpec(variant)
		res := psapolicy.AggregateCheckResults(ev.EvaluatePod(psaapi.LevelVersion{Level: level, Version: ver}, &metav1.ObjectMeta{Name: ProbeName}, &spec))
		return res.Allowed
	}
	versions := []psaapi.Version{psaapi.LatestVersion()}
	for m := 0; m <= 37; m++ {
		versions = append(versions, psaapi.MajorMinorVersion(1, m))
	}
	for _, v := range versions {
		if !allowed(psaapi.LevelRestricted, v, VariantHardened) {
			t.Errorf("%s: restricted denies the hardened probe", v)
		}
		if !allowed(psaapi.LevelBaseline, v, VariantUnhardened) || allowed(psaapi.LevelRestricted, v, VariantUnhardened) {
			t.Errorf("%s: the unhardened probe must pass baseline and fail restricted", v)
		}
		if allowed(psaapi.LevelBaseline, v, VariantPrivileged) || allowed(psaapi.LevelRestricted, v, VariantPrivileged) {
			t.Errorf("%s: baseline admits the privileged probe", v)
		}
	}
}

func ns(name string, labels map[string]string) *corev1.Namespace {
	if labels == nil {
		labels = map[string]string{}
	}
	labels["kubernetes.io/metadata.name"] = name
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func fixtureCluster() *fake.Clientset {
	none, some := admissionv1.SideEffectClassNone, admissionv1.SideEffectClassSome
	fail := admissionv1.Fail
	cm := admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}
	pods := admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.OperationAll},
		Rule: admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}
	vwc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "policy"}, Webhooks: []admissionv1.ValidatingWebhook{
		{Name: "deny.example.com", SideEffects: &none, FailurePolicy: &fail, Rules: []admissionv1.RuleWithOperations{cm},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "deny"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gpu", "cpu"}}}}},
		{Name: "audit.example.com", SideEffects: &some, Rules: []admissionv1.RuleWithOperations{pods}},
	}}
	crdRule := admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Create},
		Rule: admissionv1.Rule{APIGroups: []string{"kueue.x-k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"workloads"}}}
	mwc := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kueue"}, Webhooks: []admissionv1.MutatingWebhook{
		{Name: "mworkload.kb.io", SideEffects: &none, Rules: []admissionv1.RuleWithOperations{crdRule}}}}
	vap := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "digests"}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"", "apps"}, APIVersions: []string{"v1"}, Resources: []string{"pods", "deployments"}}}}}},
		Validations: []admissionv1.Validation{{Expression: "object.spec.containers.all(c, c.image.contains('@sha256:'))"}}}}
	deny := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "digests-ml"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "digests", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}}}}
	audit := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "digests-audit"}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: "digests", ValidationActions: []admissionv1.ValidationAction{admissionv1.Audit}}}
	return fake.NewClientset(
		ns("default", nil), ns("kube-system", nil),
		ns("prod", map[string]string{psaapi.EnforceLevelLabel: "restricted", psaapi.EnforceVersionLabel: "v1.37"}),
		ns("legacy", map[string]string{psaapi.EnforceLevelLabel: "baseline"}),
		ns("open", map[string]string{psaapi.EnforceLevelLabel: "privileged"}),
		ns("ml-restricted", map[string]string{"team": "ml", psaapi.EnforceLevelLabel: "restricted"}),
		ns("ml", map[string]string{"team": "ml"}),
		vwc, mwc, vap, deny, audit)
}

func TestDeriveProbes(t *testing.T) {
	r := &Runner{Kube: fixtureCluster()}
	ps := r.deriveProbes(context.Background())
	if len(ps.unread) > 0 {
		t.Fatalf("unread: %v", ps.unread)
	}
	got := map[string]Probe{}
	for _, p := range ps.probes {
		got[p.ID] = p
	}
	for _, id := range []string{"psa/prod/privileged", "psa/prod/unhardened", "psa/legacy/privileged", "psa/ml-restricted/privileged",
		"webhook/validating/policy/deny.example.com/configmaps/plain",
		"policy/digests/digests-ml/pods/hardened", "policy/digests/digests-ml/pods/privileged"} {
		if _, ok := got[id]; !ok {
			t.Errorf("no probe %s in %v", id, keys(got))
		}
	}
	if _, ok := got["psa/legacy/unhardened"]; ok {
		t.Error("baseline namespace probed with a pod only restricted forbids")
	}
	for id := range got {
		if strings.HasPrefix(id, "psa/open/") || strings.Contains(id, "audit") || strings.Contains(id, "mworkload") {
			t.Errorf("unexpected probe %s", id)
		}
	}
	// The webhook's probe is in a namespace its selector picks (ml, not
	// the restricted ml-restricted, where Pod Security would mask it) and
	// carries labels its object selector selects.
	hook := got["webhook/validating/policy/deny.example.com/configmaps/plain"]
	u := unstructured.Unstructured{Object: hook.Object}
	if hook.Namespace != "ml" || u.GetLabels()["probe"] != "deny" || u.GetLabels()["tier"] != "gpu" || u.GetKind() != "ConfigMap" || hook.Expect != `webhook "deny.example.com"` {
		t.Errorf("webhook probe %+v labels %v", hook, u.GetLabels())
	}
	if pol := got["policy/digests/digests-ml/pods/hardened"]; pol.Namespace != "ml" || pol.Expect != `ValidatingAdmissionPolicy "digests"` || pol.Ref != "validatingadmissionpolicy/digests" {
		t.Errorf("policy probe %+v", pol)
	}
	notes := strings.Join(ps.notes, "\n")
	for _, want := range []string{"audit.example.com (validatingwebhookconfiguration policy) not probed: sideEffects Some",
		"mworkload.kb.io (mutatingwebhookconfiguration kueue) not probed: no built-in probe for [CREATE] workloads in groups kueue.x-k8s.io",
		"ValidatingAdmissionPolicy digests (binding digests-audit) does not deny"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// apiserver is a fake dynamic client that answers dry-run creates as the
// admission chain of a cluster would, and fails the test on any create
// that is not a dry run.
type apiserver struct {
	t    *testing.T
	mu   sync.Mutex
	sent int
	// answer returns the error for a probe (nil: admitted).
	answer func(resource, namespace string, obj *unstructured.Unstructured) error
}

func (a *apiserver) client() *dynfake.FakeDynamicClient {
	c := dynfake.NewSimpleDynamicClient(runtime.NewScheme())
	c.PrependReactor("create", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca := action.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) != 1 || ca.CreateOptions.DryRun[0] != metav1.DryRunAll {
			a.t.Errorf("a create without dryRun=All: %v", ca.CreateOptions)
		}
		a.mu.Lock()
		a.sent++
		a.mu.Unlock()
		u := ca.Object.(*unstructured.Unstructured)
		return true, u, a.answer(ca.Resource.Resource, ca.Namespace, u)
	})
	return c
}

// The messages the apiserver answers with (see the sources cited in probe_run.go).
func psaDenied(ns string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, ProbeName, errors.New(`violates PodSecurity "restricted:v1.37": privileged (container "probe" must not set securityContext.privileged=true)`))
}

func webhookDenied(name string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("admission webhook %q denied the request: labelled probe", name)}}
}

func policyDenied(policy, binding string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("pods %q is forbidden: ValidatingAdmissionPolicy '%s' with binding '%s' denied request: failed expression", ProbeName, policy, binding)}}
}

func TestAdmissionProbesPreflightThenVerify(t *testing.T) {
	kc := fixtureCluster()
	srv := &apiserver{t: t}
	// The cluster at the baseline: every control denies its probes.
	srv.answer = func(res, ns string, obj *unstructured.Unstructured) error {
		switch {
		case res == "pods" && (ns == "prod" || ns == "legacy" || ns == "ml-restricted"):
			return psaDenied(ns)
		case res == "configmaps" && obj.GetLabels()["probe"] == "deny":
			return webhookDenied("deny.example.com")
		case res == "pods" && ns == "ml":
			return policyDenied("digests", "digests-ml")
		}
		return nil
	}
	probeFile := []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: unsigned, namespace: ml}\nspec: {containers: [{name: c, image: evil/unsigned:1}]}\n")
	ms, err := ParseProbeFile("unsigned.yaml", probeFile)
	if err != nil {
		t.Fatal(err)
	}
	disc := kc.Discovery()
	kc.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod", Namespaced: true}}}}
	base := &Runner{Kube: kc, Dynamic: srv.client(), Discovery: disc, Policy: PolicyOptions{Probes: ms}}
	g, probes := probeGate(base)
	if g.Status != StatusPass || srv.sent != len(probes) {
		t.Fatalf("baseline: %s %s (%d sent, %d probes)\n%s", g.Status, g.Message, srv.sent, len(probes), strings.Join(g.Evidence, "\n"))
	}
	denied, replay := 0, 0
	for _, p := range probes {
		if replayed(p) {
			replay++
		}
		if p.Result == ProbeDenied {
			denied++
			if p.Object == nil {
				t.Errorf("denied probe %s kept no object to replay", p.ID)
			}
		} else if p.Object != nil && p.Result != ProbeMasked {
			t.Errorf("probe %s (%s) keeps its object", p.ID, p.Result)
		}
	}
	file := findProbe(probes, "file/unsigned.yaml#1/Pod/unsigned")
	if file == nil || file.Result != ProbeDenied || file.DeniedBy != `ValidatingAdmissionPolicy "digests"` {
		t.Fatalf("probe file: %+v", file)
	}
	// Pod Security: 2 in prod, 1 in legacy, 2 in ml-restricted; the
	// webhook's configmap in ml and, spread, in ml-restricted; the
	// policy's three pods in ml; the probe file. The policy's pods spread
	// to ml-restricted are denied first by Pod Security there, and
	// replayed too.
	if denied != 11 || replay != 14 {
		t.Errorf("%d probes denied, %d replayed, want 11 and 14:\n%s", denied, replay, strings.Join(g.Evidence, "\n"))
	}

	// The baseline goes through the saved YAML, as verify reads it.
	saved, err := yaml.Marshal(PolicyEvidence{Probes: probes})
	if err != nil {
		t.Fatal(err)
	}
	var pe PolicyEvidence
	if err := yaml.Unmarshal(saved, &pe); err != nil {
		t.Fatal(err)
	}

	// After the upgrade: prod lost its label, the webhook is gone, the
	// policy only audits; legacy's answer times out.
	srv.sent = 0
	srv.answer = func(res, ns string, obj *unstructured.Unstructured) error {
		switch {
		case res == "pods" && ns == "legacy":
			return context.DeadlineExceeded
		case res == "pods" && ns == "ml-restricted":
			return psaDenied(ns)
		}
		return nil
	}
	after := &Runner{Kube: kc, Dynamic: srv.client(), Policy: PolicyOptions{Baseline: &pe}}
	g2, now := probeGate(after)
	if srv.sent != replay || len(now) != replay {
		t.Errorf("verify sent %d probes, kept %d, want the %d denied at the baseline", srv.sent, len(now), replay)
	}
	if g2.Status != StatusUnknown {
		t.Errorf("verify's gate: %s %s", g2.Status, g2.Message)
	}
	regs := verifyProbes(&pe, &PolicyEvidence{Probes: now}, nil)
	got := map[string]Status{}
	for _, r := range regs {
		got[r.Object+" "+string(r.Status)] = r.Status
		if r.Kind != RegAdmission || r.Message == "" || r.Command == "" {
			t.Errorf("regression %+v", r)
		}
	}
	for _, want := range []string{"namespace/prod FAIL", "validatingwebhookconfiguration/policy FAIL", "validatingadmissionpolicy/digests FAIL",
		"probe-file/unsigned.yaml#1 FAIL", "namespace/legacy UNKNOWN"} {
		if _, ok := got[want]; !ok {
			t.Errorf("no regression %q in %v", want, got)
		}
	}
	if _, ok := got["namespace/ml-restricted FAIL"]; ok {
		t.Error("a namespace whose Pod Security still denies regressed")
	}
}

func findProbe(ps []Probe, id string) *Probe {
	for i := range ps {
		if ps[i].ID == id {
			return &ps[i]
		}
	}
	return nil
}

func TestClassify(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, ProbeName,
		errors.New(`User "viewer" cannot create resource "pods" in API group "" in the namespace "prod"`))
	for _, tc := range []struct {
		err      error
		expect   string
		result   ProbeResult
		deniedBy string
		msg      string
	}{
		{nil, DeniedByPodSecurity, ProbeAdmitted, "", ""},
		{apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, ProbeName), "", ProbeAdmitted, "", ""},
		{psaDenied("prod"), DeniedByPodSecurity, ProbeDenied, DeniedByPodSecurity, ""},
		{webhookDenied("a.example.com"), DeniedByPodSecurity, ProbeMasked, `webhook "a.example.com"`, ""},
		{webhookDenied("a.example.com"), "", ProbeDenied, `webhook "a.example.com"`, ""},
		{policyDenied("p", "b"), `ValidatingAdmissionPolicy "p"`, ProbeDenied, `ValidatingAdmissionPolicy "p"`, ""},
		{forbidden, DeniedByPodSecurity, ProbeUnknown, "", "forbidden: cannot create pods in namespace prod"},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "slow.example.com": context deadline exceeded`)), `webhook "slow.example.com"`, ProbeUnknown, "", "failed calling webhook"},
		{apierrors.NewBadRequest(`admission webhook "side.example.com" does not support dry run`), "", ProbeUnknown, "", "refuses dry runs"},
		{fmt.Errorf("Post \"https://x/api/v1/namespaces/a/pods\": %w", context.DeadlineExceeded), "", ProbeUnknown, "", "request timeout"},
		{apierrors.NewTimeoutError("request did not complete within 3s", 0), "", ProbeUnknown, "", "request timeout"},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "gone"), "", ProbeGone, "", ""},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "x", nil), "", ProbeUnknown, "", "not valid"},
	} {
		p := Probe{Namespace: "prod", Expect: tc.expect}
		classify(&p, tc.err)
		if p.Result != tc.result || p.DeniedBy != tc.deniedBy || !strings.Contains(p.Message, tc.msg) || strings.Contains(p.Message, "\n") {
			t.Errorf("%v: got %s %q %q", tc.err, p.Result, p.DeniedBy, p.Message)
		}
	}
}

func TestParseProbeFile(t *testing.T) {
	ms, err := ParseProbeFile("probes.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: a}\n---\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p}}\n- {apiVersion: v1, kind: Pod, metadata: {name: q}}\n"))
	if err != nil || len(ms) != 3 {
		t.Fatalf("%v %+v", err, ms)
	}
	if u := (unstructured.Unstructured{Object: ms[0].Object}); u.GetGenerateName() != ProbeName+"-" || ms[0].Source != "probes.yaml#1" || ms[2].Source != "probes.yaml#2.2" {
		t.Errorf("%+v", ms)
	}
	for _, bad := range []string{"apiVersion: v1\nkind: Pod\nmetadata: {name: [\n", "kind: Pod\n", "- a\n- b\n", ""} {
		_, err := ParseProbeFile("bad.yaml", []byte(bad))
		if err == nil || !strings.HasPrefix(err.Error(), "probe file bad.yaml") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A probe file that did not parse makes the gate UNKNOWN with its line;
// the probes that could be built still run.
func TestAdmissionGateProbeFileError(t *testing.T) {
	srv := &apiserver{t: t, answer: func(string, string, *unstructured.Unstructured) error { return psaDenied("") }}
	r := &Runner{Kube: fake.NewClientset(ns("prod", map[string]string{psaapi.EnforceLevelLabel: "baseline"})), Dynamic: srv.client(),
		Policy: PolicyOptions{ProbeErrors: []string{"probe file bad.yaml: document 1: error converting YAML to JSON"}}}
	g, probes := probeGate(r)
	if g.Status != StatusUnknown || !strings.Contains(strings.Join(g.Evidence, "\n"), "UNKNOWN probe file bad.yaml") || len(probes) != 1 || probes[0].Result != ProbeDenied {
		t.Errorf("%s %s %v %+v", g.Status, g.Message, g.Evidence, probes)
	}
}

// Two policies deny the same probe pods. Which one the apiserver names is
// not fixed (it ranges a map to list the policies, and reports the first
// denial), so the baseline hears one name and verify the other: verify
// accepts a denial by any control that denied that object at the
// baseline, and replays the probes another control denied first.
func TestAdmissionProbesEitherDenierCounts(t *testing.T) {
	pol := func(name string) *admissionv1.ValidatingAdmissionPolicy {
		return &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "false"}}}}
	}
	bind := func(name string) *admissionv1.ValidatingAdmissionPolicyBinding {
		return &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	}
	kc := fake.NewClientset(ns("default", nil), pol("a"), bind("a"), pol("b"), bind("b"))
	srv := &apiserver{t: t}
	denier := "a"
	srv.answer = func(res, _ string, _ *unstructured.Unstructured) error {
		if res == "pods" {
			return policyDenied(denier, denier)
		}
		return nil
	}
	g, probes := probeGate(&Runner{Kube: kc, Dynamic: srv.client()})
	masked := 0
	for _, p := range probes {
		if p.Result == ProbeMasked && strings.HasPrefix(p.ID, "policy/") {
			masked++
			if p.Object == nil || len(p.Accept) != 1 || p.Accept[0] != PolicyDenier("a") {
				t.Errorf("masked probe %s: accept %v, object kept %v", p.ID, p.Accept, p.Object != nil)
			}
		}
	}
	if masked != 3 || !strings.Contains(strings.Join(g.Evidence, "\n"), "ValidatingAdmissionPolicy b (binding b): 3 of 3 probes denied first by another control (recorded") {
		t.Fatalf("baseline: %d masked\n%s", masked, strings.Join(g.Evidence, "\n"))
	}
	pe := &PolicyEvidence{Probes: probes}

	// The policy cache was rebuilt: b comes first now.
	denier = "b"
	_, now := probeGate(&Runner{Kube: kc, Dynamic: srv.client(), Policy: PolicyOptions{Baseline: pe}})
	if len(now) != 6 {
		t.Errorf("verify replayed %d probes, want the 6 denied at the baseline", len(now))
	}
	if regs := verifyProbes(pe, &PolicyEvidence{Probes: now}, nil); len(regs) != 0 {
		t.Errorf("the other policy named: %+v", regs)
	}

	// A policy that did not deny the pods at the baseline is no proof for
	// a: UNKNOWN, or WARN when a's configuration is as it was.
	denier = "c"
	_, now = probeGate(&Runner{Kube: kc, Dynamic: srv.client(), Policy: PolicyOptions{Baseline: pe}})
	regs := verifyProbes(pe, &PolicyEvidence{Probes: now}, nil)
	if len(regs) != 3 || regs[0].Status != StatusUnknown || regs[0].Object != "validatingadmissionpolicy/a" {
		t.Errorf("a new policy first: %+v", regs)
	}
	regs = verifyProbes(pe, &PolicyEvidence{Probes: now}, func(ref string) bool { return ref == "validatingadmissionpolicy/a" })
	if len(regs) != 3 || regs[0].Status != StatusWarn {
		t.Errorf("a new policy first, a unchanged: %+v", regs)
	}

	// Nothing denies the pods any more: every probe of both is a FAIL.
	srv.answer = func(string, string, *unstructured.Unstructured) error { return nil }
	_, now = probeGate(&Runner{Kube: kc, Dynamic: srv.client(), Policy: PolicyOptions{Baseline: pe}})
	failed := map[string]int{}
	for _, r := range verifyProbes(pe, &PolicyEvidence{Probes: now}, nil) {
		if r.Status == StatusFail {
			failed[r.Object]++
		}
	}
	if failed["validatingadmissionpolicy/a"] != 3 || failed["validatingadmissionpolicy/b"] != 3 {
		t.Errorf("both policies gone: %v", failed)
	}
}

// probeGate runs the admission gate and returns its probes.
func probeGate(r *Runner) (Gate, []Probe) {
	g, read := r.admissionGate(context.Background())
	return g, read.probes
}

// Pod Security's exemptions and cluster default live in the apiserver's
// admission configuration, which the API does not show: a privileged pod
// per RuntimeClass where a level is enforced, and one in a namespace
// without an enforce label, show them. A RuntimeClass added after the
// baseline (the GPU Operator's nvidia) that the configuration exempts,
// and a cluster default that was dropped, are caught by verify.
func TestAdmissionProbesPodSecurityExemptionsAndDefault(t *testing.T) {
	rc := func(name string) *nodev1.RuntimeClass {
		return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name}
	}
	kc := fake.NewClientset(ns("default", nil), ns("prod", map[string]string{psaapi.EnforceLevelLabel: "restricted"}), rc("runc"))
	exempt := map[string]bool{}
	defaults := true // the configuration enforces baseline where no label says otherwise
	srv := &apiserver{t: t, answer: func(res, ns string, obj *unstructured.Unstructured) error {
		class, _, _ := unstructured.NestedString(obj.Object, "spec", "runtimeClassName")
		switch {
		case res != "pods" || exempt[class]:
			return nil
		case ns == "prod", ns == "default" && defaults:
			return psaDenied(ns)
		}
		return nil
	}}
	g, probes := probeGate(&Runner{Kube: kc, Dynamic: srv.client()})
	for _, id := range []string{"psa-runtimeclass/runc", "psa-default/default"} {
		if p := findProbe(probes, id); p == nil || p.Result != ProbeDenied || p.Object == nil {
			t.Errorf("%s: %+v", id, p)
		}
	}
	if g.Status != StatusPass {
		t.Errorf("baseline: %s %s\n%s", g.Status, g.Message, strings.Join(g.Evidence, "\n"))
	}
	pe := &PolicyEvidence{Probes: probes}

	// The GPU Operator's RuntimeClass, exempted; the default dropped.
	if _, err := kc.NodeV1().RuntimeClasses().Create(context.Background(), rc("nvidia"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exempt["nvidia"], defaults = true, false
	_, now := probeGate(&Runner{Kube: kc, Dynamic: srv.client(), Policy: PolicyOptions{Baseline: pe}})
	got := map[string]Regression{}
	for _, r := range verifyProbes(pe, &PolicyEvidence{Probes: now}, nil) {
		got[r.Object] = r
	}
	if r := got["runtimeclass/nvidia"]; r.Status != StatusFail || !strings.Contains(r.Message, "RuntimeClass nvidia, new since the baseline, is admitted") {
		t.Errorf("nvidia: %+v", r)
	}
	if r := got["podsecurity/defaults"]; r.Status != StatusFail || !strings.Contains(r.Message, "Pod Security's cluster default (namespace default has no enforce label) denied a pods probe (privileged)") {
		t.Errorf("default: %+v", r)
	}
	if _, ok := got["runtimeclass/runc"]; ok || len(got) != 2 {
		t.Errorf("regressions: %+v", got)
	}

	// An exempt RuntimeClass at the baseline is a warning there.
	exempt["runc"] = true
	g, _ = probeGate(&Runner{Kube: kc, Dynamic: srv.client()})
	if g.Status != StatusWarn || !strings.Contains(strings.Join(g.Evidence, "\n"), "Pod Security for pods of RuntimeClass runc (in namespace prod) admitted a pod its level forbids") {
		t.Errorf("exempt at the baseline: %s\n%s", g.Status, strings.Join(g.Evidence, "\n"))
	}
}
