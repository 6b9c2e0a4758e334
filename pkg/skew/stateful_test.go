package skew

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"
)

func pdb(ns, name string, sel map[string]string, allowed int32) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
}

func ownedPod(ns, name, nodeName, kind, owner string, labels map[string]string) *corev1.Pod {
	yes := true
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner, Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: nodeName}}
}

// The inventory names, per pool, the nodes that host pods of a
// StatefulSet whose PodDisruptionBudget allows at most one disruption;
// not a Deployment's pods, not a budget that allows more, not a pod not
// yet on a node.
func TestCollectStatefulNodes(t *testing.T) {
	pl := "gpufleet.dev/pool"
	pg := map[string]string{"app": "pg"}
	objs := []runtime.Object{
		node("cpu-0", map[string]string{pl: "cpu"}, "v1.37.2"),
		node("cpu-1", map[string]string{pl: "cpu"}, "v1.37.2"),
		node("gpu-0", map[string]string{pl: "gpu"}, "v1.37.2"),
		pdb("db", "pg", pg, 1),
		ownedPod("db", "pg-0", "cpu-1", "StatefulSet", "pg", pg),
		ownedPod("db", "pg-1", "gpu-0", "StatefulSet", "pg", pg),
		ownedPod("db", "pg-2", "", "StatefulSet", "pg", pg),
		pdb("web", "web", map[string]string{"app": "web"}, 0),
		ownedPod("web", "web-x", "cpu-0", "ReplicaSet", "web-5d", map[string]string{"app": "web"}),
		pdb("cache", "cache", map[string]string{"app": "cache"}, 3),
		ownedPod("cache", "cache-0", "cpu-0", "StatefulSet", "cache", map[string]string{"app": "cache"}),
	}
	inv, err := (&Collector{Client: fakeClient("v1.37.2", objs...), PoolLabel: pl, Stateful: true, Now: func() time.Time { return t0 }}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]StatefulNode{}
	for _, p := range inv.Pools {
		if p.StatefulNodes != nil {
			got[p.Name] = p.StatefulNodes
		}
	}
	svc := []StatefulService{{Namespace: "db", StatefulSet: "pg", PDB: "pg"}}
	want := map[string][]StatefulNode{"cpu": {{Node: "cpu-1", Services: svc}}, "gpu": {{Node: "gpu-0", Services: svc}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("stateful nodes (-want +got):\n%s", d)
	}
}

// A forbidden PodDisruptionBudget list is a note that names the verb and
// resource; the inventory is read all the same.
func TestCollectStatefulForbidden(t *testing.T) {
	c := fakeClient("v1.37.2", node("cpu-0", map[string]string{"gpufleet.dev/pool": "cpu"}, "v1.37.2"))
	c.PrependReactor("list", "poddisruptionbudgets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}, "", nil)
	})
	inv, err := (&Collector{Client: c, Stateful: true, Now: func() time.Time { return t0 }}).Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(inv.Notes, "\n"), "listing poddisruptionbudgets (policy) in all namespaces is forbidden: nodes that host stateful services are not moved first") {
		t.Errorf("notes: %q", inv.Notes)
	}
}

// Per provider: where the runbook sets the order (kubeadm, k3s: nodes one
// at a time) the stateful nodes go first, in order, each followed by its
// services' checks before the next node; where the provider or a fabric
// unit sets it (EKS, GKE, AKS, Cluster API, an RKE2 GPU pool) the checks
// follow the rollout or each unit, before the pool's gates.
func TestRunbookStatefulNodesFirst(t *testing.T) {
	for _, tc := range []struct {
		variant, pool string
		first         []string // the nodes named first, in order; nil: checks after
		services      []string // namespace/pdb of each check, in order, after "@node" where the checks follow one node
	}{
		{variant: "kubeadm-apt", pool: "cpu", first: []string{"cpu-1", "cpu-2"}, services: []string{"@cpu-1", "db/postgres", "@cpu-2", "db/postgres", "coord/zk-quorum"}},
		{variant: "k3s-etcd", pool: "cpu", first: []string{"agent-2"}, services: []string{"@agent-2", "db/mariadb"}},
		{variant: "rke2", pool: "gpu-l40s", services: []string{"vector/qdrant"}},
		{variant: "gke", pool: "default-pool", services: []string{"db/postgres"}},
		{variant: "aks", pool: "system", services: []string{"db/postgres"}},
		{variant: "eks-managed", pool: "system", services: []string{"db/postgres"}},
		{variant: "capi", pool: "cpu", services: []string{"db/postgres"}},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			for _, s := range variantPlan(t, tc.variant).Steps {
				if s.Phase != PhaseNodePool || s.Pool != tc.pool {
					continue
				}
				text := strings.Join(FlattenBlocks(s.Blocks), "\n")
				var order []string
				if tc.first != nil {
					order = append(order, "first, in this order, the "+Nodes(len(tc.first))+" hosting stateful services", "("+strings.Join(tc.first, " ")+")",
						`kubectl drain "$NODE"`, `kubectl uncordon "$NODE"`)
				} else {
					order = append(order, "whole again; ")
				}
				for _, svc := range tc.services {
					if n, ok := strings.CutPrefix(svc, "@"); ok {
						order = append(order, "# here, after "+n+" and before the next node")
						continue
					}
					ns, name, _ := strings.Cut(svc, "/")
					order = append(order, "kubectl -n "+ns+" wait statefulset/", "kubectl -n "+ns+" get pdb "+name+" -o jsonpath='{.status.currentHealthy} {.status.desiredHealthy}'",
						`print "pdb `+svc+`: currentHealthy "`)
				}
				order = append(order, "kubectl skew verify")
				at := 0
				for _, w := range order {
					i := strings.Index(text[at:], w)
					if i < 0 {
						t.Fatalf("step %d lacks, or out of order, %q:\n%s", s.Number, w, text)
					}
					at += i + len(w)
				}
				// Each check is a block of its own, chained: a check that
				// fails stops what follows it.
				for _, b := range s.Blocks {
					joined := strings.Join(b.Commands, "\n")
					if strings.Contains(joined, "wait statefulset/") && strings.Contains(joined, "kubectl uncordon") {
						t.Errorf("a check shares the uncordon's block:\n%s", joined)
					}
				}
			}
		})
	}
}

// The PodDisruptionBudget check passes when currentHealthy reaches
// desiredHealthy, and fails below it or when kubectl printed nothing (no
// such budget); run by the real sh and awk over kubectl's output.
func TestServiceCheckShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	check := serviceCheck(StatefulService{Namespace: "db", StatefulSet: "pg", PDB: "pg"})
	last := check[len(check)-1]
	for _, tc := range []struct {
		out  string
		pass bool
	}{{"3 2", true}, {"2 2", true}, {"1 2", false}, {"", false}} {
		script := "kubectl() { printf '%s' \"$OUT\"; }\n" + last
		cmd := exec.Command(sh, "-c", script)
		cmd.Env = []string{"OUT=" + tc.out, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.pass {
			t.Errorf("currentHealthy desiredHealthy %q: err %v, want pass %v\n%s", tc.out, err, tc.pass, out)
		}
	}
}
