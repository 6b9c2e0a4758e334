package skew

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

const infPool = "gpufleet.dev/pool"

func infNode(name, pool string) *corev1.Node {
	n := node(name, map[string]string{infPool: pool, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "v1.37.2")
	n.Status.Allocatable = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func infSpec() corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(8000)}}}}}}
}

// infModel is a model Deployment with its ReplicaSet, one Ready replica
// on each node, and a PodDisruptionBudget that lets one go.
func infModel(name, weights string, nodes ...string) []runtime.Object {
	lbl := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name, UID: types.UID("uid-" + name),
		Annotations: map[string]string{inference.AnnWeightsBytes: weights}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(len(nodes))), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: infSpec()}}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name + "-abc", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}}}
	one := intstr.FromInt32(1)
	objs := []runtime.Object{d, rs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: lbl}}}}
	for i, n := range nodes {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: name + "-" + string(rune('a'+i)), Labels: lbl,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, Controller: ptr.To(true)}}},
			Spec:   infSpec(),
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		p.Spec.NodeName = n
		objs = append(objs, p)
	}
	return objs
}

// rank is a training rank of a scheduler-plugins pod group on a node.
func rank(name, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "train", Name: name, Labels: map[string]string{gang.LabelSchedulerPodGrp: "pt"}},
		Spec: infSpec(), Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	p.Spec.NodeName = node
	return p
}

func inferenceFixture() []runtime.Object {
	objs := []runtime.Object{
		infNode("serve-0", "serve"), infNode("serve-1", "serve"),
		infNode("spare-0", "spare"),
		infNode("train-0", "train"),
		node("cpu-0", map[string]string{infPool: "cpu"}, "v1.37.2"),
		rank("pt-0", "train-0"),
	}
	objs = append(objs, infModel("llm", "8G", "serve-0", "serve-1")...)
	// A model behind a budget on the training pool too: its gang keeps
	// the pool a training pool.
	return append(objs, infModel("embed", "1G", "train-0")...)
}

func collectInference(t *testing.T, c *Collector) (map[string]*InferencePool, []string) {
	t.Helper()
	c.PoolLabel, c.Inference, c.Now = infPool, true, func() time.Time { return t0 }
	inv, err := c.Collect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*InferencePool{}
	for _, p := range inv.Pools {
		if p.Inference != nil {
			got[p.Name] = p.Inference
		}
	}
	return got, inv.Notes
}

// The inventory marks the GPU pool of model Deployments behind budgets,
// and only it: not the pool whose pods beside a model are a training
// gang's ranks, not a GPU pool that holds no model, not a pool without
// GPUs. Its drain is planned by pkg/inference at the bandwidth given: two
// waves (the budget lets one of the two replicas go at once), each an 8 GB
// replica hydrated at 1 GB/s.
func TestCollectInferencePools(t *testing.T) {
	bw, err := inference.ParseBandwidth([]string{"object-store=1G/s"})
	if err != nil {
		t.Fatal(err)
	}
	got, notes := collectInference(t, &Collector{Client: fakeClient("v1.37.2", inferenceFixture()...),
		InferenceDynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), InferenceOptions: inference.Options{Bandwidth: bw}})
	if len(got) != 1 || got["serve"] == nil {
		t.Fatalf("inference pools: %+v (notes %q)", got, notes)
	}
	ip := got["serve"]
	if ip.Models != 1 || ip.WithPDB != 1 || ip.Waves != 2 || ip.ETA() != 16*time.Second || len(ip.Refusals) != 0 {
		t.Errorf("serve: %+v", ip)
	}
	if ip.Bandwidth != "object-store=1000000000/s" || strings.Join(ip.Sources, ",") != "object-store" {
		t.Errorf("bandwidth %q, sources %q", ip.Bandwidth, ip.Sources)
	}

	// Without a bandwidth the pool is still one, its drain refused as
	// gang-drain plan --inference would refuse it, with no ETA.
	got, _ = collectInference(t, &Collector{Client: fakeClient("v1.37.2", inferenceFixture()...),
		InferenceDynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())})
	ip = got["serve"]
	if ip == nil || ip.ETASeconds != 0 || ip.Bandwidth != "" || !strings.Contains(strings.Join(ip.Refusals, "\n"), "no hydrate bandwidth for source object-store") {
		t.Errorf("serve without a bandwidth: %+v", ip)
	}
}

