package checkpoint

import (
	"strings"
	"testing"
)

// FuzzParseAnnotations: the checkpoint protocol's annotations are written
// by the training workload, so anything may be in them. Parsing them never
// panics, and a request is found exactly when its key is present.
func FuzzParseAnnotations(f *testing.F) {
	k := DefaultKeys()
	f.Add(k.Request, "requested", k.RequestedAt(), "2026-01-01T10:00:00Z", k.Status(), "Completed", k.HeartbeatAt(), "not a time")
	f.Add(k.Deadline(), "2026-13-45T99:99:99Z", k.CompletedAt(), "", k.Protocol(), "v999", k.LastCheckpointAt(), "\xff\xfe")
	f.Add("", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, k4, v4 string) {
		ann := map[string]string{k1: v1, k2: v2, k3: v3, k4: v4}
		_, ok := k.ParseRequest(ann)
		_, present := ann[k.Request]
		if ok != present {
			t.Fatalf("request found %v, key present %v", ok, present)
		}
		_ = k.ParseResponse(ann)
		_ = k.LastCheckpoint(ann)
		_ = k.SupportOf(ann, ann)
		if _, err := ParseAnnotationFlag(k1); err == nil && strings.TrimSpace(k1) == "" {
			t.Fatalf("empty annotation flag accepted")
		}
	})
}
