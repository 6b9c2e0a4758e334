//go:build e2e

package skewe2e

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	runbooke2e "github.com/gpufleet/upgrade-plugins/e2e/runbook"
)

// podIdentityPatch is amazon-eks-pod-identity-webhook v0.6.17's patch for
// a pod of a ServiceAccount with a Pod Identity association and no AWS
// variables of its own (pkg/handler/testdata/containercredentials/
// rawPodWithoutVolumes.pod.yaml's expected patch with main.go's
// --container-credentials-* defaults: volume eks-pod-identity-token,
// audience pods.eks.amazonaws.com, mounted at
// /var/run/secrets/pods.eks.amazonaws.com/serviceaccount).
func podIdentityPatch(pod *corev1.Pod) []byte {
	const mount = "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount"
	vol := corev1.Volume{Name: "eks-pod-identity-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
		ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "pods.eks.amazonaws.com", ExpirationSeconds: ptr.To[int64](86400), Path: "eks-pod-identity-token"}}}}}}
	containers := append([]corev1.Container(nil), pod.Spec.Containers...)
	for i := range containers {
		c := &containers[i]
		c.Env = append(append([]corev1.EnvVar(nil), c.Env...), corev1.EnvVar{Name: "AWS_CONTAINER_CREDENTIALS_FULL_URI", Value: "http://169.254.170.23/v1/credentials"},
			corev1.EnvVar{Name: "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", Value: mount + "/eks-pod-identity-token"})
		c.VolumeMounts = append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), corev1.VolumeMount{Name: "eks-pod-identity-token", ReadOnly: true, MountPath: mount})
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{"add", "/spec/volumes/0", vol}}
	if pod.Spec.Volumes == nil {
		ops = []op{{"add", "/spec/volumes", []corev1.Volume{vol}}}
	}
	ops = append(ops, op{"add", "/spec/containers", containers})
	b, _ := json.Marshal(ops)
	return b
}