// Without a dynamic client the pods beside a model cannot be told from a
// gang's ranks: the pool stays a training pool, with a note; a pool of
// models alone needs no discovery.
func TestCollectInferenceNoDynamic(t *testing.T) {
	got, notes := collectInference(t, &Collector{Client: fakeClient("v1.37.2", inferenceFixture()...)})
	if got["train"] != nil || got["serve"] == nil {
		t.Errorf("inference pools: %+v", got)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "pool train: 1 model Deployment, 1 behind a PodDisruptionBudget, no training gang, beside 1 other pod(s) that may be training gangs") {
		t.Errorf("notes: %q", notes)
	}
}

// A forbidden pod list is a note that names the verb and resource as the
// API words it, and the inventory is read all the same, the pools as
// training pools.
func TestCollectInferenceForbidden(t *testing.T) {
	c := fakeClient("v1.37.2", inferenceFixture()...)
	c.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New(`User "viewer" cannot list resource "pods" in API group "" at the cluster scope`))
	})
	got, notes := collectInference(t, &Collector{Client: c})
	if len(got) != 0 {
		t.Errorf("inference pools: %+v", got)
	}
	if !strings.Contains(strings.Join(notes, "\n"), `pool serve: reading its model Deployments for an inference drain: listing pods: pods is forbidden: User "viewer" cannot list resource "pods"`) {
		t.Errorf("notes: %q", notes)
	}
}

