package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// fieldManager owns what the scenario applies.
const fieldManager = "gpufleet-demo"

// JobSetGVR is the resource of the training gang.
var JobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// Create builds the scenario on cp and returns a summary to print, one line
// per item. queueing says whether Kueue and JobSet run; without them the
// manifests that need them are left out.
func (s *Scenario) Create(ctx context.Context, cp *localcluster.Cluster, queueing bool) (string, error) {
	var sb strings.Builder
	var created []string
	for _, p := range s.Pools {
		pool := localcluster.GPUPool{Name: p.Name, Nodes: p.Nodes, KubeletVersion: p.KubeletVersion, RackSets: p.RackSets}
		nodes, err := cp.CreateGPUNodes(ctx, pool)
		if err != nil {
			return "", err
		}
		for _, n := range nodes {
			created = append(created, n.Name)
		}
		fmt.Fprintf(&sb, "  pool %-7s %d nodes x 8 nvidia.com/gpu, kubelet %s\n", p.Name, p.Nodes, p.KubeletVersion)
	}
	// Pods placed before the new nodes lose their not-ready taints avoid them.
	if err := cp.WaitSchedulable(ctx, created...); err != nil {
		return "", err
	}
	a, err := newApplier(cp.Config)
	if err != nil {
		return "", err
	}
	for _, m := range s.Manifests {
		if m.Needs == "queueing" && !queueing {
			fmt.Fprintf(&sb, "  %s left out: Kueue and JobSet are not running\n", m.File)
			continue
		}
		objs, err := ReadObjects(filepath.Join(s.Dir, m.File))
		if err != nil {
			return "", err
		}
		for _, o := range objs {
			if err := a.apply(ctx, o); err != nil {
				return "", fmt.Errorf("%s: %w", m.File, err)
			}
			fmt.Fprintf(&sb, "  %s\n", describe(o))
		}
		for _, o := range objs {
			if err := a.wait(ctx, o); err != nil {
				return "", fmt.Errorf("%s: %w", m.File, err)
			}
		}
	}
	for _, mv := range s.StorageVersionMoves {
		if err := moveStorage(ctx, cp, mv); err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "  CRD %s: storage version moved to %s; status.storedVersions still lists the old one\n", mv.CRD, mv.To)
	}
	for _, c := range s.DeprecatedCalls {
		if err := deprecatedCall(ctx, cp.Config, c); err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "  %q called GET %s (deprecated)\n", c.UserAgent, c.Get)
	}
	if queueing && s.Gang.JobSet != "" && s.Gang.LastCheckpointAge.Duration > 0 {
		at := time.Now().Add(-s.Gang.LastCheckpointAge.Duration)
		t := checkpoint.Target{Resource: JobSetGVR, Namespace: s.Gang.Namespace, Name: s.Gang.JobSet}
		if err := checkpoint.Patch(ctx, a.dyn, t, map[string]any{checkpoint.DefaultKeys().LastCheckpointAt(): checkpoint.FormatTime(at)}); err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "  gang %s/%s: last checkpoint %s ago\n", s.Gang.Namespace, s.Gang.JobSet, s.Gang.LastCheckpointAge.Duration)
	}
	return sb.String(), nil
}

func describe(o *unstructured.Unstructured) string {
	name := o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return o.GetKind() + " " + name
}

// ReadObjects reads every object of a multi-document YAML file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if err == io.EOF {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		// Unstructured's own decoder keeps integers int64, as the
		// unstructured helpers expect.
		o := &unstructured.Unstructured{}
		if err := o.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if o.GetKind() == "" || o.GetName() == "" {
			return nil, fmt.Errorf("%s: an object without kind or name", path)
		}
		out = append(out, o)
	}
}

