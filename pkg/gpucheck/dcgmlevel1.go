package gpucheck

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// What DCGM's level-1 test makes of each error code is data:
// dcgm-level1.csv lists, per DCGM release line (3.2, 3.3, 4), each code the
// Software plugin (the whole of `dcgmi diag -r 1`) can raise, the result the
// plugin then gives its test (NVIDIA/DCGM Software.cpp at the tags in the
// file's header), DCGM's message format for it and the fix the gate prints
// beside a warning. docs/dcgm.md is generated from it.
//
//go:embed dcgm-level1.csv
var embeddedDCGMLevel1 []byte

// DCGMLevel1Row is one row of dcgm-level1.csv.
type DCGMLevel1Row struct {
	// Line is the DCGM release line: 3.2, 3.3 or 4.
	Line string `json:"line"`
	Code int64  `json:"code"`
	Name string `json:"name"`
	// Result is what the Software plugin sets its test to when it raises
	// the code: Fail, Warn, Info, Pass, or Warn|Fail.
	Result string `json:"result"`
	// Message is DCGM's message format (printf) for the code, when the gate
	// needs to know the code of a message printed without one.
	Message string `json:"message,omitempty"`
	// Fix is what the gate prints beside a warning with this code.
	Fix string `json:"fix,omitempty"`

	msgRe *regexp.Regexp
}

// Warns says DCGM never fails its test for this code.
func (r DCGMLevel1Row) Warns() bool { return !strings.Contains(r.Result, "Fail") }

// DCGMLevel1Lines are the release lines of the data, oldest first.
var DCGMLevel1Lines = []string{"3.2", "3.3", "4"}

var dcgmLevel1 = mustParseData("dcgm-level1.csv", embeddedDCGMLevel1, parseDCGMLevel1)

// DCGMLevel1 returns the rows of the embedded data.
func DCGMLevel1() []DCGMLevel1Row { return dcgmLevel1 }

// mustParseData parses an embedded data file; an error is a build defect,
// which the package's tests catch.
func mustParseData[T any](name string, data []byte, parse func([]byte) (T, error)) T {
	v, err := parse(data)
	if err != nil {
		panic("gpucheck: " + name + ": " + err.Error())
	}
	return v
}

// readDataCSV reads a data file's rows after its "#" lines and checks its
// header row.
func readDataCSV(data []byte, header string) ([][]string, error) {
	recs, err := csv.NewReader(bytes.NewReader(stripCSVComments(data))).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 || strings.Join(recs[0], ",") != header {
		return nil, fmt.Errorf("want a header row %s and rows", header)
	}
	return recs[1:], nil
}

var dcgmLevel1Results = map[string]bool{"Fail": true, "Warn": true, "Info": true, "Pass": true, "Warn|Fail": true}

func parseDCGMLevel1(data []byte) ([]DCGMLevel1Row, error) {
	recs, err := readDataCSV(data, "line,code,name,dcgm_result,message,fix")
	if err != nil {
		return nil, err
	}
	lines := map[string]bool{}
	for _, l := range DCGMLevel1Lines {
		lines[l] = true
	}
	seen := map[string]bool{}
	var out []DCGMLevel1Row
	for _, rec := range recs {
		code, err := strconv.ParseInt(rec[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("code %q: %w", rec[1], err)
		}
		r := DCGMLevel1Row{Line: rec[0], Code: code, Name: rec[2], Result: rec[3], Message: rec[4], Fix: rec[5]}
		switch key := r.Line + "/" + rec[1]; {
		case !lines[r.Line]:
			return nil, fmt.Errorf("code %d: unknown release line %q", code, r.Line)
		case !dcgmLevel1Results[r.Result]:
			return nil, fmt.Errorf("code %d: unknown result %q", code, r.Result)
		case seen[key]:
			return nil, fmt.Errorf("code %d listed twice for %s", code, r.Line)
		case r.Warns() && r.Fix == "":
			return nil, fmt.Errorf("code %d (%s): a warning needs a fix", code, r.Line)
		default:
			seen[key] = true
		}
		if r.Message != "" {
			r.msgRe = printfPattern(r.Message)
		}
		out = append(out, r)
	}
	return out, nil
}

var printfVerbRe = regexp.MustCompile(`%l{0,2}[sdu]`)

// printfPattern matches a text that starts with what format prints.
func printfPattern(format string) *regexp.Regexp {
	parts := printfVerbRe.Split(format, -1)
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile(`^` + strings.Join(parts, `.*?`))
}

// dcgmLevel1Row finds the row of a code on a release line; a code without a
// row on that line ("" or a line the data lacks) has none.
func dcgmLevel1Row(line string, code int64) (DCGMLevel1Row, bool) {
	for _, r := range dcgmLevel1 {
		if r.Line == line && r.Code == code {
			return r, true
		}
	}
	return DCGMLevel1Row{}, false
}

// dcgmLevel1Code finds the code of a message printed without one by DCGM's
// message formats (those of line, else of any line).
func dcgmLevel1Code(line, msg string) (int64, bool) {
	for _, pass := range []bool{true, false} {
		for _, r := range dcgmLevel1 {
			if (r.Line == line) == pass && r.msgRe != nil && r.msgRe.MatchString(msg) {
				return r.Code, true
			}
		}
	}
	return 0, false
}

// dcgmFix is the gate's fix for a code: its row on line, else on the newest
// line that lists it.
func dcgmFix(line string, code int64) string {
	if r, ok := dcgmLevel1Row(line, code); ok && r.Fix != "" {
		return r.Fix
	}
	for i := len(dcgmLevel1) - 1; i >= 0; i-- {
		if dcgmLevel1[i].Code == code && dcgmLevel1[i].Fix != "" {
			return dcgmLevel1[i].Fix
		}
	}
	return ""
}
