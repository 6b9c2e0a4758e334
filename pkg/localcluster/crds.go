package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// fieldManager owns what the cluster applies server-side.
const fieldManager = "gpufleet-e2e"

// APIExtensions returns a clientset for CustomResourceDefinitions.
func (cp *Cluster) APIExtensions() apiextensionsclient.Interface {
	return apiextensionsclient.NewForConfigOrDie(cp.Config)
}

// LoadCRDs reads every CustomResourceDefinition in the YAML files of dir.
func LoadCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			out = append(out, crd)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ApplyCRDs applies the CRDs server-side and waits until they are
// Established.
func (cp *Cluster) ApplyCRDs(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	c := cp.APIExtensions().ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		crd.ResourceVersion, crd.Status = "", apiextensionsv1.CustomResourceDefinitionStatus{}
		body, err := json.Marshal(crd)
		if err != nil {
			return err
		}
		if _, err := c.Patch(ctx, crd.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		name := crd.Name
		if err := Eventually(ctx, "CRD "+name+" Established", 60*time.Second, func(ctx context.Context) (bool, error) {
			got, err := c.Get(ctx, name, getOpts)
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}
