package gpucheck

import (
	"bufio"
	"bytes"
	"regexp"
	"sort"
	"strings"
)

// The human table of `dcgmi diag` (without -j), as DCGM 3.x and 4.x print
// it (real captures: ../shared/real-outputs/dcgm, sources in its README).
// Its layout comes from dcgmi's Diag.cpp: a header, section rows such as
// "|-----  Deployment  ---...|" or "+-----  Hardware  ---...+", and one
// "| NAME | RESULT |" row per test, each cell padded by
// CommandOutputController::ReplaceTag. Below a test come:
//   - DCGM 3.x (v3.2.6, v3.3.8): a level-one test's "Error" and "Info" rows
//     (HelperDisplayDeploymentResult; its result is HelperDisplayDiagResult,
//     which writes a warning as "Fail"), or for a per-GPU test rows such as
//     "Pass - All", "Warn - GPU: 2", "Fail - GPUs: 0, 3" (continuation rows
//     with an empty name, HelperDisplayGpuResults, which tells Warn apart),
//     then "Warning" and "Info" rows;
//   - DCGM 4.x (v4.2.3, v4.4.2): the test's own result, with Warn
//     (HelperDisplayGlobalResult, DDR_DISPLAY_WARN), its "Warning" rows,
//     then per entity a "GPU0: Pass" row (HelperDisplayEntityResults, which
//     writes a warning as "Fail") followed by "Warning: GPU0" and
//     "Info: GPU0" rows.
//
// dcgmi wraps long cells onto continuation rows with an empty name column,
// cutting words anywhere (DisplayVerboseInfo, 45 characters a row).
var (
	dcgmSectionRe = regexp.MustCompile(`^[|+]-+\s+([A-Za-z][A-Za-z ]*?)\s+-+[+|]`)
	// dcgmEntityRowRe is a 4.x entity row: "GPU0: Fail".
	dcgmEntityRowRe = regexp.MustCompile(`^([A-Z][A-Za-z]*)(\d+): (Pass|Fail|Warn|Skip)$`)
	// dcgmGPUsRowRe is a 3.x per-GPU result: "Fail - All", "Pass - GPUs: 0, 2".
	dcgmGPUsRowRe = regexp.MustCompile(`^(Pass|Fail|Warn|Skip) - (All|GPUs?: [0-9, ]+)$`)
	// dcgmCodeRowRe is the return code row under a 3.x "Diagnostic" test.
	dcgmCodeRowRe = regexp.MustCompile(`^Code: \(\d+\)$`)
	dcgmErrorRe   = regexp.MustCompile(`^Error: (.+)$`)
)

// dcgmCells splits "| name | result |" into its two cells; the result keeps
// its leading spaces past the first (they are part of wrapped text).
func dcgmCells(line string) (name, result string, ok bool) {
	line = strings.TrimRight(line, " \t") // only what follows the closing "|"
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 3 {
		return "", "", false
	}
	inner := line[1 : len(line)-1]
	i := strings.Index(inner, "|")
	if i < 0 {
		return "", "", false
	}
	name = strings.TrimSpace(inner[:i])
	result = strings.TrimPrefix(inner[i+1:], " ")
	return name, result, true
}

// dcgmChunk is the text of a wrapped cell: dcgmi cuts long text into
// chunks of dcgmWrap characters, spaces included, and pads the last one,
// so a chunk's trailing space is part of the text (joining trimmed chunks
// would glue "DCGM" to "and").
const dcgmWrap = 45

func dcgmChunk(cell string) string {
	if len(cell) > dcgmWrap {
		return cell[:dcgmWrap]
	}
	return cell
}

// dcgmTableTest is a test being read from the table.
type dcgmTableTest struct {
	seen dcgmSeen
	// perGPU: the 3.x per-GPU form ("Pass - All"), whose words are DCGM's
	// own; entities: the 4.x entity rows were seen.
	perGPU, entities bool
}