// withInference is a variant's inventory with its pool marked as an
// inference pool.
func withInference(t *testing.T, variant, pool string, ip InferencePool) Plan {
	t.Helper()
	inv := variantInventory(t, variant)
	found := false
	for i := range inv.Pools {
		if inv.Pools[i].Name == pool {
			inv.Pools[i].Inference = &ip
			found = true
		}
	}
	if !found {
		t.Fatalf("%s: no pool %s", variant, pool)
	}
	p, err := MakePlan(inv, MustParseVersion("v1.38"), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An inference pool's step drains it with gang-drain run --inference,
// gated by gang-drain plan --inference, with the hydrate bandwidth the
// reader sets (or the one it was planned with), and its restore is
// restore --inference after validation; never the gang drain unit by
// unit. By provider: in place (kubeadm), replaced by the provider (EKS,
// whose update must have succeeded before the restore; GKE), and
// Karpenter (nodes deleted once drained, drift held).
func TestRunbookInferencePool(t *testing.T) {
	ip := InferencePool{Models: 2, WithPDB: 2, Reason: "2 model Deployment(s), 2 behind a PodDisruptionBudget, no training gang", Sources: []string{"object-store", "registry"}, Waves: 2}
	for _, tc := range []struct {
		variant, pool string
		ip            InferencePool
		want          []string // in order
	}{
		{"kubeadm-apt", "gpu-h100", ip, []string{
			"BW='object-store=<bytes-per-second>,registry=<bytes-per-second>'",
			`kubectl gang-drain plan --inference -l gpufleet.dev/pool=gpu-h100 --hydrate-bandwidth "$BW" && \`,
			`kubectl gang-drain run --inference -l gpufleet.dev/pool=gpu-h100 --run-id "gpu-h100-to-1.38" --timeout 12h --hydrate-bandwidth "$BW"`,
			"sudo apt-mark unhold",
			"kubectl gpu-validate nodes -l gpufleet.dev/pool=gpu-h100 --kubelet-version v1.38",
			`kubectl gang-drain restore "gpu-h100-to-1.38" --inference`,
			"kubectl skew verify"}},
		{"eks-managed", "gpu-p5", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Bandwidth: "object-store=1250000000/s", Waves: 3, ETASeconds: 754}, []string{
			"# planned when the inventory was read: 3 wave(s), ETA 12m34s of cold starts",
			"BW=object-store=1250000000/s",
			`kubectl gang-drain run --inference -l eks.amazonaws.com/nodegroup=gpu-p5 --run-id "gpu-p5-to-1.`,
			"aws eks update-nodegroup-version",
			`= Successful ] && \`,
			"kubectl gpu-validate nodes -l eks.amazonaws.com/nodegroup=gpu-p5",
			`--inference`,
			"kubectl skew verify"}},
		{"gke", "a3-gpu", ip, []string{
			`kubectl gang-drain run --inference -l cloud.google.com/gke-nodepool=a3-gpu`,
			"gcloud container clusters upgrade",
			`--inference`,
			"kubectl skew verify"}},
		{"eks-selfmanaged", "gpu-karpenter", ip, []string{
			`"value":{"nodes":"0","reasons":["Drifted"]}`,
			"OLD=$(kubectl get nodes -l karpenter.sh/nodepool=gpu-karpenter -o name)",
			`kubectl gang-drain run --inference -l karpenter.sh/nodepool=gpu-karpenter`,
			`BAD=$(for n in $OLD; do NODE=${n#node/};`,
			`if [ -z "$BAD" ]; then kubectl delete $OLD;`,
			"NEW=$(kubectl get nodes -l karpenter.sh/nodepool=gpu-karpenter -o name)",
			`[ -z "$NEW" ] || kubectl wait --for=condition=Ready $NEW`,
			`{ [ -z "$NEW" ] || kubectl gpu-validate nodes -l karpenter.sh/nodepool=gpu-karpenter`,
			`--inference`,
			"nodepool-gpu-karpenter-budgets.json",
			"kubectl skew verify"}},
	} {
		t.Run(tc.variant, func(t *testing.T) {
			p := withInference(t, tc.variant, tc.pool, tc.ip)
			first := stepOf(t, p, PhaseNodePool, tc.pool)
			text := strings.Join(FlattenBlocks(first.Blocks), "\n")
			at := 0
			for _, w := range tc.want {
				i := strings.Index(text[at:], w)
				if i < 0 {
					t.Fatalf("step %d lacks, or out of order, %q:\n%s", first.Number, w, text)
				}
				at += i + len(w)
			}
			for _, s := range p.Steps {
				if s.Phase != PhaseNodePool || s.Pool != tc.pool {
					continue
				}
				text := strings.Join(FlattenBlocks(s.Blocks), "\n")
				if s.Rollback != nil {
					back := strings.Join(FlattenBlocks(s.Rollback.Blocks), "\n")
					text += "\n" + back
					if (tc.variant == "eks-managed" || tc.pool == "gpu-karpenter") && s.Number == lastStepOf(t, p, PhaseNodePool, tc.pool).Number && !strings.Contains(back, "gang-drain run --inference") {
						t.Errorf("step %d: the rollback does not drain the pool as an inference pool:\n%s", s.Number, back)
					}
					// Karpenter's way back deletes the nodes its run drained,
					// not by selector (that would take the nodes launched
					// for the displaced replicas too), and waits on the
					// nodes left, if any.
					if tc.pool == "gpu-karpenter" && strings.Contains(back, "gang-drain run --inference") {
						i, j := strings.Index(back, "OLD=$(kubectl get nodes -l"), strings.Index(back, "gang-drain run --inference")
						if i < 0 || i > j || !strings.Contains(back, "kubectl delete $OLD") || strings.Contains(back, "kubectl delete nodes -l") ||
							!strings.Contains(back, `[ -z "$NEW" ] || kubectl wait --for=condition=Ready $NEW`) {
							t.Errorf("step %d: the Karpenter rollback does not delete only the drained nodes and wait on the new:\n%s", s.Number, back)
						}
					}
				}
				for _, line := range strings.Split(text, "\n") {
					if strings.Contains(line, "kubectl gang-drain") && !strings.HasPrefix(line, "#") && !strings.Contains(line, "--inference") {
						t.Errorf("step %d: a gang-drain command without --inference: %q", s.Number, line)
					}
				}
			}
		})
	}
}

// A training pool beside an inference pool keeps the gang drain, one
// fabric unit at a time.
func TestRunbookTrainingPoolBesideInference(t *testing.T) {
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r"})
	for _, s := range p.Steps {
		if s.Phase == PhaseNodePool && s.Pool == "cpu" {
			if strings.Contains(cmds(s), "--inference") {
				t.Errorf("pool cpu: %s", cmds(s))
			}
		}
	}
	q := variantPlan(t, "kubeadm-apt")
	s := stepOf(t, q, PhaseNodePool, "gpu-h100")
	text := strings.Join(FlattenBlocks(s.Blocks), "\n")
	wantIn(t, "gpu-h100 without inference", text, "one fabric unit at a time", `kubectl gang-drain run -l "gpufleet.dev/pool=gpu-h100,gpufleet.dev/rack-set=$UNIT"`)
	if strings.Contains(text, "--inference") {
		t.Errorf("a training pool drained as an inference pool:\n%s", text)
	}
}

// An inference pool upgraded in place rolls back under the step's own
// inference run, restored with --inference.
func TestRollbackInferencePool(t *testing.T) {
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Sources: []string{"object-store"}})
	s := lastStepOf(t, p, PhaseNodePool, "gpu-h100")
	if s.Rollback == nil {
		t.Fatalf("step %d has no rollback", s.Number)
	}
	text := strings.Join(FlattenBlocks(s.Rollback.Blocks), "\n")
	wantIn(t, "rollback", text, `kubectl gang-drain run --inference -l gpufleet.dev/pool=gpu-h100 --run-id "gpu-h100-to-`, `kubectl gang-drain restore "gpu-h100-to-`)
	if strings.Contains(text, "$UNIT") {
		t.Errorf("the rollback goes unit by unit:\n%s", text)
	}
}

// A pool with a model outside any PodDisruptionBudget keeps the gang
// drain: the inference run's gate floors each model at its budget, so such
// a model would have no floor and could go to 0 replicas, while the
// runbook says the gate refuses a drain below a model's budget.
func TestRunbookInferencePoolModelWithoutPDB(t *testing.T) {
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 2, WithPDB: 1, Reason: "2 model Deployment(s), 1 behind a PodDisruptionBudget, no training gang", Sources: []string{"object-store"}})
	for _, s := range p.Steps {
		if s.Phase == PhaseNodePool && s.Pool == "gpu-h100" && strings.Contains(cmds(s), "--inference") {
			t.Errorf("step %d drains a pool with a model without a budget as an inference pool:\n%s", s.Number, cmds(s))
		}
	}
	q := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 2, WithPDB: 2, Reason: "r", Sources: []string{"object-store"}})
	s := stepOf(t, q, PhaseNodePool, "gpu-h100")
	wantIn(t, "gpu-h100 all budgeted", strings.Join(FlattenBlocks(s.Blocks), "\n"), "gang-drain run --inference", "every model on the pool has one")
}

