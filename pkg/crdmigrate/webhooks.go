package crdmigrate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Webhook kinds.
const (
	KindConversion = "Conversion"
	KindValidating = "ValidatingWebhook"
	KindMutating   = "MutatingWebhook"
)

// HealthState is a webhook's health in the suite's status words, lower
// case as every report's JSON writes them: ok, fail, unknown.
type HealthState string

// Webhook health states.
const (
	// HealthOK: the webhook's Service has ready endpoints.
	HealthOK HealthState = "ok"
	// HealthDown: the Service is missing or has no ready endpoint.
	HealthDown HealthState = "fail"
	// HealthUnknown: the webhook is reached by URL (or an ExternalName
	// Service), which the API cannot tell about; a server-side dry-run
	// write checks it before a run.
	HealthUnknown HealthState = "unknown"
)

// Word is the state's word in a table: OK, FAIL or UNKNOWN.
func (h HealthState) Word() cli.Status {
	switch h {
	case HealthOK:
		return cli.StatusOK
	case HealthDown:
		return cli.StatusFail
	}
	return cli.StatusUnknown
}

// v1alpha1Health are the words reports of gpufleet.dev/v1alpha1 wrote.
var v1alpha1Health = map[string]HealthState{"OK": HealthOK, "Down": HealthDown, "Unknown": HealthUnknown}

// UnmarshalText reads a health as this release writes it, or as reports
// of gpufleet.dev/v1alpha1 did ("OK", "Down", "Unknown").
func (h *HealthState) UnmarshalText(b []byte) error {
	w := string(b)
	switch HealthState(w) {
	case HealthOK, HealthDown, HealthUnknown, "":
		*h = HealthState(w)
		return nil
	}
	if old, ok := v1alpha1Health[w]; ok {
		*h = old
		return nil
	}
	return fmt.Errorf("health %q is not one of ok, fail, unknown", w)
}

