package gpucheck

import (
	"strings"
	"testing"
)

// TestDCGMSeverityTable pins rows of dcgm-error-severity.csv against
// NVIDIA/DCGM dcgmlib/src/dcgm_errors.c (dcgmErrorMeta) and
// dcgmlib/dcgm_errors.h at v3.2.6, v3.3.8 and v4.4.2.
func TestDCGMSeverityTable(t *testing.T) {
	if n := len(dcgmCodeSeverity); n != 121 {
		t.Errorf("%d codes, want 121 (DCGM_FR_OK through DCGM_FR_FALLEN_OFF_BUS)", n)
	}
	if got := strings.Join(dcgmSeverityColumns, ","); got != "severity_v3.2.6,severity_v3.3.8,severity_v4.4.2" {
		t.Errorf("columns %s", got)
	}
	const (
		monitor = 1
		isolate = 2
		config  = 5
		reset   = 6
		none    = -1
	)
	pins := []struct {
		code int64
		name string
		sevs []int64
	}{
		{6, "DCGM_FR_PENDING_PAGE_RETIREMENTS", []int64{monitor, reset, reset}},
		{10, "DCGM_FR_CLOCKS_EVENT_THERMAL", []int64{monitor, monitor, monitor}},
		{25, "DCGM_FR_GRAPHICS_PROCESSES", []int64{isolate, reset, reset}},
		// MONITOR at every tag, and DCGM fails its tests on both.
		{27, "DCGM_FR_FIELD_QUERY", []int64{monitor, monitor, monitor}},
		{51, "DCGM_FR_CUDA_API", []int64{monitor, monitor, monitor}},
		{29, "DCGM_FR_PERSISTENCE_MODE", []int64{isolate, config, config}},
		{42, "DCGM_FR_TEMP_VIOLATION", []int64{isolate, monitor, monitor}},
		{111, "DCGM_FR_NAN_VALUE", []int64{none, isolate, isolate}},
		{118, "DCGM_FR_SRAM_THRESHOLD", []int64{none, none, isolate}},
		{120, "DCGM_FR_FALLEN_OFF_BUS", []int64{none, none, isolate}},
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
	}
	if sev, ok := dcgmTableSeverity(118); !ok || sev != isolate {
		t.Errorf("118: %d %v", sev, ok)
	}
	if _, ok := dcgmTableSeverity(500); ok || dcgmCodeName(500) != "" || dcgmSeverityName(9) != "severity 9" {
		t.Error("unknown code or severity named")
	}
	for _, bad := range []string{
		"",
		"x,y\n1,2\n",
		"code,name,severity_a\n1,A,MONITOR\n1,B,MONITOR\n",
		"code,name,severity_a\n1,A,SOMETIMES\n",
		"code,name,severity_a\nx,A,MONITOR\n",
		"code,name,severity_a,severity_b\n1,A,,\n",
	} {
		if _, _, err := parseDCGMSeverity([]byte(bad)); err == nil {
			t.Errorf("parseDCGMSeverity(%q) accepted", bad)
		}
	}
}

// TestDCGMLevel1Data pins rows of dcgm-level1.csv against the Software
// plugin: nvvs/plugin_src/software/Software.cpp at v3.2.6 and v3.3.8,
// nvvs/src/Software.cpp at v4.2.3 and v4.4.2.
func TestDCGMLevel1Data(t *testing.T) {
	pins := []struct {
		line   string
		code   int64
		result string
	}{
		{"3.2", 27, "Fail"}, {"3.3", 27, "Fail"}, {"4", 27, "Fail"}, // FIELD_QUERY: SetResult(FAIL)
		{"3.2", 29, "Info"}, {"3.3", 29, "Info"}, {"4", 29, "Warn"}, // PERSISTENCE_MODE: AddWarning, then addError
		{"3.3", 28, "Warn"}, {"4", 25, "Warn"}, {"4", 20, "Warn"},
		{"4", 22, "Warn|Fail"}, // CANNOT_OPEN_LIB: NVML Fail, CUDA Warn
		{"4", 118, "Warn"}, {"4", 112, "Fail"},
	}
	for _, p := range pins {
		row, ok := dcgmLevel1Row(p.line, p.code)
		if !ok || row.Result != p.result || row.Name != dcgmCodeName(p.code) {
			t.Errorf("%s/%d: %+v", p.line, p.code, row)
		}
	}
	if _, ok := dcgmLevel1Row("3.2", 118); ok {
		t.Error("3.2 has no DCGM_FR_SRAM_THRESHOLD")
	}
	for _, r := range DCGMLevel1() {
		if dcgmCodeName(r.Code) != r.Name {
			t.Errorf("%s/%d named %s, the severity table %s", r.Line, r.Code, r.Name, dcgmCodeName(r.Code))
		}
	}
	// Messages without codes are named by DCGM's formats.
	for msg, want := range map[string]int64{
		"Persistence mode for GPU 3 is disabled. Enable persistence mode by running \"nvidia-smi -i <gpuId> -pm 1 \" as root.": 29,
		"Found CUDA performance-limiting environment variable 'CUDA_PROFILE'. Please unset this environment variable.":         28,
		"SRAM Threshold Count exceeded on GPU 2: 5": 118,
	} {
		if code, ok := dcgmLevel1Code("4", msg); !ok || code != want {
			t.Errorf("%q: %d %v", msg, code, ok)
		}
	}
	if _, ok := dcgmLevel1Code("4", "Something else"); ok {
		t.Error("unknown message named")
	}
	for _, bad := range []string{
		"",
		"line,code,name,dcgm_result\n",
		"line,code,name,dcgm_result,message,fix\n5,1,X,Fail,,\n",
		"line,code,name,dcgm_result,message,fix\n4,1,X,Maybe,,\n",
		"line,code,name,dcgm_result,message,fix\n4,x,X,Fail,,\n",
		"line,code,name,dcgm_result,message,fix\n4,1,X,Warn,,\n",
		"line,code,name,dcgm_result,message,fix\n4,1,X,Fail,,\n4,1,X,Fail,,\n",
	} {
		if _, err := parseDCGMLevel1([]byte(bad)); err == nil {
			t.Errorf("parseDCGMLevel1(%q) accepted", bad)
		}
	}
}
