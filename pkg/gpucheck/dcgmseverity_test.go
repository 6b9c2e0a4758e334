package gpucheck

import (
	"bytes"
	"strings"
	"testing"
)

// TestDCGMSeverityTable pins rows of dcgm-error-severity.csv against
// NVIDIA/DCGM dcgmlib/src/dcgm_errors.c (dcgmErrorMeta) at commit
// 18b87c715750d0d44b185dfeb9a7d8e2597443a4 (column severity) and
// 57251713113d41e5d2fff1e7d547c4a880199fe6 (column severity_2022), with the
// code numbers of dcgmlib/dcgm_errors.h.
func TestDCGMSeverityTable(t *testing.T) {
	if n := len(dcgmCodeSeverity); n != 112 {
		t.Errorf("%d codes, want 112 (DCGM_FR_OK through DCGM_FR_NAN_VALUE)", n)
	}
	const (
		monitor = dcgmSeverityMonitor
		isolate = 2
		reset   = 6
		config  = dcgmSeverityConfig
	)
	pins := []struct {
		code  int64
		name  string
		sevs  []int64
		works bool
	}{
		{4, "DCGM_FR_VOLATILE_DBE_DETECTED", []int64{isolate, isolate}, false},
		{6, "DCGM_FR_PENDING_PAGE_RETIREMENTS", []int64{reset, monitor}, false},
		{10, "DCGM_FR_CLOCK_THROTTLE_THERMAL", []int64{monitor, monitor}, true},
		{29, "DCGM_FR_PERSISTENCE_MODE", []int64{config, isolate}, false},
		{40, "DCGM_FR_THERMAL_VIOLATIONS", []int64{monitor, monitor}, true},
		// DCGM 4's helper_per_gpu_responses_dcgmi expects a temperature
		// violation to be MONITOR; the 2022 table (and that era's test,
		// which expects DCGM_ST_NVVS_ISOLATE_ERROR) says ISOLATE.
		{42, "DCGM_FR_TEMP_VIOLATION", []int64{monitor, isolate}, false},
		{46, "DCGM_FR_PCIE_WIDTH", []int64{config, monitor}, false},
		{47, "DCGM_FR_ABORTED", []int64{config, monitor}, false},
		{88, "DCGM_FR_NVSWITCH_NVLINK_DOWN", []int64{isolate, isolate}, false},
		{108, "DCGM_FR_CUDA_FM_NOT_INITIALIZED", []int64{monitor}, true},
		{111, "DCGM_FR_NAN_VALUE", []int64{isolate}, false},
	}
	for _, p := range pins {
		row := dcgmCodeSeverity[p.code]
		if row.Name != p.name || len(row.Severities) != len(p.sevs) {
			t.Errorf("code %d: %+v, want %s %v", p.code, row, p.name, p.sevs)
			continue
		}
		for i := range p.sevs {
			if row.Severities[i] != p.sevs[i] {
				t.Errorf("code %d: %v, want %v", p.code, row.Severities, p.sevs)
			}
		}
		if dcgmCodeKeepsWorking(p.code) != p.works {
			t.Errorf("code %d keeps working %v", p.code, !p.works)
		}
	}
	for _, code := range []int64{-1, 0, 112, 1 << 40} {
		if dcgmCodeKeepsWorking(code) {
			t.Errorf("code %d keeps working", code)
		}
	}
	for _, bad := range []string{
		"",
		"x,y\n1,2\n",
		"code,name,severity\n1,A,MONITOR\n1,B,MONITOR\n",
		"code,name,severity\n1,A,SOMETIMES\n",
		"code,name,severity\nx,A,MONITOR\n",
		"code,name,severity,severity_2022\n1,A,,\n",
	} {
		if _, err := parseDCGMSeverity([]byte(bad)); err == nil {
			t.Errorf("parseDCGMSeverity(%q) accepted", bad)
		}
	}
}

