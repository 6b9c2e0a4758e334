package gpucheck

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DCGM's own verdict. dcgmi -j writes a test DCGM warned on as "Fail"
// (Diag.cpp HelperDisplayDiagResult at v3.2.6, v3.3.8, v4.2.3 and v4.4.2),
// and a warning's severity is not DCGM's warn/fail decision: DCGM 4's
// Software plugin fails its test on DCGM_FR_FIELD_QUERY, severity MONITOR
// (Software.cpp v4.2.3 and v4.4.2), and the GPU Memory test fails on
// DCGM_FR_CUDA_API, MONITOR at every tag (a real 3.3.8 capture in
// ../shared/real-outputs/dcgm). So the verdict is read from what tells
// them apart, per DCGM release line:
//   - 4.x: the human table's test row (HelperDisplayGlobalResult prints
//     Pass, Skip, Warn or Fail). Its exit status cannot: GetFailureResult
//     (Diag.cpp v4.2.3, v4.4.2) exits DCGM_ST_NVVS_ERROR on any error of
//     the Software test or of a GPU, warnings included.
//   - 3.x: a per-GPU test's table rows ("Warn - All"), and the exit status:
//     GetFailureResult (Diag.cpp v3.2.6, v3.3.8) exits non-zero only when a
//     result is DCGM_DIAG_RESULT_FAIL, so 0 means every printed "Fail" is a
//     warning (or a level-one test that did not run).
//   - Where neither tells, a level-1 test whose every error code is one
//     DCGM's Software plugin only ever warns on, on that release line
//     (dcgm-level1.csv), is a warning; anything else printed "Fail" fails.
// On every line an exit status of DCGM_ST_NVVS_ISOLATE_ERROR fails the run:
// dcgmi returns it when an error's code is one DCGM's table rates ISOLATE.

// dcgmExitStatus names dcgmi's exit statuses (dcgmReturn_t, dcgm_structs.h,
// as the process's 8-bit status).
var dcgmExitStatus = map[int]string{
	226: "DCGM_ST_NVVS_ERROR (-30)",
	205: "DCGM_ST_NVVS_ISOLATE_ERROR (-51)",
	203: "DCGM_ST_NVVS_KILLED (-53)",
	198: "DCGM_ST_NVVS_NO_AVAILABLE_TEST (-58)",
}

func exitName(code int) string {
	if n, ok := dcgmExitStatus[code]; ok {
		return strconv.Itoa(code) + " " + n
	}
	return strconv.Itoa(code)
}

// dcgmLine is the release line whose rules read a version: 3.2, 3.3, 3
// (another 3.x), 4, or "" (unknown, or a line these rules do not cover).
func dcgmLine(version string, major int) string {
	switch {
	case major >= 4:
		return "4"
	case strings.HasPrefix(version, "3.2."):
		return "3.2"
	case strings.HasPrefix(version, "3.3."):
		return "3.3"
	case major == 3:
		return "3"
	}
	return ""
}

