package gangdrain

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/cli/golden"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// servingCluster is a pool of two 8-GPU nodes (pool=serve) running two
// models, each with a PodDisruptionBudget, and spare GPUs of the same
// product outside the pool (spareGPUs on one node, none when 0).
func servingCluster(spareGPUs int64) *fake.Clientset {
	node := func(name, pool string, gpus int64) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	objs := []runtime.Object{node("serve-0", "serve", 8), node("serve-1", "serve", 8)}
	if spareGPUs > 0 {
		objs = append(objs, node("spare-0", "spare", spareGPUs))
	}
	spec := func(gpus int64) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}
	}
	for _, m := range []struct {
		name    string
		gpus    int64
		weights string
		pdb     policyv1.PodDisruptionBudgetSpec
	}{
		{"llama", 4, "8M", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))}},
		{"mistral", 2, "4M", policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))}},
	} {
		lbl := map[string]string{"app": m.name}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: m.name, UID: types.UID("d-" + m.name), Annotations: map[string]string{inference.AnnWeightsBytes: m.weights}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: lbl},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec(m.gpus)}}}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: m.name + "-7d9f", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: m.name, UID: d.UID, Controller: ptr.To(true)}}}}
		m.pdb.Selector = &metav1.LabelSelector{MatchLabels: lbl}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: m.name}, Spec: m.pdb}
		objs = append(objs, d, rs, pdb)
		for i := 0; i < 2; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: fmt.Sprintf("%s-7d9f-%d", m.name, i), Labels: lbl,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, Controller: ptr.To(true)}}},
				Spec:   spec(m.gpus),
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			p.Spec.NodeName = fmt.Sprintf("serve-%d", i)
			objs = append(objs, p)
		}
	}
	return fake.NewClientset(objs...)
}

func servingGetter(kube *fake.Clientset) *cli.TestClientGetter {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}: "PodList",
	})
	return cli.NewTestClientGetter().WithKube(kube).WithDynamic(dyn)
}

// runCLI runs the command tree as main does (cli.Run), so that stderr
// holds the error and hint lines.
func runCLI(t *testing.T, cg cli.ClientGetter, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	code := cli.Run(context.Background(), cmd, streams)
	return out.String(), errOut.String(), code
}

func TestInferenceUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "-l", "pool=serve", "--hydrate-bandwidth", "object-store=1M/s"}, "--hydrate-bandwidth needs --inference"},
		{[]string{"plan", "-l", "pool=serve", "--inference", "--min-serving", "1.5"}, "--min-serving 1.5"},
		{[]string{"plan", "-l", "pool=serve", "--inference", "--hydrate-bandwidth", "s3=1M/s"}, "unknown weight source"},
		{[]string{"plan", "-l", "pool=serve", "--inference", "--weights", "llama=1G"}, "NAMESPACE/DEPLOYMENT=SIZE"},
		{[]string{"run", "-l", "pool=serve", "--inference", "--disable-eviction"}, "--disable-eviction bypasses"},
	} {
		_, errOut, code := runCLI(t, servingGetter(servingCluster(16)), tc.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// The plan of a pool with room for the surge: one wave per node, every
// model at its replicas, the cold starts from bytes over bandwidth.
func TestInferencePlanTableAndJSON(t *testing.T) {
	args := []string{"plan", "-l", "pool=serve", "--inference", "--hydrate-bandwidth", "object-store=1M/s", "--min-serving", "0.5", "--nodes-per-wave", "1", "--color", "never"}
	out, errOut, code := run(t, servingGetter(servingCluster(16)), args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	golden.Check(t, "plan-inference.table.golden", out)
	golden.CheckWidth(t, out, 120)
	out, _, code = run(t, servingGetter(servingCluster(16)), append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	golden.Check(t, "plan-inference.json.golden", out)
	var rep InferencePlanReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "GangDrainInferencePlan" || rep.Summary.Waves != 2 || rep.Summary.ETASeconds != 32 || rep.Summary.Refused {
		t.Errorf("report: kind %s summary %+v", rep.Kind, rep.Summary)
	}
}

// Without headroom the plan is refused (exit 1), and run refuses it the
// same way, changing nothing.
func TestInferenceRefused(t *testing.T) {
	kube := servingCluster(0)
	args := []string{"-l", "pool=serve", "--inference", "--hydrate-bandwidth", "object-store=1M/s", "--min-serving", "0.5"}
	out, _, code := run(t, servingGetter(kube), append([]string{"plan", "--color", "never"}, args...)...)
	if code != cli.ExitFindings || !strings.Contains(out, "allows no disruption of model serving/llama (1 Ready, at least 1 kept)") {
		t.Errorf("plan: exit %d\n%s", code, out)
	}
	golden.Check(t, "plan-inference-refused.table.golden", out)
	out, errOut, code := runCLI(t, servingGetter(kube), append([]string{"run", "--color", "never"}, args...)...)
	if code != cli.ExitFindings || !strings.Contains(errOut, "hint: kubectl gang-drain plan --inference -l pool=serve") {
		t.Errorf("run: exit %d\n%s%s", code, out, errOut)
	}
	n, _ := kube.CoreV1().Nodes().Get(context.Background(), "serve-0", metav1.GetOptions{})
	if n.Spec.Unschedulable || len(n.Annotations) > 0 {
		t.Errorf("a refused run changed node serve-0: %+v", n)
	}
}

// A dry run prints the steps and changes nothing.
func TestInferenceRunDryRun(t *testing.T) {
	kube := servingCluster(16)
	out, errOut, code := run(t, servingGetter(kube), "run", "-l", "pool=serve", "--inference", "--hydrate-bandwidth", "object-store=1M/s", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"  ETA ", "surge: scale deployment serving/llama from 2 to 3 replicas (+1)", "wave 1: once every displaced replica is Ready elsewhere", "kubectl gang-drain restore gd-"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	js, errOut, code := run(t, servingGetter(kube), "run", "-l", "pool=serve", "--inference", "--hydrate-bandwidth", "object-store=1M/s", "--dry-run", "-o", "json")
	if code != 0 {
		t.Fatalf("-o json: exit %d\n%s%s", code, js, errOut)
	}
	golden.Check(t, "run-inference-dry-run.json.golden", golden.Steady(regexp.MustCompile(`gd-[0-9]+-[0-9]+-[0-9a-f]+`).ReplaceAllString(js, "gd-RUN"), "startedAt", "finishedAt"))
	d, _ := kube.AppsV1().Deployments("serving").Get(context.Background(), "llama", metav1.GetOptions{})
	n, _ := kube.CoreV1().Nodes().Get(context.Background(), "serve-0", metav1.GetOptions{})
	if *d.Spec.Replicas != 2 || n.Spec.Unschedulable {
		t.Errorf("the dry run changed the cluster: replicas %d, cordoned %v", *d.Spec.Replicas, n.Spec.Unschedulable)
	}
}

// A plain run on a pool where an --inference run is under way is refused
// (exit 2, nothing changed): it would drain the rest at once, unpaced.
// Once the run is restored, a plain run may drain the nodes again.
func TestPlainRunRefusesToResumeInferenceRun(t *testing.T) {
	kube := servingCluster(16)
	ctx := context.Background()
	mark := func(state string) {
		for _, name := range []string{"serve-0", "serve-1"} {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Annotations = map[string]string{gang.AnnRunID: "gd-inf", gang.AnnState: state, inference.AnnInferenceRun: "gd-inf"}
			n.Spec.Unschedulable = state != string(gang.NodeDone)
			if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark(string(gang.NodeDrained))
	out, errOut, code := runCLI(t, servingGetter(kube), "run", "-l", "pool=serve")
	if code != cli.ExitUsage || !strings.Contains(errOut, "run gd-inf on these nodes is an --inference run") || !strings.Contains(errOut, "kubectl gang-drain restore gd-inf") {
		t.Errorf("plain run on an inference run: exit %d\n%s%s", code, out, errOut)
	}
	pods, _ := kube.CoreV1().Pods("serving").List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 4 {
		t.Errorf("the refused run evicted pods: %d left", len(pods.Items))
	}
	mark(string(gang.NodeDone))
	if out, errOut, code := runCLI(t, servingGetter(kube), "run", "-l", "pool=serve", "--dry-run"); code != 0 {
		t.Errorf("plain dry run after restore: exit %d\n%s%s", code, out, errOut)
	}
}

// Long model names are printed whole, in the model table and as the step
// table's column heads; two models of one name are told apart by their
// namespace.
func TestInferencePlanLongModelNames(t *testing.T) {
	long := "llama-3-1-405b-instruct-fp8-with-a-long-suffix"
	var models []inference.ModelPlan
	start := map[string]int32{}
	for _, ns := range []string{"inference-prod-eu-west-1", "inference-prod-us-east-1"} {
		m := &inference.Model{Key: ns + "/" + long, Namespace: ns, Name: long, Replicas: 4, Ready: 4}
		models = append(models, inference.ModelPlan{Model: m})
		start[m.Key] = 4
	}
	short := &inference.Model{Key: "serving/mistral", Namespace: "serving", Name: "mistral", Replicas: 2, Ready: 2}
	models = append(models, inference.ModelPlan{Model: short})
	start[short.Key] = 2
	rep := InferencePlanReport{Plan: &inference.Plan{Models: models, Start: start}}
	var out strings.Builder
	if err := printInferencePlan(&out, rep, cli.NewPrintFlags(), cli.Colorizer{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	for _, want := range []string{"inference-prod-eu-west-1/" + long, "inference-prod-us-east-1/" + long} {
		if !strings.Contains(out.String(), strings.ToUpper(want)) {
			t.Errorf("step table lacks the head %q:\n%s", strings.ToUpper(want), out.String())
		}
	}
	if !strings.Contains(out.String(), " MISTRAL") {
		t.Errorf("step table lacks the head MISTRAL:\n%s", out.String())
	}
	for _, l := range lines[1:3] {
		if !strings.Contains(l, " "+long+" ") {
			t.Errorf("model table row cuts the name %q: %q", long, l)
		}
	}
}

// A resumed run whose plan is refused leaves its run as it is and says
// how to undo it.
func TestInferenceRefusedResumeNamesRestore(t *testing.T) {
	kube := servingCluster(0)
	ctx := context.Background()
	for _, name := range []string{"serve-0", "serve-1"} {
		n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{gang.AnnRunID: "gd-inf", gang.AnnState: string(gang.NodeCordoned), inference.AnnInferenceRun: "gd-inf"}
		n.Spec.Unschedulable = true
		if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runCLI(t, servingGetter(kube), "run", "-l", "pool=serve", "--inference", "--hydrate-bandwidth", "object-store=1M/s", "--min-serving", "0.5")
	if code != cli.ExitFindings || !strings.Contains(errOut, "run gd-inf stays as it is (nodes cordoned, surge in place)") || !strings.Contains(errOut, "kubectl gang-drain restore gd-inf") {
		t.Errorf("refused resume: exit %d\n%s%s", code, out, errOut)
	}
}

// TestRestoreInferenceNodesReplaced: when a provider replaced every node
// of an --inference run that stopped no gang, restore RUN --inference
// still finds the surge by its label and scales it back; without a surge
// either, the run is unknown (exit 2).
func TestRestoreInferenceNodesReplaced(t *testing.T) {
	kube := servingCluster(16)
	ctx := context.Background()
	d, err := kube.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := *d.Spec.Replicas
	if _, err := inference.ApplySurge(ctx, kube, d, "gd-gone", 2, time.Now()); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, servingGetter(kube), "restore", "gd-gone", "--inference")
	if code != 0 || !strings.Contains(errOut, "model serving/llama: surge of run gd-gone") {
		t.Errorf("restore of a run whose nodes are gone: exit %d\n%s%s", code, out, errOut)
	}
	if d, _ = kube.AppsV1().Deployments("serving").Get(ctx, "llama", metav1.GetOptions{}); *d.Spec.Replicas != before {
		t.Errorf("replicas %d after restore, want %d", *d.Spec.Replicas, before)
	}
	if _, errOut, code := runCLI(t, servingGetter(kube), "restore", "gd-gone", "--inference"); code != cli.ExitUsage || !strings.Contains(errOut, "neither a run id nor a node") {
		t.Errorf("second restore: exit %d %s", code, errOut)
	}
}