// The run's --timeout follows the planned ETA (twice it and an hour,
// rounded up to a quarter hour), or a 12h bound where no ETA is known,
// never the 1h of other drains; and the block that upgrades a node in
// place opens with the check that the run drained it, before any reset.
func TestRunbookInferenceTimeoutAndDrainedCheck(t *testing.T) {
	for _, tc := range []struct {
		eta  float64
		want string
	}{{754, "--timeout 1h30m "}, {3 * 3600, "--timeout 7h "}, {0, "--timeout 12h "}} {
		p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Sources: []string{"object-store"}, Waves: 2, ETASeconds: tc.eta})
		s := stepOf(t, p, PhaseNodePool, "gpu-h100")
		text := strings.Join(FlattenBlocks(s.Blocks), "\n")
		if !strings.Contains(text, "gang-drain run --inference") || !strings.Contains(text, tc.want) || strings.Contains(text, "--timeout 1h ") {
			t.Errorf("ETA %gs: want %q:\n%s", tc.eta, tc.want, text)
		}
		found := false
		for _, blk := range s.Blocks {
			all := strings.Join(blk.Commands, "\n")
			r := strings.Index(all, "kubeadm reset")
			if r < 0 {
				continue
			}
			found = true
			c := strings.Index(all, `jsonpath='{.spec.unschedulable}')" = true ]`)
			if c < 0 || c > r || !strings.Contains(all[:r], "DaemonSet") {
				t.Errorf("block resets a node without first checking it is drained:\n%s", all)
			}
		}
		if !found {
			t.Errorf("no block resets a node:\n%s", text)
		}
	}
}

