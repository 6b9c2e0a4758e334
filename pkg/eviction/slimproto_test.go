package eviction

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// slimProtoSeeds are pods in JSON as the API server returns them, each
// exercising a field DecodeSlimPod reads or skips.
var slimProtoSeeds = []string{
	// As the e2e scale test's pods come back: defaults, the service
	// account volume, managed fields.
	`{"metadata":{"name":"p-000001","namespace":"team-0000","uid":"00000003-0000-4000-8000-000000000001","resourceVersion":"1002","creationTimestamp":"2026-01-02T03:00:00Z","labels":{"app":"app-00000"},"managedFields":[{"manager":"pdbblockers.test","operation":"Update","apiVersion":"v1","time":"2026-01-02T03:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}}]},"spec":{"volumes":[{"name":"kube-api-access-x","projected":{"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}}],"defaultMode":420}}],"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10","terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"nodeName":"scale-00001","tolerations":[{"operator":"Exists"}]},"status":{"phase":"Running","conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"True","lastTransitionTime":"2026-01-02T03:00:01Z"}],"qosClass":"BestEffort"}}`,
	// Controller among other owners, emptyDir among other volumes,
	// terminating with finalizers, both annotations kept and others dropped.
	`{"metadata":{"name":"a","namespace":"ml","uid":"u-a","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":["x","y"],"annotations":{"karpenter.sh/do-not-disrupt":"true","kubernetes.io/config.mirror":"abc","other":"z"},"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"n1"},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1","uid":"r","controller":true,"blockOwnerDeletion":true},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-2","uid":"r2","controller":true}]},"spec":{"nodeName":"gpu-1","terminationGracePeriodSeconds":-1,"volumes":[{"name":"cfg","configMap":{"name":"c"}},{"name":"s","emptyDir":{"medium":"Memory","sizeLimit":"1Gi"}},{"name":"t","emptyDir":{}}]},"status":{"phase":"Pending"}}`,
	// Two Ready conditions (the last wins in Slim), no labels, no node.
	`{"metadata":{"name":"b","namespace":"ml"},"spec":{},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"},{"type":"Ready","status":"True","lastTransitionTime":"2026-03-04T05:06:07Z","reason":"r","message":"m"}]}}`,
	// Nothing at all.
	`{}`,
	// Empty labels and finalizers: the wire form cannot tell them from
	// absent ones, so both decoders must give nil.
	`{"metadata":{"labels":{},"finalizers":[],"annotations":{}},"spec":{"volumes":[]},"status":{"conditions":[]}}`,
	// Owners without a controller; a Succeeded pod with a zero grace period.
	`{"metadata":{"name":"c","namespace":"ml","labels":{"a":"1","b":""},"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"x","controller":false}]},"spec":{"terminationGracePeriodSeconds":0},"status":{"phase":"Succeeded"}}`,
}

func checkSlimProto(t *testing.T, p *corev1.Pod) {
	t.Helper()
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSlimPod(b)
	if err != nil {
		t.Fatalf("DecodeSlimPod: %v", err)
	}
	// The oracle is the generated protobuf decoder on the same bytes: the
	// wire form carries no difference between an empty map or list and an
	// absent one, which JSON does, so Slim(p) itself is not comparable.
	var want corev1.Pod
	if err := want.Unmarshal(b); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if diff := cmp.Diff(Slim(&want), got); diff != "" {
		t.Errorf("DecodeSlimPod differs from Slim (-Slim +DecodeSlimPod):\n%s", diff)
	}
}

func TestDecodeSlimPodEqualsSlim(t *testing.T) {
	for _, s := range slimProtoSeeds {
		var p corev1.Pod
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			t.Fatal(err)
		}
		checkSlimProto(t, &p)
	}
}

func TestDecodeSlimPodRejectsTruncated(t *testing.T) {
	var p corev1.Pod
	if err := json.Unmarshal([]byte(slimProtoSeeds[0]), &p); err != nil {
		t.Fatal(err)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, len(b) / 2, len(b) - 1} {
		if _, err := DecodeSlimPod(b[:n]); err == nil {
			t.Errorf("%d of %d bytes: no error", n, len(b))
		}
	}
}

// FuzzDecodeSlimPod: for any pod that JSON describes, the protobuf fast
// path returns exactly what Slim does; on arbitrary bytes it never panics.
func FuzzDecodeSlimPod(f *testing.F) {
	for _, s := range slimProtoSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeSlimPod(data)
		var p corev1.Pod
		if json.Unmarshal(data, &p) != nil {
			return
		}
		checkSlimProto(t, &p)
	})
}
