package crdmigrate

import (
	"context"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AdmissionWebhook is one admission webhook of the cluster with its health
// (as Check reports it for a CRD's writes) and what it intercepts.
type AdmissionWebhook struct {
	WebhookHealth
	// TimeoutSeconds is the webhook's timeout (the API's default of 10
	// seconds when unset).
	TimeoutSeconds int32 `json:"timeoutSeconds"`
	// Rules are the operations and resources it intercepts.
	Rules []admissionv1.RuleWithOperations `json:"-"`
	// NamespaceSelector and ObjectSelector narrow it (nil: every object).
	NamespaceSelector *metav1.LabelSelector `json:"-"`
	ObjectSelector    *metav1.LabelSelector `json:"-"`
}

// All returns every validating and mutating webhook with its health, for
// checks that are not about one CRD (`kubectl skew preflight`).
func (w *Webhooks) All(ctx context.Context, kube kubernetes.Interface) ([]AdmissionWebhook, error) {
	var out []AdmissionWebhook
	add := func(kind, cfg, name string, cc admissionv1.WebhookClientConfig, fp *admissionv1.FailurePolicyType, ns, obj *metav1.LabelSelector, rules []admissionv1.RuleWithOperations, timeout *int32) error {
		h, err := w.admissionHealth(ctx, kube, kind, cfg, name, cc, fp, ns, obj)
		if err != nil {
			return err
		}
		t := int32(10)
		if timeout != nil {
			t = *timeout
		}
		out = append(out, AdmissionWebhook{WebhookHealth: h, TimeoutSeconds: t, Rules: rules, NamespaceSelector: ns, ObjectSelector: obj})
		return nil
	}
	for _, cfg := range w.Validating {
		for _, wh := range cfg.Webhooks {
			if err := add(KindValidating, cfg.Name, wh.Name, wh.ClientConfig, wh.FailurePolicy, wh.NamespaceSelector, wh.ObjectSelector, wh.Rules, wh.TimeoutSeconds); err != nil {
				return out, err
			}
		}
	}
	for _, cfg := range w.Mutating {
		for _, wh := range cfg.Webhooks {
			if err := add(KindMutating, cfg.Name, wh.Name, wh.ClientConfig, wh.FailurePolicy, wh.NamespaceSelector, wh.ObjectSelector, wh.Rules, wh.TimeoutSeconds); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}
