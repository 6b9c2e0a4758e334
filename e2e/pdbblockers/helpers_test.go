//go:build e2e

package pdbblockerse2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
)

const bin = "kubectl-pdb_blockers"

type env struct {
	t     *testing.T
	cp    *harness.ControlPlane
	ctx   context.Context
	ns    string
	nodes []string
	apps  []app
}

// newEnv creates a namespace and n KWOK nodes for one test; both go away
// when the test ends.
func newEnv(t *testing.T, n int, timeout time.Duration) *env {
	t.Helper()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	ns := cp.Namespace(t)
	e := &env{t: t, cp: cp, ctx: ctx, ns: ns}
	pool := harness.GPUPool{Name: "pb-" + ns[len(ns)-5:], Nodes: n}
	nodes, err := cp.CreateGPUNodes(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		e.nodes = append(e.nodes, node.Name)
		name := node.Name
		t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	return e
}

func (e *env) fatal(format string, args ...any) {
	e.t.Helper()
	e.t.Fatalf(format, args...)
}

// deploy creates a Deployment whose pods all run on node and waits for them.
func (e *env) deploy(name string, replicas int32, node string, annotations map[string]string) {
	e.t.Helper()
	d := harness.Deployment(e.ns, name, replicas, 0)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	d.Spec.Template.Annotations = annotations
	if _, err := e.cp.Client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.fatal("deployment %s: %v", name, err)
	}
	e.apps = append(e.apps, app{name, int(replicas)})
}

type app struct {
	name     string
	replicas int
}

// waitApps waits until the pods of every deployment are Ready.
func (e *env) waitApps() {
	e.t.Helper()
	for _, a := range e.apps {
		if err := e.cp.WaitPodsReady(e.ctx, e.ns, "app="+a.name, a.replicas, 3*time.Minute); err != nil {
			e.fatal("deployment %s: %v", a.name, err)
		}
	}
}

// settle waits until every PDB of the namespace counts exactly the Ready
// pods it selects (PDBs that fail to sync excepted).
func (e *env) settle() {
	e.t.Helper()
	err := harness.Eventually(e.ctx, "PDB status settles", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := e.cp.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pdbs, err := e.cp.Client.PolicyV1().PodDisruptionBudgets(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, b := range pdbs.Items {
			if b.Status.ObservedGeneration < b.Generation {
				continue // never synced; checked by the test itself
			}
			sel, _ := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			ready := int32(0)
			for i := range pods.Items {
				if sel.Matches(labels.Set(pods.Items[i].Labels)) && harness.PodReady(&pods.Items[i]) {
					ready++
				}
			}
			if b.Status.ExpectedPods > 0 && b.Status.CurrentHealthy != ready {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.fatal("%v", err)
	}
}

// daemonSet creates a DaemonSet with one pod, on node.
func (e *env) daemonSet(name, node string) {
	e.t.Helper()
	lbl := map[string]string{"app": name}
	spec := harness.PodSpec(0)
	spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}}}
	if _, err := e.cp.Client.AppsV1().DaemonSets(e.ns).Create(e.ctx, ds, metav1.CreateOptions{}); err != nil {
		e.fatal("daemonset %s: %v", name, err)
	}
	if err := e.cp.WaitPodsReady(e.ctx, e.ns, "app="+name, 1, 90*time.Second); err != nil {
		e.fatal("daemonset %s: %v", name, err)
	}
}

// pod creates a bare pod bound to node and waits until KWOK runs it.
func (e *env) pod(p *corev1.Pod, node string) *corev1.Pod {
	e.t.Helper()
	if p.Spec.Containers == nil {
		p.Spec = harness.PodSpec(0)
	}
	p.Namespace = e.ns
	p.Spec.NodeName = node
	if _, err := e.cp.Client.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
		e.fatal("pod %s: %v", p.Name, err)
	}
	if err := e.cp.WaitPodsReady(e.ctx, e.ns, "app="+p.Labels["app"], 1, 60*time.Second); err != nil {
		e.fatal("pod %s: %v", p.Name, err)
	}
	got, err := e.cp.Client.CoreV1().Pods(e.ns).Get(e.ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		e.fatal("pod %s: %v", p.Name, err)
	}
	return got
}

