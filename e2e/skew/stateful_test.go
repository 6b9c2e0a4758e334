//go:build e2e

package skewe2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestSkewStatefulNodesFirst runs a StatefulSet of two pods on pool
// skew-134's KWOK nodes behind a PodDisruptionBudget that allows one
// disruption, as the real StatefulSet and disruption controllers keep
// them. The inventory names the nodes that host its pods; the plan moves
// them first in the pool; the step's service check, run by sh with the
// real kubectl, passes while the service is whole and fails once its
// budget wants more healthy pods than there are.
func TestSkewStatefulNodesFirst(t *testing.T) {
	cp := scenario(t)
	ctx := context.Background()
	const ns, pool = "skew-stateful", "skew-134"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The budget first, so that no later inventory sees it while the
		// namespace goes.
		_ = cp.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(context.Background(), "db-quorum", metav1.DeleteOptions{})
		_ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	labels := map[string]string{"app": "db"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), ServiceName: "db", Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: podSpec(pool)}}}
	if _, err := cp.Client.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db-quorum"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var hosts []string
	if err := harness.Eventually(ctx, "db's pods Running and its budget computed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		b, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db-quorum", metav1.GetOptions{})
		if err != nil || b.Status.CurrentHealthy != 2 || b.Status.DisruptionsAllowed != 1 {
			return false, nil
		}
		pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=db"})
		if err != nil {
			return false, err
		}
		hosts = nil
		for _, p := range pods.Items {
			if !slices.Contains(hosts, p.Spec.NodeName) {
				hosts = append(hosts, p.Spec.NodeName)
			}
		}
		slices.Sort(hosts)
		return len(pods.Items) == 2, nil
	}); err != nil {
		t.Fatal(err)
	}

	var rep struct {
		Inventory struct {
			Pools []struct {
				Name          string `json:"name"`
				StatefulNodes []struct {
					Node     string `json:"node"`
					Services []struct {
						Namespace, StatefulSet, PDB string
					} `json:"services"`
				} `json:"statefulNodes"`
			} `json:"pools"`
		} `json:"inventory"`
	}
	decode(t, skew(t, cp, "-o", "json"), &rep)
	var got []string
	for _, p := range rep.Inventory.Pools {
		for _, n := range p.StatefulNodes {
			for _, s := range n.Services {
				got = append(got, p.Name+" "+n.Node+" "+s.Namespace+"/"+s.StatefulSet+"/"+s.PDB)
			}
		}
	}
	var want []string
	for _, h := range hosts {
		want = append(want, pool+" "+h+" "+ns+"/db/db-quorum")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stateful nodes %q, want %q", got, want)
	}

	var p planSteps
	decode(t, skew(t, cp, "plan", "--target", "v1.38", "--calendar", calendarFile(t), "-o", "json"), &p)
	var step []string
	for _, s := range p.Steps {
		if s.Phase == "node-pool" && s.Pool == pool {
			step = s.Commands
			break
		}
	}
	text := strings.Join(step, "\n")
	// The scenario's pools are GPU pools, moved a fabric unit at a time:
	// the service is checked after each unit.
	if !strings.Contains(text, "# here, after each unit, before the next: the stateful services behind PodDisruptionBudgets that allow at most one disruption, on "+nodeCount(len(hosts))+" ("+strings.Join(hosts, " ")+")") {
		t.Fatalf("the step does not check the service on %v:\n%s", hosts, text)
	}
	// The check: three lines from kubectl wait, continuations undone.
	var check []string
	for i, l := range step {
		if strings.Contains(l, "wait statefulset/") && i+3 <= len(step) {
			for _, c := range step[i : i+3] {
				check = append(check, strings.TrimSuffix(c, " && \\"))
			}
			break
		}
	}
	if len(check) != 3 || !strings.Contains(check[2], "get pdb") {
		t.Fatalf("no check lines:\n%s", text)
	}
	run := func(lines ...string) ([]byte, error) {
		cmd := exec.Command("sh", "-c", strings.Join(lines, " && "))
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig, "PATH="+filepath.Dir(cp.Binaries.Kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
		return cmd.CombinedOutput()
	}
	if out, err := run(check...); err != nil || !strings.Contains(string(out), "pdb "+ns+"/db-quorum: currentHealthy 2, desiredHealthy 1") {
		t.Fatalf("the check of a whole service: %v\n%s", err, out)
	}
	// A budget that wants three healthy pods of two: the final check fails
	// (the poll before it would only wait its five minutes out).
	if _, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Patch(ctx, "db-quorum", types.MergePatchType,
		[]byte(`{"spec":{"maxUnavailable":null,"minAvailable":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "db-quorum wants 3", time.Minute, func(ctx context.Context) (bool, error) {
		b, err := cp.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db-quorum", metav1.GetOptions{})
		return err == nil && b.Status.DesiredHealthy == 3, nil
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := run(check[0], check[2]); err == nil || !strings.Contains(string(out), "currentHealthy 2, desiredHealthy 3") {
		t.Errorf("the check of a budget not met passed: %v\n%s", err, out)
	}
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return strconv.Itoa(n) + " nodes"
}

// podSpec is a pause pod on pool's KWOK nodes, gone at once when deleted.
func podSpec(pool string) corev1.PodSpec {
	s := harness.PodSpec(0)
	s.NodeSelector = map[string]string{harness.PoolLabel: pool}
	s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	return s
}
