package harness

import (
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// MultiVersionCRD returns a namespaced CRD <plural>.<group> of kind that
// serves every version in versions (schema: an open spec object with an
// optional string field "size"), storing storageVersion. Conversion is None,
// so the stored objects keep the version they were written in until
// migrated, and status.storedVersions grows as the storage version moves.
func MultiVersionCRD(group, kind, plural string, versions []string, storageVersion string) *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type:                   "object",
				XPreserveUnknownFields: ptr.To(true),
				Properties:             map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: "string"}},
			},
			"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
		},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List",
			},
			Scope:      apiextensionsv1.NamespaceScoped,
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name:    v,
			Served:  true,
			Storage: v == storageVersion,
			Schema:  &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema.DeepCopy()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{
				Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
			},
		})
	}
	return crd
}
