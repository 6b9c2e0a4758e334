package fleetrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// Cluster API's versions, newest first: v1beta2 is the storage version of
// cluster.x-k8s.io since v1.11, and v1beta1 is still served
// (kubernetes-sigs/cluster-api v1.14.0 core/config/crd/bases).
var capiVersions = []string{"v1beta2", "v1beta1"}

// capiRef is a Cluster API Cluster on its management cluster.
type capiRef struct {
	dyn       dynamic.Interface
	version   string
	namespace string
	name      string
	context   string
}

func (c capiRef) gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: c.version, Resource: resource}
}

func (c capiRef) String() string {
	return fmt.Sprintf("Cluster %s/%s (context %s)", c.namespace, c.name, c.context)
}

// managementClient reaches a Cluster API management cluster. Where the
// run's kubeconfigs are Secrets (spec.credentials), a step pod has no
// kubeconfig contexts: the management cluster's kubeconfig is the Secret
// named for managementContext as for a cluster ("{{.Cluster}}-kubeconfig"
// by default; its context managementContext, else the kubeconfig's
// current one), which render grants the step pods. Without that Secret
// (a run by hand), or without credentials, it is the kubeconfig context.
func (a *Access) managementClient(ctx context.Context, managementContext string) (dynamic.Interface, error) {
	getter := a.Getter.ForContext(managementContext)
	if a.Credentials != nil {
		t, err := a.ForCluster(ctx, managementContext, managementContext)
		switch {
		case err == nil:
			getter = t.Getter
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	dyn, err := getter.Dynamic()
	if err != nil {
		if a.Credentials != nil {
			err = fmt.Errorf("%w (and no Secret %s/%s holds its kubeconfig)", err, a.Credentials.SecretNamespace, a.Credentials.SecretName(managementContext))
		}
		return nil, cli.UsageErr(err)
	}
	return dyn, nil
}

// capiCluster reads the step's Cluster object from the management cluster.
func (r *stepRun) capiCluster(ctx context.Context, a *fleetfile.ClusterAPIAction) (capiRef, *unstructured.Unstructured, error) {
	dyn, err := r.p.Access.managementClient(ctx, a.ManagementContext)
	if err != nil {
		return capiRef{}, nil, err
	}
	ref := capiRef{dyn: dyn, namespace: a.Namespace, name: a.ClusterName, context: a.ManagementContext}
	if ref.name == "" {
		ref.name = r.cp.Name
	}
	var last error
	for _, v := range capiVersions {
		ref.version = v
		u, err := dyn.Resource(ref.gvr("clusters")).Namespace(ref.namespace).Get(ctx, ref.name, metav1.GetOptions{})
		if err == nil {
			return ref, u, nil
		}
		last = err
	}
	return ref, nil, cli.ClusterErr(fmt.Errorf("reading Cluster %s/%s in context %s: %w", a.Namespace, ref.name, a.ManagementContext, last))
}

// topologies are the names of the Cluster's MachineDeployment topologies
// and, for each, whether it carries defer-upgrade now.
func topologies(u *unstructured.Unstructured) ([]string, map[string]bool) {
	mds, _, _ := unstructured.NestedSlice(u.Object, "spec", "topology", "workers", "machineDeployments")
	var names []string
	deferred := map[string]bool{}
	for _, m := range mds {
		md, _ := m.(map[string]any)
		name, _, _ := unstructured.NestedString(md, "name")
		if name == "" {
			continue
		}
		names = append(names, name)
		ann, _, _ := unstructured.NestedStringMap(md, "metadata", "annotations")
		_, deferred[name] = ann[pkgskew.CAPIDeferUpgradeAnnotation]
	}
	return names, deferred
}

// holdManager is the field manager that owns one topology's hold: one per
// topology, so that releasing one (an apply of nothing under its manager)
// removes that annotation alone, whoever else holds what.
func holdManager(topology string) string {
	m := "gpufleet-hold-" + topology
	if len(m) > 128 {
		m = m[:119] + "-" + strings.TrimPrefix(Digest(topology), "sha256:")[:8]
	}
	return m
}

// applyHold sets (or, with hold false, releases) defer-upgrade on one
// MachineDeployment topology with a server-side apply: the topology list
// is a map keyed by name (x-kubernetes-list-type: map in the Cluster CRD),
// so the applied entry merges into the live one.
func (c capiRef) applyHold(ctx context.Context, topology string, hold bool) error {
	obj := map[string]any{"apiVersion": "cluster.x-k8s.io/" + c.version, "kind": "Cluster",
		"metadata": map[string]any{"name": c.name, "namespace": c.namespace}}
	if hold {
		obj["spec"] = map[string]any{"topology": map[string]any{"workers": map[string]any{"machineDeployments": []any{
			map[string]any{"name": topology, "metadata": map[string]any{"annotations": map[string]any{pkgskew.CAPIDeferUpgradeAnnotation: ""}}},
		}}}}
	}
	body, _ := json.Marshal(obj)
	force := true
	_, err := c.dyn.Resource(c.gvr("clusters")).Namespace(c.namespace).Patch(ctx, c.name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: holdManager(topology), Force: &force})
	if err != nil {
		verb := "setting"
		if !hold {
			verb = "removing"
		}
		return cli.ClusterErr(fmt.Errorf("%s %s on MachineDeployment topology %s of %s: %w", verb, pkgskew.CAPIDeferUpgradeAnnotation, topology, c, err))
	}
	return nil
}

// laterPoolUpgrade reports whether the cluster has a pool upgrade after
// step index idx.
func (r *stepRun) laterPoolUpgrade() bool {
	_, idx, _ := r.cp.Step(r.step.Name)
	for _, s := range r.cp.Steps[idx+1:] {
		if s.Kind == StepPoolUpgrade {
			return true
		}
	}
	return false
}

// capiHoldAll sets defer-upgrade on every MachineDeployment topology of the
// Cluster, as the management cluster's Cluster object lists them, so the
// topology controller does not roll any pool with its own drain when the
// control plane moves: each pool moves at its own upgrade step, after the
// programme's checkpointing drain. The holds are recorded in the state.
func (r *stepRun) capiHoldAll(ctx context.Context, a *fleetfile.ClusterAPIAction) (string, error) {
	ref, u, err := r.capiCluster(ctx, a)
	if err != nil {
		return "", err
	}
	names, _ := topologies(u)
	if len(names) == 0 {
		return fmt.Sprintf("%s has no MachineDeployment topology to hold", ref), nil
	}
	for _, t := range names {
		if err := ref.applyHold(ctx, t, true); err != nil {
			return "", err
		}
	}
	r.mu.Lock()
	for _, t := range names {
		if !slices.Contains(r.state.Holds, t) {
			r.state.Holds = append(r.state.Holds, t)
		}
	}
	r.mu.Unlock()
	return fmt.Sprintf("%s set on MachineDeployment topologies %s of %s", pkgskew.CAPIDeferUpgradeAnnotation, strings.Join(names, ", "), ref), nil
}

// capiRelease lifts the hold of the step's pool (its MachineDeployment's
// topology, by the MachineDeployment's topology label), and, at the
// cluster's last pool upgrade, every hold this run set that no step lifted
// (topologies whose MachineDeployments have no node in the plan). It then
// reads the Cluster back: a topology still deferred (by someone else) would
// never roll.
func (r *stepRun) capiRelease(ctx context.Context, a *fleetfile.ClusterAPIAction) (string, error) {
	if r.step.ControlPlane {
		return "KubeadmControlPlane rolls the control-plane machines with the control plane; no MachineDeployment holds them", nil
	}
	ref, u, err := r.capiCluster(ctx, a)
	if err != nil {
		return "", err
	}
	md, err := ref.dyn.Resource(ref.gvr("machinedeployments")).Namespace(ref.namespace).Get(ctx, r.step.Pool, metav1.GetOptions{})
	if err != nil {
		return "", cli.ClusterErr(fmt.Errorf("reading MachineDeployment %s/%s of pool %s (context %s): %w", ref.namespace, r.step.Pool, r.step.Pool, ref.context, err))
	}
	topology := md.GetLabels()[pkgskew.CAPITopologyDeploymentLabel]
	if topology == "" {
		return fmt.Sprintf("MachineDeployment %s has no %s label: no topology holds it", r.step.Pool, pkgskew.CAPITopologyDeploymentLabel), nil
	}
	release := []string{topology}
	if !r.laterPoolUpgrade() {
		names, _ := topologies(u)
		for _, t := range r.state.Holds {
			if t != topology && slices.Contains(names, t) {
				release = append(release, t)
			}
		}
	}
	for _, t := range release {
		if err := ref.applyHold(ctx, t, false); err != nil {
			return "", err
		}
	}
	r.mu.Lock()
	r.state.Holds = slices.DeleteFunc(r.state.Holds, func(t string) bool { return slices.Contains(release, t) })
	r.mu.Unlock()
	_, after, err := r.capiCluster(ctx, a)
	if err != nil {
		return "", err
	}
	if _, deferred := topologies(after); deferred[topology] {
		return "", fmt.Errorf("MachineDeployment topology %s of %s still carries %s set by another field manager: it will not roll; remove it (kubectl get cluster %s -n %s --show-managed-fields -o yaml shows who set it)",
			topology, ref, pkgskew.CAPIDeferUpgradeAnnotation, ref.name, ref.namespace)
	}
	msg := fmt.Sprintf("%s removed from MachineDeployment topology %s of %s after the pool's drain", pkgskew.CAPIDeferUpgradeAnnotation, topology, ref)
	if len(release) > 1 {
		msg += fmt.Sprintf("; and from %s, which no pool step of this run moves", strings.Join(release[1:], ", "))
	}
	return msg, nil
}

// manualGate waits for a person: exit 4 with what to do (and the
// runbook's commands in the evidence) until the step is approved.
func (r *stepRun) manualGate(ctx context.Context, what string) stepOutcome {
	ds, err := ReadDecisions(ctx, r.p.Store, r.p.Plan.Run)
	if err != nil {
		return stepOutcome{code: cli.ExitUnavailable, message: err.Error()}
	}
	if d, ok := StepApproved(ds, r.cp.Name, r.step.Name); ok {
		return stepOutcome{message: fmt.Sprintf("done by hand, approved by %s at %s: %s", d.By, d.At.Format("2006-01-02T15:04:05Z"), d.Reason)}
	}
	out := stepOutcome{code: cli.ExitIncomplete, message: fmt.Sprintf("waits for a person: %s; when done, `kubectl skew fleet approve --run %s --cluster %s --step %s --reason ...`",
		what, r.p.Plan.Run, r.cp.Name, r.step.Name)}
	if len(r.step.Commands) > 0 {
		out.extra = map[string][]byte{"commands.sh": []byte(strings.Join(r.step.Commands, "\n") + "\n")}
	}
	return out
}
