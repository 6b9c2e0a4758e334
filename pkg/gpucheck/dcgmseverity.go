package gpucheck

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
)

// The severity of a DCGM error code is data: dcgm-error-severity.csv holds,
// per DCGM_FR_* code, the severity DCGM's own table (dcgmErrorMeta in
// NVIDIA/DCGM dcgmlib/src/dcgm_errors.c) gives it in two revisions of DCGM's
// source, with the commits in its header. DCGM 3 writes a warning's error
// code but no severity, so the gate takes the severity from this table.
//
//go:embed dcgm-error-severity.csv
var embeddedDCGMSeverity []byte

// dcgmSeverityNames are the names of dcgmErrorSeverity_t (dcgm_errors.h),
// by value.
var dcgmSeverityNames = []string{"NONE", "MONITOR", "ISOLATE", "UNKNOWN", "TRIAGE", "CONFIG", "RESET"}

// dcgmCodeRow is one row of the table: the code's name and its severity in
// each revision that lists it.
type dcgmCodeRow struct {
	Name       string
	Severities []int64
}

var dcgmCodeSeverity = mustParseDCGMSeverity(embeddedDCGMSeverity)

func mustParseDCGMSeverity(data []byte) map[int64]dcgmCodeRow {
	m, err := parseDCGMSeverity(data)
	if err != nil {
		panic("gpucheck: dcgm-error-severity.csv: " + err.Error())
	}
	return m
}

// parseDCGMSeverity reads "code,name,severity[,severity...]" rows after "#"
// comment lines and a header row; a blank severity cell means that
// revision has no such code.
func parseDCGMSeverity(data []byte) (map[int64]dcgmCodeRow, error) {
	var body bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			body.WriteString(line)
		}
	}
	rows, err := csv.NewReader(&body).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 3 || rows[0][0] != "code" || rows[0][1] != "name" {
		return nil, fmt.Errorf("want a header row code,name,severity...")
	}
	m := map[int64]dcgmCodeRow{}
	for _, r := range rows[1:] {
		code, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("code %q: %w", r[0], err)
		}
		if _, dup := m[code]; dup {
			return nil, fmt.Errorf("code %d listed twice", code)
		}
		row := dcgmCodeRow{Name: r[1]}
		for _, cell := range r[2:] {
			if cell == "" {
				continue
			}
			sev := -1
			for i, n := range dcgmSeverityNames {
				if n == cell {
					sev = i
				}
			}
			if sev < 0 {
				return nil, fmt.Errorf("code %d: unknown severity %q", code, cell)
			}
			row.Severities = append(row.Severities, int64(sev))
		}
		if len(row.Severities) == 0 {
			return nil, fmt.Errorf("code %d has no severity", code)
		}
		m[code] = row
	}
	return m, nil
}

// dcgmSeverityKeepsWorking: NONE and MONITOR ("can perform workload, but
// needs to be monitored") let the GPU keep working; CONFIG, ISOLATE,
// UNKNOWN, TRIAGE, RESET and any other value do not. CONFIG fails on
// purpose in a post-upgrade gate: its codes are what an upgrade changes or
// leaves unchecked (DCGM_FR_ECC_DISABLED, DCGM_FR_PERSISTENCE_MODE,
// DCGM_FR_DEVICE_COUNT_MISMATCH, DCGM_FR_DENYLISTED_DRIVER), or say the
// diagnostic did not run (DCGM_FR_ABORTED, DCGM_FR_TEST_DISABLED), and a
// node is not validated by a test that did not run.
func dcgmSeverityKeepsWorking(sev int64) bool {
	switch sev {
	case dcgmSeverityNone, dcgmSeverityMonitor:
		return true
	}
	return false
}

// dcgmCodeKeepsWorking says a warning with this error code and no severity
// lets the GPU keep working: the code is in the table and every revision
// that lists it gives it such a severity (revisions disagree on some codes,
// e.g. DCGM_FR_TEMP_VIOLATION, MONITOR in 2024 and ISOLATE in 2022, and the
// JSON does not say which table the node's DCGM used). A code not in the
// table fails.
func dcgmCodeKeepsWorking(code int64) bool {
	row, ok := dcgmCodeSeverity[code]
	if !ok {
		return false
	}
	for _, s := range row.Severities {
		if !dcgmSeverityKeepsWorking(s) {
			return false
		}
	}
	return true
}
