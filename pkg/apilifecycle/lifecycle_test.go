package apilifecycle

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

type lifecycle interface {
	APILifecycleIntroduced() (int, int)
}
type deprecated interface {
	APILifecycleDeprecated() (int, int)
}
type removed interface {
	APILifecycleRemoved() (int, int)
}
type replaced interface {
	APILifecycleReplacement() schema.GroupVersionKind
}

// markerEntry reads the lifecycle of a registered type by reflection, the
// way the apiserver does.
func markerEntry(gvk schema.GroupVersionKind, t reflect.Type) (Entry, bool) {
	obj := reflect.New(t).Interface()
	in, ok := obj.(lifecycle)
	if !ok {
		return Entry{}, false
	}
	e := Entry{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	e.Introduced = R(in.APILifecycleIntroduced())
	if d, ok := obj.(deprecated); ok {
		e.Deprecated = R(d.APILifecycleDeprecated())
	}
	if r, ok := obj.(removed); ok {
		e.Removed = R(r.APILifecycleRemoved())
	}
	if r, ok := obj.(replaced); ok {
		g := r.APILifecycleReplacement()
		e.Replacement = GVK{Group: g.Group, Version: g.Version, Kind: strings.TrimSuffix(g.Kind, "List")}
	}
	return e, true
}

func checkScheme(t *testing.T, s *runtime.Scheme, prefix string) int {
	t.Helper()
	n := 0
	for gvk, typ := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if !strings.HasPrefix(typ.PkgPath(), prefix) || typ.Name() != gvk.Kind {
			continue
		}
		want, ok := markerEntry(gvk, typ)
		if !ok {
			continue
		}
		n++
		got, ok := Builtin().LookupGVK(gvk.Group, gvk.Version, gvk.Kind)
		if !ok {
			t.Errorf("%v: missing from the table", gvk)
			continue
		}
		if want.Replacement.IsZero() && strings.Contains(got.Source, "; replacement: ") {
			// replacements.yaml adds what the markers do not carry.
			got.Replacement = GVK{}
		}
		got.Resource, got.Source, got.ReplacementAvailable = "", "", Release{}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%v: table differs from the markers (-markers +table):\n%s", gvk, d)
		}
	}
	return n
}

// TestBuiltinMatchesMarkers checks the committed table against the markers
// compiled into the k8s.io/api and k8s.io/apiextensions-apiserver this
// module requires: run go generate when it fails after a bump.
func TestBuiltinMatchesMarkers(t *testing.T) {
	if n := checkScheme(t, scheme.Scheme, "k8s.io/api/"); n < 100 {
		t.Errorf("only %d k8s.io/api kinds carry markers; the scheme walk is broken", n)
	}
	s := runtime.NewScheme()
	if err := apiextv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if n := checkScheme(t, s, "k8s.io/apiextensions-apiserver/"); n == 0 {
		t.Error("no apiextensions kinds carry markers")
	}
	if !strings.HasPrefix(builtinSource, "k8s.io/api@v") {
		t.Errorf("builtinSource = %q", builtinSource)
	}
}

