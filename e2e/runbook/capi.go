package runbooke2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Cluster API's resources, at the storage version of Cluster API v1.14.0's
// CRDs (core/config/crd/bases, controlplane/kubeadm/config/crd/bases:
// v1beta2 storage: true; v1beta1 still served).
var (
	capiClusters = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	capiMDs      = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	capiMachines = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	capiKCPs     = schema.GroupVersionResource{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmcontrolplanes"}
)

// Labels and annotations Cluster API sets and reads (Cluster API v1.14.0
// docs/book/src/reference/api/labels-and-annotations.md).
const (
	capiClusterName    = "cluster.x-k8s.io/cluster-name"
	capiDeploymentName = "cluster.x-k8s.io/deployment-name"
	capiTopologyOwned  = "topology.cluster.x-k8s.io/owned"
	capiTopologyMD     = "topology.cluster.x-k8s.io/deployment-name"
	// capiDeferUpgrade on a MachineDeployment topology holds it at its
	// version when spec.topology.version moves.
	capiDeferUpgrade = "topology.cluster.x-k8s.io/defer-upgrade"
	// capiHoldUpgrade holds it and every topology after it.
	capiHoldUpgrade = "topology.cluster.x-k8s.io/hold-upgrade-sequence"
)

// capiSuffix stands for the random suffix the topology controller gives
// the MachineDeployments it creates (<cluster>-<topology>-<suffix>).
const capiSuffix = "7xk2p"

// capiConversion serves the Cluster CRD's v1beta1 <-> v1beta2
// conversion, as Cluster API's webhook does on a management cluster (its
// CRDs name the webhook through config/crd/patches; the bases have no
// conversion): without one, the apiserver would hand a v1beta1 request
// the stored v1beta2 object unconverted. Only the fields the lane's
// Clusters carry are converted (v1beta1 spec.topology.class and
// classNamespace are v1beta2 spec.topology.classRef.name and namespace,
// Cluster API v1.14.0 api/core/v1beta1/conversion.go); an object
// with any other field of the two versions' differences is refused, so
// that the lane never answers with a half-converted Cluster.
func capiConversion(w http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    struct {
			UID               string            `json:"uid"`
			DesiredAPIVersion string            `json:"desiredAPIVersion"`
			Objects           []json.RawMessage `json:"objects"`
		} `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := map[string]any{"uid": review.Request.UID}
	var out []map[string]any
	var convErr error
	for _, raw := range review.Request.Objects {
		var o map[string]any
		if err := json.Unmarshal(raw, &o); err != nil {
			convErr = err
			break
		}
		if err := convertCluster(o, review.Request.DesiredAPIVersion); err != nil {
			convErr = err
			break
		}
		out = append(out, o)
	}
	if convErr != nil {
		resp["result"] = map[string]any{"status": "Failure", "message": convErr.Error()}
	} else {
		resp["convertedObjects"] = out
		resp["result"] = map[string]any{"status": "Success"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": review.Kind, "response": resp})
}

// convertCluster converts a Cluster to the desired version in place.
func convertCluster(o map[string]any, to string) error {
	from, _ := o["apiVersion"].(string)
	o["apiVersion"] = to
	if from == to {
		return nil
	}
	spec, _ := o["spec"].(map[string]any)
	topo, _ := spec["topology"].(map[string]any)
	if topo == nil {
		return nil
	}
	for k := range topo {
		switch k {
		case "class", "classNamespace", "classRef", "version", "workers":
		default:
			return fmt.Errorf("runbook lane: the conversion of spec.topology.%s is not served here", k)
		}
	}
	switch to {
	case "cluster.x-k8s.io/v1beta2":
		ref := map[string]any{}
		if c, ok := topo["class"]; ok {
			ref["name"] = c
		}
		if ns, ok := topo["classNamespace"]; ok {
			ref["namespace"] = ns
		}
		delete(topo, "class")
		delete(topo, "classNamespace")
		if len(ref) > 0 {
			topo["classRef"] = ref
		}
	case "cluster.x-k8s.io/v1beta1":
		if ref, ok := topo["classRef"].(map[string]any); ok {
			if n, ok := ref["name"]; ok {
				topo["class"] = n
			}
			if ns, ok := ref["namespace"]; ok {
				topo["classNamespace"] = ns
			}
		}
		delete(topo, "classRef")
	default:
		return fmt.Errorf("runbook lane: no conversion to %s", to)
	}
	return nil
}

// startCAPI serves the Cluster conversion over TLS (the lane's CA) and
// applies Cluster API's CRDs with the Cluster CRD pointing at it.
func (l *Lane) startCAPI(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition, apply func(context.Context, ...*apiextensionsv1.CustomResourceDefinition) error) error {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(capiConversion))
	cert, err := l.CA.Issue("127.0.0.1")
	if err != nil {
		return err
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	l.servers = append(l.servers, srv)
	caPEM, err := os.ReadFile(l.CA.PEM)
	if err != nil {
		return err
	}
	url := srv.URL + "/convert"
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		c = c.DeepCopy()
		if c.Name == "clusters.cluster.x-k8s.io" {
			c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
					ConversionReviewVersions: []string{"v1"},
				},
			}
		}
		out = append(out, c)
	}
	return apply(ctx, out...)
}

// capiMirror keeps a Cluster API world's objects on the management
// cluster (the lane's control plane, context mgmt): the Cluster with its
// topology, a KubeadmControlPlane, a MachineDeployment per pool and a
// Machine per node, whose nodeRef names the node. Reconcile plays the
// topology controller after each paste. Cluster API's validating
// webhooks (a version that skips a minor, a version the ClusterClass does
// not allow) are not served: only the CRDs' own schema is enforced.
type capiMirror struct {
	dyn   dynamic.Interface
	w     *World
	label string // the scenario label's value
}

func (m *capiMirror) mdName(pool string) string {
	return m.w.Cluster + "-" + pool + "-" + capiSuffix
}

func (m *capiMirror) kcpName() string { return m.w.Cluster + "-cp" }

func (m *capiMirror) meta(name string, labels map[string]string) map[string]any {
	l := map[string]any{scenarioLabel: m.label, capiClusterName: m.w.Cluster}
	for k, v := range labels {
		l[k] = v
	}
	return map[string]any{"name": name, "namespace": m.w.Namespace, "labels": l}
}

func ref(group, kind, name string) map[string]any {
	return map[string]any{"apiGroup": group, "kind": kind, "name": name}
}

// objects are the world's Cluster API objects (called with the world
// locked).
func (m *capiMirror) objects() (cluster, kcp map[string]any, mds, machines []map[string]any) {
	w := m.w
	var topo []any
	cpReplicas := 0
	for _, p := range w.Pools {
		if p.ControlPlane {
			// KubeadmControlPlane's machines (labels of Cluster API v1.14.0
			// labels-and-annotations.md: cluster.x-k8s.io/control-plane,
			// cluster.x-k8s.io/control-plane-name).
			for i, n := range p.Nodes {
				name := fmt.Sprintf("%s-%d", m.kcpName(), i)
				machines = append(machines, map[string]any{
					"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
					"metadata": m.meta(name, map[string]string{"cluster.x-k8s.io/control-plane": "", "cluster.x-k8s.io/control-plane-name": m.kcpName()}),
					"spec": map[string]any{
						"clusterName": w.Cluster, "version": "v" + n.Kubelet,
						"bootstrap":         map[string]any{"configRef": ref("bootstrap.cluster.x-k8s.io", "KubeadmConfig", name)},
						"infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "DockerMachine", name),
					},
					"status": map[string]any{"nodeRef": map[string]any{"name": n.Name}},
				})
			}
			cpReplicas += len(p.Nodes)
			continue
		}
		topo = append(topo, map[string]any{"class": "default-worker", "name": p.Name})
		md := m.mdName(p.Name)
		tmplLabels := map[string]any{capiClusterName: w.Cluster, capiDeploymentName: md}
		mds = append(mds, map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
			"metadata": m.meta(md, map[string]string{capiTopologyOwned: "", capiTopologyMD: p.Name}),
			"spec": map[string]any{
				"clusterName": w.Cluster, "replicas": len(p.Nodes),
				"selector": map[string]any{"matchLabels": map[string]any{capiClusterName: w.Cluster, capiDeploymentName: md}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": tmplLabels},
					"spec": map[string]any{
						"clusterName": w.Cluster, "version": "v" + p.Version,
						"bootstrap":         map[string]any{"configRef": ref("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate", md)},
						"infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate", md),
					},
				},
			},
		})
		for i, n := range p.Nodes {
			name := fmt.Sprintf("%s-%d", md, i)
			machines = append(machines, map[string]any{
				"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
				"metadata": m.meta(name, map[string]string{capiDeploymentName: md, capiTopologyOwned: "", capiTopologyMD: p.Name}),
				"spec": map[string]any{
					"clusterName": w.Cluster, "version": "v" + n.Kubelet,
					"bootstrap":         map[string]any{"configRef": ref("bootstrap.cluster.x-k8s.io", "KubeadmConfig", name)},
					"infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "DockerMachine", name),
				},
				"status": map[string]any{"nodeRef": map[string]any{"name": n.Name}},
			})
		}
	}
	cluster = map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": m.meta(w.Cluster, nil),
		"spec": map[string]any{"topology": map[string]any{
			"classRef": map[string]any{"name": "gpu-cluster-class"},
			"version":  "v" + w.ControlPlane,
			"workers":  map[string]any{"machineDeployments": topo},
		}},
	}
	kcp = map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
		"metadata": m.meta(m.kcpName(), map[string]string{capiTopologyOwned: ""}),
		"spec": map[string]any{
			"replicas": cpReplicas, "version": "v" + w.ControlPlane,
			"machineTemplate": map[string]any{"spec": map[string]any{
				"infrastructureRef": ref("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate", m.kcpName())}},
		},
	}
	return cluster, kcp, mds, machines
}

// Create creates the namespace and the world's objects.
func (m *capiMirror) Create(ctx context.Context, nsCreate func(context.Context, *corev1.Namespace) error) error {
	if err := nsCreate(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: m.w.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	m.w.Lock()
	cluster, kcp, mds, machines := m.objects()
	m.w.Unlock()
	create := func(gvr schema.GroupVersionResource, o map[string]any) error {
		u := &unstructured.Unstructured{Object: o}
		status, hasStatus := o["status"]
		created, err := m.dyn.Resource(gvr).Namespace(m.w.Namespace).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create %s %s: %w", gvr.Resource, u.GetName(), err)
		}
		if hasStatus {
			created.Object["status"] = status
			if _, err := m.dyn.Resource(gvr).Namespace(m.w.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("status of %s %s: %w", gvr.Resource, u.GetName(), err)
			}
		}
		return nil
	}
	if err := create(capiClusters, cluster); err != nil {
		return err
	}
	if err := create(capiKCPs, kcp); err != nil {
		return err
	}
	for _, o := range mds {
		if err := create(capiMDs, o); err != nil {
			return err
		}
	}
	for _, o := range machines {
		if err := create(capiMachines, o); err != nil {
			return err
		}
	}
	return nil
}

// Delete removes the scenario's objects.
func (m *capiMirror) Delete(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: scenarioLabel + "=" + m.label}
	for _, gvr := range []schema.GroupVersionResource{capiMachines, capiMDs, capiKCPs, capiClusters} {
		if err := m.dyn.Resource(gvr).Namespace(m.w.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			return err
		}
	}
	return nil
}

// Reconcile plays Cluster API's controllers on what the pasted block left
// on the management cluster (Cluster API v1.14.0, docs/book
// tasks/experimental-features/cluster-class/operate-cluster.md "Upgrade a
// Cluster"): a paused Cluster (spec.paused) is left alone; otherwise a
// new spec.topology.version moves the KubeadmControlPlane, and then every
// MachineDeployment topology that carries neither defer-upgrade nor
// hold-upgrade-sequence (nor follows one that holds the sequence) to
// it; a KubeadmControlPlane whose spec.version a block moved rolls the
// control plane to it. The world takes the versions, so the nodes, the
// apiserver's version and the steps after it see them. It returns what
// a real controller would refuse or leave undone as problems.
func (m *capiMirror) Reconcile(ctx context.Context) []string {
	ns := m.w.Namespace
	c, err := m.dyn.Resource(capiClusters).Namespace(ns).Get(ctx, m.w.Cluster, metav1.GetOptions{})
	if err != nil {
		return []string{"reading the Cluster: " + err.Error()}
	}
	if paused, _, _ := unstructured.NestedBool(c.Object, "spec", "paused"); paused {
		return nil
	}
	version, _, _ := unstructured.NestedString(c.Object, "spec", "topology", "version")
	kcp, err := m.dyn.Resource(capiKCPs).Namespace(ns).Get(ctx, m.kcpName(), metav1.GetOptions{})
	if err != nil {
		return []string{"reading the KubeadmControlPlane: " + err.Error()}
	}
	kcpVersion, _, _ := unstructured.NestedString(kcp.Object, "spec", "version")
	topos, _, _ := unstructured.NestedSlice(c.Object, "spec", "topology", "workers", "machineDeployments")
	w := m.w
	w.Lock()
	cp := "v" + w.ControlPlane
	switch {
	case version != "" && version != cp:
		w.ControlPlane = strings.TrimPrefix(version, "v")
		w.Topology = version
	case kcpVersion != "" && kcpVersion != cp:
		w.ControlPlane = strings.TrimPrefix(kcpVersion, "v")
	}
	cp = "v" + w.ControlPlane
	// KubeadmControlPlane replaces its machines by new ones at its version.
	for _, p := range w.Pools {
		if !p.ControlPlane || p.Version == w.ControlPlane {
			continue
		}
		p.Version = w.ControlPlane
		for _, n := range p.Nodes {
			n.Kubelet = w.ControlPlane
			n.Host.Kubelet, n.Host.Kubeadm, n.Host.ControlPlane, n.Host.Repo = w.ControlPlane, w.ControlPlane, w.ControlPlane, Minor(w.ControlPlane)
		}
	}
	held := false
	if version == cp {
		for _, t := range topos {
			tm, _ := t.(map[string]any)
			name, _ := tm["name"].(string)
			ann, _, _ := unstructured.NestedStringMap(tm, "metadata", "annotations")
			if _, ok := ann[capiHoldUpgrade]; ok {
				held = true
			}
			if _, ok := ann[capiDeferUpgrade]; ok || held {
				continue
			}
			if p := w.Pool(name); p != nil && p.Version != w.ControlPlane {
				p.Version = w.ControlPlane
				for _, n := range p.Nodes {
					n.Kubelet = w.ControlPlane
				}
			}
		}
	}
	cluster, kcpWant, mds, machines := m.objects()
	w.Unlock()
	_ = cluster
	var problems []string
	set := func(gvr schema.GroupVersionResource, want map[string]any, path ...string) {
		v, _, _ := unstructured.NestedString(want, path...)
		name, _, _ := unstructured.NestedString(want, "metadata", "name")
		got, err := m.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		if cur, _, _ := unstructured.NestedString(got.Object, path...); cur == v {
			return
		}
		_ = unstructured.SetNestedField(got.Object, v, path...)
		if _, err := m.dyn.Resource(gvr).Namespace(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			problems = append(problems, fmt.Sprintf("the controller's update of %s %s: %v", gvr.Resource, name, err))
		}
	}
	set(capiKCPs, kcpWant, "spec", "version")
	for _, o := range mds {
		set(capiMDs, o, "spec", "template", "spec", "version")
	}
	for _, o := range machines {
		set(capiMachines, o, "spec", "version")
	}
	sort.Strings(problems)
	return problems
}

// clusterctl is not built here: Cluster API v1.14.0's go.mod takes its
// API module (sigs.k8s.io/cluster-api/api, which clusterctl imports)
// through a replace to ./api, which a module that depends on it does not
// follow, and the module proxy's own copies of that module are not an
// approved release on this project's machines. So the lane's clusterctl
// is a stand-in that lists each command as not executed, with its checks:
// describe cluster NAME with only the flags clusterctl v1.14.0's describe
// cluster takes (cmd/clusterctl/cmd/describe_cluster.go), its
// --kubeconfig-context a context of the kubeconfig, and the Cluster there
// in the namespace -n names (what clusterctl reads first). Any other
// clusterctl command fails.
const clusterctlNotExecuted = ".clusterctl-not-executed"

func writeClusterctlShim(dir, list string) error {
	s := `#!/bin/bash
# clusterctl stand-in of the runbook lane: see e2e/runbook/capi.go.
if [ "$1 $2" != "describe cluster" ]; then
	echo "runbook lane: clusterctl $1 $2 is not served here (only describe cluster)" >&2; exit 2
fi
shift 2
name= ns=default ctx= kc=
while [ $# -gt 0 ]; do
	a=$1; shift
	case $a in
	--kubeconfig-context) ctx=$1; shift ;;
	--kubeconfig-context=*) ctx=${a#*=} ;;
	--kubeconfig) kc=$1; shift ;;
	--kubeconfig=*) kc=${a#*=} ;;
	-n|--namespace) ns=$1; shift ;;
	--namespace=*) ns=${a#*=} ;;
	--show-conditions) shift ;;
	--show-conditions=*|--show-machinesets|--show-machinesets=*|--show-resourcesets|--show-resourcesets=*|--show-templates|--show-templates=*|--echo|--echo=*|--grouping|--grouping=*|--v1beta2|--v1beta2=*|-c|--color|--color=*) ;;
	--config) shift ;;
	--config=*) ;;
	-*) echo "Error: unknown flag: $a" >&2; exit 1 ;;
	*) if [ -n "$name" ]; then echo "Error: accepts 1 arg(s), received more" >&2; exit 1; fi; name=$a ;;
	esac