// mergeDCGM joins the runs of the pod log into one result with DCGM's own
// verdict per test.
func mergeDCGM(outs []dcgmOutput) *DCGMResult {
	res := &DCGMResult{}
	major := 0
	var errs []string
	for _, o := range outs {
		res.Runs = append(res.Runs, o.run)
		if res.Version == "" {
			res.Version = o.version
		}
		if major == 0 {
			major = o.major
		}
		if o.runtimeError != "" && !contains(errs, o.runtimeError) {
			errs = append(errs, o.runtimeError)
		}
	}
	if m := dcgmMajor(res.Version); m > 0 {
		major = m
	}
	res.Line = dcgmLine(res.Version, major)
	res.RuntimeError = strings.Join(errs, "; ")

	type view struct {
		seen dcgmSeen
		exit *int
	}
	var order []string
	views := map[string][]view{}
	for _, o := range outs {
		for _, s := range o.tests {
			key := strings.ToLower(s.name)
			if _, ok := views[key]; !ok {
				order = append(order, key)
			}
			views[key] = append(views[key], view{s, o.run.ExitStatus})
		}
	}
	for _, key := range order {
		vs := views[key]
		t := DCGMTest{Category: vs[0].seen.category, Name: vs[0].seen.name}
		own, printedFail, exit0 := "", false, true
		var ws []dcgmWarning
		failed := map[string]bool{}
		for _, v := range vs {
			switch {
			case !v.seen.own:
				printedFail = true
				exit0 = exit0 && v.exit != nil && *v.exit == 0
			case own == "" || statusRank(v.seen.word) > statusRank(own):
				own = v.seen.word
			}
			for _, f := range v.seen.failed {
				failed[f] = true
			}
			// The JSON's warnings carry codes; the table's only text.
			if len(ws) == 0 || (len(v.seen.warnings) > 0 && ws[0].Code == nil && v.seen.warnings[0].Code != nil) {
				ws = v.seen.warnings
			}
		}
		switch {
		case printedFail && (own == "Warn" || own == "Fail"):
			t.Status, t.Basis = own, DCGMBasisTable
		case printedFail && major == 3 && exit0:
			t.Status, t.Basis = "Warn", DCGMBasisExitStatus
		case printedFail && dcgmLevel1Warns(res.Line, t, ws):
			t.Status, t.Basis = "Warn", DCGMBasisLevel1Codes
		case printedFail:
			t.Status, t.Basis = "Fail", DCGMBasisUnresolved
		case own == "Warn" || own == "Fail":
			t.Status, t.Basis = own, DCGMBasisTable
		case own != "":
			t.Status, t.Basis = own, DCGMBasisPrinted
		default:
			t.Status, t.Basis = "Skip", DCGMBasisPrinted
		}
		if t.Status == "Pass" && len(ws) > 0 {
			t.Status, t.Basis = "Warn", DCGMBasisMessage
		}
		if t.Status == "Fail" {
			for f := range failed {
				t.Failed = append(t.Failed, f)
			}
			sort.Strings(t.Failed)
		}
		var fixes []string
		for _, w := range ws {
			t.Warnings = append(t.Warnings, w.text())
			if code, ok := w.code(res.Line); ok {
				if fix := dcgmFix(res.Line, code); fix != "" && !contains(fixes, fix) {
					fixes = append(fixes, fix)
				}
			}
		}
		if t.Status == "Warn" {
			t.Fix = strings.Join(fixes, "; ")
		}
		res.Tests = append(res.Tests, t)
	}
	res.ExitFailure = dcgmExitFailure(res, major)
	return res
}

// dcgmExitFailure is a failure the runs' exit statuses tell and no test
// carries: DCGM_ST_NVVS_ISOLATE_ERROR on any line, DCGM_ST_NVVS_ERROR on
// 3.x (there it means a result failed; a test the level-1 data read as a
// warning is then taken as the one that failed), any other status but 0.
func dcgmExitFailure(res *DCGMResult, major int) string {
	if res.RuntimeError != "" {
		return ""
	}
	failed := false
	for _, t := range res.Tests {
		failed = failed || t.Status == "Fail"
	}
	for _, run := range res.Runs {
		if run.ExitStatus == nil || *run.ExitStatus == 0 || failed {
			continue
		}
		code := *run.ExitStatus
		if code == 226 && major >= 4 {
			continue // any warning exits so on 4.x
		}
		if code == 226 || code == 205 {
			for i := range res.Tests {
				if res.Tests[i].Basis == DCGMBasisLevel1Codes {
					res.Tests[i].Status, res.Tests[i].Basis, res.Tests[i].Fix = "Fail", DCGMBasisExitStatus, ""
					failed = true
				}
			}
			if failed {
				continue
			}
		}
		switch code {
		case 205:
			return fmt.Sprintf("%s exited %s: DCGM rates an error it reported ISOLATE and asks for the GPU to be isolated", run.Command, exitName(code))
		case 226:
			return fmt.Sprintf("%s exited %s, which DCGM 3 returns only when a test failed", run.Command, exitName(code))
		default:
			return fmt.Sprintf("%s exited %s", run.Command, exitName(code))
		}
	}
	return ""
}

