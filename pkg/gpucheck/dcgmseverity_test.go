package gpucheck

import "testing"

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
		{46, "DCGM_FR_PCIE_WIDTH", []int64{config, monitor}, true},
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
