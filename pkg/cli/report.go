package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Group is the API group of every report the suite prints.
const Group = "gpufleet.dev"

// APIVersion is the version of the report schema of the kinds whose
// schema has not changed since the first release. Field names and enum
// values within a version never change meaning; additions are backwards
// compatible. A kind whose schema changed carries a later version
// (ReportAPIVersion).
const APIVersion = Group + "/v1alpha1"

// APIVersionV1Alpha2 is the version of the reports whose status enums
// became the suite's status words in lower case ("ok", "warn", "fail",
// "wait", "blocked", ...) where v1alpha1 had each plugin's own words
// ("edge", "violation", "PASS", "Later", "Never", "MigrationNeeded").
const APIVersionV1Alpha2 = Group + "/v1alpha2"

// APIVersionV1Alpha3 is the version of the reports whose status enums
// became the suite's words in lower case after v1alpha2: a pre-flight
// gate's status ("ok", "warn", "unknown", "fail" where v1alpha2 wrote
// pkg/preflight's "PASS", "WARN", "UNKNOWN", "FAIL"), the fleet
// inventory's saved pre-flight verdict, which copies it, and a drain
// blocker's kind (kebab-case, the casing of the suite's multi-word enum
// values).
const APIVersionV1Alpha3 = Group + "/v1alpha3"

// v1alpha2Kinds are the report kinds at APIVersionV1Alpha2: those that
// carry a skew status, an eviction outcome, a GPU node status, a CRD
// verdict, run outcome or webhook health, or a deprecated API's status.
var v1alpha2Kinds = map[string]bool{
	"SkewReport": true, "SkewReportList": true,
	"SkewPlanReport":    true,
	"GPUValidateReport": true, "GPUValidateReportList": true,
	"CRDStatusReport": true, "CRDStatusReportList": true,
	// A CRD's run outcome (Migrated, NothingToDo, Failed, Incomplete)
	// became the table's word (done, ok, fail, error).
	"CRDMigrationReport": true,
	// A finding's status (removed, deprecated) became the table's word
	// (fail, warn), and a webhook's health (OK, Down) ok or fail.
	"DeprecationsReport": true, "DeprecationsReportList": true,
	"FixHelmReport": true,
	// A verify regression's status (PASS, WARN, UNKNOWN, FAIL) became the
	// table's word (ok, warn, unknown, fail).
	"SkewVerifyReport": true,
}

// v1alpha3Kinds are the report kinds at APIVersionV1Alpha3: those that
// carry a pre-flight gate's status, which moved after their skew status
// had already taken them to v1alpha2, and those that carry a drain
// blocker's kind, which became kebab-case ("budget-exhausted" where it
// was "BudgetExhausted") after their eviction outcome had.
var v1alpha3Kinds = map[string]bool{
	"SkewPreflightReport": true, "SkewPreflightReportList": true,
	"FleetInventory":    true,
	"PDBBlockersReport": true, "PDBBlockersReportList": true,
	"GangDrainPlan": true,
}

// ReportAPIVersion is the apiVersion of a report of the given kind.
func ReportAPIVersion(kind string) string {
	if v1alpha3Kinds[kind] {
		return APIVersionV1Alpha3
	}
	if v1alpha2Kinds[kind] {
		return APIVersionV1Alpha2
	}
	return APIVersion
}

// Metadata says where a report comes from, so concatenated outputs of a
// loop over contexts explain themselves.
type Metadata struct {
	Context       string `json:"context,omitempty"`
	Server        string `json:"server,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
}

// Header opens every report: embed it (without a field name) in a report
// struct so apiVersion, kind and metadata come first.
type Header struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
}

// NewHeader returns the header for a report of the given kind.
func NewHeader(kind string, md Metadata) Header {
	return Header{APIVersion: ReportAPIVersion(kind), Kind: kind, Metadata: md}
}

// ContextReport is one context's entry in a multi-context report: either the
// report or the error that stopped it.
type ContextReport struct {
	Context  string `json:"context"`
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exitCode"`
	Report   any    `json:"report,omitempty"`
}

// ReportList groups the reports of several contexts (kind <Kind>List).
type ReportList struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Items      []ContextReport `json:"items"`
}

// PrintStructured writes obj as JSON (two-space indent) or YAML.
func PrintStructured(w io.Writer, format string, obj any) error {
	var (
		data []byte
		err  error
	)
	switch format {
	case OutputJSON:
		// No HTML escaping: reports are read by people and jq, not browsers,
		// and "->" must not turn into "-\u003e".
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(obj)
		data = buf.Bytes()
	case OutputYAML:
		data, err = yaml.Marshal(obj)
	default:
		return fmt.Errorf("output format %q is not structured", format)
	}
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	_, err = w.Write(data)
	return err
}
