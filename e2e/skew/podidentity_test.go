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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
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
// With the association listed again, the eks-pod-identity-agent pod on a
// Ready, schedulable node not ready fails both naming the node; on a
// cordoned node it is left out.
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

	agent := startPodIdentityAgent(t, cp)

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
	if !evidenceHas(g, "EKS Pod Identity Agent: DaemonSet kube-system/eks-pod-identity-agent: 2 of 2 pods ready") || strings.Contains(g.Message, "Agent") {
		t.Fatalf("clean: want the agent ready 2 of 2 and not in the message, got %s %q %q\n%s", g.Status, g.Message, g.Evidence, r)
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

	// Listed again, with the agent's pod on a Ready, schedulable node
	// not ready: preflight and verify fail naming that node.
	world.Lock()
	world.Denied = nil
	world.Unlock()
	agent.setReady(t, cp, agent.nodes[0], false)
	gate := func() gateRow {
		r := run("preflight", "-o", "json", "--target", "v1.37", "--eks-cluster", "train-prod", "--eks-region", "us-west-2")
		var rep preflightReport
		decode(t, r, &rep)
		for _, it := range rep.Items {
			if it.Name == "workload-identity" {
				return it
			}
		}
		t.Fatalf("no workload-identity gate\n%s", r)
		return gateRow{}
	}
	notReady := "DaemonSet kube-system/eks-pod-identity-agent: 1 of 2 pods ready; not ready on Ready, schedulable node " + agent.nodes[0]
	if g := gate(); g.Status != "fail" || !strings.Contains(g.Message, "the EKS Pod Identity Agent that serves the credentials of 1 association is not ready: "+notReady) ||
		!strings.Contains(g.Command, "kubectl -n kube-system get daemonset eks-pod-identity-agent -o wide") {
		t.Fatalf("agent not ready: want FAIL naming %s, got %s %q %q", agent.nodes[0], g.Status, g.Message, g.Command)
	}
	v = run("verify", "-o", "json", "--baseline", baseline)
	found = false
	for _, it := range items(v) {
		if it.Kind != "workload-identity" {
			continue
		}
		if it.Status == "fail" && it.Object == "eks-pod-identity-agent" && strings.Contains(it.Message, "the EKS Pod Identity Agent is not ready now: "+notReady) {
			found = true
		} else {
			t.Errorf("agent not ready: unexpected item %+v", it)
		}
	}
	if v.ExitCode != 1 || !found {
		t.Fatalf("agent not ready: want exit 1 and a FAIL naming node %s\n%s", agent.nodes[0], v)
	}

	// The same node cordoned, as an upgrade does before draining it: its
	// agent is left out, and neither command fails on it.
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, agent.nodes[0], types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	excused := "EKS Pod Identity Agent: DaemonSet kube-system/eks-pod-identity-agent: 1 of 2 pods ready (1 not ready on nodes NotReady or cordoned, not counted)"
	if g := gate(); g.Status == "fail" || strings.Contains(g.Message, "Agent") || !evidenceHas(g, excused) {
		t.Fatalf("agent not ready on a cordoned node: want no FAIL and %q, got %s %q %q", excused, g.Status, g.Message, g.Evidence)
	}
	v = run("verify", "-o", "json", "--baseline", baseline)
	for _, it := range items(v) {
		if it.Kind == "workload-identity" {
			t.Errorf("agent not ready on a cordoned node: unexpected item %+v", it)
		}
	}
}

// podIdentityAgent is an eks-pod-identity-agent DaemonSet in kube-system
// on two KWOK nodes of its own.
type podIdentityAgent struct {
	nodes []string
}

// startPodIdentityAgent creates two nodes and the agent's DaemonSet (the
// EKS add-on's name) on them alone, and waits for both pods to be ready;
// all is deleted when the test ends.
func startPodIdentityAgent(t *testing.T, cp *harness.ControlPlane) *podIdentityAgent {
	t.Helper()
	ctx := ctxT(t)
	const pool = "pod-identity-agent"
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: pool, Nodes: 2})
	a := &podIdentityAgent{}
	for _, n := range nodes {
		a.nodes = append(a.nodes, n.Name)
	}
	t.Cleanup(func() {
		for _, n := range a.nodes {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	lbl := map[string]string{"app.kubernetes.io/name": "eks-pod-identity-agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "eks-pod-identity-agent", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{harness.PoolLabel: pool}, Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "eks-pod-identity-agent", Image: harness.PauseImage}}}}}}
	if _, err := cp.Client.AppsV1().DaemonSets("kube-system").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.AppsV1().DaemonSets("kube-system").Delete(context.Background(), ds.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	})
	if err := harness.Eventually(ctx, "eks-pod-identity-agent ready", time.Minute, func(ctx context.Context) (bool, error) {
		d, err := cp.Client.AppsV1().DaemonSets("kube-system").Get(ctx, ds.Name, metav1.GetOptions{})
		return err == nil && d.Status.DesiredNumberScheduled == 2 && d.Status.NumberReady == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	return a
}

// setReady sets the Ready condition of the agent's pod on node, as the
// kubelet does when its readiness probe (/readyz) fails or passes (KWOK
// leaves a running pod's status alone), and waits for the DaemonSet to
// count it.
func (a *podIdentityAgent) setReady(t *testing.T, cp *harness.ControlPlane, node string, ready bool) {
	t.Helper()
	ctx := ctxT(t)
	pods, err := cp.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=eks-pod-identity-agent", FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the agent's pod on %s: %v (%d pods)", node, err, len(pods.Items))
	}
	p := &pods.Items[0]
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status, p.Status.Conditions[i].LastTransitionTime = st, metav1.Now()
		}
	}
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = ready
	}
	if _, err := cp.Client.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := int32(1)
	if ready {
		want = 2
	}
	if err := harness.Eventually(ctx, "eks-pod-identity-agent counted", time.Minute, func(ctx context.Context) (bool, error) {
		d, err := cp.Client.AppsV1().DaemonSets("kube-system").Get(ctx, "eks-pod-identity-agent", metav1.GetOptions{})
		return err == nil && d.Status.NumberReady == want, nil
	}); err != nil {
		t.Fatal(err)
	}
}