// code is the warning's DCGM_FR_* code: the one dcgmi wrote, else the one
// whose message format (dcgm-level1.csv) the text starts with.
func (w dcgmWarning) code(line string) (int64, bool) {
	if w.Code != nil {
		return *w.Code, !w.partial
	}
	return dcgmLevel1Code(line, w.Msg)
}

// dcgmLevel1Warns says DCGM's level-1 test (the Software plugin: the
// Deployment tests of 3.x, "software" of 4.x) only ever warns on every code
// of ws on this release line.
func dcgmLevel1Warns(line string, t DCGMTest, ws []dcgmWarning) bool {
	if len(ws) == 0 || !(strings.EqualFold(t.Name, "software") || (strings.HasPrefix(line, "3") && t.Category == "Deployment")) {
		return false
	}
	for _, w := range ws {
		code, ok := w.code(line)
		if !ok {
			return false
		}
		row, ok := dcgmLevel1Row(line, code)
		if !ok || !row.Warns() {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// DCGMFindings fails on a runtime error, on a failure told by dcgmi's exit
// status and on every test DCGM failed, whatever its warnings' severity;
// a test DCGM warned on is a warning naming the fix, or a failure with
// warnFails (--dcgm-warn-fails).
func DCGMFindings(r *DCGMResult, warnFails bool) []Finding {
	var out []Finding
	if r.RuntimeError != "" {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: "dcgmi diag runtime error: " + r.RuntimeError})
	}
	if r.ExitFailure != "" {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: "DCGM failed the run: " + r.ExitFailure})
	}
	passed := 0
	for _, t := range r.Tests {
		switch t.Status {
		case "Fail":
			msg := fmt.Sprintf("DCGM %s/%s failed", t.Category, t.Name)
			if internalErrorOnly(t.Warnings) {
				// DCGM's own words for a test that broke rather than found
				// a fault ("There was an internal error during the test");
				// the node is not vouched for, so it still fails.
				msg = fmt.Sprintf("DCGM %s/%s could not complete (internal error in the test; check the DCGM logs and rerun)", t.Category, t.Name)
			}
			if len(t.Failed) > 0 {
				msg += " on " + strings.Join(t.Failed, " ")
			}
			msg += firstWarning(t.Warnings)
			if t.Basis == DCGMBasisUnresolved {
				msg += " [dcgmi prints a warning as Fail too, and its output here cannot tell them apart]"
			}
			out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: msg})
		case "Warn":
			msg := fmt.Sprintf("DCGM %s/%s warned", t.Category, t.Name) + firstWarning(t.Warnings)
			if t.Fix != "" {
				msg += "; fix: " + t.Fix
			}
			lvl := LevelWarning
			if warnFails {
				lvl = LevelFail
				msg += " (a failure under --dcgm-warn-fails)"
			}
			out = append(out, Finding{Check: CheckDCGM, Level: lvl, Message: msg})
		case "Pass":
			passed++
		}
	}
	if len(r.Tests) == 0 && r.RuntimeError == "" {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: "dcgmi diag reported no tests"})
	}
	// Skip is DCGM's "the test did not run" (Pass, Skip, Warn, Fail): a
	// run that skipped every test vouches for nothing.
	if len(r.Tests) > 0 && passed == 0 && len(out) == 0 {
		names := make([]string, 0, len(r.Tests))
		for _, t := range r.Tests {
			names = append(names, t.Category+"/"+t.Name)
		}
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: fmt.Sprintf("DCGM skipped all %d tests (%s): nothing was checked; see why with dcgmi diag -r 1 -v", len(r.Tests), strings.Join(names, ", "))})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelInfo, Message: "DCGM level 1: " + strconv.Itoa(passed) + " tests passed"})
	}
	return out
}

func firstWarning(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ": " + ws[0]
	}
	return fmt.Sprintf(": %s (and %d more)", ws[0], len(ws)-1)
}

func internalErrorOnly(ws []string) bool {
	if len(ws) == 0 {
		return false
	}
	for _, w := range ws {
		if !strings.Contains(w, "internal error during the test") {
			return false
		}
	}
	return true
}