// EKS Pod Identity through the workload-identity gate: the EKS API is the
// recording endpoint of the runbook lane (e2e/runbook EKS), reached by
// kubectl-skew's aws-sdk-go-v2 client through AWS_ENDPOINT_URL_EKS with
// static credentials; the webhook injects Pod Identity's environment for
// the associated ServiceAccount. Preflight records the association and
// what its dry-run pod got (PASS); verify fails naming the ServiceAccount
// once the association is gone from the EKS API, and is UNKNOWN naming
// eks:ListPodIdentityAssociations when the caller may no longer list.
func TestWorkloadIdentityEKSPodIdentity(t *testing.T) {
	cp := scenario(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	if _, err := cp.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const role = "arn:aws:iam::111122223333:role/trainer-s3"
	world := &runbooke2e.World{Provider: "eks", Cluster: "train-prod", Region: "us-west-2", ControlPlane: "1.37.2",
		PodIdentity: []runbooke2e.PodIdentityAssociation{{ID: "a-0123456789abcdef0", Namespace: ns, ServiceAccount: "trainer", RoleARN: role}}}
	rec := &runbooke2e.Recorder{}
	api := httptest.NewServer(&runbooke2e.EKS{W: world, Rec: rec})
	t.Cleanup(api.Close)

	w := startIRSAWebhook(t, cp)
	w.podIdentity = func(n, sa string) bool {
		world.Lock()
		defer world.Unlock()
		for _, a := range world.PodIdentity {
			if a.Namespace == n && a.ServiceAccount == sa {
				return true
			}
		}
		return false
	}
	w.register(t, cp, "pod-identity-"+ns, ns)
	waitInjected(t, cp, ns, "trainer", true)

	dir := t.TempDir()
	env := []string{"PATH=" + filepath.Dir(cp.Binaries.Kubectl) + ":/usr/bin:/bin",
		"AWS_ENDPOINT_URL_EKS=" + api.URL, "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + dir + "/config", "AWS_SHARED_CREDENTIALS_FILE=" + dir + "/credentials"}
	run := func(args ...string) plugintest.Result {
		return plugintest.RunCmd(t, plugintest.Binary(t, "kubectl-skew"), plugintest.Cmd{Args: append([]string{"--kubeconfig", cp.Kubeconfig}, args...), Env: env})
	}
	items := func(r plugintest.Result) []struct{ Kind, Status, Object, Message string } {
		var vr struct {
			Items []struct{ Kind, Status, Object, Message string }
		}
		if err := json.Unmarshal([]byte(r.Stdout), &vr); err != nil {
			t.Fatalf("%v\n%s", err, r)
		}
		return vr.Items
	}

	baseline := dir + "/baseline.yaml"
	r := run("preflight", "-o", "json", "--target", "v1.37", "--eks-cluster", "train-prod", "--eks-region", "us-west-2", "--save", baseline)
	var rep preflightReport
	decode(t, r, &rep)
	var g gateRow
	for _, it := range rep.Items {
		if it.Name == "workload-identity" {
			g = it
		}
	}
	want := ns + "/trainer (eks-pod-identity " + role + "): injected env AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI; token volume audience pods.eks.amazonaws.com at /var/run/secrets/pods.eks.amazonaws.com/serviceaccount"
	// Another test's IRSA ServiceAccount in the shared cluster may leave
	// the gate WARN: only this namespace's binding is judged here.
	if (g.Status != "ok" && g.Status != "warn") || strings.Contains(g.Message, ns+"/") || !evidenceHas(g, want) || !strings.Contains(g.Command, "aws eks list-pod-identity-associations --region us-west-2 --cluster-name train-prod") {
		t.Fatalf("clean: want PASS with %q, got %s %q %q\n%s", want, g.Status, g.Message, g.Evidence, r)
	}
	calls := runbooke2e.Format(rec.Take())
	if !strings.Contains(calls, "eks ListPodIdentityAssociations GET /clusters/train-prod/pod-identity-associations -> 200") ||
		!strings.Contains(calls, "eks DescribePodIdentityAssociation GET /clusters/train-prod/pod-identity-associations/a-0123456789abcdef0 -> 200") {
		t.Fatalf("EKS calls:\n%s", calls)
	}
	if n := w.wet.Load(); n != 0 {
		t.Errorf("the webhook saw %d reviews that were not dry runs", n)
	}
	for _, it := range items(run("verify", "-o", "json", "--baseline", baseline)) {
		if it.Kind == "workload-identity" {
			t.Errorf("unchanged: unexpected item %+v", it)
		}
	}

	// The association is deleted in the EKS API.
	world.Lock()
	saved := world.PodIdentity
	world.PodIdentity = nil
	world.Unlock()
	waitInjected(t, cp, ns, "trainer", false)
	v := run("verify", "-o", "json", "--baseline", baseline)
	found := false
	for _, it := range items(v) {
		if it.Kind != "workload-identity" {
			continue
		}
		if it.Status == "fail" && it.Object == "serviceaccount/"+ns+"/trainer" && strings.Contains(it.Message, "its EKS Pod Identity association a-0123456789abcdef0 ("+role+") is gone from the EKS API") {
			found = true
		} else {
			t.Errorf("association gone: unexpected item %+v", it)
		}
	}
	if v.ExitCode != 1 || !found {
		t.Fatalf("association gone: want exit 1 and a FAIL naming %s/trainer\n%s", ns, v)
	}

	// The caller may no longer list: UNKNOWN naming the IAM action, and
	// the association is not reported gone.
	world.Lock()
	world.PodIdentity, world.Denied = saved, []string{"ListPodIdentityAssociations"}
	world.Unlock()
	v = run("verify", "-o", "json", "--baseline", baseline)
	found = false
	for _, it := range items(v) {
		if it.Kind != "workload-identity" {
			continue
		}
		if it.Status == "unknown" && it.Object == "eks-pod-identity/train-prod" && strings.Contains(it.Message, "AccessDeniedException: the caller needs eks:ListPodIdentityAssociations") {
			found = true
		} else {
			t.Errorf("denied: unexpected item %+v", it)
		}
	}
	if !found {
		t.Fatalf("denied: want an UNKNOWN naming eks:ListPodIdentityAssociations\n%s", v)
	}
}
