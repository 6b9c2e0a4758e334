package preflight

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// identityCluster is a fake cluster with an IRSA, an Azure and a GKE
// binding; its pod creates stand in for the admission chain: the EKS
// webhook's shape for the IRSA ServiceAccount while inject is set, the
// Azure one never (no webhook installed), a refusal while forbid is set.
func identityCluster(t *testing.T, inject, forbid *bool, gkeReady int32) *Runner {
	t.Helper()
	sa := func(name string, ann map[string]string) *corev1.ServiceAccount {
		return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, Annotations: ann}}
	}
	kube := fake.NewSimpleClientset(
		sa("s3", map[string]string{health.AnnotationEKSRoleARN: "arn:aws:iam::111122223333:role/s3-reader"}),
		sa("gcs", map[string]string{health.AnnotationGKEServiceAccount: "reader@p.iam.gserviceaccount.com"}),
		sa("default", nil),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: health.GKEMetadataServerDaemonSet}, Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, NumberReady: gkeReady}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{health.LabelGKEMetadataServer: "true"}}},
	)
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) != 1 || ca.CreateOptions.DryRun[0] != metav1.DryRunAll {
			t.Errorf("pod created without dryRun=All: %+v", ca.CreateOptions)
		}
		if *forbid {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errString(`User "ci" cannot create resource "pods" in API group "" in the namespace "ml"`))
		}
		p := ca.Object.(*corev1.Pod).DeepCopy()
		if *inject && p.Spec.ServiceAccountName == "s3" {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "aws-iam-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "sts.amazonaws.com", Path: "token"}}}}}})
			c := &p.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "AWS_ROLE_ARN", Value: "arn"}, corev1.EnvVar{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: "/var/run/secrets/eks.amazonaws.com/serviceaccount/token"})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "aws-iam-token", MountPath: "/var/run/secrets/eks.amazonaws.com/serviceaccount"})
		}
		return true, p, nil
	})
	return &Runner{Kube: kube}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestWorkloadIdentityGate(t *testing.T) {
	ctx := context.Background()
	inject, forbid := true, false
	g, base := identityCluster(t, &inject, &forbid, 2).workloadIdentityGate(ctx)
	if g.Status != StatusPass || !strings.Contains(g.Message, "2 identity bindings") || !strings.Contains(g.Message, "1 GKE binding served by a ready GKE metadata server") {
		t.Fatalf("clean: %s %q %q", g.Status, g.Message, g.Evidence)
	}
	if !strings.Contains(strings.Join(g.Evidence, "\n"), "ml/s3 (eks-irsa arn:aws:iam::111122223333:role/s3-reader): injected env AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount") {
		t.Errorf("evidence %q", g.Evidence)
	}
	verify := func(n *WorkloadIdentityEvidence) []string {
		var out []string
		for _, r := range verifyHealth(Evidence{Health: &HealthEvidence{WorkloadIdentity: base}}, Evidence{Health: &HealthEvidence{WorkloadIdentity: n}}) {
			out = append(out, string(r.Status)+" "+r.Object+": "+r.Message)
		}
		return out
	}
	if regs := verify(base); len(regs) != 0 {
		t.Errorf("unchanged: %q", regs)
	}

	// The webhook stopped mutating and the metadata server lost a pod.
	inject = false
	g, now := identityCluster(t, &inject, &forbid, 1).workloadIdentityGate(ctx)
	if g.Status != StatusFail || !strings.Contains(g.Message, "GKE metadata server") {
		t.Errorf("metadata server not ready: %s %q", g.Status, g.Message)
	}
	want := []string{
		"FAIL serviceaccount/ml/s3: ServiceAccount ml/s3 (eks-irsa arn:aws:iam::111122223333:role/s3-reader): the mutating webhook no longer injects env AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE; token volume audience sts.amazonaws.com at /var/run/secrets/eks.amazonaws.com/serviceaccount, which it injected at the baseline; its pods get no eks-irsa credentials",
		"FAIL gke-metadata-server: the GKE metadata server was ready at the baseline and now: DaemonSet kube-system/gke-metadata-server: 1 of 2 pods ready; 1 nodes labelled iam.gke.io/gke-metadata-server-enabled=true; pods of ml/gcs get no Workload Identity Federation credentials",
	}
	if got := verify(now); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// RBAC refuses the dry run: UNKNOWN naming the verb and resource.
	forbid = true
	g, now = identityCluster(t, &inject, &forbid, 2).workloadIdentityGate(ctx)
	if g.Status != StatusUnknown || !strings.Contains(g.Message, "forbidden: cannot create pods (dry run) in namespace ml") {
		t.Errorf("forbidden: %s %q", g.Status, g.Message)
	}
	if got := verify(now); len(got) != 1 || !strings.HasPrefix(got[0], "UNKNOWN serviceaccount/ml/s3: ServiceAccount ml/s3: the dry-run pod could not be made now: forbidden: cannot create pods") {
		t.Errorf("forbidden verify: %q", got)
	}
}

func TestWorkloadIdentityGateNoBinding(t *testing.T) {
	r := &Runner{Kube: fake.NewSimpleClientset(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "default"}})}
	g, ev := r.workloadIdentityGate(context.Background())
	if g.Status != StatusPass || !strings.HasPrefix(g.Message, "no ServiceAccount carries an identity binding") || len(ev.Bindings) != 0 {
		t.Errorf("%s %q %+v", g.Status, g.Message, ev)
	}
	kube := fake.NewSimpleClientset()
	kube.PrependReactor("list", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "", errString("no"))
	})
	g, _ = (&Runner{Kube: kube}).workloadIdentityGate(context.Background())
	if g.Status != StatusUnknown || !strings.Contains(g.Message, "cannot list serviceaccounts") {
		t.Errorf("forbidden list: %s %q", g.Status, g.Message)
	}
}

// TestDaemonSetPodOnDownNodeIsNotCounted: a GKE metadata server pod not
// ready on a node an upgrade has cordoned (or that is NotReady) does not
// fail the gate; one not ready on a Ready, schedulable node does.
func TestDaemonSetPodOnDownNodeIsNotCounted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		node     corev1.Node
		wantFail bool
	}{
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}, false},
		{"NotReady", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}, false},
		{"Ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}, true},
	} {
		inject, forbid := true, false
		r := identityCluster(t, &inject, &forbid, 1)
		node := tc.node
		node.Name = "n2"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "gke-metadata-server-x", OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: health.GKEMetadataServerDaemonSet}}},
			Spec:       corev1.PodSpec{NodeName: "n2"},
			Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
		}
		tr := r.Kube.(*fake.Clientset).Tracker()
		if err := tr.Add(&node); err != nil {
			t.Fatal(err)
		}
		if err := tr.Add(pod); err != nil {
			t.Fatal(err)
		}
		g, _ := r.workloadIdentityGate(ctx)
		if failed := g.Status == StatusFail; failed != tc.wantFail {
			t.Errorf("%s node: %s %q, want FAIL %v", tc.name, g.Status, g.Message, tc.wantFail)
		}
	}
}
