package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// schemaDir holds one JSON Schema per report kind (docs/output-schemas.md).
const schemaDir = "../../docs/schemas"

// compileSchemas compiles every docs/schemas/<Kind>.json, by kind. Each
// file is first added under its $id, so that a List kind's schema can
// refer to the schema of its items' kind ("DeprecationsReport.json").
func compileSchemas(t *testing.T) map[string]*jsonschema.Schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schema under %s: %v", schemaDir, err)
	}
	c := jsonschema.NewCompiler()
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		kind := strings.TrimSuffix(filepath.Base(f), ".json")
		if want := schemaIDBase + kind + ".json"; id != want {
			t.Fatalf("%s: $id %q, want %q", f, id, want)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ids[kind] = id
	}
	out := map[string]*jsonschema.Schema{}
	for kind, id := range ids {
		sch, err := c.Compile(id)
		if err != nil {
			t.Fatalf("%s.json: %v", kind, err)
		}
		out[kind] = sch
	}
	return out
}

// schemaIDBase is where every schema's $id lives.
const schemaIDBase = "https://gpufleet.dev/schemas/"

// reportGoldens are the -o json and -o yaml goldens of every plugin: the
// output of each command's unit test, as the plugin prints it.
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
// apiVersion and status enums it must use; every kind a plugin can print
// has a schema and at least one golden that holds it to its schema.
func TestReportGoldensMatchSchemas(t *testing.T) {
	schemas := compileSchemas(t)
	seen := map[string]int{}
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
		seen[kind]++
		if err := sch.Validate(doc); err != nil {
			t.Errorf("%s does not match %s.json:\n%v", path, kind, err)
		}
	}
	kinds := emittedKinds(t)
	for _, kind := range kinds {
		if _, ok := schemas[kind]; !ok {
			t.Errorf("kind %s is printed by a plugin and has no schema: add %s/%s.json and list it in docs/output-schemas.md", kind, schemaDir, kind)
		} else if seen[kind] == 0 {
			t.Errorf("kind %s has a schema but no -o json or -o yaml golden under plugins/*/testdata holds it to the schema", kind)
		}
	}
	for kind := range schemas {
		if !slices.Contains(kinds, kind) {
			t.Errorf("%s/%s.json is the schema of a kind no plugin prints", schemaDir, kind)
		}
	}
	doc, err := os.ReadFile("../../docs/output-schemas.md")
	if err != nil {
		t.Fatal(err)
	}
	for kind := range schemas {
		if row := "| `" + kind + "` |"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/output-schemas.md has no row for %s", kind)
		}
	}
}

