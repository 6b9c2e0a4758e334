package apilifecycle

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestParseRulesOwnFormat(t *testing.T) {
	in := `apiVersion: gpufleet.dev/v1alpha1
kind: APILifecycleTable
items:
- group: example.com
  version: v1beta1
  kind: Widget
  resource: widgets
  deprecated: "1.30"
  removed: v1.33
  replacement: {group: example.com, version: v1, kind: Widget}
  replacementAvailable: "1.29"
`
	r, err := ParseRules([]byte(in), "widgets.yaml")
	got := r.Entries
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Group: "example.com", Version: "v1beta1", Kind: "Widget", Resource: "widgets",
		Deprecated: R(1, 30), Removed: R(1, 33), Replacement: GVK{"example.com", "v1", "Widget"},
		ReplacementAvailable: R(1, 29), Source: "widgets.yaml"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	// A bare JSON list, with version written as group/version.
	r, err = ParseRules([]byte(`[{"version":"example.com/v1beta1","kind":"Widget","removed":"1.33"}]`), "w.json")
	got = r.Entries
	if err != nil || len(got) != 1 || got[0].Group != "example.com" || got[0].Removed != R(1, 33) {
		t.Errorf("list form: %v, %v", got, err)
	}
}

func TestParseRulesRoundTrip(t *testing.T) {
	doc := map[string]any{"apiVersion": "gpufleet.dev/v1alpha1", "kind": RulesKind, "items": Builtin().Entries()}
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRules(b, "x")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Builtin().Entries(), got.Entries); d != "" {
		t.Error(d)
	}
}

func TestParseRulesBad(t *testing.T) {
	for name, in := range map[string]string{
		"empty":     "",
		"not yaml":  "a: [b",
		"no ver":    `[{"kind":"X"}]`,
		"bad ver":   "deprecated-versions:\n- version: a/v1\n  kind: X\n  removed-in: vx\n",
		"other doc": "foo: bar\n",
		// Found by fuzzing: a group with nothing after its slash.
		"group only":       `[{"version":"example.com/","kind":"X"}]`,
		"pluto group only": "deprecated-versions:\n- version: /\n",
	} {
		if _, err := ParseRules([]byte(in), name); err == nil {
			t.Errorf("%s: want error", name)
		}
	}
}

// TestParseRulesPluto reads pluto's own versions file in place.
func TestParseRulesPluto(t *testing.T) {
	path := filepath.Join("..", "..", "..", "shared", "corpus", "peers", "pluto-versions.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("pluto versions file not present: %v", err)
	}
	rules, err := ParseRules(b, "pluto-versions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := rules.Entries
	if rules.ComponentTargets["istio"] != R(1, 11) {
		t.Errorf("istio target = %v", rules.ComponentTargets["istio"])
	}
	if len(got) < 100 {
		t.Fatalf("read %d rows, want over 100", len(got))
	}
	var found bool
	for _, e := range got {
		if e.APIVersion() == "extensions/v1beta1" && e.Kind == "Ingress" {
			found = true
			want := Entry{Group: "extensions", Version: "v1beta1", Kind: "Ingress", Deprecated: R(1, 14), Removed: R(1, 22),
				Replacement: GVK{"networking.k8s.io", "v1", "Ingress"}, ReplacementAvailable: R(1, 19), Source: "pluto-versions.yaml"}
			if d := cmp.Diff(want, e); d != "" {
				t.Error(d)
			}
		}
	}
	if !found {
		t.Error("extensions/v1beta1 Ingress not read")
	}
	// Merged over the built-in table, pluto's rows win.
	tab := Builtin().With(rules)
	if e, ok := tab.Lookup("resource.k8s.io/v1beta1", "ResourceClaim"); !ok || e.Source != "pluto-versions.yaml" {
		t.Errorf("pluto row does not override: %+v", e)
	}
	// A kind-less row covers its whole group version, in its component's releases.
	e, ok := tab.Lookup("authentication.istio.io/v1alpha1", "Policy")
	if !ok || e.Component != "istio" || tab.StatusAt(e, R(1, 20)) != StatusRemoved {
		t.Errorf("istio row: %+v %v", e, ok)
	}
}