// An inference pool upgraded in place says what to do where the gate
// refuses the whole pool: the pool moved in labelled parts, each with its
// own plan, run, validation and restore, the commands given in full.
func TestRunbookInferenceSplitWhenRefused(t *testing.T) {
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Sources: []string{"object-store"}, ETASeconds: 754})
	s := stepOf(t, p, PhaseNodePool, "gpu-h100")
	wantIn(t, "gpu-h100 split", strings.Join(FlattenBlocks(s.Blocks), "\n"),
		"where the plan refuses",
		"kubectl label nodes <node-name> <node-name> gpufleet.dev/inference-part=1",
		`kubectl gang-drain plan --inference -l gpufleet.dev/pool=gpu-h100,gpufleet.dev/inference-part=1 --hydrate-bandwidth "$BW" && kubectl gang-drain run --inference -l gpufleet.dev/pool=gpu-h100,gpufleet.dev/inference-part=1 --run-id "gpu-h100-to-1.38-part1" --timeout 1h30m --hydrate-bandwidth "$BW"`,
		`kubectl gang-drain restore "gpu-h100-to-1.38-part1" --inference`,
		"kubectl label nodes -l gpufleet.dev/pool=gpu-h100 gpufleet.dev/inference-part-")
}

// The restore's text does not say it scales back a surge that the
// completed run already scaled back (pkg/inference's Runner.Run).
func TestRunbookInferenceRestoreText(t *testing.T) {
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Sources: []string{"object-store"}})
	text := strings.Join(FlattenBlocks(stepOf(t, p, PhaseNodePool, "gpu-h100").Blocks), "\n")
	wantIn(t, "restore", text, "a completed run has scaled its surge back already")
	wantNotIn(t, "restore", text, "scale each model back by the surge the run recorded")
}

// A refusal of the inference drain's plan other than a missing bandwidth
// is a "Before you start" item with its fix command; a missing bandwidth
// is left to the drain's BW line.
func TestRunbookInferenceRefusalsBeforeYouStart(t *testing.T) {
	weights := "model serving/llm: no weight size: kubectl annotate deployment -n serving llm " + inference.AnnWeightsBytes + "=<bytes, e.g. 140Gi>, or pass --weights serving/llm=<bytes>"
	p := withInference(t, "kubeadm-apt", "gpu-h100", InferencePool{Models: 1, WithPDB: 1, Reason: "r", Refusals: []string{
		"no hydrate bandwidth for source object-store (models serving/llm): pass --hydrate-bandwidth object-store=<bytes per second, e.g. 1250M/s>",
		weights,
	}})
	all := strings.Join(p.Warnings, "\n")
	if !strings.Contains(all, "pool gpu-h100: its inference drain (gang-drain plan --inference) refuses as read: "+weights) {
		t.Errorf("warnings lack the weight size refusal and its fix:\n%s", all)
	}
	if strings.Contains(all, "no hydrate bandwidth") {
		t.Errorf("a missing bandwidth is a warning:\n%s", all)
	}
}