// dcgm3Doc is a document in the layout DCGM 3's dcgmi writes for
// `dcgmi diag -j` (NVIDIA/DCGM dcgmi/Diag.cpp at commit
// 4e0a87a8c7a9af99e0d911c491d9a65204f1a30e: HelperJsonBuildOutput writes
// "version", "Driver Version Detected" and "GPU Device IDs" beside
// "DCGM GPU Diagnostic"; HelperJsonAddResult writes per GPU "gpu_ids",
// "status" (HelperDisplayDiagResult: Pass, Skip, else Fail), the warnings
// as one string under "warnings" and the code under "error_id";
// HelperJsonAddBasicTests writes "status" and a "warnings" string with no
// code). Only those keys are used; the messages follow dcgm_errors.h's
// DCGM_FR_*_MSG formats.
func dcgm3Doc(result string) string {
	return `{"DCGM GPU Diagnostic":{"test_categories":[` +
		`{"category":"Deployment","tests":[{"name":"Denylist","results":[{"status":"Pass"}]}]},` +
		`{"category":"Stress","tests":[{"name":"SM Stress","results":[` + result + `,{"gpu_ids":"1","status":"Pass"}]}]}]},` +
		`"Driver Version Detected":"535.129.03","GPU Device IDs":["1eb8","1eb8"],"version":"3.3.1"}`
}

func TestDCGM3WarningsByErrorCode(t *testing.T) {
	cases := []struct {
		name, result string
		status       Status
		message      string
	}{
		{"monitor code warns", `{"error_id":40,"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0"}`,
			StatusWarn, "DCGM Stress/SM Stress warned: There were thermal violations totaling 2.3 seconds for GPU 0 (error 40)"},
		{"isolate code fails", `{"error_id":4,"gpu_ids":"0","status":"Fail","warnings":"Detected 1 volatile double-bit ECC error(s) in GPU 0."}`,
			StatusFail, "DCGM Stress/SM Stress failed on GPU0: Detected 1 volatile double-bit ECC error(s) in GPU 0. (error 4)"},
		{"unknown code fails", `{"error_id":112,"gpu_ids":"0","status":"Fail","warnings":"Something new"}`,
			StatusFail, "failed on GPU0: Something new (error 112)"},
		{"codes that disagree fail", `{"error_id":42,"gpu_ids":"0","status":"Fail","warnings":"Temperature 1000 of GPU 0 exceeded user-specified maximum allowed temperature 87"}`,
			StatusFail, "failed on GPU0"},
		// DCGM joins a result's warnings with ", " and keeps the first
		// code only (DcgmDiagManager::PopulateErrorDetail).
		{"joined warnings fail", `{"error_id":40,"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0, Detected 1 volatile double-bit ECC error(s) in GPU 0."}`,
			StatusFail, "failed on GPU0"},
		{"text only fails", `{"gpu_ids":"0","status":"Fail","warnings":"There were thermal violations totaling 2.3 seconds for GPU 0"}`,
			StatusFail, "failed on GPU0"},
		{"code without warning fails", `{"error_id":40,"gpu_ids":"0","status":"Fail"}`,
			StatusFail, "failed on GPU0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseDCGM(strings.NewReader(dcgm3Doc(tc.result)))
			if err != nil {
				t.Fatal(err)
			}
			fs := DCGMFindings(r)
			var msgs []string
			for _, f := range fs {
				msgs = append(msgs, f.Message)
			}
			if StatusOf(fs) != tc.status || r.Version != "3.3.1" || len(r.Tests) != 2 || !strings.Contains(strings.Join(msgs, "\n"), tc.message) {
				t.Errorf("status %s version %q tests %d findings %q", StatusOf(fs), r.Version, len(r.Tests), msgs)
			}
		})
	}
	// The Deployment tests carry no code: a failure there fails.
	deploy := strings.Replace(dcgm3Doc(`{"gpu_ids":"0","status":"Pass"}`), `{"status":"Pass"}`,
		`{"status":"Fail","warnings":"Persistence mode for GPU 0 is currently disabled. The DCGM diagnostic requires peristence mode to be enabled."}`, 1)
	r, err := ParseDCGM(strings.NewReader(deploy))
	if err != nil {
		t.Fatal(err)
	}
	if fs := DCGMFindings(r); StatusOf(fs) != StatusFail || !strings.Contains(fs[0].Message, "DCGM Deployment/Denylist failed: Persistence mode") {
		t.Errorf("deployment: %+v", fs)
	}
	// The fixture is the same layout, indented as dcgmi's toStyledString.
	r, err = ParseDCGM(bytes.NewReader(fixture(t, "dcgm3-warn.json")))
	if err != nil {
		t.Fatal(err)
	}
	if fs := DCGMFindings(r); StatusOf(fs) != StatusWarn || r.Version != "3.3.1" {
		t.Errorf("fixture: %q %+v", r.Version, fs)
	}
}