// WebhookHealth is the health of one webhook that reading or writing a
// CRD's objects goes through.
type WebhookHealth struct {
	// Kind is Conversion, ValidatingWebhook or MutatingWebhook.
	Kind string `json:"kind"`
	// Configuration names the webhook configuration (admission webhooks).
	Configuration string `json:"configuration,omitempty"`
	// Name is the webhook's name (admission webhooks).
	Name string `json:"name,omitempty"`
	// Target is "service ns/name:port" or the URL.
	Target string `json:"target"`
	// ServiceNamespace and ServiceName name a Service-backed webhook.
	ServiceNamespace string `json:"serviceNamespace,omitempty"`
	ServiceName      string `json:"serviceName,omitempty"`
	// FailurePolicy is Fail or Ignore; a conversion webhook always fails
	// closed.
	FailurePolicy string `json:"failurePolicy"`
	// Health is ok, fail (down) or unknown.
	Health         HealthState `json:"health"`
	ReadyEndpoints int         `json:"readyEndpoints"`
	// Selective is set when a namespace or object selector may keep the
	// webhook away from some objects (the selectors are not evaluated).
	Selective bool   `json:"selective,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// Blocks reports whether the webhook is down and its failure would fail the
// request.
func (h WebhookHealth) Blocks() bool {
	return h.Health == HealthDown && h.FailurePolicy != string(admissionv1.Ignore)
}

// Problem describes a blocking webhook in one phrase.
func (h WebhookHealth) Problem() string {
	what := "conversion webhook"
	if h.Kind != KindConversion {
		what = fmt.Sprintf("%s %s (%s)", kindWord(h.Kind), h.Name, h.Configuration)
	}
	return fmt.Sprintf("%s at %s is down: %s", what, h.Target, h.Detail)
}

func kindWord(kind string) string {
	switch kind {
	case KindValidating:
		return "validating webhook"
	case KindMutating:
		return "mutating webhook"
	}
	return "webhook"
}

// Webhooks holds the cluster's admission webhook configurations and caches
// Service endpoint lookups.
type Webhooks struct {
	Validating []admissionv1.ValidatingWebhookConfiguration
	Mutating   []admissionv1.MutatingWebhookConfiguration

	mu    sync.Mutex
	cache map[string]serviceHealth
}

type serviceHealth struct {
	health HealthState
	ready  int
	detail string
}

// LoadWebhooks lists the validating and mutating webhook configurations.
func LoadWebhooks(ctx context.Context, kube kubernetes.Interface) (*Webhooks, error) {
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing validatingwebhookconfigurations: %w", err)
	}
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing mutatingwebhookconfigurations: %w", err)
	}
	return &Webhooks{Validating: v.Items, Mutating: m.Items, cache: map[string]serviceHealth{}}, nil
}

// Health groups the webhooks one CRD depends on.
type Health struct {
	Conversion *WebhookHealth
	Admission  []WebhookHealth
}

// Check returns the health of the CRD's conversion webhook and of every
// admission webhook that an UPDATE of its objects goes through.
func (w *Webhooks) Check(ctx context.Context, kube kubernetes.Interface, crd *apiextv1.CustomResourceDefinition) (Health, error) {
	var out Health
	if conv := crd.Spec.Conversion; conv != nil && conv.Strategy == apiextv1.WebhookConverter {
		h := WebhookHealth{Kind: KindConversion, FailurePolicy: string(admissionv1.Fail)}
		var cc *apiextv1.WebhookClientConfig
		if conv.Webhook != nil {
			cc = conv.Webhook.ClientConfig
		}
		if cc == nil {
			h.Health, h.Target, h.Detail = HealthDown, "<none>", "conversion strategy Webhook without a client config"
		} else if cc.Service != nil {
			port := int32(443)
			if cc.Service.Port != nil {
				port = *cc.Service.Port
			}
			if err := w.fillService(ctx, kube, &h, cc.Service.Namespace, cc.Service.Name, port); err != nil {
				return out, err
			}
		} else {
			h.Target, h.Health, h.Detail = urlOf(cc.URL), HealthUnknown, "reached by URL; checked by a dry-run write"
		}
		out.Conversion = &h
	}
	versions := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	target := ruleTarget{group: crd.Spec.Group, resource: crd.Spec.Names.Plural, storage: StorageVersion(crd), versions: versions, namespaced: crd.Spec.Scope == apiextv1.NamespaceScoped}
	for _, cfg := range w.Validating {
		for _, wh := range cfg.Webhooks {
			if !target.matches(wh.Rules, wh.MatchPolicy) {
				continue
			}
			h, err := w.admissionHealth(ctx, kube, KindValidating, cfg.Name, wh.Name, wh.ClientConfig, wh.FailurePolicy, wh.NamespaceSelector, wh.ObjectSelector)
			if err != nil {
				return out, err
			}
			out.Admission = append(out.Admission, h)
		}
	}
	for _, cfg := range w.Mutating {
		for _, wh := range cfg.Webhooks {
			if !target.matches(wh.Rules, wh.MatchPolicy) {
				continue
			}
			h, err := w.admissionHealth(ctx, kube, KindMutating, cfg.Name, wh.Name, wh.ClientConfig, wh.FailurePolicy, wh.NamespaceSelector, wh.ObjectSelector)
			if err != nil {
				return out, err
			}
			out.Admission = append(out.Admission, h)
		}
	}
	sort.Slice(out.Admission, func(i, j int) bool {
		a, b := out.Admission[i], out.Admission[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Configuration != b.Configuration {
			return a.Configuration < b.Configuration
		}
		return a.Name < b.Name
	})
	return out, nil
}

func urlOf(u *string) string {
	if u == nil {
		return "<none>"
	}
	return *u
}

func (w *Webhooks) admissionHealth(ctx context.Context, kube kubernetes.Interface, kind, cfg, name string, cc admissionv1.WebhookClientConfig, fp *admissionv1.FailurePolicyType, nsSel, objSel *metav1.LabelSelector) (WebhookHealth, error) {
	h := WebhookHealth{Kind: kind, Configuration: cfg, Name: name, FailurePolicy: string(admissionv1.Fail)}
	if fp != nil {
		h.FailurePolicy = string(*fp)
	}
	h.Selective = !emptySelector(nsSel) || !emptySelector(objSel)
	if cc.Service != nil {
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		if err := w.fillService(ctx, kube, &h, cc.Service.Namespace, cc.Service.Name, port); err != nil {
			return h, err
		}
	} else {
		h.Target, h.Health, h.Detail = urlOf(cc.URL), HealthUnknown, "reached by URL; checked by a dry-run write"
	}
	return h, nil
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// fillService sets the target and health of a Service-backed webhook.
func (w *Webhooks) fillService(ctx context.Context, kube kubernetes.Interface, h *WebhookHealth, ns, name string, port int32) error {
	h.Target = fmt.Sprintf("service %s/%s:%d", ns, name, port)
	h.ServiceNamespace, h.ServiceName = ns, name
	key := h.Target
	w.mu.Lock()
	sh, ok := w.cache[key]
	w.mu.Unlock()
	if !ok {
		var err error
		sh, err = serviceReady(ctx, kube, ns, name, port)
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.cache[key] = sh
		w.mu.Unlock()
	}
	h.Health, h.ReadyEndpoints, h.Detail = sh.health, sh.ready, sh.detail
	return nil
}

// serviceReady counts the ready endpoints behind a Service port.
func serviceReady(ctx context.Context, kube kubernetes.Interface, ns, name string, port int32) (serviceHealth, error) {
	svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return serviceHealth{health: HealthDown, detail: "service not found"}, nil
	}
	if err != nil {
		return serviceHealth{}, fmt.Errorf("reading service %s/%s: %w", ns, name, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return serviceHealth{health: HealthUnknown, detail: "ExternalName service " + svc.Spec.ExternalName + "; checked by a dry-run write"}, nil
	}
	portName, found := "", false
	for _, p := range svc.Spec.Ports {
		if p.Port == port {
			portName, found = p.Name, true
			break
		}
	}
	if !found {
		return serviceHealth{health: HealthDown, detail: fmt.Sprintf("service has no port %d", port)}, nil
	}
	eps, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return serviceHealth{}, fmt.Errorf("listing endpointslices of service %s/%s: %w", ns, name, err)
	}
	ready := countReady(eps.Items, portName)
	if ready == 0 {
		return serviceHealth{health: HealthDown, detail: "no ready endpoints"}, nil
	}
	return serviceHealth{health: HealthOK, ready: ready}, nil
}

func countReady(items []discoveryv1.EndpointSlice, portName string) int {
	seen := map[string]bool{}
	for _, s := range items {
		hasPort := len(s.Ports) == 0
		for _, p := range s.Ports {
			if (p.Name == nil && portName == "") || (p.Name != nil && *p.Name == portName) {
				hasPort = true
			}
		}
		if !hasPort {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				seen[a] = true
			}
		}
	}
	return len(seen)
}

// ruleTarget is the request a migration write makes: an UPDATE of the main
// resource at the storage version.
type ruleTarget struct {
	group, resource, storage string
	versions                 []string
	namespaced               bool
}

// matches reports whether any rule sends an UPDATE of the resource to the
// webhook. With matchPolicy Equivalent (the default) a rule naming any
// version of the CRD matches, because the apiserver converts the request.
func (t ruleTarget) matches(rules []admissionv1.RuleWithOperations, policy *admissionv1.MatchPolicyType) bool {
	equivalent := policy == nil || *policy == admissionv1.Equivalent
	for _, r := range rules {
		if !has(r.Operations, admissionv1.Update) && !has(r.Operations, admissionv1.OperationAll) {
			continue
		}
		if !slices.Contains(r.APIGroups, t.group) && !slices.Contains(r.APIGroups, "*") {
			continue
		}
		versionOK := slices.Contains(r.APIVersions, "*") || slices.Contains(r.APIVersions, t.storage)
		if !versionOK && equivalent {
			for _, v := range t.versions {
				if slices.Contains(r.APIVersions, v) {
					versionOK = true
				}
			}
		}
		if !versionOK {
			continue
		}
		if !slices.Contains(r.Resources, t.resource) && !slices.Contains(r.Resources, "*") && !slices.Contains(r.Resources, "*/*") {
			continue
		}
		if r.Scope != nil {
			switch *r.Scope {
			case admissionv1.ClusterScope:
				if t.namespaced {
					continue
				}
			case admissionv1.NamespacedScope:
				if !t.namespaced {
					continue
				}
			}
		}
		return true
	}
	return false
}

func has(ops []admissionv1.OperationType, op admissionv1.OperationType) bool {
	return slices.Contains(ops, op)
}

// ConversionWebhookWait is how long the apiserver waits for a CRD's
// conversion webhook: a fixed 30s, since a CRD's conversion has no
// timeoutSeconds (admission webhooks have one).
const ConversionWebhookWait = 30 * time.Second

// ConversionWebhookTarget returns where the CRD's conversion webhook is
// reached ("service ns/name:port" or the URL), or "" when its objects are
// not converted by a webhook.
func ConversionWebhookTarget(crd *apiextv1.CustomResourceDefinition) string {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Strategy != apiextv1.WebhookConverter {
		return ""
	}
	if conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return "<none>"
	}
	cc := conv.Webhook.ClientConfig
	if s := cc.Service; s != nil {
		port := int32(443)
		if s.Port != nil {
			port = *s.Port
		}
		return fmt.Sprintf("service %s/%s:%d", s.Namespace, s.Name, port)
	}
	return urlOf(cc.URL)
}

// ConversionWebhookError is a read or write of a CRD's objects that timed
// out while the CRD converts through a webhook. Every read of an object
// stored at another version than the one asked for, and every update of
// one (the apiserver reads the stored object first), waits on that webhook,
// so a webhook that stops answering shows up as requests that time out,
// with nothing in the error naming the webhook.
type ConversionWebhookError struct {
	CRD string
	// Target is where the webhook is reached (ConversionWebhookTarget).
	Target string
	Err    error
}

func (e *ConversionWebhookError) Error() string {
	return fmt.Sprintf("timed out, most likely waiting for the conversion webhook of %s at %s (the apiserver converts each object stored at another version through it and waits up to %s for an answer): %v",
		e.CRD, e.Target, ConversionWebhookWait, e.Err)
}

func (e *ConversionWebhookError) Unwrap() error { return e.Err }

// conversionWebhook attributes timeouts of requests for a CRD's objects to
// its conversion webhook; the zero value (no webhook) attributes nothing.
type conversionWebhook struct {
	crd, target string
}

func conversionWebhookOf(crd *apiextv1.CustomResourceDefinition) conversionWebhook {
	return conversionWebhook{crd: crd.Name, target: ConversionWebhookTarget(crd)}
}

// explain wraps err in *ConversionWebhookError when the CRD converts
// through a webhook and the request timed out (timedOut: on any try, so
// that a last try that failed differently, say a stream the apiserver
// reset at the deadline, still counts).
func (c conversionWebhook) explain(err error, timedOut bool) error {
	if err == nil || c.target == "" || !(timedOut || IsTimeout(err)) {
		return err
	}
	return &ConversionWebhookError{CRD: c.crd, Target: c.target, Err: err}
}

// IsTimeout reports whether err is a request that ran out of time: the
// client's --request-timeout, the apiserver's 504, or the apiserver's own
// call to a webhook that did not answer.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "i/o timeout")
}