type applier struct {
	dyn    dynamic.Interface
	kube   kubernetes.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*applier, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &applier{dyn: dyn, kube: kube, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

// resource maps an object's kind to its resource, rereading discovery for
// kinds a CRD applied a moment ago introduced.
func (a *applier) resource(ctx context.Context, o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	var m *meta.RESTMapping
	err := localcluster.Eventually(ctx, "the resource of "+gvk.String(), 60*time.Second, func(context.Context) (bool, error) {
		var err error
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			a.mapper.Reset()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// apply applies o server-side, retrying while a webhook or a new CRD is
// not ready yet.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.resource(ctx, o)
	if err != nil {
		return err
	}
	var last error
	err = localcluster.Eventually(ctx, "applying "+describe(o), 60*time.Second, func(ctx context.Context) (bool, error) {
		_, last = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
		if last != nil && (apierrors.IsInvalid(last) || apierrors.IsBadRequest(last)) {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%s: %w", describe(o), last)
	}
	return err
}

// wait waits until o is in use: CRDs Established, ClusterQueues active,
// Deployments and JobSets with their pods Ready, PDBs counted.
func (a *applier) wait(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.resource(ctx, o)
	if err != nil {
		return err
	}
	get := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return ri.Get(ctx, o.GetName(), metav1.GetOptions{})
	}
	what := describe(o)
	switch o.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
		return localcluster.Eventually(ctx, what+" Established", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := get(ctx)
			return err == nil && condition(u, string(apiextensionsv1.Established)), nil
		})
	case schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "ClusterQueue"}:
		return localcluster.Eventually(ctx, what+" active", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := get(ctx)
			return err == nil && condition(u, "Active"), nil
		})
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		n, _, _ := unstructured.NestedInt64(o.Object, "spec", "replicas")
		return a.podsReady(ctx, o.GetNamespace(), "app="+o.GetLabels()["app"], int(n))
	case schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}:
		return a.podsReady(ctx, o.GetNamespace(), "jobset.sigs.k8s.io/jobset-name="+o.GetName(), jobSetPods(o))
	case schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}:
		return localcluster.Eventually(ctx, what+" counted", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := get(ctx)
			if err != nil {
				return false, nil
			}
			gen := u.GetGeneration()
			obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			exp, _, _ := unstructured.NestedInt64(u.Object, "status", "expectedPods")
			return obs >= gen && exp > 0, nil
		})
	}
	return nil
}

func (a *applier) podsReady(ctx context.Context, ns, selector string, n int) error {
	if n <= 0 {
		return nil
	}
	return localcluster.Eventually(ctx, fmt.Sprintf("%d Ready pods %s in %s", n, selector, ns), 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := a.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range pods.Items {
			if localcluster.PodReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready >= n, nil
	})
}

// jobSetPods counts the pods a JobSet runs: replicas x parallelism of each
// replicated job.
func jobSetPods(o *unstructured.Unstructured) int {
	rjs, _, _ := unstructured.NestedSlice(o.Object, "spec", "replicatedJobs")
	n := 0
	for _, rj := range rjs {
		m, ok := rj.(map[string]any)
		if !ok {
			continue
		}
		replicas, found, _ := unstructured.NestedInt64(m, "replicas")
		if !found {
			replicas = 1
		}
		par, found, _ := unstructured.NestedInt64(m, "template", "spec", "parallelism")
		if !found {
			par = 1
		}
		n += int(replicas * par)
	}
	return n
}

func condition(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// moveStorage makes mv.To the only storage version of the CRD.
func moveStorage(ctx context.Context, cp *localcluster.Cluster, mv StorageVersionMove) error {
	c := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	crd, err := c.Get(ctx, mv.CRD, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("storage move: %w", err)
	}
	var versions []map[string]any
	found := false
	for _, v := range crd.Spec.Versions {
		versions = append(versions, map[string]any{"name": v.Name, "storage": v.Name == mv.To})
		found = found || v.Name == mv.To
	}
	if !found {
		return fmt.Errorf("storage move: CRD %s has no version %s", mv.CRD, mv.To)
	}
	// A JSON patch of the storage flags alone keeps the rest as applied.
	var ops []map[string]any
	for i, v := range versions {
		ops = append(ops, map[string]any{"op": "replace", "path": fmt.Sprintf("/spec/versions/%d/storage", i), "value": v["storage"]})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := c.Patch(ctx, mv.CRD, types.JSONPatchType, body, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("storage move of %s: %w", mv.CRD, err)
	}
	return localcluster.Eventually(ctx, "CRD "+mv.CRD+" storedVersions lists "+mv.To, 60*time.Second, func(ctx context.Context) (bool, error) {
		got, err := c.Get(ctx, mv.CRD, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, v := range got.Status.StoredVersions {
			if v == mv.To {
				return true, nil
			}
		}
		return false, nil
	})
}

// deprecatedCall makes the GET as the old client would, so that
// apiserver_requested_deprecated_apis and the audit log record it.
func deprecatedCall(ctx context.Context, cfg *rest.Config, call DeprecatedCall) error {
	c := rest.CopyConfig(cfg)
	c.UserAgent = call.UserAgent
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	if err := cs.Discovery().RESTClient().Get().AbsPath(call.Get).Do(ctx).Error(); err != nil {
		return fmt.Errorf("deprecated call GET %s: %w", call.Get, err)
	}
	return nil
}
