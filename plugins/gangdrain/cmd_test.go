package gangdrain

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
)

func testGetter() *cli.TestClientGetter {
	q := *resource.NewQuantity(8, resource.DecimalSI)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"rack": "a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": q}}}
	pg := func(name string, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("u-" + name),
			Labels: map[string]string{gang.LabelKueuePodGroup: "pg"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(4, resource.DecimalSI)}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	kube := fake.NewClientset(n, pg("pg-0", "gpu-1"), pg("pg-1", "gpu-2"))
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "pods"}: "PodList",
	})
	return cli.NewTestClientGetter().WithKube(kube).WithDynamic(dyn)
}

func run(t *testing.T, cg cli.ClientGetter, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plan"}, "no nodes given: name them (NODE...) or select them with -l SELECTOR"},
		{[]string{"run", "gpu-1", "--on-timeout=maybe"}, "unknown --on-timeout"},
		{[]string{"run", "gpu-1", "--max-unavailable-gpus=lots"}, "--max-unavailable-gpus"},
		{[]string{"run", "gpu-1", "--annotation=bad"}, "--annotation"},
		{[]string{"plan", "nope"}, `node "nope" not found`},
		{[]string{"restore"}, "requires at least 1 arg"},
	} {
		_, _, code := run(t, testGetter(), tc.args...)
		if code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
	}
}

func TestPlanJSONAndTable(t *testing.T) {
	out, _, code := run(t, testGetter(), "plan", "-l", "rack=a", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var rep PlanReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "GangDrainPlan" || rep.APIVersion != cli.ReportAPIVersion("GangDrainPlan") || len(rep.Items) != 1 || rep.Items[0].Ranks != 2 || rep.Items[0].RanksOnNodes != 1 ||
		rep.Items[0].Method != gang.StopDeletePods || rep.Summary.GPUs != 8 || rep.Summary.GPUsOnNodes != 4 {
		t.Errorf("report %+v", rep)
	}
	out, _, code = run(t, testGetter(), "plan", "gpu-1", "--color=never")
	if code != 0 || !strings.Contains(out, "ml/PodGroup/pg") || !strings.Contains(out, "1/2") || !strings.Contains(out, "Steps of `run`") {
		t.Errorf("table exit %d:\n%s", code, out)
	}
}

func TestRunDryRunAndStatus(t *testing.T) {
	cg := testGetter()
	out, errOut, code := run(t, cg, "run", "gpu-1", "--dry-run")
	if code != 0 || !strings.Contains(out, "Dry run") || !strings.Contains(out, "delete its 2 pods together") {
		t.Fatalf("dry run exit %d:\n%s\n%s", code, out, errOut)
	}
	n, _ := cg.KubeClient.CoreV1().Nodes().Get(context.Background(), "gpu-1", metav1.GetOptions{})
	if n.Spec.Unschedulable || n.Annotations[gang.AnnRunID] != "" {
		t.Error("dry run changed the node")
	}
	out, errOut, code = run(t, cg, "status")
	if code != 0 || errOut != "" || out != "No gang-drain runs found.\n" {
		t.Errorf("status exit %d: %q %q", code, out, errOut)
	}
	_, _, code = run(t, cg, "status", "gd-missing")
	if code != cli.ExitUsage {
		t.Errorf("status of an unknown run: exit %d", code)
	}
}

// TestKueueDiscoveryFailureStops: a failing discovery call must not make
// gang-drain plan as if Kueue were absent; only a group the server does
// not serve means no Kueue.
func TestKueueDiscoveryFailureStops(t *testing.T) {
	cg := testGetter()
	cg.KubeClient.(*fake.Clientset).PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cg, streams)
	cmd.SetArgs([]string{"plan", "gpu-1"})
	err := cmd.ExecuteContext(context.Background())
	if code := cli.ExitCode(err); code != cli.ExitUnavailable || !strings.Contains(fmt.Sprint(err), "whether Kueue is installed") {
		t.Errorf("exit %d (%v), want 3 naming the Kueue check", code, err)
	}
	if _, _, code := run(t, testGetter(), "plan", "gpu-1"); code != 0 {
		t.Errorf("without Kueue: exit %d, want 0", code)
	}
}