// pdb creates a PodDisruptionBudget over app=app.
func (e *env) pdb(name, app string, minAvailable, maxUnavailable *intstr.IntOrString, policy policyv1.UnhealthyPodEvictionPolicyType, expect int32) {
	e.t.Helper()
	b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	if policy != "" {
		b.Spec.UnhealthyPodEvictionPolicy = &policy
	}
	if _, err := e.cp.CreatePDB(e.ctx, b, expect); err != nil {
		e.fatal("pdb %s: %v", name, err)
	}
}

// waitPDB waits until the disruption controller's status of a PDB satisfies ok.
func (e *env) waitPDB(name string, ok func(*policyv1.PodDisruptionBudget) bool) {
	e.t.Helper()
	e.waitPDBStatus(name, func(b *policyv1.PodDisruptionBudget) bool {
		return b.Status.ObservedGeneration >= b.Generation && ok(b)
	})
}

// waitPDBStatus waits until a PDB's status satisfies ok, whatever generation
// the controller observed.
func (e *env) waitPDBStatus(name string, ok func(*policyv1.PodDisruptionBudget) bool) {
	e.t.Helper()
	var last *policyv1.PodDisruptionBudget
	err := harness.Eventually(e.ctx, "PDB "+name+" status", 90*time.Second, func(ctx context.Context) (bool, error) {
		b, err := e.cp.Client.PolicyV1().PodDisruptionBudgets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = b
		return ok(b), nil
	})
	if err != nil {
		if last == nil {
			e.fatal("%v", err)
		}
		e.fatal("%v; last status %+v", err, last.Status)
	}
}

// markUnready sets a running pod's Ready condition to False. KWOK only
// makes Pending pods Ready, so the condition stays.
func (e *env) markUnready(name string) {
	e.t.Helper()
	p, err := e.cp.Client.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.fatal("%v", err)
	}
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = corev1.ConditionFalse
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := e.cp.Client.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.fatal("mark %s unready: %v", name, err)
	}
}

// podsOf lists the pods labelled app=app, sorted by name.
func (e *env) podsOf(app string) []corev1.Pod {
	e.t.Helper()
	l, err := e.cp.Client.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.fatal("%v", err)
	}
	return l.Items
}

// cordon marks node unschedulable, as kubectl cordon does.
func (e *env) cordon(node string) {
	e.t.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := e.cp.Client.CoreV1().Nodes().Patch(e.ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kubectl-cordon"}); err != nil {
		e.fatal("cordon %s: %v", node, err)
	}
}

// crdGroup is the group of the custom resource without a /scale subresource.
const crdGroup = "pdbblockers.e2e.gpufleet.dev"

var trainerGVR = schema.GroupVersionResource{Group: crdGroup, Version: "v1", Resource: "trainers"}

// trainer creates (once) a CRD without a scale subresource and one
// Trainer object, and returns an owner reference to it.
func (e *env) trainer(name string) metav1.OwnerReference {
	e.t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "trainers." + crdGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: crdGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "trainers", Singular: "trainer", Kind: "Trainer", ListKind: "TrainerList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := e.cp.ApplyCRDs(e.ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		e.fatal("crd: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(e.cp.Config)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crdGroup + "/v1", "kind": "Trainer",
		"metadata": map[string]any{"name": name, "namespace": e.ns},
		"spec":     map[string]any{"workers": int64(2)},
	}}
	var created *unstructured.Unstructured
	err := harness.Eventually(e.ctx, "create Trainer", 60*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		created, err = dyn.Resource(trainerGVR).Namespace(e.ns).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		e.fatal("trainer: %v", err)
	}
	return metav1.OwnerReference{APIVersion: crdGroup + "/v1", Kind: "Trainer", Name: name, UID: created.GetUID(), Controller: ptr.To(true)}
}

// report runs the plugin with -o json and decodes the report.
func (e *env) report(args ...string) (pdbblockers.Report, plugintest.Result) {
	e.t.Helper()
	args = append([]string{"--kubeconfig", e.cp.Kubeconfig, "-o", "json"}, args...)
	r := plugintest.Run(e.t, bin, args...)
	e.t.Logf("%s %s: exit %d in %s", bin, strings.Join(args[3:], " "), r.ExitCode, r.Duration.Round(time.Millisecond))
	var rep pdbblockers.Report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		e.fatal("decoding the report: %v\n%s", err, r)
	}
	return rep, r
}

func podKey(ns, name string) string { return fmt.Sprintf("%s/%s", ns, name) }

func harnessPodSpec() corev1.PodSpec { return harness.PodSpec(0) }
