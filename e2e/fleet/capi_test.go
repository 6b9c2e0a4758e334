//go:build e2e

package fleete2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetrun"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

var (
	capiClusters = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	capiMDs      = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
)

// capiCRDs brings Cluster API's own CRDs (e2e/tools/build.sh capi: the
// v1.14.0 module as the Go module proxy serves it) onto the management
// cluster.
func (e *fleetEnv) capiCRDs(t *testing.T) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "e2e/tools/build.sh"), "capi").Output()
	if err != nil {
		t.Fatalf("e2e/tools/build.sh capi: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "capi-v1.14.0", "crds")
	crds, err := harness.LoadCRDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []*apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Name == "clusters.cluster.x-k8s.io" || c.Name == "machinedeployments.cluster.x-k8s.io" {
			want = append(want, c)
		}
	}
	if len(want) != 2 {
		t.Fatalf("Cluster and MachineDeployment CRDs not in %s", dir)
	}
	if err := e.mgmt.ApplyCRDs(context.Background(), want...); err != nil {
		t.Fatal(err)
	}
}

// TestFleetClusterAPIHoldsPools runs a Cluster API cluster's steps by hand
// against the real Cluster API CRDs: the hold-rollouts step sets
// defer-upgrade on every MachineDeployment topology of the Cluster object
// before the control-plane step moves spec.topology.version; each pool's
// hold is lifted at its own upgrade step, after its checkpointing drain, the
// other still held; the etcd step is a gate that says KubeadmControlPlane
// takes no backup. Nothing reconciles the Cluster here: the test plays the
// topology controller, moving a pool's nodes once its hold is gone. The
// workload cluster is the management cluster itself (its nodes, no Argo).
func TestFleetClusterAPIHoldsPools(t *testing.T) {
	e := env(t)
	ctx := context.Background()
	e.capiCRDs(t)
	cp := e.mgmt
	const ns = "capi-e2e"
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The Cluster and its MachineDeployments, as the topology controller
	// names them; created with kubectl, as a user would.
	mds := map[string]string{"md-a": "capi-md-a-7xk2p", "md-b": "capi-md-b-9q4rt"}
	objs := fmt.Sprintf(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: capi, namespace: %[1]s}
spec:
  topology:
    classRef: {name: gpu-cell}
    version: v1.36.4
    workers:
      machineDeployments:
      - {class: h100, name: md-a}
      - {class: h100, name: md-b}
`, ns)
	for topo, md := range mds {
		objs += fmt.Sprintf(`---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: %[2]s, namespace: %[1]s, labels: {cluster.x-k8s.io/cluster-name: capi, %[4]s: %[3]s}}
spec:
  clusterName: capi
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: %[2]s}}
  template:
    metadata: {labels: {cluster.x-k8s.io/deployment-name: %[2]s}}
    spec:
      clusterName: capi
      bootstrap: {dataSecretName: none}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: h100}
`, ns, md, topo, pkgskew.CAPITopologyDeploymentLabel)
	}
	f := filepath.Join(t.TempDir(), "capi.yaml")
	if err := os.WriteFile(f, []byte(objs), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := plugintest.RunCmd(t, e.kubectl, plugintest.Cmd{Args: []string{"--kubeconfig", cp.Kubeconfig, "create", "-f", f}}); r.ExitCode != 0 {
		t.Fatalf("kubectl create: %s", r)
	}
	// The workload cluster's nodes: two GPU pools named by their
	// MachineDeployments, and a control-plane node whose kube-apiserver
	// pod still runs v1.36 (the hop the plan makes).
	var created []string
	for _, md := range []string{mds["md-a"], mds["md-b"]} {
		for i := range 2 {
			n := harness.GPUNode(fmt.Sprintf("%s-%d", md, i), harness.GPUPool{Name: md, KubeletVersion: oldKubelet}, "")
			delete(n.Labels, harness.PoolLabel)
			n.Labels["cluster.x-k8s.io/deployment-name"] = md
			if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			created = append(created, n.Name)
		}
	}
	cpNode := controlPlaneNode("capi-cp-0", "v1.36.4")
	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, cpNode, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created = append(created, cpNode.Name)
	apiPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-capi-cp-0", Namespace: "kube-system",
		Labels: map[string]string{"component": "kube-apiserver", "tier": "control-plane"},
		// A static pod's mirror, as the kubelet writes it: drains leave it.
		Annotations: map[string]string{"kubernetes.io/config.mirror": "e2e", "kubernetes.io/config.source": "file"}},
		Spec: corev1.PodSpec{NodeName: cpNode.Name, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.36.4"}}}}
	if _, err := cp.Client.CoreV1().Pods("kube-system").Create(ctx, apiPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Pods("kube-system").Delete(context.Background(), apiPod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		for _, n := range created {
			_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	kcfg, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "capi-kubeconfig", Namespace: argoNS}, Data: map[string][]byte{"value": kcfg}}
	if _, err := cp.Client.CoreV1().Secrets(argoNS).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "store") // a plain directory, as a person running by hand gives it
	file := filepath.Join(dir, "fleet.yaml")
	y := fmt.Sprintf(`apiVersion: gpufleet.dev/v1alpha1