// The inference read of the GPU pools (serve, spare, train here) lists
// the pods of every namespace once, in pages of the inventory's size, and
// lists no nodes beyond the inventory's own paged list.
func TestCollectInferenceListsOnce(t *testing.T) {
	client := fakeClient("v1.37.2", inferenceFixture()...)
	got, notes := collectInference(t, &Collector{Client: client, PageSize: 7,
		InferenceDynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())})
	if got["serve"] == nil {
		t.Fatalf("no inference pool serve: %+v (notes %q)", got, notes)
	}
	var nodeLists, podLists []string
	for _, a := range client.Actions() {
		l, ok := a.(k8stesting.ListActionImpl)
		if !ok {
			continue
		}
		limit := fmt.Sprint(l.GetListOptions().Limit)
		switch {
		case a.GetResource().Resource == "nodes":
			nodeLists = append(nodeLists, limit)
		case a.GetResource().Resource == "pods" && a.GetNamespace() == "" && l.GetListRestrictions().Labels.Empty() && l.GetListRestrictions().Fields.Empty():
			podLists = append(podLists, limit)
		}
	}
	if len(nodeLists) != 1 || len(podLists) != 1 || podLists[0] != "7" {
		t.Errorf("node lists (their limits) %q, pod lists of every namespace %q: want one node list and one pod list in pages of 7", nodeLists, podLists)
	}
}

// A model under a PodDisruptionBudget shared with a model that covers the
// budget's floor alone is not budgeted: the eviction API would let all of
// its replicas go, and the runbook passes no --min-serving, so the pool
// keeps the gang drain.
func TestCollectInferenceSharedBudgetNotOwnFloor(t *testing.T) {
	objs := []runtime.Object{infNode("serve-0", "serve"), infNode("serve-1", "serve"), infNode("spare-0", "spare")}
	drop := func(in []runtime.Object) []runtime.Object {
		var out []runtime.Object
		for _, o := range in {
			if _, ok := o.(*policyv1.PodDisruptionBudget); !ok {
				out = append(out, o)
			}
		}
		return out
	}
	objs = append(objs, drop(infModel("llm", "8G", "serve-0"))...)
	objs = append(objs, drop(infModel("small", "1G", "serve-1", "spare-0", "spare-0"))...)
	two := intstr.FromInt32(2)
	objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "serving", Name: "llms"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"llm", "small"}}}}}})
	bw, err := inference.ParseBandwidth([]string{"object-store=1G/s"})
	if err != nil {
		t.Fatal(err)
	}
	got, notes := collectInference(t, &Collector{Client: fakeClient("v1.37.2", objs...),
		InferenceDynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), InferenceOptions: inference.Options{Bandwidth: bw}})
	ip := got["serve"]
	if ip == nil {
		t.Fatalf("inference pools: %+v (notes %q)", got, notes)
	}
	if ip.Models != 2 || ip.WithPDB != 1 || ip.EveryModelBudgeted() {
		t.Errorf("serve: %+v; want llm not counted as budgeted", ip)
	}
}

// A model whose budget also selects pods outside the models that cover
// its floor alone (minAvailable 50% of a live expectedPods of 6, 4 of them
// another Deployment's) is not budgeted either: the budget lets both of
// its replicas go.
func TestCollectInferenceBudgetCoveredOutsideTheModels(t *testing.T) {
	objs := []runtime.Object{infNode("serve-0", "serve"), infNode("serve-1", "serve"), infNode("spare-0", "spare")}
	half := intstr.FromString("50%")
	for _, o := range infModel("llm", "8G", "serve-0", "serve-1") {
		if pdb, ok := o.(*policyv1.PodDisruptionBudget); ok {
			pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable = &half, nil
			pdb.Status.ExpectedPods = 6
		}
		objs = append(objs, o)
	}
	bw, err := inference.ParseBandwidth([]string{"object-store=1G/s"})
	if err != nil {
		t.Fatal(err)
	}
	got, notes := collectInference(t, &Collector{Client: fakeClient("v1.37.2", objs...),
		InferenceDynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), InferenceOptions: inference.Options{Bandwidth: bw}})
	ip := got["serve"]
	if ip == nil {
		t.Fatalf("inference pools: %+v (notes %q)", got, notes)
	}
	if ip.Models != 1 || ip.WithPDB != 0 || ip.EveryModelBudgeted() {
		t.Errorf("serve: %+v; want llm not counted as budgeted", ip)
	}
}
