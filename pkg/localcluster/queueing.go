package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Kueue runs outside the cluster. Its internal certificate management is on
// (with it off, v0.17 insists on metrics certificates at a fixed path under
// /etc), so the harness hands it, before it starts, what its certificate
// rotator expects to find: the kueue-system namespace, the webhook Secret
// filled with a CA and a serving certificate that is valid both for the
// in-cluster service name and for 127.0.0.1, the (empty) webhook
// configurations, and CRDs whose conversion webhook points at
// https://127.0.0.1:<port>/convert. The rotator keeps that certificate and
// injects the CA into the CRDs. Kueue's admission webhooks are left out, so
// a Job or JobSet must be created suspended and with the
// kueue.x-k8s.io/queue-name label; Kueue then admits and unsuspends it.
const (
	KueueNamespace    = "kueue-system"
	kueueSecret       = "kueue-webhook-server-cert"
	kueueService      = "kueue-webhook-service"
	kueueQueueNameKey = "kueue.x-k8s.io/queue-name"
)

// QueueNameLabel is the label that puts a Job or JobSet in a LocalQueue.
const QueueNameLabel = kueueQueueNameKey

var kueueConversionCRDs = map[string]bool{
	"localqueues.kueue.x-k8s.io":        true,
	"clusterqueues.kueue.x-k8s.io":      true,
	"workloads.kueue.x-k8s.io":          true,
	"cohorts.kueue.x-k8s.io":            true,
	"multikueueclusters.kueue.x-k8s.io": true,
}