// TestBuiltinDeletedKinds checks kinds that only older releases declare.
func TestBuiltinDeletedKinds(t *testing.T) {
	for _, tc := range []struct {
		apiVersion, kind string
		removed          Release
	}{
		{"policy/v1beta1", "PodSecurityPolicy", R(1, 25)},
		{"extensions/v1beta1", "PodSecurityPolicy", R(1, 16)},
		{"autoscaling/v2beta1", "HorizontalPodAutoscaler", R(1, 25)},
		{"autoscaling/v2beta2", "HorizontalPodAutoscaler", R(1, 26)},
		{"apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", R(1, 22)},
		{"apiregistration.k8s.io/v1beta1", "APIService", R(1, 22)},
		{"resource.k8s.io/v1alpha2", "ResourceClaim", R(1, 32)},
		{"extensions/v1beta1", "Ingress", R(1, 22)},
		{"batch/v1beta1", "CronJob", R(1, 25)},
		{"flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", R(1, 26)},
		{"flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", R(1, 29)},
		{"flowcontrol.apiserver.k8s.io/v1beta3", "PriorityLevelConfiguration", R(1, 32)},
	} {
		e, ok := Builtin().Lookup(tc.apiVersion, tc.kind)
		if !ok {
			t.Errorf("%s %s: missing", tc.apiVersion, tc.kind)
			continue
		}
		if e.Removed != tc.removed {
			t.Errorf("%s %s: removed %v, want %v", tc.apiVersion, tc.kind, e.Removed, tc.removed)
		}
	}
	e, _ := Builtin().Lookup("batch/v1beta1", "CronJob")
	if want := (GVK{"batch", "v1", "CronJob"}); e.Replacement != want || e.ReplacementAvailable != R(1, 21) {
		t.Errorf("CronJob replacement %v in %v", e.Replacement, e.ReplacementAvailable)
	}
	if e, ok := Builtin().LookupResource("resource.k8s.io", "v1beta1", "resourceslices"); !ok || e.Kind != "ResourceSlice" {
		t.Errorf("LookupResource resourceslices = %v, %v", e, ok)
	}
}

func TestStatusAt(t *testing.T) {
	e, _ := Builtin().Lookup("resource.k8s.io/v1beta1", "ResourceSlice")
	for _, tc := range []struct {
		target Release
		want   Status
	}{{R(1, 34), StatusOK}, {R(1, 35), StatusDeprecated}, {R(1, 37), StatusDeprecated}, {R(1, 38), StatusRemoved}, {R(1, 40), StatusRemoved}} {
		if got := e.StatusAt(tc.target); got != tc.want {
			t.Errorf("StatusAt(%v) = %v, want %v", tc.target, got, tc.want)
		}
	}
}

func TestParseRelease(t *testing.T) {
	for in, want := range map[string]Release{"v1.35": R(1, 35), "1.35": R(1, 35), "v1.35.2": R(1, 35), "1.36.0-beta.0": R(1, 36), "": {}} {
		got, err := ParseRelease(in)
		if err != nil || got != want {
			t.Errorf("ParseRelease(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"1", "x.y", "v1.35.x", "1.2.3.4", "-1.2"} {
		if _, err := ParseRelease(in); err == nil {
			t.Errorf("ParseRelease(%q): want error", in)
		}
	}
}

// TestDRAReplacements: the DRA beta kinds name their GA replacement, which
// their markers do not carry (replacements.yaml holds it, with its source).
func TestDRAReplacements(t *testing.T) {
	for _, v := range []string{"v1beta1", "v1beta2"} {
		for _, kind := range []string{"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"} {
			e, ok := Builtin().Lookup("resource.k8s.io/"+v, kind)
			if !ok {
				t.Errorf("resource.k8s.io/%s %s: missing", v, kind)
				continue
			}
			if want := (GVK{"resource.k8s.io", "v1", kind}); e.Replacement != want || e.ReplacementAvailable != R(1, 34) {
				t.Errorf("resource.k8s.io/%s %s: replacement %v since %v, want %v since 1.34", v, kind, e.Replacement, e.ReplacementAvailable, want)
			}
			if !strings.Contains(e.Source, "kubernetes.io") {
				t.Errorf("resource.k8s.io/%s %s: source %q does not cite upstream", v, kind, e.Source)
			}
		}
	}
}

func TestReplacementsFileBad(t *testing.T) {
	for _, data := range []string{
		"replacements: [{apiVersion: resource.k8s.io/v1beta1, kinds: [Nope], replacement: resource.k8s.io/v1, replacementAvailable: '1.34', source: x, date: d}]",
		"replacements: [{apiVersion: resource.k8s.io/v1beta1, kinds: [ResourceClaim], replacement: resource.k8s.io/v1, replacementAvailable: '1.34'}]",
		"replacements: [{apiVersion: resource.k8s.io/v1beta1, typo: 1}]",
	} {
		if _, err := withReplacements(builtin, []byte(data)); err == nil {
			t.Errorf("accepted %s", data)
		}
	}
}
