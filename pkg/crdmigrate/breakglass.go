package crdmigrate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationBreakGlass is set on a CustomResourceDefinition by a forced
// run (`crd-migrate run --force`): it rewrites every object and rewrites
// status.storedVersions even when nothing asks for it, so the CRD keeps
// who did it and when. The value is "<what> by <user> at <RFC 3339 time>".
const AnnotationBreakGlass = "gpufleet.dev/break-glass"

// BreakGlassValue is the annotation's value.
func BreakGlassValue(what, who string, at time.Time) string {
	if who == "" {
		who = "unknown"
	}
	return fmt.Sprintf("%s by %s at %s", what, who, at.UTC().Format(time.RFC3339))
}

// RecordBreakGlass writes the break-glass annotation onto the CRD with a
// merge patch (get and update of the CRD's status alone cannot carry
// metadata: the /status subresource resets annotations).
func RecordBreakGlass(ctx context.Context, c Clients, crd, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationBreakGlass: value}}})
	if err != nil {
		return err
	}
	_, err = c.Ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: ManagedBy})
	if err != nil {
		return fmt.Errorf("recording %s on customresourcedefinition %s: %w", AnnotationBreakGlass, crd, err)
	}
	return nil
}
