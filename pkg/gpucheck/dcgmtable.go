package gpucheck

import (
	"bufio"
	"bytes"
	"regexp"
	"sort"
	"strings"
)

// The human table of `dcgmi diag` (without -j), as DCGM 3.3 and 4.x print
// it (real captures: ../shared/real-outputs/dcgm, sources in its README).
// Its layout comes from dcgmi's Diag.cpp: a header, section rows such as
// "|-----  Deployment  ---...|" or "+-----  Hardware  ---...+", and one
// "| NAME | RESULT |" row per test, followed by "Warning" and "Info" rows
// and, in 4.x, one "GPUn: Status" row per GPU. dcgmi wraps long cells onto
// continuation rows with an empty name column, cutting words anywhere.
var (
	dcgmSectionRe = regexp.MustCompile(`^[|+]-+\s+([A-Za-z][A-Za-z ]*?)\s+-+[+|]`)
	dcgmGPURowRe  = regexp.MustCompile(`^GPU\s?(\d+):\s*(\w+)`)
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

// parseDCGMTable reads the human table; ok is false when there is none.
func parseDCGMTable(data []byte) (*DCGMResult, bool) {
	res := &DCGMResult{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var (
		category string
		cur      *DCGMTest
		text     *string // the Warning or Info cell being continued
		inTable  bool
		errs     []string
	)
	flush := func() {
		if cur == nil {
			return
		}
		if cur.Status == "" {
			cur.Status = "Skip"
		}
		sort.Strings(cur.Failed)
		if len(res.Tests) < 1000 {
			res.Tests = append(res.Tests, *cur)
		}
		cur, text = nil, nil
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
			flush()
			inTable = true
			category = m[1]
			continue
		}
		name, result, ok := dcgmCells(row)
		if !ok {
			continue
		}
		switch {
		case name == "Diagnostic" && strings.TrimSpace(result) == "Result":
			inTable = true
		case category == "Metadata":
			if name == "DCGM Version" {
				res.Version = strings.TrimSpace(result)
			}
		case name == "Warning":
			if cur == nil {
				continue
			}
			if len(cur.Warnings) < 20 {
				cur.Warnings = append(cur.Warnings, dcgmChunk(result))
				text = &cur.Warnings[len(cur.Warnings)-1]
			} else {
				text = nil
			}
		case name == "Info":
			text = nil // informational; not part of the verdict
		case name == "":
			if cur == nil {
				continue
			}
			if m := dcgmGPURowRe.FindStringSubmatch(strings.TrimSpace(result)); m != nil {
				text = nil
				st := m[2]
				if statusRank(st) == 3 {
					cur.Failed = append(cur.Failed, "GPU"+m[1])
				}
				if statusRank(st) > statusRank(cur.Status) {
					cur.Status = normStatus(st)
				}
				continue
			}
			if text != nil && len(*text) < 2000 {
				*text += dcgmChunk(result)
			}
		default:
			flush()
			st := strings.TrimSpace(result)
			word, rest, _ := strings.Cut(st, " - ")
			cur = &DCGMTest{Category: category, Name: name, Status: normStatus(strings.TrimSpace(word))}
			if statusRank(word) == 3 && rest != "" {
				// "Fail - All", "Fail - GPU: 1", "Fail - GPUs: 0, 2".
				if r := strings.TrimSpace(rest); r != "All" {
					for _, id := range strings.Split(r[strings.Index(r, ":")+1:], ",") {
						if id = strings.TrimSpace(id); id != "" {
							cur.Failed = append(cur.Failed, "GPU"+id)
						}
					}
				}
			}
		}
	}
	flush()
	for i := range res.Tests {
		for j, w := range res.Tests[i].Warnings {
			res.Tests[i].Warnings[j] = strings.Join(strings.Fields(w), " ")
		}
	}
	if !inTable {
		if len(errs) == 0 {
			return nil, false
		}
		res.RuntimeError = strings.Join(errs, "; ")
		return res, true
	}
	return res, true
}