// parseDCGMTable reads the human table, else dcgmi's "Error: ..." lines;
// ok is false when there is neither.
func parseDCGMTable(data []byte) (dcgmOutput, bool) {
	out := dcgmOutput{run: DCGMRun{Output: "table"}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var (
		category string
		tests    []*dcgmTableTest
		cur      *dcgmTableTest
		text     *string // the warning cell being continued
		inTable  bool
		errs     []string
	)
	warn := func(first string) {
		text = nil
		if cur == nil || len(cur.seen.warnings) >= 20 {
			return
		}
		cur.seen.warnings = append(cur.seen.warnings, dcgmWarning{Msg: dcgmChunk(first)})
		text = &cur.seen.warnings[len(cur.seen.warnings)-1].Msg
	}
	word := func(w string) {
		if statusRank(w) > statusRank(cur.seen.word) || cur.seen.word == "" {
			cur.seen.word = w
		}
	}
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		row := strings.TrimLeft(strings.TrimRight(line, "\r"), " ")
		if m := dcgmErrorRe.FindStringSubmatch(trim); m != nil && !inTable {
			errs = append(errs, m[1])
			continue
		}
		if m := dcgmSectionRe.FindStringSubmatch(trim); m != nil {
			cur, text, inTable, category = nil, nil, true, m[1]
			continue
		}
		name, result, ok := dcgmCells(row)
		if !ok {
			continue
		}
		cell := strings.TrimSpace(result)
		switch {
		case name == "Diagnostic" && cell == "Result":
			inTable = true
		case category == "Metadata":
			if name == "DCGM Version" {
				out.version = cell
			}
		case name == "Warning" || name == "Error" || strings.HasPrefix(name, "Warning: "):
			// 4.x names an entity's warning "Warning: GPU0"; 3.x writes a
			// level-one test's errors as "Error".
			warn(result)
		case name == "Info" || strings.HasPrefix(name, "Info: "):
			text = nil // informational; not part of the verdict
		case name == "":
			if cur == nil {
				continue
			}
			if m := dcgmEntityRowRe.FindStringSubmatch(cell); m != nil {
				text = nil
				cur.entities = true
				if m[3] == "Fail" {
					cur.seen.failed = append(cur.seen.failed, m[1]+m[2])
				}
				continue
			}
			if m := dcgmGPUsRowRe.FindStringSubmatch(cell); m != nil && text == nil {
				cur.perGPU = true
				word(m[1])
				cur.seen.failed = append(cur.seen.failed, gpusOf(m[1], m[2])...)
				continue
			}
			if dcgmCodeRowRe.MatchString(cell) {
				text = nil
				continue
			}
			if text != nil && len(*text) < 2000 {
				*text += dcgmChunk(result)
			}
		default:
			text = nil
			cur = &dcgmTableTest{seen: dcgmSeen{category: category, name: name}}
			if m := dcgmGPUsRowRe.FindStringSubmatch(cell); m != nil {
				cur.perGPU = true
				word(m[1])
				cur.seen.failed = gpusOf(m[1], m[2])
			} else {
				word(normStatus(cell))
			}
			if len(tests) < 1000 {
				tests = append(tests, cur)
			}
		}
	}
	if !inTable {
		if len(errs) == 0 {
			return out, false
		}
		out.run.Output = "error"
		out.runtimeError = strings.Join(errs, "; ")
		return out, true
	}
	out.major = dcgmMajor(out.version)
	for _, t := range tests {
		s := t.seen
		if s.word == "" {
			s.word = "Skip"
		}
		// The 4.x test row and the 3.x per-GPU rows are DCGM's own word;
		// a 3.x level-one row writes a warning as "Fail", and only "Fail"
		// rows of the 4.x entities name who failed.
		s.own = statusRank(s.word) != 3 || t.perGPU || t.entities || out.major >= 4
		if t.entities && statusRank(s.word) < 2 && len(s.failed) > 0 {
			// An entity printed "Fail" (a failure or a warning) under a
			// test that passed: the table contradicts itself.
			s.word, s.own = "Fail", false
		}
		sort.Strings(s.failed)
		for i := range s.warnings {
			s.warnings[i].Msg = strings.Join(strings.Fields(s.warnings[i].Msg), " ")
		}
		out.tests = append(out.tests, s)
	}
	return out, true
}

// gpusOf lists the GPUs of a 3.x "Fail - GPUs: 0, 2" row that is not a pass.
func gpusOf(word, who string) []string {
	if word != "Fail" && word != "Warn" {
		return nil
	}
	if who == "All" {
		return nil
	}
	var out []string
	_, ids, _ := strings.Cut(who, ":")
	for _, id := range strings.Split(ids, ",") {
		if id = strings.TrimSpace(id); id != "" && word == "Fail" {
			out = append(out, "GPU"+id)
		}
	}
	return out
}
