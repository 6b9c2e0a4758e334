package gpucheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// DCGMTest is one test of a dcgmi diag run.
type DCGMTest struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	// Status is the worst status over its results: Pass, Warn, Skip or Fail.
	Status string `json:"status"`
	// Failed lists the entities ("GPU3") whose result failed.
	Failed   []string `json:"failed,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// DCGMResult is a parsed `dcgmi diag -r 1 -j`.
type DCGMResult struct {
	Version      string     `json:"version,omitempty"`
	Tests        []DCGMTest `json:"tests"`
	RuntimeError string     `json:"runtimeError,omitempty"`
}

// ErrNoDCGMResult means the output holds no diagnostic JSON.
var ErrNoDCGMResult = errors.New("no dcgmi diag JSON in the output")

// dcgmWarning is one entry of a result's "warnings". The keys are those of
// DCGM's NvvsJsonStrings.h (NVIDIA/DCGM nvvs/include): the message under
// "warning" (NVVS_WARNING), "error_id" (NVVS_ERROR_ID), and in DCGM 4
// "error_category" and "error_severity". Some 3.3.x writers put the message
// under "warnings" inside the object as well; both are read. A bare string
// is taken as the message: DCGM 3's dcgmi writes a result's warnings as one
// string, with the error code beside it on the result (see
// dcgmResultEntry.ErrorID).
type dcgmWarning struct {
	Text     string
	ErrorID  *int64
	Severity *int64
	// bare: the warning was a bare string (no keys of its own).
	bare bool
	// partial: its error code is known to cover only part of the text.
	partial bool
}

func jsonInt(v any) *int64 {
	switch n := v.(type) {
	case float64:
		i := int64(n)
		return &i
	case string:
		if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
			return &i
		}
	}
	return nil
}

func (w *dcgmWarning) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		w.Text = s
		w.bare = true
		return nil
	}
	var o map[string]any
	if json.Unmarshal(b, &o) == nil {
		for _, k := range []string{"warning", "warnings", "message"} {
			if v, ok := o[k].(string); ok && v != "" {
				w.Text = v
				break
			}
		}
		w.ErrorID = jsonInt(o["error_id"])
		if w.ErrorID == nil {
			w.ErrorID = jsonInt(o["error_code"])
		}
		w.Severity = jsonInt(o["error_severity"])
		w.noteCode()
	}
	return nil
}

// noteCode appends the error code to the message.
func (w *dcgmWarning) noteCode() {
	if w.ErrorID != nil {
		w.Text = strings.TrimSpace(fmt.Sprintf("%s (error %d)", w.Text, *w.ErrorID))
	}
}

// keepsWorking says the warning lets the GPU keep working: by the severity
// DCGM wrote (DCGM 4), else by the severity DCGM's table gives its error
// code (DCGM 3 writes the code alone; dcgmCodeKeepsWorking). A warning with
// neither, or whose code covers only part of its text, does not.
func (w dcgmWarning) keepsWorking() bool {
	switch {
	case w.Severity != nil:
		return dcgmSeverityKeepsWorking(*w.Severity)
	case w.ErrorID != nil && !w.partial:
		return dcgmCodeKeepsWorking(*w.ErrorID)
	}
	return false
}

type dcgmWarnings []dcgmWarning

func (ws *dcgmWarnings) UnmarshalJSON(b []byte) error {
	var list []dcgmWarning
	if json.Unmarshal(b, &list) == nil {
		*ws = list
		return nil
	}
	var one dcgmWarning
	_ = one.UnmarshalJSON(b)
	if one.Text != "" {
		*ws = dcgmWarnings{one}
	}
	return nil
}

// DCGM error severities (dcgmErrorSeverity_t in DCGM's dcgm_errors.h):
// 0 NONE, 1 MONITOR ("can perform workload, but needs to be monitored"),
// 2 ISOLATE, 3 UNKNOWN, 4 TRIAGE, 5 CONFIG, 6 RESET.
const (
	dcgmSeverityNone    = 0
	dcgmSeverityMonitor = 1
	dcgmSeverityConfig  = 5
)

// onlyWarns says a failing result is a warning: dcgmi prints a WARN result
// as "Fail" (its HelperDisplayDiagResult writes Pass, Skip or else Fail;
// DCGM's own test of `dcgmi diag -j` injects a temperature violation and
// asserts status "Fail" with error_severity DCGM_ERROR_MONITOR, NVIDIA/DCGM
// testing/python3 tests, helper_per_gpu_responses_dcgmi), so the word alone
// cannot tell. A result warns when it carries warnings and every one lets
// the GPU keep working (dcgmWarning.keepsWorking: the severity DCGM wrote,
// else the severity of its error code); a text-only warning fails.
func onlyWarns(ws dcgmWarnings) bool {
	if len(ws) == 0 {
		return false
	}
	for _, w := range ws {
		if !w.keepsWorking() {
			return false
		}
	}
	return true
}

type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if json.Unmarshal(b, &n) == nil {
		*f = flexString(n.String())
	}
	return nil
}

type dcgmResultEntry struct {
	Status        flexString   `json:"status"`
	GPUID         flexString   `json:"gpu_id"`
	GPUIDs        flexString   `json:"gpu_ids"`
	EntityGroup   flexString   `json:"entity_group"`
	EntityID      flexString   `json:"entity_id"`
	Warnings      dcgmWarnings `json:"warnings"`
	Info          any          `json:"info"`
	RuntimeErrors any          `json:"runtime_error"`
	// ErrorID is DCGM 3's result-level error code: its dcgmi (Diag.cpp
	// HelperJsonAddResult, NVIDIA/DCGM dcgmi) writes a result's warnings as
	// one string under "warnings" and the code under "error_id" beside it.
	ErrorID any `json:"error_id"`
}

// attachErrorID gives DCGM 3's result-level error code to the result's
// one bare warning. DCGM joins all of a result's warnings into that string
// with ", " and keeps the code of the first only (DcgmDiagManager
// PopulateErrorDetail, NVIDIA/DCGM modules/diag), so a string with that
// seam may hold warnings the code does not cover: its code is marked
// partial and the warning fails. With several bare warnings none gets it.
func (e *dcgmResultEntry) attachErrorID() {
	code := jsonInt(e.ErrorID)
	if code == nil || len(e.Warnings) != 1 {
		return
	}
	w := &e.Warnings[0]
	if !w.bare || w.ErrorID != nil {
		return
	}
	w.ErrorID = code
	w.partial = strings.Contains(w.Text, ", ")
	w.noteCode()
}

type dcgmDoc struct {
	Diag *struct {
		Categories []struct {
			Category string `json:"category"`
			// Tests may hold nulls (DCGM's "Deserialize real output" test
			// of JsonResult, a 3.1.0 document, has one after every test).
			Tests []*struct {
				Name    string            `json:"name"`
				Results []dcgmResultEntry `json:"results"`
				Summary *dcgmResultEntry  `json:"test_summary"`
			} `json:"tests"`
		} `json:"test_categories"`
		Version      flexString `json:"version"`
		RuntimeError flexString `json:"runtime_error"`
	}
	Metadata *struct {
		Version flexString `json:"version"`
	} `json:"metadata"`
	RuntimeError flexString `json:"runtime_error"`
	Version      flexString `json:"version"`
}

// dcgmRoots are the top-level keys of DCGM 4 ("DCGM Diagnostic") and of
// DCGM 2 and 3 ("DCGM GPU Diagnostic").
var dcgmRoots = []string{"DCGM Diagnostic", "DCGM GPU Diagnostic"}

func statusRank(s string) int {
	switch strings.ToLower(s) {
	case "fail":
		return 3
	case "warn", "warning":
		return 2
	case "pass":
		return 1
	}
	return 0
}

// ParseDCGM reads the JSON of `dcgmi diag -j` (DCGM 2, 3 and 4 layouts),
// skipping any text before it, else the human table of `dcgmi diag` or its
// "Error: ..." lines.
//
// No real `dcgmi diag -j` output could be found to test against (see
// ../shared/real-outputs/README.md); the JSON reader assumes only what
// DCGM's source writes: the keys of nvvs/include/NvvsJsonStrings.h
// ("DCGM GPU Diagnostic" in 3.x, "DCGM Diagnostic" in 4.x,
// test_categories, category, tests, name, results, status, warnings,
// warning, error_id, error_category, error_severity, gpu_id(s),
// entity_group, entity_id, test_summary, version, runtime_error), null
// entries in "tests" and upper-case statuses ("PASS") as in DCGM's
// JsonResult "Deserialize real output" test, the 3.x dcgmi layout of
// dcgmi/Diag.cpp (a result's warnings as one string, its error_id beside
// them on the result), and the 4.x per-entity layout asserted by DCGM's
// python test helper_per_gpu_responses_dcgmi. The table reader is tested
// on real captures.
func ParseDCGM(r io.Reader) (*DCGMResult, error) {
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading dcgmi output: %w", err)
	}
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '{')
		if i < 0 {
			break
		}
		start := off + i
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(data[start:])).Decode(&raw); err == nil {
			if res, ok := dcgmFromRaw(raw); ok {
				return res, nil
			}
		}
		nl := bytes.IndexByte(data[start:], '\n')
		if nl < 0 {
			break
		}
		off = start + nl + 1
	}
	if res, ok := parseDCGMTable(data); ok {
		return res, nil
	}
	return nil, ErrNoDCGMResult
}

func dcgmFromRaw(raw map[string]json.RawMessage) (*DCGMResult, bool) {
	var doc dcgmDoc
	for _, root := range dcgmRoots {
		if b, ok := raw[root]; ok {
			if err := json.Unmarshal(b, &doc.Diag); err != nil || doc.Diag == nil {
				return nil, false
			}
			break
		}
	}
	if m, ok := raw["metadata"]; ok {
		_ = json.Unmarshal(m, &doc.Metadata)
	}
	if re, ok := raw["runtime_error"]; ok {
		_ = json.Unmarshal(re, &doc.RuntimeError)
	}
	if v, ok := raw["version"]; ok {
		_ = json.Unmarshal(v, &doc.Version)
	}
	res := &DCGMResult{RuntimeError: string(doc.RuntimeError)}
	if doc.Diag == nil {
		if res.RuntimeError != "" {
			return res, true
		}
		return nil, false
	}
	res.Version = string(doc.Diag.Version)
	if doc.Version != "" {
		res.Version = string(doc.Version)
	}
	if doc.Metadata != nil && doc.Metadata.Version != "" {
		res.Version = string(doc.Metadata.Version)
	}
	if res.RuntimeError == "" {
		res.RuntimeError = string(doc.Diag.RuntimeError)
	}
	for _, c := range doc.Diag.Categories {
		for _, t := range c.Tests {
			if t == nil {
				continue
			}
			dt := DCGMTest{Category: c.Category, Name: t.Name}
			entries := t.Results
			for i := range entries {
				entries[i].attachErrorID()
			}
			if t.Summary != nil {
				sum := *t.Summary
				sum.attachErrorID()
				// The summary's status is the worst word of the results,
				// so a "Fail" that only repeats results that merely warn
				// is a warning too; a "Fail" with its own severe warnings,
				// or over results that all pass (an internal error of the
				// test itself), stays a failure.
				if statusRank(string(sum.Status)) == 3 && len(sum.Warnings) == 0 && resultsOnlyWarn(entries) {
					sum.Status = "Warn"
				}
				entries = append([]dcgmResultEntry{sum}, entries...)
			}
			for _, e := range entries {
				st := string(e.Status)
				if statusRank(st) == 3 && onlyWarns(e.Warnings) {
					st = "Warn"
				}
				if statusRank(st) > statusRank(dt.Status) {
					dt.Status = normStatus(st)
				}
				if statusRank(st) == 3 {
					if ent := entityName(e); ent != "" {
						dt.Failed = append(dt.Failed, ent)
					}
				}
				for _, w := range e.Warnings {
					if w.Text != "" && len(dt.Warnings) < 20 {
						dt.Warnings = append(dt.Warnings, w.Text)
					}
				}
			}
			if dt.Status == "" {
				dt.Status = "Skip"
			}
			sort.Strings(dt.Failed)
			if len(res.Tests) < 1000 {
				res.Tests = append(res.Tests, dt)
			}
		}
	}
	return res, true
}

// resultsOnlyWarn: at least one result failed in word only (onlyWarns)
// and none failed for real.
func resultsOnlyWarn(entries []dcgmResultEntry) bool {
	warned := false
	for _, e := range entries {
		if statusRank(string(e.Status)) == 3 {
			if !onlyWarns(e.Warnings) {
				return false
			}
			warned = true
		}
	}
	return warned
}

func normStatus(s string) string {
	switch strings.ToLower(s) {
	case "fail":
		return "Fail"
	case "warn", "warning":
		return "Warn"
	case "pass":
		return "Pass"
	}
	return s
}

func entityName(e dcgmResultEntry) string {
	switch {
	case e.EntityID != "":
		g := string(e.EntityGroup)
		if g == "" {
			g = "GPU"
		}
		return g + string(e.EntityID)
	case e.GPUID != "":
		return "GPU" + string(e.GPUID)
	case e.GPUIDs != "":
		ids := strings.Split(string(e.GPUIDs), ",")
		for i := range ids {
			ids[i] = "GPU" + strings.TrimSpace(ids[i])
		}
		return strings.Join(ids, ",")
	}
	return ""
}

// DCGMFindings fails on any failed test (or a runtime error) and warns on
// warnings.
func DCGMFindings(r *DCGMResult) []Finding {
	var out []Finding
	if r.RuntimeError != "" {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: "dcgmi diag runtime error: " + r.RuntimeError})
	}
	passed := 0
	for _, t := range r.Tests {
		switch statusRank(t.Status) {
		case 3:
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
			if len(t.Warnings) > 0 {
				msg += ": " + t.Warnings[0]
			}
			out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: msg})
		case 2:
			msg := fmt.Sprintf("DCGM %s/%s warned", t.Category, t.Name)
			if len(t.Warnings) > 0 {
				msg += ": " + t.Warnings[0]
			}
			out = append(out, Finding{Check: CheckDCGM, Level: LevelWarning, Message: msg})
		case 1:
			passed++
		}
	}
	if len(r.Tests) == 0 && r.RuntimeError == "" {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelFail, Message: "dcgmi diag reported no tests"})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: CheckDCGM, Level: LevelInfo, Message: "DCGM level 1: " + strconv.Itoa(passed) + " tests passed"})
	}
	return out
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