func (cp *Cluster) startKueue(ctx context.Context) error {
	certDir := filepath.Join(cp.Dir, "kueue-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	ca, err := newKeyPair(certSpec{commonName: "kueue-ca", organization: []string{"kueue"}, dnsNames: []string{"kueue-ca"}, isCA: true, rsaKey: true}, nil)
	if err != nil {
		return err
	}
	serving, err := newKeyPair(certSpec{
		commonName: kueueService + "." + KueueNamespace + ".svc",
		dnsNames:   []string{kueueService + "." + KueueNamespace + ".svc", "localhost"},
		ips:        loopbackIPs,
		usages:     serverAuth,
	}, ca)
	if err != nil {
		return err
	}
	// In a cluster the Secret is mounted into certDir; here the harness
	// writes the same files.
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), serving.CertPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), serving.KeyPEM, 0o600); err != nil {
		return err
	}
	c := cp.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KueueNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := c.CoreV1().Secrets(KueueNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kueueSecret},
		Data:       map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": ca.KeyPEM, "tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-validating-webhook-configuration"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if _, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-mutating-webhook-configuration"},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	crds, err := LoadCRDs(cp.Binaries.KueueCRDs)
	if err != nil {
		return &ComponentError{Component: Kueue, Log: cp.logPath(Kueue), Err: fmt.Errorf("kueue CRDs: %w", err)}
	}
	frameworks := []string{"batch/job"}
	if cp.Options.JobSet {
		frameworks = append(frameworks, "jobset.x-k8s.io/jobset")
	}
	kubeconfig, err := cp.writeKubeconfig(Kueue, "kueue")
	if err != nil {
		return err
	}
	configPath := filepath.Join(cp.Dir, "kueue-config.yaml")
	// The conversion webhook's URL names the port, so each try applies the
	// CRDs again.
	args := func(ctx context.Context) ([]string, error) {
		port := cp.port(Kueue)
		url := "https://127.0.0.1:" + strconv.Itoa(port) + "/convert"
		for _, crd := range crds {
			if kueueConversionCRDs[crd.Name] {
				crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
					Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{
						ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: ca.CertPEM},
						ConversionReviewVersions: []string{"v1"},
					},
				}
			}
		}
		if err := cp.ApplyCRDs(ctx, crds...); err != nil {
			return nil, err
		}
		config := fmt.Sprintf(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: %s
manageJobsWithoutQueueName: false
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
  webhookServiceName: %s
  webhookSecretName: %s
integrations:
  frameworks: [%s]
`, KueueNamespace, cp.port(portKueueHealth), port, certDir, kueueService, kueueSecret, strings.Join(quoteAll(frameworks), ", "))
		if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
			return nil, err
		}
		return []string{
			"--config=" + configPath,
			"--kubeconfig=" + kubeconfig,
			"--feature-gates=VisibilityOnDemand=false",
			"--zap-log-level=info",
		}, nil
	}
	return cp.startComponent(ctx, component{name: Kueue, bin: cp.Binaries.Kueue, args: args, retries: queueingRetries,
		ready: func(ctx context.Context, p *process) error {
			ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			defer cancel()
			return cp.waitFor(ctx, p, "readyz", func(ctx context.Context) error {
				return httpGetOK(ctx, loopbackHTTP, "http://127.0.0.1:"+strconv.Itoa(cp.port(portKueueHealth))+"/readyz")
			})
		}})
}

// queueingRetries is how many more times Kueue or JobSet is started when
// it does not become ready (a taken port is retried on its own): the demo's
// training gang needs both, and a slow first start on a busy machine should
// not cost it.
const queueingRetries = 2

// attemptTimeout bounds one try of a manager's start, so that a manager
// that hangs is tried again while the start-up has time left.
const attemptTimeout = 90 * time.Second

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// JobSet runs outside the cluster with its internal certificate management
// off: its webhook server on 127.0.0.1 uses a certificate from the harness CA,
// and the JobSet defaulting and validating webhooks are registered with a
// loopback URL. Its pod webhooks (exclusive placement) are not registered.
func (cp *Cluster) startJobSet(ctx context.Context) error {
	certDir := filepath.Join(cp.Dir, "jobset-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	serving, err := cp.pki.servingPairFor("jobset-webhook")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), serving.CertPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), serving.KeyPEM, 0o600); err != nil {
		return err
	}
	crds, err := LoadCRDs(cp.Binaries.JobSetCRDs)
	if err != nil {
		return &ComponentError{Component: JobSet, Log: cp.logPath(JobSet), Err: fmt.Errorf("jobset CRDs: %w", err)}
	}
	if err := cp.ApplyCRDs(ctx, crds...); err != nil {
		return err
	}
	kubeconfig, err := cp.writeKubeconfig(JobSet, "jobset")
	if err != nil {
		return err
	}
	configPath := filepath.Join(cp.Dir, "jobset-config.yaml")
	args := func(context.Context) ([]string, error) {
		config := fmt.Sprintf(`apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:%d
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
`, cp.port(portJobSetHealth), cp.port(JobSet), certDir)
		if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
			return nil, err
		}
		return []string{
			"--config=" + configPath,
			"--kubeconfig=" + kubeconfig,
			"--metrics-bind-address=0",
			"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(cp.port(portJobSetHealth)),
		}, nil
	}
	if err := cp.startComponent(ctx, component{name: JobSet, bin: cp.Binaries.JobSet, args: args, retries: queueingRetries,
		ready: func(ctx context.Context, p *process) error {
			ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			defer cancel()
			return cp.waitFor(ctx, p, "readyz", func(ctx context.Context) error {
				return httpGetOK(ctx, loopbackHTTP, "http://127.0.0.1:"+strconv.Itoa(cp.port(portJobSetHealth))+"/readyz")
			})
		}}); err != nil {
		return err
	}
	base := "https://127.0.0.1:" + strconv.Itoa(cp.port(JobSet))
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"jobset.x-k8s.io"}, APIVersions: []string{"v1alpha2"}, Resources: []string{"jobsets"},
		},
	}}
	sideEffects := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	mutURL, valURL := base+"/mutate-jobset-x-k8s-io-v1alpha2-jobset", base+"/validate-jobset-x-k8s-io-v1alpha2-jobset"
	mutRules := append([]admissionregistrationv1.RuleWithOperations(nil), rules...)
	mutRules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-mutating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mjobset.kb.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &mutURL, CABundle: cp.pki.ca.CertPEM},
			Rules:                   mutRules,
			FailurePolicy:           &fail,
			SideEffects:             &sideEffects,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "jobset-validating-webhook-configuration"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vjobset.kb.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &valURL, CABundle: cp.pki.ca.CertPEM},
			Rules:                   rules,
			FailurePolicy:           &fail,
			SideEffects:             &sideEffects,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	// Create, or point an existing registration at this webhook server.
	if err := createOrUpdate(ctx, cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations(), mwc); err != nil {
		return err
	}
	return createOrUpdate(ctx, cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations(), vwc)
}

// createOrUpdate creates obj, or replaces the object of its name.
func createOrUpdate[T metav1.Object](ctx context.Context, c interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}, obj T) error {
	_, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := c.Get(ctx, obj.GetName(), getOpts)
	if err != nil {
		return err
	}
	obj.SetResourceVersion(old.GetResourceVersion())
	_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}
