package preflight

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// fakeEKS answers the listing with the associations it holds, or err.
type fakeEKS struct {
	assoc map[string][2]string // id -> namespace, serviceaccount
	err   error
}

func (f *fakeEKS) ListPodIdentityAssociations(_ context.Context, in *eks.ListPodIdentityAssociationsInput, _ ...func(*eks.Options)) (*eks.ListPodIdentityAssociationsOutput, error) {
	if f.err != nil {
		return nil, &smithy.OperationError{ServiceID: "EKS", OperationName: "ListPodIdentityAssociations", Err: f.err}
	}
	out := &eks.ListPodIdentityAssociationsOutput{}
	for id, a := range f.assoc {
		out.Associations = append(out.Associations, ekstypes.PodIdentityAssociationSummary{AssociationId: aws.String(id), ClusterName: in.ClusterName,
			Namespace: aws.String(a[0]), ServiceAccount: aws.String(a[1])})
	}
	return out, nil
}

func (f *fakeEKS) DescribePodIdentityAssociation(_ context.Context, in *eks.DescribePodIdentityAssociationInput, _ ...func(*eks.Options)) (*eks.DescribePodIdentityAssociationOutput, error) {
	a := f.assoc[*in.AssociationId]
	return &eks.DescribePodIdentityAssociationOutput{Association: &ekstypes.PodIdentityAssociation{AssociationId: in.AssociationId,
		Namespace: aws.String(a[0]), ServiceAccount: aws.String(a[1]), RoleArn: aws.String("arn:aws:iam::111122223333:role/" + a[1])}}, nil
}

// podIdentityCluster: ServiceAccount ml/trainer with no annotation; pod
// creates get the Pod Identity webhook's environment and token volume for
// it while inject is set.
func podIdentityCluster(t *testing.T, inject *bool, c *fakeEKS) *Runner {
	t.Helper()
	kube := fake.NewSimpleClientset(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "trainer"}})
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ca := a.(k8stesting.CreateActionImpl)
		if len(ca.CreateOptions.DryRun) != 1 {
			t.Errorf("pod created without dryRun=All")
		}
		p := ca.Object.(*corev1.Pod).DeepCopy()
		if *inject && p.Spec.ServiceAccountName == "trainer" {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "eks-pod-identity-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "pods.eks.amazonaws.com", Path: "eks-pod-identity-token"}}}}}})
			c := &p.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: health.EnvContainerCredentialsFullURI, Value: "http://169.254.170.23/v1/credentials"},
				corev1.EnvVar{Name: health.EnvContainerAuthorizationTokenFile, Value: "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount/eks-pod-identity-token"})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "eks-pod-identity-token", MountPath: "/var/run/secrets/pods.eks.amazonaws.com/serviceaccount"})
		}
		return true, p, nil
	})
	r := &Runner{Kube: kube}
	r.Health.EKSPodIdentity = health.EKSPodIdentityAccess{Cluster: "train-prod", Region: "us-west-2"}
	r.Health.EKSClient = c
	return r
}

type apiErr struct{ code, msg string }

func (e apiErr) Error() string                 { return e.code + ": " + e.msg }
func (e apiErr) ErrorCode() string             { return e.code }
func (e apiErr) ErrorMessage() string          { return e.msg }
func (e apiErr) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