done
if [ -z "$name" ]; then echo "Error: please specify a cluster name" >&2; exit 1; fi
k=(kubectl)
[ -z "$kc" ] || k+=(--kubeconfig "$kc")
if [ -n "$ctx" ]; then
	"${k[@]}" config get-contexts "$ctx" >/dev/null || exit 1
	k+=(--context "$ctx")
fi
"${k[@]}" -n "$ns" get cluster.cluster.x-k8s.io "$name" -o name >/dev/null || exit 1
echo "not executed: clusterctl describe cluster $name is not built here (e2e/runbook/capi.go); flags checked against clusterctl v1.14.0 describe cluster, context $ctx and Cluster $ns/$name found" >>` + shq(list) + `
`
	return os.WriteFile(dir+"/clusterctl", []byte(s), 0o755)
}

// takeClusterctlNotExecuted returns and clears the commands the stand-in
// listed.
func takeClusterctlNotExecuted(dir string) []HostCommand {
	b, err := os.ReadFile(dir + "/" + clusterctlNotExecuted)
	if err != nil {
		return nil
	}
	_ = os.Remove(dir + "/" + clusterctlNotExecuted)
	var out []HostCommand
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, HostCommand{Node: "workstation", Line: "clusterctl describe cluster", Checks: []string{l}})
		}
	}
	return out
}

// capiUnitHook is the pre-drain hook the runbook's Cluster API GPU pool
// blocks set and lift.
const capiUnitHook = "pre-drain.delete.hook.machine.cluster.x-k8s.io/gpufleet-gang-drain"

// capiSkipWhy is why the lane does not paste a Cluster API GPU pool's unit
// block nor the restore after it.
const capiSkipWhy = "not pasted: the lane's Cluster API mirror rolls a released MachineDeployment by setting its Machines' version in place and deletes no Machine, " +
	"so none waits at the pre-drain hook this block drains by (Cluster API v1.14.0 deletes the old MachineSet's Machines one by one and holds each at its " +
	"pre-drain.delete.hook.machine.cluster.x-k8s.io annotations before the drain: reconcileDelete, core/reconcilers/machine/machine_controller.go); " +
	"pkg/skew TestCAPIUnitBlocksPasted pastes these blocks against stand-ins"

// capiSkip says why the lane skips blocks[i] of a Cluster API scenario's
// step ("" to paste it): the unit block that waits for the rollout to
// delete a hooked Machine (it lifts the hook and waits --for=delete), and,
// after it in the same step, the block that restores the gangs its
// gang-drain run stopped, which the skipped block never started.
func capiSkip(sc Scenario, blocks []*Block, i int) string {
	if sc.Provider != "capi" || blocks[i].Rollback {
		return ""
	}
	unit := func(b *Block) bool {
		t := b.Text()
		return strings.Contains(t, capiUnitHook+"-") && strings.Contains(t, "--for=delete")
	}
	if unit(blocks[i]) {
		return capiSkipWhy
	}
	if !strings.Contains(blocks[i].Text(), "gang-drain restore") {
		return ""
	}
	for _, b := range blocks[:i] {
		if !b.Rollback && unit(b) {
			return capiSkipWhy
		}
	}
	return ""
}
