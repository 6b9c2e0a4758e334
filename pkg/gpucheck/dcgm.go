package gpucheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// DCGMTest is one test of a dcgmi diag run.
type DCGMTest struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	// Status is DCGM's own result for the test: Pass, Warn, Skip or Fail.
	// Basis says how it was read from dcgmi's output.
	Status string `json:"status"`
	Basis  string `json:"basis,omitempty"`
	// Failed lists the entities ("GPU3") DCGM printed as failing.
	Failed   []string `json:"failed,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Fix is the gate's fix for a test DCGM warned on (dcgm-level1.csv).
	Fix string `json:"fix,omitempty"`
}

// Bases of DCGMTest.Status.
const (
	// DCGMBasisPrinted: dcgmi printed Pass or Skip.
	DCGMBasisPrinted = "printed"
	// DCGMBasisTable: the human table printed DCGM's own word (the 4.x test
	// row, or a 3.x per-GPU row), which tells Warn from Fail.
	DCGMBasisTable = "table"
	// DCGMBasisExitStatus: dcgmi printed Fail, which is also how it prints
	// a warning, and DCGM 3.x's exit status told which.
	DCGMBasisExitStatus = "exit-status"
	// DCGMBasisLevel1Codes: dcgmi printed Fail and DCGM's level-1 test gives
	// every error code of the test a warning on this release line.
	DCGMBasisLevel1Codes = "level1-codes"
	// DCGMBasisUnresolved: dcgmi printed Fail and nothing in its output
	// tells a warning from a failure: the gate takes it as a failure.
	DCGMBasisUnresolved = "unresolved"
	// DCGMBasisMessage: DCGM passed the test and printed a message anyway.
	DCGMBasisMessage = "message"
)

// DCGMRun is one dcgmi run the check pod made.
type DCGMRun struct {
	// Command is the dcgmi command line, "" for output without the check
	// pod's exit line.
	Command string `json:"command,omitempty"`
	// Output is what it printed: json, table, error or none.
	Output string `json:"output"`
	// ExitStatus is dcgmi's exit status when the pod recorded it.
	ExitStatus *int `json:"exitStatus,omitempty"`
}

// DCGMResult is a parsed check pod log: `dcgmi diag -r 1 -j` and
// `dcgmi diag -r 1` with their exit statuses (DCGMCommand), or either
// output alone.
type DCGMResult struct {
	Version string `json:"version,omitempty"`
	// Line is the DCGM release line whose rules read the output (3.2, 3.3,
	// 3 for other 3.x, 4), "" when the output does not say.
	Line         string     `json:"line,omitempty"`
	Tests        []DCGMTest `json:"tests"`
	RuntimeError string     `json:"runtimeError,omitempty"`
	// ExitFailure is a failure DCGM told by its exit status alone.
	ExitFailure string    `json:"exitFailure,omitempty"`
	Runs        []DCGMRun `json:"runs,omitempty"`
}

// ErrNoDCGMResult means the output holds no diagnostic result.
var ErrNoDCGMResult = errors.New("no dcgmi diag result in the output")

// dcgmExitRe is the line DCGMCommand prints after each dcgmi run.
var dcgmExitRe = regexp.MustCompile(`(?m)^gpu-validate: (dcgmi [^\n]*?) exited (\d+)[ \t\r]*$`)

// dcgmWarning is one warning of a result. Its keys are those of DCGM's
// NvvsJsonStrings.h (NVIDIA/DCGM nvvs/include): the message under "warning"
// (NVVS_WARNING; 3.3.x's level-one tests put it under "warnings",
// NVVS_WARNINGS, inside the object, dcgmi/Diag.cpp v3.3.8
// HelperJsonAddBasicTests), "error_id", "error_category" and
// "error_severity". DCGM 3.2's dcgmi (Diag.cpp v3.2.6 HelperJsonAddResult)
// writes a result's warning as a bare string with its code beside it on the
// result (dcgmResultEntry.ErrorID), and a level-one test's with no code.
type dcgmWarning struct {
	Msg      string
	Code     *int64
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
		w.Msg = s
		w.bare = true
		return nil
	}
	var o map[string]any
	if json.Unmarshal(b, &o) == nil {
		for _, k := range []string{"warning", "warnings"} {
			if v, ok := o[k].(string); ok && v != "" {
				w.Msg = v
				break
			}
		}
		w.Code = jsonInt(o["error_id"])
		w.Severity = jsonInt(o["error_severity"])
	}
	return nil
}

// text is the warning as the gate prints it: DCGM's message, then its code,
// the code's name and the severity DCGM wrote (else the one its table gives
// the code), which explain the warning and never decide the verdict.
func (w dcgmWarning) text() string {
	if w.Code == nil {
		return w.Msg
	}
	note := "error " + strconv.FormatInt(*w.Code, 10)
	if n := dcgmCodeName(*w.Code); n != "" {
		note += " " + n
	}
	if w.Severity != nil {
		note += ", severity " + dcgmSeverityName(*w.Severity)
	} else if sev, ok := dcgmTableSeverity(*w.Code); ok {
		note += ", severity " + dcgmSeverityName(sev) + " in DCGM's table"
	}
	return strings.TrimSpace(w.Msg + " (" + note + ")")
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
	if one.Msg != "" {
		*ws = dcgmWarnings{one}
	}
	return nil
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
	Status      flexString   `json:"status"`
	GPUID       flexString   `json:"gpu_id"`
	GPUIDs      flexString   `json:"gpu_ids"`
	EntityGroup flexString   `json:"entity_group"`
	EntityID    flexString   `json:"entity_id"`
	Warnings    dcgmWarnings `json:"warnings"`
	// ErrorID is DCGM 3.2's result-level error code, beside the result's
	// warning string (Diag.cpp v3.2.6 HelperJsonAddResult).
	ErrorID any `json:"error_id"`
}

// attachErrorID gives DCGM 3.2's result-level error code to the result's
// one bare warning. DCGM joins all of a result's warnings into that string
// with ", " and keeps the code of the first only (DcgmDiagManager
// PopulateErrorDetail, NVIDIA/DCGM modules/diag), so a string with that
// seam may hold warnings the code does not cover: its code is marked
// partial.
func (e *dcgmResultEntry) attachErrorID() {
	code := jsonInt(e.ErrorID)
	if code == nil || len(e.Warnings) != 1 {
		return
	}
	w := &e.Warnings[0]
	if !w.bare || w.Code != nil {
		return
	}
	w.Code = code
	w.partial = strings.Contains(w.Msg, ", ")
}

type dcgmDoc struct {
	Categories []struct {
		Category string `json:"category"`
		// Tests may hold nulls (DCGM's "Deserialize real output" test of
		// JsonResult, a 3.1.0 document, has one after every test).
		Tests []*struct {
			Name    string            `json:"name"`
			Results []dcgmResultEntry `json:"results"`
			Summary *dcgmResultEntry  `json:"test_summary"`
		} `json:"tests"`
	} `json:"test_categories"`
	Version      flexString `json:"version"`
	RuntimeError flexString `json:"runtime_error"`
}

// dcgmRoots are the top-level keys of DCGM 4 ("DCGM Diagnostic") and of
// DCGM 2 and 3 ("DCGM GPU Diagnostic"), NVVS_NAME in NvvsJsonStrings.h.
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

func normStatus(s string) string {
	switch strings.ToLower(s) {
	case "fail":
		return "Fail"
	case "warn", "warning":
		return "Warn"
	case "pass":
		return "Pass"
	case "skip":
		return "Skip"
	}
	return s
}

// dcgmOutput is what one dcgmi run printed.
type dcgmOutput struct {
	run          DCGMRun
	version      string
	major        int // DCGM's major version as the output shows it, 0 unknown
	runtimeError string
	tests        []dcgmSeen
}

// dcgmSeen is one test as one run printed it.
type dcgmSeen struct {
	category, name string
	// word is the worst result printed for the test; own says it is DCGM's
	// own result: a "Fail" from dcgmi -j, or from a 3.x level-one table
	// row, is not (dcgmi writes DCGM_DIAG_RESULT_WARN as "Fail" there).
	word string
	own  bool
	// failed are the entities printed as failing.
	failed   []string
	warnings []dcgmWarning
}

// ParseDCGM reads the log of the DCGM check pod (DCGMCommand): the JSON of
// `dcgmi diag -r 1 -j` and the human table of `dcgmi diag -r 1`, each
// followed by the pod's line with dcgmi's exit status, or either output
// alone (the table as real captures show it, in ../shared/real-outputs),
// or dcgmi's "Error: ..." lines. The result holds DCGM's own verdict per
// test (dcgmverdict.go).
//
// No real `dcgmi diag -j` output could be found (see
// ../shared/real-outputs/README.md): the JSON reader follows DCGM's writer,
// dcgmi/Diag.cpp at v3.2.6 (HelperJsonAddBasicTests: a level-one result's
// warning as a string; HelperJsonAddResult: "gpu_ids", the warning string
// and "error_id" beside it), v3.3.8 (level-one results with "gpu_id" and
// warning objects under "warnings"; per-GPU results with "gpu_id" and
// objects with "warning", "error_id", "error_category", "error_severity"),
// v4.2.3 and v4.4.2 (per-entity results, "test_summary", "metadata"), and
// HelperDisplayFailureMessage's {NVVS_NAME: {"version", "runtime_error"}}.
func ParseDCGM(r io.Reader) (*DCGMResult, error) {
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("reading dcgmi output: %w", err)
	}
	var outs []dcgmOutput
	prev := 0
	add := func(text []byte, cmd string, exit *int) {
		out, ok := parseDCGMOutput(text)
		if !ok && exit == nil {
			return
		}
		out.run.Command, out.run.ExitStatus = cmd, exit
		if !ok {
			out.run.Output = "none"
			if *exit != 0 {
				out.runtimeError = fmt.Sprintf("%s exited %d without a result", cmd, *exit)
				if first := firstLine(text); first != "" {
					out.runtimeError += ": " + first
				}
			}
		}
		outs = append(outs, out)
	}
	for _, m := range dcgmExitRe.FindAllSubmatchIndex(data, 20) {
		code, err := strconv.Atoi(string(data[m[4]:m[5]]))
		if err != nil {
			continue
		}
		add(data[prev:m[0]], string(data[m[2]:m[3]]), &code)
		prev = m[1]
	}
	add(data[prev:], "", nil)
	if len(outs) == 0 {
		return nil, ErrNoDCGMResult
	}
	return mergeDCGM(outs), nil
}

func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200]
			}
			return l
		}
	}
	return ""
}

// parseDCGMOutput reads one run's output: its JSON, else its table, else
// its "Error: ..." lines.
func parseDCGMOutput(data []byte) (dcgmOutput, bool) {
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '{')
		if i < 0 {
			break
		}
		start := off + i
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(bytes.NewReader(data[start:])).Decode(&raw); err == nil {
			if out, ok := dcgmFromRaw(raw); ok {
				return out, true
			}
		}
		nl := bytes.IndexByte(data[start:], '\n')
		if nl < 0 {
			break
		}
		off = start + nl + 1
	}
	return parseDCGMTable(data)
}

func dcgmFromRaw(raw map[string]json.RawMessage) (dcgmOutput, bool) {
	var doc *dcgmDoc
	out := dcgmOutput{run: DCGMRun{Output: "json"}}
	for i, root := range dcgmRoots {
		if b, ok := raw[root]; ok {
			if err := json.Unmarshal(b, &doc); err != nil || doc == nil {
				return out, false
			}
			out.major = 4 - i // the 4.x root, else 2.x and 3.x
			break
		}
	}
	if doc == nil {
		return out, false
	}
	var top struct {
		Metadata *struct {
			Version flexString `json:"version"`
		} `json:"metadata"`
		Version flexString `json:"version"`
	}
	if b, err := json.Marshal(raw); err == nil {
		_ = json.Unmarshal(b, &top)
	}
	out.version = string(doc.Version)
	if top.Version != "" {
		out.version = string(top.Version)
	}
	if top.Metadata != nil && top.Metadata.Version != "" {
		out.version = string(top.Metadata.Version)
	}
	if m := dcgmMajor(out.version); m > 0 {
		out.major = m
	}
	out.runtimeError = dcgmErrorLines(string(doc.RuntimeError))
	for _, c := range doc.Categories {
		for _, t := range c.Tests {
			if t == nil {
				continue
			}
			seen := dcgmSeen{category: c.Category, name: t.Name, own: true}
			entries := t.Results
			if t.Summary != nil {
				entries = append([]dcgmResultEntry{*t.Summary}, entries...)
			}
			for _, e := range entries {
				e.attachErrorID()
				st := normStatus(string(e.Status))
				if statusRank(st) > statusRank(seen.word) || seen.word == "" {
					seen.word = st
				}
				// A 3.x level-one result's "gpu_id" is that of its first
				// error (0 when the error names no GPU), not an entity.
				if statusRank(st) == 3 && !(out.major < 4 && c.Category == "Deployment") {
					if ent := entityName(e); ent != "" {
						seen.failed = append(seen.failed, ent)
					}
				}
				for _, w := range e.Warnings {
					if w.Msg != "" && len(seen.warnings) < 20 {
						seen.warnings = append(seen.warnings, w)
					}
				}
			}
			// dcgmi -j writes DCGM_DIAG_RESULT_WARN as "Fail"
			// (HelperDisplayDiagResult: Pass, Skip, else Fail, at v3.2.6
			// and v3.3.8; without DDR_DISPLAY_WARN at v4.2.3 and v4.4.2).
			seen.own = statusRank(seen.word) != 3
			if len(out.tests) < 1000 {
				out.tests = append(out.tests, seen)
			}
		}
	}
	if len(out.tests) == 0 && out.runtimeError == "" {
		return out, false
	}
	return out, true
}

// dcgmErrorLines joins dcgmi's error message lines as the table reader
// does with its "Error: ..." lines (HelperDisplayFailureMessage writes the
// same message into runtime_error with -j and as lines without).
func dcgmErrorLines(msg string) string {
	var lines []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimPrefix(strings.TrimSpace(l), "Error: "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// dcgmMajor is the major number of a DCGM version, 0 when unknown.
func dcgmMajor(v string) int {
	major, _, _ := strings.Cut(strings.TrimSpace(v), ".")
	n, err := strconv.Atoi(major)
	if err != nil || n <= 0 {
		return 0
	}
	return n
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