// The association listed and its webhook injecting is PASS; verify fails
// naming the ServiceAccount when the webhook stops injecting and when the
// association disappears; access denied now is one UNKNOWN naming the
// IAM action, and the associations are not reported gone.
func TestWorkloadIdentityPodIdentity(t *testing.T) {
	inject := true
	c := &fakeEKS{assoc: map[string][2]string{"a-1": {"ml", "trainer"}}}
	r := podIdentityCluster(t, &inject, c)
	g, base := r.workloadIdentityGate(context.Background())
	if g.Status != StatusPass || !strings.Contains(strings.Join(g.Evidence, "\n"),
		"ml/trainer (eks-pod-identity arn:aws:iam::111122223333:role/trainer): injected env AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI; token volume audience pods.eks.amazonaws.com") ||
		!strings.Contains(g.Command, "aws eks list-pod-identity-associations --region us-west-2 --cluster-name train-prod") {
		t.Fatalf("baseline: %s %s %q %s", g.Status, g.Message, g.Evidence, g.Command)
	}
	if regs := verifyWorkloadIdentity(base, base); len(regs) != 0 {
		t.Errorf("unchanged: %+v", regs)
	}

	inject = false
	_, now := r.workloadIdentityGate(context.Background())
	regs := verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != "serviceaccount/ml/trainer" || !strings.Contains(regs[0].Message, "no longer injects env AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_FULL_URI") {
		t.Errorf("webhook off: %+v", regs)
	}

	inject = true
	c.assoc = nil
	_, now = r.workloadIdentityGate(context.Background())
	regs = verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != "serviceaccount/ml/trainer" ||
		!strings.Contains(regs[0].Message, "its EKS Pod Identity association a-1 (arn:aws:iam::111122223333:role/trainer) is gone") {
		t.Errorf("association gone: %+v", regs)
	}

	c.assoc = map[string][2]string{"a-1": {"ml", "trainer"}}
	c.err = apiErr{"AccessDeniedException", "User: arn:aws:iam::111122223333:user/ci is not authorized to perform: eks:ListPodIdentityAssociations"}
	g, now = r.workloadIdentityGate(context.Background())
	if g.Status != StatusUnknown || !strings.Contains(g.Message, "AccessDeniedException: the caller needs eks:ListPodIdentityAssociations") {
		t.Errorf("denied: %s %s", g.Status, g.Message)
	}
	regs = verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusUnknown || regs[0].Object != "eks-pod-identity/train-prod" || !strings.Contains(regs[0].Message, "eks:ListPodIdentityAssociations") {
		t.Errorf("denied: %+v", regs)
	}
}

// The eks-pod-identity-agent DaemonSet, where an association is in use:
// its pod not ready on a Ready, schedulable node fails the gate naming the
// node, and verify too; one not ready on a cordoned or NotReady node is
// not counted (the CNI check's exemption); with no association in use it
// is not read.
func TestWorkloadIdentityPodIdentityAgent(t *testing.T) {
	ctx := context.Background()
	inject := true
	c := &fakeEKS{assoc: map[string][2]string{"a-1": {"ml", "trainer"}}}
	r := podIdentityCluster(t, &inject, c)
	tr := r.Kube.(*fake.Clientset).Tracker()
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n-ok"}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n-cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: ready}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n-down"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n-up"}, Status: corev1.NodeStatus{Conditions: ready}},
	} {
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	agentPod := func(node string, isReady bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "eks-pod-identity-agent-" + node,
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: health.EKSPodIdentityAgentDaemonSet}}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: health.EKSPodIdentityAgentDaemonSet},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 2}}
	for _, o := range []runtime.Object{ds, agentPod("n-ok", true), agentPod("n-cordoned", false), agentPod("n-down", false), agentPod("n-up", true)} {
		if err := tr.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	g, base := r.workloadIdentityGate(ctx)
	if g.Status != StatusPass || !strings.Contains(strings.Join(g.Evidence, "\n"),
		"EKS Pod Identity Agent: DaemonSet kube-system/eks-pod-identity-agent: 2 of 4 pods ready (2 not ready on nodes NotReady or cordoned, not counted)") {
		t.Fatalf("agent down only on a cordoned and a NotReady node: want PASS, got %s %q %q", g.Status, g.Message, g.Evidence)
	}

	if err := tr.Update(appsv1.SchemeGroupVersion.WithResource("daemonsets"), &appsv1.DaemonSet{ObjectMeta: ds.ObjectMeta,
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 1}}, "kube-system"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Update(corev1.SchemeGroupVersion.WithResource("pods"), agentPod("n-up", false), "kube-system"); err != nil {
		t.Fatal(err)
	}
	// A new run of the command: a Runner reads the DaemonSets once.
	r = &Runner{Kube: r.Kube, Health: r.Health}
	g, now := r.workloadIdentityGate(ctx)
	if g.Status != StatusFail || !strings.Contains(g.Message, "the EKS Pod Identity Agent that serves the credentials of 1 association is not ready") ||
		!strings.Contains(g.Message, "not ready on Ready, schedulable node n-up") || strings.Contains(g.Message, "n-cordoned") ||
		!strings.Contains(g.Command, "get daemonset eks-pod-identity-agent") {
		t.Errorf("agent not ready on Ready node n-up: want FAIL naming n-up, got %s %q %s", g.Status, g.Message, g.Command)
	}
	regs := verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != "eks-pod-identity-agent" || !strings.Contains(regs[0].Message, "not ready on Ready, schedulable node n-up") {
		t.Errorf("verify, agent not ready on n-up: %+v", regs)
	}

	// No association in use: the agent is not read.
	c.assoc = nil
	if g, ev := r.workloadIdentityGate(ctx); g.Status != StatusPass || ev.EKSPodIdentityAgent != nil {
		t.Errorf("no association: want PASS without reading the agent, got %s %q %+v", g.Status, g.Message, ev.EKSPodIdentityAgent)
	}
}

