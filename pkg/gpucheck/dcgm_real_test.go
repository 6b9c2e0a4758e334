package gpucheck

import (
	"bytes"
	"fmt"
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
			fs := DCGMFindings(r, false)
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

// TestDCGMJSONLayouts reads the other shapes DCGM's writers give the JSON:
// nulls in "tests" and upper-case statuses (DCGM's JsonResult "Deserialize
// real output" test, a 3.1.0 document), a 4.x test_summary's own failure
// over results that all pass (the real 4.2.3 and 4.4.1 pcie captures as
// -j writes them: HelperJsonAddTestSummary), and DCGM 3.2's per-GPU
// results (Diag.cpp v3.2.6 HelperJsonAddResult: "gpu_ids", the warnings as
// one string, "error_id" beside it), whose joined warnings the one code
// does not cover.
func TestDCGMJSONLayouts(t *testing.T) {
	v31 := `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Deployment","tests":[{"name":"Denylist","results":[{"status":"PASS"}]},null,` +
		`{"name":"Inforom","results":[{"status":"PASS"}]}]}],"version":"3.1.0"}}`
	r, err := ParseDCGM(strings.NewReader(v31))
	if err != nil {
		t.Fatal(err)
	}
	if fs := DCGMFindings(r, false); StatusOf(fs) != StatusPass || len(r.Tests) != 2 || r.Line != "3" || r.Version != "3.1.0" {
		t.Errorf("3.1: %+v %+v", r, fs)
	}
	own := `{"DCGM Diagnostic":{"test_categories":[{"category":"Integration","tests":[{"name":"pcie","test_summary":{"status":"Fail","warnings":[{"warning":"There was an internal error during the test: 'x'","error_id":44,"error_category":16,"error_severity":4}]},` +
		`"results":[{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Pass"}]}]}]},"metadata":{"version":"4.2.3"}}`
	r, _ = ParseDCGM(strings.NewReader(own))
	if fs := DCGMFindings(r, false); StatusOf(fs) != StatusFail || !strings.Contains(fs[0].Message, "could not complete") {
		t.Errorf("own failure: %+v", fs)
	}
	v32 := func(result string) string {
		return `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Stress","tests":[{"name":"SM Stress","results":[` + result +
			`,{"gpu_ids":"1","status":"Pass"}]}]}]},"Driver Version Detected":"535.161.08","GPU Device IDs":["2330","2330"],"version":"3.2.6"}` + "\n"
	}
	for name, tc := range map[string]struct {
		result, exit string
		status       Status
		message      string
	}{
		"failed":             {`{"error_id":4,"gpu_ids":"0","status":"Fail","warnings":"Detected 1 volatile double-bit ECC error(s) in GPU 0."}`, "226", StatusFail, "DCGM Stress/SM Stress failed on GPU0: Detected 1 volatile double-bit ECC error(s) in GPU 0. (error 4 DCGM_FR_VOLATILE_DBE_DETECTED, severity ISOLATE in DCGM's table)"},
		"warned":             {`{"error_id":40,"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0"}`, "0", StatusWarn, "DCGM Stress/SM Stress warned: There were thermal violations totaling 2.3 seconds for GPU 0 (error 40 DCGM_FR_THERMAL_VIOLATIONS, severity MONITOR in DCGM's table)"},
		"joined, no status":  {`{"error_id":40,"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0, Detected 1 volatile double-bit ECC error(s) in GPU 0."}`, "", StatusFail, "failed on GPU0"},
		"monitor, no status": {`{"error_id":40,"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0"}`, "", StatusFail, "failed on GPU0"},
	} {
		text := v32(tc.result)
		if tc.exit != "" {
			text += "gpu-validate: dcgmi diag -r 3 -j exited " + tc.exit + "\n"
		}
		r, err := ParseDCGM(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if fs := DCGMFindings(r, false); StatusOf(fs) != tc.status || r.Line != "3.2" || !strings.Contains(dcgmMessages(fs), tc.message) {
			t.Errorf("%s: %s %s", name, StatusOf(fs), dcgmMessages(fs))
		}
	}
}

// A run that skipped every test proved nothing: DCGM's results are Pass,
// Skip, Warn or Fail, and Skip says the test did not run. The skipped
// tests of the real 3.3.8 run, alone, fail the node; with one passed test
// beside them they do not.
func TestDCGMEverythingSkipped(t *testing.T) {
	r, err := ParseDCGM(bytes.NewReader(readReal(t, "dcgm", "dcgm-3.3.8_diag-r3-fail-early_fail-cuinit_8xH100.txt")))
	if err != nil {
		t.Fatal(err)
	}
	var skipped, passed []DCGMTest
	for _, tt := range r.Tests {
		switch tt.Status {
		case "Skip":
			skipped = append(skipped, tt)
		case "Pass":
			passed = append(passed, tt)
		}
	}
	if len(skipped) < 2 || len(passed) == 0 {
		t.Fatalf("the real run has %d skipped and %d passed tests", len(skipped), len(passed))
	}
	only := *r
	only.Tests, only.ExitFailure = skipped, ""
	fs := DCGMFindings(&only, false)
	if StatusOf(fs) != StatusFail || !strings.Contains(fs[0].Message, fmt.Sprintf("DCGM skipped all %d tests", len(skipped))) {
		t.Errorf("all skipped: %+v", fs)
	}
	only.Tests = append(skipped, passed[0])
	if fs := DCGMFindings(&only, false); StatusOf(fs) != StatusPass {
		t.Errorf("one passed beside the skipped: %+v", fs)
	}
}
