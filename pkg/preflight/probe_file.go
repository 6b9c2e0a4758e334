package preflight

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ProbeManifest is one object of a probe file: a manifest that a policy
// the probes cannot reason about must deny, such as a pod running an
// unsigned image where image signatures are enforced.
type ProbeManifest struct {
	// Source is the file and the document's number in it.
	Source string
	// Path is the file as given (for the command that replays it).
	Path   string
	Object map[string]any
}

// ParseProbeFile reads the manifests of a probe file (YAML documents or
// JSON, a List's items included). Every document needs apiVersion and
// kind; one without a name gets a generated one. The error is one line.
func ParseProbeFile(path string, data []byte) ([]ProbeManifest, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []ProbeManifest
	for doc := 1; ; doc++ {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("probe file %s: document %d: %s", path, doc, oneLine(err.Error()))
		}
		if len(u.Object) == 0 {
			continue
		}
		items := []unstructured.Unstructured{u}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("probe file %s: document %d: %s", path, doc, oneLine(err.Error()))
			}
			items = l.Items
		}
		for i, it := range items {
			src := fmt.Sprintf("%s#%d", filepath.Base(path), doc)
			if len(items) > 1 || u.IsList() {
				src += fmt.Sprintf(".%d", i+1)
			}
			if it.GetAPIVersion() == "" || it.GetKind() == "" {
				return nil, fmt.Errorf("probe file %s: document %d: apiVersion and kind are required", path, doc)
			}
			if it.GetName() == "" && it.GetGenerateName() == "" {
				it.SetGenerateName(ProbeName + "-")
			}
			out = append(out, ProbeManifest{Source: src, Path: path, Object: it.Object})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("probe file %s: no object in it", path)
	}
	return out, nil
}

// fileProbes turns the probe files' manifests into probes, resolving each
// kind to its resource through discovery. A kind the cluster does not
// serve is an UNKNOWN probe.
func (r *Runner) fileProbes(ctx context.Context) []Probe {
	type res struct {
		name       string
		namespaced bool
	}
	served := map[string]map[string]res{} // apiVersion -> kind -> resource
	var out []Probe
	for _, m := range r.Policy.Probes {
		u := unstructured.Unstructured{Object: m.Object}
		name := u.GetName()
		if name == "" {
			name = u.GetGenerateName() + "*"
		}
		p := Probe{ID: "file/" + m.Source + "/" + u.GetKind() + "/" + name, Ref: "probe-file/" + m.Source, Object: m.Object,
			Control: fmt.Sprintf("probe file %s (%s %s)", m.Source, u.GetKind(), name), Check: "kubectl create --dry-run=server -f " + m.Path}
		kinds, ok := served[u.GetAPIVersion()]
		if !ok && r.Discovery != nil {
			kinds = map[string]res{}
			if l, err := r.Discovery.ServerResourcesForGroupVersion(u.GetAPIVersion()); err == nil {
				for _, ar := range l.APIResources {
					if !strings.Contains(ar.Name, "/") {
						kinds[ar.Kind] = res{ar.Name, ar.Namespaced}
					}
				}
			}
			served[u.GetAPIVersion()] = kinds
		}
		rs, ok := kinds[u.GetKind()]
		if !ok {
			p.Result, p.Message = ProbeUnknown, fmt.Sprintf("%s %s is not served by this cluster (or discovery failed)", u.GetAPIVersion(), u.GetKind())
			if r.Discovery == nil {
				p.Message = "no discovery client to resolve " + u.GetKind()
			}
			out = append(out, p)
			continue
		}
		p.Resource = rs.name
		if rs.namespaced {
			p.Namespace = u.GetNamespace()
			if p.Namespace == "" {
				p.Namespace = metav1.NamespaceDefault
			}
			p.Object = withNamespace(m.Object, p.Namespace)
		}
		out = append(out, p)
	}
	return out
}

// withNamespace returns a copy of obj in namespace ns.
func withNamespace(obj map[string]any, ns string) map[string]any {
	u := unstructured.Unstructured{Object: obj}
	c := u.DeepCopy()
	c.SetNamespace(ns)
	return c.Object
}