// The agent's DaemonSet for EKS Hybrid Nodes (eks-pod-identity-agent-hybrid,
// beside the cloud one) is read as well: ready at the baseline, its pod
// not ready on a Ready hybrid node fails the gate and verify naming the
// DaemonSet and the node; gone since the baseline fails verify; a cluster
// with no hybrid DaemonSet has no line of it.
func TestWorkloadIdentityPodIdentityHybridAgent(t *testing.T) {
	ctx := context.Background()
	inject := true
	r := podIdentityCluster(t, &inject, &fakeEKS{assoc: map[string][2]string{"a-1": {"ml", "trainer"}}})
	tr := r.Kube.(*fake.Clientset).Tracker()
	const hybrid = "eks-pod-identity-agent-hybrid"
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	agentPod := func(ds, node string, isReady bool) *corev1.Pod {
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ds + "-" + node,
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: ds}}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
	}
	cloud := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: health.EKSPodIdentityAgentDaemonSet},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: 1}}
	hds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: hybrid},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: 1}}
	for _, o := range []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ec2-0"}, Status: corev1.NodeStatus{Conditions: ready}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hybrid-0", Labels: map[string]string{"eks.amazonaws.com/compute-type": "hybrid"}}, Status: corev1.NodeStatus{Conditions: ready}},
		cloud, agentPod(cloud.Name, "ec2-0", true),
	} {
		if err := tr.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := r.workloadIdentityGate(ctx)
	if g.Status != StatusPass || strings.Contains(strings.Join(g.Evidence, "\n"), "hybrid") {
		t.Fatalf("no hybrid agent: want PASS and no line of it, got %s %q %q", g.Status, g.Message, g.Evidence)
	}

	for _, o := range []runtime.Object{hds, agentPod(hybrid, "hybrid-0", true)} {
		if err := tr.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	r = &Runner{Kube: r.Kube, Health: r.Health}
	g, base := r.workloadIdentityGate(ctx)
	if g.Status != StatusPass || !strings.Contains(strings.Join(g.Evidence, "\n"), "EKS Pod Identity Agent for hybrid nodes: DaemonSet kube-system/"+hybrid+": 1 of 1 pods ready") {
		t.Fatalf("hybrid agent ready: want PASS with its line, got %s %q %q", g.Status, g.Message, g.Evidence)
	}

	if err := tr.Update(appsv1.SchemeGroupVersion.WithResource("daemonsets"), &appsv1.DaemonSet{ObjectMeta: hds.ObjectMeta,
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: 0}}, "kube-system"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Update(corev1.SchemeGroupVersion.WithResource("pods"), agentPod(hybrid, "hybrid-0", false), "kube-system"); err != nil {
		t.Fatal(err)
	}
	r = &Runner{Kube: r.Kube, Health: r.Health}
	g, now := r.workloadIdentityGate(ctx)
	if g.Status != StatusFail || !strings.Contains(g.Message, "is not ready: DaemonSet kube-system/"+hybrid+": 0 of 1 pods ready; not ready on Ready, schedulable node hybrid-0") ||
		!strings.Contains(g.Command, "get daemonset "+hybrid) {
		t.Errorf("hybrid agent not ready on hybrid-0: want FAIL naming it, got %s %q %s", g.Status, g.Message, g.Command)
	}
	regs := verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != hybrid ||
		!strings.Contains(regs[0].Message, "the EKS Pod Identity Agent for hybrid nodes is not ready now") || !strings.Contains(regs[0].Message, "node hybrid-0") {
		t.Errorf("verify, hybrid agent not ready on hybrid-0: %+v", regs)
	}

	if err := tr.Delete(appsv1.SchemeGroupVersion.WithResource("daemonsets"), "kube-system", hybrid); err != nil {
		t.Fatal(err)
	}
	r = &Runner{Kube: r.Kube, Health: r.Health}
	_, now = r.workloadIdentityGate(ctx)
	regs = verifyWorkloadIdentity(base, now)
	if len(regs) != 1 || regs[0].Status != StatusFail || regs[0].Object != hybrid || !strings.Contains(regs[0].Message, "was ready at the baseline and is gone now") {
		t.Errorf("verify, hybrid agent gone: %+v", regs)
	}
}