kind: Fleet
metadata: {name: capi}
spec:
  target: {version: %s}
  clusters:
  - {name: capi, provider: clusterapi, labels: {gpufleet.dev/ring: canary}}
  rings:
  - {name: canary, selector: {matchLabels: {gpufleet.dev/ring: canary}}}
  credentials: {secretNamespace: argo}
  upgrade:
    stepDuration: 10s
    drain: {onTimeout: stop, ackTimeout: 3s}
    actions:
    - clusterAPI: {managementContext: %s, namespace: %s}
  store: {url: "file://%s"}
`, target, raw.CurrentContext, ns, store)
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(e.skew(t, "fleet", "plan", "-f", file, "--run", "r1", "-o", "wide"))
	st, err := fleetrun.OpenStore(ctx, "file://"+store)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fleetrun.ReadPlan(ctx, st, "r1")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := p.Cluster("capi")

	// deferred reads which topologies carry defer-upgrade, and the version.
	deferred := func() ([]string, string) {
		u, err := e.dyn.Resource(capiClusters).Namespace(ns).Get(ctx, "capi", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "workers", "machineDeployments")
		var out []string
		for _, m := range list {
			md := m.(map[string]any)
			ann, _, _ := unstructured.NestedStringMap(md, "metadata", "annotations")
			if _, ok := ann[pkgskew.CAPIDeferUpgradeAnnotation]; ok {
				out = append(out, md["name"].(string))
			}
		}
		sort.Strings(out)
		v, _, _ := unstructured.NestedString(u.Object, "spec", "topology", "version")
		return out, v
	}
	// rollout plays the topology controller: a pool whose topology is no
	// longer deferred, once the version moved, gets the new kubelet.
	rollout := func() {
		held, v := deferred()
		var names []string
		for topo, md := range mds {
			if !slices.Contains(held, topo) {
				names = append(names, md+"-0", md+"-1")
			}
		}
		if v == target {
			names = append(names, cpNode.Name) // KubeadmControlPlane's part
		}
		{
			for _, name := range names {
				n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n.Status.NodeInfo.KubeletVersion = v
				if _, err := cp.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	type mark struct {
		step, held, version string
	}
	var timeline []mark
	var sawEtcdGate bool
	for _, s := range c.Steps {
		for try := 0; ; try++ {
			r := e.run(t, "kubectl-skew", "fleet", "step", "--store", store, "--run", "r1", "--cluster", "capi", "--step", s.Name, "-o", "json")
			var res fleetrun.StepResult
			_ = json.Unmarshal([]byte(r.Stdout), &res)
			if r.ExitCode == 0 {
				break
			}
			if r.ExitCode != 4 || try > 20 {
				var report string
				for _, k := range res.Evidence {
					if strings.HasSuffix(k, "/report.json") {
						b, _ := st.Read(ctx, k)
						report = string(b)
					}
				}
				t.Fatalf("step %s: exit %d\n%s\n--- report\n%s", s.Name, r.ExitCode, r, report)
			}
			switch s.Kind {
			case fleetrun.StepEtcdSnapshot:
				if !strings.Contains(res.Message, "KubeadmControlPlane takes no etcd backup") {
					t.Errorf("etcd gate: %q", res.Message)
				}
				sawEtcdGate = true
				e.skewAs(t, "alice", "fleet", "approve", "--store", store, "--run", "r1", "--cluster", "capi", "--step", s.Name, "--reason", "snapshot saved off the machines: s3://etcd-backups/capi/pre-1.37.db")
			case fleetrun.StepPoolUpgrade:
				rollout()
			default:
				time.Sleep(time.Second)
			}
		}
		held, v := deferred()
		timeline = append(timeline, mark{s.Name, strings.Join(held, ","), v})
	}
	var lines []string
	for _, m := range timeline {
		lines = append(lines, fmt.Sprintf("%-32s deferred=[%s] version=%s", m.step, m.held, m.version))
	}
	t.Logf("the Cluster after each step:\n%s", strings.Join(lines, "\n"))
	if !sawEtcdGate {
		t.Error("the etcd step of a Cluster API cluster did not wait for a person")
	}
	at := func(step string) mark {
		for _, m := range timeline {
			if m.step == step {
				return m
			}
		}
		t.Fatalf("no step %s in %v", step, timeline)
		return mark{}
	}
	if m := at("hold-rollouts-1-37"); m.held != "md-a,md-b" || m.version != "v1.36.4" {
		t.Errorf("after the hold: %+v; want both topologies deferred before the version moves", m)
	}
	if m := at("control-plane-1-37"); m.held != "md-a,md-b" || m.version != target {
		t.Errorf("after the control-plane step: %+v", m)
	}
	a, b := mds["md-a"], mds["md-b"]
	for _, want := range []struct{ step, held string }{
		{"pool-" + a + "-1-37-drain", "md-a,md-b"},
		{"pool-" + a + "-1-37-upgrade", "md-b"},
		{"pool-" + b + "-1-37-drain", "md-b"},
		{"pool-" + b + "-1-37-upgrade", ""},
	} {
		if m := at(want.step); m.held != want.held {
			t.Errorf("after %s: deferred [%s], want [%s]", want.step, m.held, want.held)
		}
	}
	// Every step's evidence is in the store.
	states, err := fleetrun.ReadStates(ctx, st, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Steps {
		ss := states["capi"].Step(s.Name)
		if ss.Phase != fleetrun.PhaseCompleted || len(ss.Evidence) == 0 {
			t.Errorf("%s: %s, evidence %v", s.Name, ss.Phase, ss.Evidence)
		}
	}
	if len(states["capi"].Holds) != 0 {
		t.Errorf("holds left: %v", states["capi"].Holds)
	}
}
