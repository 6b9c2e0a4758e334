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
// NVIDIA/DCGM dcgmlib/src/dcgm_errors.c) gives it at three tags, v3.2.6,
// v3.3.8 and v4.4.2, one column each. The gate never takes a verdict from
// a severity (DCGM's own result decides, see dcgmverdict.go): the severity
// is printed beside a warning to explain it, and looked up here for DCGM
// 3.2, whose dcgmi writes an error code but no severity.
//
//go:embed dcgm-error-severity.csv
var embeddedDCGMSeverity []byte

// dcgmSeverityNames are the names of dcgmErrorSeverity_t (dcgm_errors.h),
// by value.
var dcgmSeverityNames = []string{"NONE", "MONITOR", "ISOLATE", "UNKNOWN", "TRIAGE", "CONFIG", "RESET"}

// dcgmCodeRow is one row of the table: the code's name and its severity in
// each column, -1 where that tag has no such code.
type dcgmCodeRow struct {
	Name       string
	Severities []int64
}

var dcgmCodeSeverity, dcgmSeverityColumns = mustParseDCGMSeverity(embeddedDCGMSeverity)

func mustParseDCGMSeverity(data []byte) (map[int64]dcgmCodeRow, []string) {
	m, cols, err := parseDCGMSeverity(data)
	if err != nil {
		panic("gpucheck: dcgm-error-severity.csv: " + err.Error())
	}
	return m, cols
}

// parseDCGMSeverity reads "code,name,severity_TAG[,severity_TAG...]" rows
// after "#" comment lines and a header row; a blank severity cell means that
// tag has no such code.
func parseDCGMSeverity(data []byte) (map[int64]dcgmCodeRow, []string, error) {
	rows, err := csv.NewReader(bytes.NewReader(stripCSVComments(data))).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) < 2 || len(rows[0]) < 3 || rows[0][0] != "code" || rows[0][1] != "name" {
		return nil, nil, fmt.Errorf("want a header row code,name,severity_TAG...")
	}
	cols := rows[0][2:]
	m := map[int64]dcgmCodeRow{}
	for _, r := range rows[1:] {
		code, err := strconv.ParseInt(r[0], 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("code %q: %w", r[0], err)
		}
		if _, dup := m[code]; dup {
			return nil, nil, fmt.Errorf("code %d listed twice", code)
		}
		row := dcgmCodeRow{Name: r[1]}
		listed := false
		for _, cell := range r[2:] {
			sev := int64(-1)
			if cell != "" {
				if sev = dcgmSeverityValue(cell); sev < 0 {
					return nil, nil, fmt.Errorf("code %d: unknown severity %q", code, cell)
				}
				listed = true
			}
			row.Severities = append(row.Severities, sev)
		}
		if !listed {
			return nil, nil, fmt.Errorf("code %d has no severity", code)
		}
		m[code] = row
	}
	return m, cols, nil
}

// stripCSVComments drops the "#" lines of a data file.
func stripCSVComments(data []byte) []byte {
	var body bytes.Buffer
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			body.WriteString(line)
		}
	}
	return body.Bytes()
}

func dcgmSeverityValue(name string) int64 {
	for i, n := range dcgmSeverityNames {
		if n == name {
			return int64(i)
		}
	}
	return -1
}

// dcgmSeverityName names a severity value ("severity 9" for one DCGM's
// enum lacks).
func dcgmSeverityName(sev int64) string {
	if sev >= 0 && sev < int64(len(dcgmSeverityNames)) {
		return dcgmSeverityNames[sev]
	}
	return "severity " + strconv.FormatInt(sev, 10)
}

// dcgmCodeName is the DCGM_FR_* name of a code, "" when the table lacks it.
func dcgmCodeName(code int64) string {
	return dcgmCodeSeverity[code].Name
}

// dcgmTableSeverity is the severity DCGM's table gives a code at the
// newest tag that lists it; ok is false for a code the table lacks.
func dcgmTableSeverity(code int64) (sev int64, ok bool) {
	row, found := dcgmCodeSeverity[code]
	if !found {
		return 0, false
	}
	for i := len(row.Severities) - 1; i >= 0; i-- {
		if row.Severities[i] >= 0 {
			return row.Severities[i], true
		}
	}
	return 0, false
}