// emittedKinds are the report kinds the plugins print: the first
// argument of every cli.NewHeader and cli.ReportAPIVersion call in
// plugins/*, a string or a string constant of the plugin (or a sum of
// them, "PDBBlockersReport" + "List").
func emittedKinds(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("../*")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			consts := map[string]string{}
			for _, f := range pkg.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					if vs, ok := n.(*ast.ValueSpec); ok {
						for i, name := range vs.Names {
							if i < len(vs.Values) {
								if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
									consts[name.Name], _ = strconv.Unquote(lit.Value)
								}
							}
						}
					}
					return true
				})
			}
			var eval func(e ast.Expr) (string, bool)
			eval = func(e ast.Expr) (string, bool) {
				switch e := e.(type) {
				case *ast.BasicLit:
					v, err := strconv.Unquote(e.Value)
					return v, err == nil
				case *ast.Ident:
					v, ok := consts[e.Name]
					return v, ok
				case *ast.BinaryExpr:
					a, ok1 := eval(e.X)
					b, ok2 := eval(e.Y)
					return a + b, ok1 && ok2 && e.Op == token.ADD
				}
				return "", false
			}
			for _, f := range pkg.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok || len(call.Args) == 0 {
						return true
					}
					sel, ok := call.Fun.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, isIdent := sel.X.(*ast.Ident); !isIdent || x.Name != "cli" || (sel.Sel.Name != "NewHeader" && sel.Sel.Name != "ReportAPIVersion") {
						return true
					}
					kind, ok := eval(call.Args[0])
					if !ok && sel.Sel.Name == "ReportAPIVersion" {
						// A header's own kind (h.APIVersion =
						// cli.ReportAPIVersion(h.Kind)), set from a
						// constant the walk reads where it is set.
						return true
					}
					if !ok {
						t.Errorf("%s: the kind of cli.%s is not a string constant", fset.Position(call.Pos()), sel.Sel.Name)
						return true
					}
					if !slices.Contains(kinds, kind) {
						kinds = append(kinds, kind)
					}
					return true
				})
			}
		}
	}
	if len(kinds) < 10 {
		t.Fatalf("found only %v: the walk of plugins/* is broken", kinds)
	}
	slices.Sort(kinds)
	return kinds
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
		{"../crdmigrate/testdata/run.json.golden", "CRDMigrationReport", func(m map[string]any) { item(m, "items", 0)["outcome"] = "Migrated" }},
		{"../crdmigrate/testdata/run.json.golden", "CRDMigrationReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersion }},
		{"../deprecations/testdata/fixhelm.json.golden", "FixHelmReport", func(m map[string]any) { item(item(m, "items", 0), "changes", 0)["status"] = "removed" }},
		{"../gangdrain/testdata/plan.json.golden", "GangDrainPlan", func(m map[string]any) { item(m, "pods", 0)["outcome"] = "Never" }},
		{"../gangdrain/testdata/plan.json.golden", "GangDrainPlan", func(m map[string]any) {
			item(item(m, "pods", 0), "blockers", 0)["kind"] = "MinAvailableEqualsReplicas"
		}},
		{"../gangdrain/testdata/plan.json.golden", "GangDrainPlan", func(m map[string]any) { m["apiVersion"] = cli.APIVersionV1Alpha2 }},
		{"../pdbblockers/testdata/mixed.json.golden", "PDBBlockersReport", func(m map[string]any) {
			item(item(m, "items", 0), "blockers", 0)["kind"] = string(eviction.BlockerBudgetSpent)
		}},
		{"../pdbblockers/testdata/mixed.json.golden", "PDBBlockersReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersionV1Alpha2 }},
		{"../skew/testdata/preflight.json.golden", "SkewPreflightReport", func(m map[string]any) { item(m, "items", 0)["status"] = "edge" }},
		{"../skew/testdata/preflight.json.golden", "SkewPreflightReport", func(m map[string]any) { item(m, "items", 0)["status"] = "PASS" }},
		{"../skew/testdata/preflight.json.golden", "SkewPreflightReport", func(m map[string]any) { m["summary"].(map[string]any)["status"] = "WARN" }},
		{"../skew/testdata/preflight.json.golden", "SkewPreflightReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersionV1Alpha2 }},
		{"../skew/testdata/preflight-contexts.json.golden", "SkewPreflightReportList", func(m map[string]any) { m["apiVersion"] = cli.APIVersionV1Alpha2 }},
		{"../skew/testdata/verify.json.golden", "SkewVerifyReport", func(m map[string]any) { item(m, "items", 0)["status"] = "FAIL" }},
		{"../skew/testdata/verify.json.golden", "SkewVerifyReport", func(m map[string]any) { m["apiVersion"] = cli.APIVersion }},
		{"../crdmigrate/testdata/status-contexts.json.golden", "CRDStatusReportList", func(m map[string]any) {
			item(item(m, "items", 1)["report"].(map[string]any), "items", 0)["verdict"] = "MigrationNeeded"
		}},
		{"../crdmigrate/testdata/status-contexts.json.golden", "CRDStatusReportList", func(m map[string]any) { item(m, "items", 0)["exitCode"] = 7 }},
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

// A blocker kind's enum in the schemas is pkg/eviction's words, every one
// of them: a kind added in Go and not in a schema fails here.
func TestBlockerKindEnumIsEviction(t *testing.T) {
	var want []string
	for _, k := range eviction.BlockerKinds {
		want = append(want, k.JSONWord())
	}
	for _, kind := range []string{"PDBBlockersReport", "GangDrainPlan"} {
		var s struct {
			Defs map[string]struct {
				Enum []string `json:"enum"`
			} `json:"$defs"`
		}
		b, err := os.ReadFile(filepath.Join(schemaDir, kind+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if got := s.Defs["blockerKind"].Enum; !slices.Equal(got, want) {
			t.Errorf("%s.json: blockerKind %v, want pkg/eviction's %v", kind, got, want)
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
