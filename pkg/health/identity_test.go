package health

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestInjectedIntoEKSWebhookPatch applies the patch the EKS pod identity
// webhook's own test expects for a pod of an annotated ServiceAccount
// (amazon-eks-pod-identity-webhook v0.6.17,
// pkg/handler/testdata/rawPodNeedsRegion.pod.yaml, copied whole) and reads
// what it injected; the ServiceAccount admission plugin's kube-api-access
// volume, added before any webhook, is not counted.
func TestInjectedIntoEKSWebhookPatch(t *testing.T) {
	b, err := os.ReadFile("testdata/eks-pod-identity-webhook-v0.6.17-rawPodNeedsRegion.pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sent corev1.Pod
	if err := yaml.Unmarshal(b, &sent); err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch([]byte(sent.Annotations["testing.eks.amazonaws.com/expectedPatch"]))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(&sent)
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Volumes = append(got.Spec.Volumes, corev1.Volume{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}})
	inj := InjectedInto(IdentityEKS, &sent, &got)
	want := "env AWS_DEFAULT_REGION, AWS_REGION, AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount"
	if inj.String() != want {
		t.Errorf("injected %q\nwant     %q", inj, want)
	}
	if n := InjectedInto(IdentityEKS, &sent, &sent); !n.Empty() {
		t.Errorf("unmutated pod: injected %q", n)
	}
	// The webhook gone: only the environment survives in a pod that set
	// it itself, the token volume is lost.
	lost := inj.Lost(Injection{Env: inj.Env})
	if lost.String() != "token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount" {
		t.Errorf("lost %q", lost)
	}
}

// The Azure webhook's shape (azure-workload-identity v1.6.0
// pkg/webhook/consts.go: AZURE_* variables, a projected token of audience
// api://AzureADTokenExchange in a volume named
// azure-workload-identity-reserved-<hash of the pod's name>, mounted at
// /var/run/secrets/azure/wi).
func TestInjectedIntoAzureAndProbePod(t *testing.T) {
	b := IdentityBinding{Namespace: "ml", ServiceAccount: "trainer", Provider: IdentityAzure, Identity: "0000-1111"}
	sent := IdentityProbePod(b)
	if sent.Labels[LabelAzureUse] != "true" || sent.Spec.ServiceAccountName != "trainer" || sent.Namespace != "ml" {
		t.Fatalf("probe pod %+v", sent.ObjectMeta)
	}
	if p := IdentityProbePod(IdentityBinding{Namespace: "ml", ServiceAccount: "s3", Provider: IdentityEKS}); p.Labels[LabelAzureUse] != "" {
		t.Errorf("EKS probe carries the Azure label")
	}
	got := sent.DeepCopy()
	c := &got.Spec.Containers[0]
	for _, e := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AWS_REGION", "OTHER"} {
		c.Env = append(c.Env, corev1.EnvVar{Name: e, Value: "x"})
	}
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "azure-workload-identity-reserved-0a1b", MountPath: "/var/run/secrets/azure/wi"})
	got.Spec.Volumes = append(got.Spec.Volumes, corev1.Volume{Name: "azure-workload-identity-reserved-0a1b", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "api://AzureADTokenExchange", Path: "token/azure-identity-token"}}}}}},
		corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	want := "env AZURE_AUTHORITY_HOST, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_TENANT_ID; token volume audience api://AzureADTokenExchange at /var/run/secrets/azure/wi"
	if inj := InjectedInto(IdentityAzure, sent, got); inj.String() != want {
		t.Errorf("injected %q\nwant     %q", inj, want)
	}
}

func TestIdentityBindingsAndDiff(t *testing.T) {
	sa := func(ns, name string, ann map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}}
	}
	bs := IdentityBindings([]*corev1.ServiceAccount{
		sa("ml", "s3", map[string]string{AnnotationEKSRoleARN: "arn:aws:iam::111122223333:role/s3-reader"}),
		sa("ml", "plain", nil),
		sa("ml", "gcs", map[string]string{AnnotationGKEServiceAccount: "reader@p.iam.gserviceaccount.com"}),
		sa("az", "blob", map[string]string{AnnotationAzureClientID: "0000-1111", "other": "x"}),
		sa("ml", "blank", map[string]string{AnnotationEKSRoleARN: " "}),
	})
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID())
	}
	if got := strings.Join(ids, ", "); got != "az/blob (azure), ml/gcs (gke), ml/s3 (eks-irsa)" {
		t.Errorf("bindings %s", got)
	}
	full := &Injection{Env: []string{"AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"}, TokenVolumes: []string{"audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount"}}
	base := []IdentityFact{
		{IdentityBinding: bs[2], Injected: full},
		{IdentityBinding: bs[0], Injected: &Injection{Env: []string{"AZURE_CLIENT_ID"}}},
		{IdentityBinding: IdentityBinding{Namespace: "ml", ServiceAccount: "gone", Provider: IdentityEKS, Identity: "arn"}, Injected: full},
		{IdentityBinding: IdentityBinding{Namespace: "ml", ServiceAccount: "never", Provider: IdentityEKS}, Injected: &Injection{}},
		{IdentityBinding: bs[1]},
	}
	now := []IdentityFact{
		{IdentityBinding: bs[2], Injected: &Injection{}},
		{IdentityBinding: bs[0], Unread: "forbidden"},
		{IdentityBinding: IdentityBinding{Namespace: "ml", ServiceAccount: "never", Provider: IdentityEKS}, Injected: &Injection{}},
		{IdentityBinding: bs[1]},
	}
	var got []string
	for _, c := range DiffIdentities(base, now) {
		got = append(got, c.String())
	}
	want := []string{
		"ServiceAccount ml/s3 (eks-irsa arn:aws:iam::111122223333:role/s3-reader): the mutating webhook no longer injects env AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount, which it injected at the baseline; its pods get no eks-irsa credentials",
		"ServiceAccount az/blob: the dry-run pod could not be made now: forbidden",
		"ServiceAccount ml/gone no longer carries its eks-irsa identity binding (arn)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := DiffIdentities(base, base); len(d) != 0 {
		t.Errorf("unchanged: %v", d)
	}
}
