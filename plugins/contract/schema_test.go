package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// schemaDir holds one JSON Schema per report kind (docs/output-schemas.md).
const schemaDir = "../../docs/schemas"

// compileSchemas compiles every docs/schemas/<Kind>.json, by kind.
func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema under %s: %v", schemaDir, err)
	}
	c := jsonschema.NewCompiler()
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(abs)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = sch
	}
	return out
}

// reportGoldens are the -o json and -o yaml goldens of every plugin.
func reportGoldens(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"../*/testdata/*.json.golden", "../*/testdata/*.yaml.golden"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatal("no -o json or -o yaml golden under plugins/*/testdata")
	}
	return out
}

// decodeReport reads a JSON or YAML golden as JSON Schema validates it.
func decodeReport(path string) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(path, ".yaml.golden") {
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return nil, err
		}
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// Every report golden validates against the schema of its kind, whose
// apiVersion and status enums it must use.
func TestReportGoldensMatchSchemas(t *testing.T) {
	schemas := compileSchemas(t)
	for _, path := range reportGoldens(t) {
		doc, err := decodeReport(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		kind, _ := doc.(map[string]any)["kind"].(string)
		sch, ok := schemas[kind]
		if !ok {
			t.Errorf("%s: no schema for kind %q under %s", path, kind, schemaDir)
			continue
		}
		if err := sch.Validate(doc); err != nil {
			t.Errorf("%s does not match %s.json:\n%v", path, kind, err)
		}
	}
}

// A schema refuses a report with a status word outside its enum, the
// casing of an earlier version, or an earlier apiVersion: the test above
// fails when a report drifts.
func TestReportSchemasRefuseOtherWords(t *testing.T) {
	schemas := compileSchemas(t)
	for _, c := range []struct {
		golden, kind string
		mutate       func(map[string]any)
	}{
		{"../skew/testdata/check.json.golden", "SkewReport", func(m map[string]any) { item(m, "items", 0)["status"] = "violation" }},
		{"../skew/testdata/check.json.golden", "SkewReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersion }},
		{"../skew/testdata/plan.json.golden", "SkewPlanReport", func(m map[string]any) { item(m, "pools", 0)["status"] = "edge" }},
		{"../gpuvalidate/testdata/wave.json.golden", "GPUValidateReport", func(m map[string]any) { item(m, "items", 0)["status"] = "PASS" }},
		{"../pdbblockers/testdata/mixed.json.golden", "PDBBlockersReport", func(m map[string]any) { item(m, "items", 0)["verdict"] = "Later" }},
		{"../pdbblockers/testdata/mixed.json.golden", "PDBBlockersReport", func(m map[string]any) { item(m, "nodes", 0)["verdict"] = "Never" }},
		{"../crdmigrate/testdata/status.json.golden", "CRDStatusReport", func(m map[string]any) { item(m, "items", 0)["verdict"] = "UpToDate" }},
		{"../crdmigrate/testdata/status.json.golden", "CRDStatusReport", func(m map[string]any) { item(m, "items", 1)["conversionWebhook"].(map[string]any)["health"] = "Down" }},
		{"../crdmigrate/testdata/status.json.golden", "CRDStatusReport", func(m map[string]any) { item(item(m, "items", 2), "webhooks", 0)["health"] = "OK" }},
		{"../deprecations/testdata/ci.json.golden", "DeprecationsReport", func(m map[string]any) { item(m, "items", 0)["status"] = "FAIL" }},
		{"../deprecations/testdata/ci.json.golden", "DeprecationsReport", func(m map[string]any) { item(m, "items", 0)["status"] = "removed" }},
		{"../deprecations/testdata/ci.json.golden", "DeprecationsReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersion }},
	} {
		doc, err := decodeReport(c.golden)
		if err != nil {
			t.Fatal(err)
		}
		m := doc.(map[string]any)
		if err := schemas[c.kind].Validate(m); err != nil {
			t.Fatalf("%s does not match %s.json before the change: %v", c.golden, c.kind, err)
		}
		c.mutate(m)
		if err := schemas[c.kind].Validate(m); err == nil {
			t.Errorf("%s.json accepts %s changed to %v", c.kind, c.golden, mustJSON(m))
		}
	}
}

// The status enums of the schemas ($defs status, and a webhook's health)
// are pkg/cli's status words in lower case: one vocabulary, one casing.
func TestReportSchemaStatusesAreTheSuiteWords(t *testing.T) {
	words := cli.JSONStatuses()
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	for _, f := range files {
		var s struct {
			Defs map[string]struct {
				Enum []string `json:"enum"`
			} `json:"$defs"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, def := range []string{"status", "health"} {
			for _, w := range s.Defs[def].Enum {
				if !slices.Contains(words, w) {
					t.Errorf("%s: %s %q is not one of pkg/cli's words in lower case %v", f, def, w, words)
				}
			}
		}
	}
}

func item(m map[string]any, list string, i int) map[string]any {
	return m[list].([]any)[i].(map[string]any)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		b = append(b[:300], "..."...)
	}
	return string(b)
}
