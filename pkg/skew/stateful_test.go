package skew

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
		// rolled: the provider replaces the pool in batches, so the
		// check runs after each batch and the step says what the order
		// costs; marked: the nodes whose Machines get delete-machine
		// before the topologies are released (Cluster API).
		rolled bool
		marked []string
	}{
		{variant: "kubeadm-apt", pool: "cpu", first: []string{"cpu-1", "cpu-2"}, services: []string{"@cpu-1", "db/postgres", "@cpu-2", "db/postgres", "coord/zk-quorum"}},
		{variant: "k3s-etcd", pool: "cpu", first: []string{"agent-2"}, services: []string{"@agent-2", "db/mariadb"}},
		{variant: "rke2", pool: "gpu-l40s", services: []string{"vector/qdrant"}},
		{variant: "gke", pool: "default-pool", services: []string{"db/postgres"}, rolled: true},
		{variant: "aks", pool: "system", services: []string{"db/postgres"}, rolled: true},
		{variant: "eks-managed", pool: "system", services: []string{"db/postgres"}, rolled: true},
		{variant: "capi", pool: "cpu", services: []string{"db/postgres"}, rolled: true, marked: []string{"gpu-cell-07-cpu-0"}},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			for _, s := range variantPlan(t, tc.variant).Steps {
				if s.Phase != PhaseNodePool || s.Pool != tc.pool {
					continue
				}
				text := strings.Join(FlattenBlocks(s.Blocks), "\n")
				var order []string
				if tc.marked != nil {
					order = append(order, "printf '%s\\n' "+strings.Join(tc.marked, " ")+" > pool-"+tc.pool+"-stateful-nodes.txt",
						"annotate machines.cluster.x-k8s.io $STATEFUL_MACHINES cluster.x-k8s.io/delete-machine=gpufleet --overwrite; } && \\\n",
						"for MD in $TOPOLOGIES; do", "so they go first")
				}
				if tc.rolled {
					if tc.marked == nil {
						order = append(order, "picks the order and the batch")
					}
					order = append(order, "a service can lose a member once for each old node it lands on",
						"checks each time another node of the pool reports v", "while :; do", `if [ "$NEW" -gt "$SEEN" ]`)
				} else if tc.first != nil {
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
				if tc.rolled {
					order = append(order, "|| { WHOLE=0; break; }; fi", "done", `[ "$WHOLE" = 1 ] ||`)
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

// The after-each-batch loop of a provider-rolled pool, run by the real
// bash against a stand-in kubectl whose pool gains one node at the
// target each time it is read: it checks the services once per batch,
// ends when every node is at the target, and fails at the first service
// not whole again without waiting for the rest of the rollout.
func TestStatefulEachBatchShell(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	p := variantPlan(t, "aks")
	var loop string
	for _, s := range p.Steps {
		if s.Phase != PhaseNodePool || s.Pool != "system" {
			continue
		}
		for _, b := range s.Blocks {
			if j := strings.Join(b.Commands, "\n"); strings.Contains(j, "while :; do") {
				loop = j
			}
		}
	}
	if loop == "" {
		t.Fatal("the system pool's step has no after-each-batch loop")
	}
	// kubectl: the node versions (one more node at v1.38 each read, of
	// 3), the node names, the StatefulSet's replicas, its wait, the PDB.
	stub := `kubectl() {
  case "$*" in
  *kubeletVersion*) n=$(cat "$D/n"); echo $((n + 1)) > "$D/n"; i=0; while [ $i -lt 3 ]; do if [ $i -le $n ]; then echo v1.38.2; else echo v1.37.4; fi; i=$((i + 1)); done ;;
  *"-o name"*) printf 'node/a\nnode/b\nnode/c\n' ;;
  *"get statefulset"*) echo 3 ;;
  *"wait statefulset"*) echo wait >> "$D/checks" ;;
  *"get pdb"*) printf '%s' "$PDB" ;;
  esac
}
sleep() { :; }
`
	for _, tc := range []struct {
		pdb    string
		pass   bool
		checks int
	}{{"3 2", true, 3}, {"1 2", false, 1}} {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "n"), []byte("0\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bash, "-c", stub+loop)
		cmd.Env = []string{"D=" + d, "PDB=" + tc.pdb, "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if (err == nil) != tc.pass {
			t.Errorf("pdb %q: err %v, want pass %v\n%s", tc.pdb, err, tc.pass, out)
		}
		b, _ := os.ReadFile(filepath.Join(d, "checks"))
		if got := strings.Count(string(b), "wait"); got != tc.checks {
			t.Errorf("pdb %q: %d checks, want %d (one per batch)\n%s", tc.pdb, got, tc.checks, out)
		}
		if !tc.pass && !strings.Contains(string(out), "stop the rollout here") {
			t.Errorf("pdb %q: no word to stop the rollout:\n%s", tc.pdb, out)
		}
	}
}
