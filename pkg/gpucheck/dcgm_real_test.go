package gpucheck

import (
	"bytes"
	"strings"
	"testing"
)

// TestDCGMRealTables reads the real dcgmi outputs of the shared folder
// (sources in its README).
func TestDCGMRealTables(t *testing.T) {
	cases := []struct {
		file    string
		status  Status
		version string
		tests   int
		message string
	}{
		{"dcgm-4.4.2_diag-r2_pass_1gpu.txt", StatusPass, "4.4.2", 3, "3 tests passed"},
		{"dcgm-3.3.8_diag-r3-fail-early_fail-cuinit_8xH100.txt", StatusFail, "3.3.8", 0,
			"DCGM Hardware/GPU Memory failed: GPU 0 Error using CUDA API cuInit Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics. Unable to initialize CUDA library: 'system not yet initialized'"},
		{"dcgm-4.2.3_diag-r2_pcie-fail-internal-error_4gpu.txt", StatusFail, "4.2.3", 3, "DCGM Integration/pcie could not complete (internal error"},
		{"dcgm-4.4.1_diag-r2_pcie-fail-internal-error_8xB200_slurm.txt", StatusFail, "4.4.1", 3, "DCGM Integration/pcie could not complete"},
		{"dcgm-4.4.1_diag-r3_runtime-error_plugin-dir-missing.txt", StatusFail, "", 0,
			"dcgmi diag runtime error: Unable to complete diagnostic for entities 0,1,2,3. Return: (-30) : DCGM GPU Diagnostic returned an error; Cannot load plugins."},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			r, err := ParseDCGM(bytes.NewReader(readReal(t, "dcgm", tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			fs := DCGMFindings(r)
			var msgs []string
			for _, f := range fs {
				msgs = append(msgs, f.Message)
			}
			if StatusOf(fs) != tc.status || r.Version != tc.version || !strings.Contains(strings.Join(msgs, "\n"), tc.message) {
				t.Errorf("status %s version %q findings %q", StatusOf(fs), r.Version, msgs)
			}
			if tc.tests > 0 && len(r.Tests) != tc.tests {
				t.Errorf("%d tests: %+v", len(r.Tests), r.Tests)
			}
		})
	}
	// 3.3.8: the Info rows under Persistence Mode are not warnings, the
	// skipped PCIe test is not a failure, and all eight GPUs' warnings are
	// read (wrapped over several rows).
	r, _ := ParseDCGM(bytes.NewReader(readReal(t, "dcgm", "dcgm-3.3.8_diag-r3-fail-early_fail-cuinit_8xH100.txt")))
	for _, tt := range r.Tests {
		switch tt.Name {
		case "Persistence Mode":
			if tt.Status != "Pass" || len(tt.Warnings) != 0 {
				t.Errorf("%+v", tt)
			}
		case "PCIe":
			if tt.Status != "Skip" {
				t.Errorf("%+v", tt)
			}
		case "GPU Memory":
			if tt.Status != "Fail" || len(tt.Warnings) != 8 || !strings.HasPrefix(tt.Warnings[7], "GPU 7 Error using CUDA API cuInit") {
				t.Errorf("%d warnings: %q", len(tt.Warnings), tt.Warnings)
			}
		}
	}
}

// TestDCGMJSONWarnAsFail: dcgmi -j prints a result that only warns as
// "Fail"; its error_severity (DCGM_ERROR_MONITOR = 1) says it warns. The
// document has the 4.x layout DCGM's own test asserts
// (helper_per_gpu_responses_dcgmi: test_summary, entity_group/entity_id,
// warnings[].error_id/error_category/error_severity).
func TestDCGMJSONWarnAsFail(t *testing.T) {
	doc := func(sev int) string {
		return `{"DCGM Diagnostic":{"test_categories":[{"category":"Stress","tests":[{"name":"memtest","test_summary":{"status":"Fail"},"results":[` +
			`{"entity_group":"GPU","entity_id":0,"status":"Fail","warnings":[{"warning":"Temperature 1000 C violated","error_id":50,"error_category":4,"error_severity":` + string(rune('0'+sev)) + `}]},` +
			`{"entity_group":"GPU","entity_id":1,"status":"Pass"}]}]}]},"version":"4.4.2"}`
	}
	r, err := ParseDCGM(strings.NewReader(doc(1)))
	if err != nil {
		t.Fatal(err)
	}
	fs := DCGMFindings(r)
	if StatusOf(fs) != StatusWarn || !strings.Contains(fs[0].Message, "DCGM Stress/memtest warned: Temperature 1000 C violated (error 50)") || r.Version != "4.4.2" {
		t.Errorf("monitor: %+v %q", fs, r.Version)
	}
	r, _ = ParseDCGM(strings.NewReader(doc(2)))
	if fs := DCGMFindings(r); StatusOf(fs) != StatusFail || !strings.Contains(fs[0].Message, "failed on GPU0") {
		t.Errorf("isolate: %+v", fs)
	}
	// 3.x: root "DCGM GPU Diagnostic", null tests, upper-case statuses
	// (DCGM's JsonResult "Deserialize real output" test), no severity: the
	// code decides (83, DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS, is RESET in
	// dcgm-error-severity.csv, so it fails); the message of a warning
	// object is read from "warning" or "warnings".
	v3 := `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Deployment","tests":[{"name":"Denylist","results":[{"gpu_ids":"0,1","status":"PASS"}]},null,` +
		`{"name":"Page Retirement/Row Remap","results":[{"gpu_id":"1","status":"FAIL","warnings":[{"warnings":"Row remap failure on GPU 1.","error_id":83}]}]}]}],"version":"3.3.8"}}`
	r, err = ParseDCGM(strings.NewReader(v3))
	if err != nil {
		t.Fatal(err)
	}
	fs = DCGMFindings(r)
	if StatusOf(fs) != StatusFail || len(r.Tests) != 2 || r.Version != "3.3.8" || !strings.Contains(fs[0].Message, "failed on GPU1: Row remap failure on GPU 1. (error 83)") {
		t.Errorf("3.x: %+v %+v", r, fs)
	}
	// A summary "Fail" over results that all pass is the test's own
	// failure, not a warning.
	own := `{"DCGM Diagnostic":{"test_categories":[{"category":"Integration","tests":[{"name":"pcie","test_summary":{"status":"Fail","warnings":[{"warning":"There was an internal error during the test","error_id":97}]},"results":[{"entity_group":"GPU","entity_id":0,"status":"Pass"}]}]}]}}`
	r, _ = ParseDCGM(strings.NewReader(own))
	if fs := DCGMFindings(r); StatusOf(fs) != StatusFail {
		t.Errorf("own failure: %+v", fs)
	}
}
