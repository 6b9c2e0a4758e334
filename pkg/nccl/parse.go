package nccl

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Layout names the output layout a parse recognised.
type Layout string

// Layouts of all_reduce_perf output.
const (
	// LayoutText is the text table of nccl-tests 2.x with a root column and
	// #wrong counts (N/A when validation is off).
	LayoutText Layout = "text"
	// LayoutTextLegacy is the older text table without a root column, with a
	// floating-point "error" column instead of #wrong.
	LayoutTextLegacy Layout = "text-legacy"
	// LayoutJSON is the JSON report newer nccl-tests versions write to a
	// file named *.json.
	LayoutJSON Layout = "json"
)

// Measurement is one half (out-of-place or in-place) of a result row.
type Measurement struct {
	// TimeUS is the time per operation in microseconds.
	TimeUS float64 `json:"timeUs"`
	// AlgBW and BusBW are in GB/s.
	AlgBW float64 `json:"algBw"`
	BusBW float64 `json:"busBw"`
	// Wrong is the number of wrong elements; nil when validation was off
	// (N/A) or the layout has no such column.
	Wrong *int64 `json:"wrong,omitempty"`
	// Error is the relative error of the legacy layout.
	Error *float64 `json:"error,omitempty"`
	// Valid is false when this half was not run or could not be read.
	Valid bool `json:"valid"`
}

// Row is one message size of the results table.
type Row struct {
	SizeBytes  int64       `json:"sizeBytes"`
	Count      int64       `json:"count"`
	Type       string      `json:"type"`
	Redop      string      `json:"redop"`
	Root       string      `json:"root,omitempty"`
	OutOfPlace Measurement `json:"outOfPlace"`
	InPlace    Measurement `json:"inPlace"`
}

// Result is a parsed all_reduce_perf run.
type Result struct {
	Layout Layout `json:"layout"`
	Rows   []Row  `json:"rows"`
	// Ranks is how many "Rank N ... on HOST device D" lines were seen.
	Ranks int `json:"ranks"`
	// Hosts lists the distinct hosts of those lines, in order of appearance.
	Hosts []string `json:"hosts,omitempty"`
	// OutOfBounds is the "Out of bounds values" count; nil when absent.
	OutOfBounds *int64 `json:"outOfBounds,omitempty"`
	// AvgBusBW is the "Avg bus bandwidth" line (GB/s); nil when absent.
	AvgBusBW *float64 `json:"avgBusBw,omitempty"`
	// Errors are "# error:" lines and the JSON report's errors.
	Errors []string `json:"errors,omitempty"`
	// NCCLWarnings are "NCCL WARN" debug lines (kept for the report).
	NCCLWarnings []string `json:"ncclWarnings,omitempty"`
}

// ErrNoResults means the output holds no results table.
var ErrNoResults = errors.New("no all_reduce_perf results in the output")

// Row returns the row for a message size.
func (r *Result) Row(size int64) (Row, bool) {
	for _, row := range r.Rows {
		if row.SizeBytes == size {
			return row, true
		}
	}
	return Row{}, false
}

// WrongTotal sums #wrong over every row and both halves.
func (r *Result) WrongTotal() int64 {
	var n int64
	for _, row := range r.Rows {
		for _, m := range []Measurement{row.OutOfPlace, row.InPlace} {
			if m.Wrong != nil && *m.Wrong > 0 {
				n += *m.Wrong
			}
		}
	}
	return n
}

// maxLine bounds one line of output; longer lines are cut.
const maxLine = 1 << 20

// tagPrefix matches Open MPI's --tag-output prefix ("[1,0]<stdout>:") and
// an optional --timestamp-output date before it.
var tagPrefix = regexp.MustCompile(`^(?:[^\[]*)\[\d+,\d+\]<std(?:out|err)>:\s?`)

// srunLabel is the task-number prefix of `srun --label` ("0: "), seen in
// real two-node outputs (aws-samples/awsome-distributed-training,
// micro-benchmarks/nccl-tests/README.md). A result row never has a colon
// right after its first number.
var srunLabel = regexp.MustCompile(`^\s*\d+: `)

// rankLine matches the device lines of the header.
var rankLine = regexp.MustCompile(`^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device`)

// Parse reads all_reduce_perf output in any supported layout. It tolerates
// Open MPI --tag-output prefixes, NCCL_DEBUG lines mixed in, and a JSON
// report printed anywhere in the stream (used when there is no text table).
func Parse(r io.Reader) (*Result, error) {
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading all_reduce_perf output: %w", err)
	}
	res := parseText(data)
	if len(res.Rows) > 0 {
		return res, nil
	}
	if js, ok := findJSONReport(data); ok && len(js.Rows) > 0 {
		return js, nil
	}
	return res, ErrNoResults
}

// ParseString is Parse for a string.
func ParseString(s string) (*Result, error) { return Parse(strings.NewReader(s)) }

func stripPrefix(line string) string {
	line = strings.TrimRight(line, "\r")
	if loc := tagPrefix.FindStringIndex(line); loc != nil {
		line = line[loc[1]:]
	} else if loc := srunLabel.FindStringIndex(line); loc != nil {
		line = line[loc[1]:]
	}
	return line
}

type columns struct {
	names  []string
	legacy bool
}

func parseHeader(fields []string) (columns, bool) {
	// fields exclude the leading "#".
	hasSize, hasBus := false, false
	for _, f := range fields {
		switch f {
		case "size":
			hasSize = true
		case "busbw":
			hasBus = true
		}
	}
	if !hasSize || !hasBus {
		return columns{}, false
	}
	c := columns{names: fields}
	for _, f := range fields {
		if f == "error" {
			c.legacy = true
		}
	}
	return c, true
}

func parseText(data []byte) *Result {
	res := &Result{Layout: LayoutText}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	var cols *columns
	seenHosts := map[string]bool{}
	for sc.Scan() {
		line := stripPrefix(sc.Text())
		trim := strings.TrimSpace(line)
		if trim == "" {
			continue
		}
		if strings.Contains(trim, "NCCL WARN") {
			res.NCCLWarnings = appendCapped(res.NCCLWarnings, trim)
			continue
		}
		if strings.HasPrefix(trim, "#") {
			body := strings.TrimSpace(strings.TrimPrefix(trim, "#"))
			if m := rankLine.FindStringSubmatch(trim); m != nil {
				res.Ranks++
				if !seenHosts[m[2]] {
					seenHosts[m[2]] = true
					res.Hosts = appendCapped(res.Hosts, m[2])
				}
				continue
			}
			if c, ok := parseHeader(strings.Fields(body)); ok {
				cols = &c
				continue
			}
			if v, ok := strings.CutPrefix(body, "Out of bounds values"); ok {
				if n, ok := firstInt(strings.TrimLeft(v, " :")); ok {
					res.OutOfBounds = &n
				}
				continue
			}
			if v, ok := strings.CutPrefix(body, "Avg bus bandwidth"); ok {
				if f, ok := firstFloat(strings.TrimLeft(v, " :")); ok {
					res.AvgBusBW = &f
				}
				continue
			}
			if v, ok := strings.CutPrefix(body, "error:"); ok {
				res.Errors = appendCapped(res.Errors, strings.TrimSpace(v))
			}
			continue
		}
		row, ok := parseRow(strings.Fields(trim), cols)
		if !ok {
			continue
		}
		if cols != nil && cols.legacy || cols == nil && row.Root == "" {
			res.Layout = LayoutTextLegacy
		}
		if len(res.Rows) < 4096 {
			res.Rows = append(res.Rows, row)
		}
	}
	return res
}

func appendCapped(s []string, v string) []string {
	if len(s) >= 256 {
		return s
	}
	if len(v) > 512 {
		v = v[:512]
	}
	return append(s, v)
}

func firstInt(s string) (int64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	return n, err == nil
}

func firstFloat(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, false
	}
	return parseFloat(f[0])
}

func parseFloat(s string) (float64, bool) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func isTypeName(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// parseRow reads one data line. Without a header it guesses the layout
// from the number of fields: 13 (root and #wrong) or 12 (legacy), plus two
// optional timestamp fields.
func parseRow(f []string, cols *columns) (Row, bool) {
	if len(f) < 8 {
		return Row{}, false
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	count, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || size < 0 || count < 0 || !isTypeName(f[2]) || !isTypeName(f[3]) {
		return Row{}, false
	}
	row := Row{SizeBytes: size, Count: count, Type: f[2], Redop: f[3]}
	hasRoot := false
	legacy := false
	if cols != nil {
		legacy = cols.legacy
		for _, n := range cols.names {
			if n == "root" {
				hasRoot = true
			}
		}
	} else {
		switch {
		case len(f) == 12 || len(f) == 14 && !looksInt(f[4]):
			legacy = true
		default:
			hasRoot = true
		}
	}
	i := 4
	if hasRoot {
		row.Root = f[i]
		i++
	}
	rest := f[i:]
	// Each half has four fields; an in-place-only line has four in total.
	switch {
	case len(rest) >= 8:
		row.OutOfPlace = parseHalf(rest[0:4], legacy)
		row.InPlace = parseHalf(rest[4:8], legacy)
	case len(rest) >= 4:
		row.InPlace = parseHalf(rest[0:4], legacy)
	default:
		return Row{}, false
	}
	if !row.OutOfPlace.Valid && !row.InPlace.Valid {
		return Row{}, false
	}
	return row, true
}

func looksInt(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

func parseHalf(f []string, legacy bool) Measurement {
	var m Measurement
	t, ok1 := parseFloat(f[0])
	a, ok2 := parseFloat(f[1])
	b, ok3 := parseFloat(f[2])
	if !ok1 || !ok2 || !ok3 {
		return m
	}
	m.TimeUS, m.AlgBW, m.BusBW, m.Valid = t, a, b, true
	w := f[3]
	if legacy {
		if e, ok := parseFloat(w); ok {
			m.Error = &e
		}
		return m
	}
	if strings.EqualFold(w, "N/A") {
		return m
	}
	if v, ok := parseFloat(w); ok && !math.IsNaN(v) && v >= 0 && v < 1e18 {
		n := int64(v)
		m.Wrong = &n
	}
	return m
}

// jsonReport is the JSON report of newer nccl-tests.
type jsonReport struct {
	Version any `json:"version"`
	Config  *struct {
		Devices []struct {
			Rank     int    `json:"rank"`
			Hostname string `json:"hostname"`
		} `json:"devices"`
	} `json:"config"`
	Results []struct {
		Size       jsonNumber `json:"size"`
		Count      jsonNumber `json:"count"`
		Type       string     `json:"type"`
		Redop      string     `json:"redop"`
		Root       string     `json:"root"`
		OutOfPlace *jsonHalf  `json:"out_of_place"`
		InPlace    *jsonHalf  `json:"in_place"`
	} `json:"results"`
	OutOfBounds *struct {
		Count jsonNumber `json:"count"`
	} `json:"out_of_bounds"`
	AverageBusBandwidth *struct {
		Bandwidth jsonNumber `json:"bandwidth"`
	} `json:"average_bus_bandwidth"`
	Errors []string `json:"errors"`
}

type jsonHalf struct {
	Time    jsonNumber  `json:"time"`
	CPUTime jsonNumber  `json:"cpu_time"`
	AlgBW   jsonNumber  `json:"alg_bw"`
	BusBW   jsonNumber  `json:"bus_bw"`
	NWrong  *jsonNumber `json:"nwrong"`
}

// jsonNumber accepts a number, or a string such as "nan"; NaN and
// unparseable values read as unset.
type jsonNumber struct {
	V   float64
	Set bool
}

func (n *jsonNumber) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	n.V, n.Set = v, true
	return nil
}

func (h *jsonHalf) measurement() Measurement {
	if h == nil {
		return Measurement{}
	}
	t := h.Time
	if !t.Set {
		t = h.CPUTime
	}
	m := Measurement{TimeUS: t.V, AlgBW: h.AlgBW.V, BusBW: h.BusBW.V, Valid: h.BusBW.Set}
	if h.NWrong != nil && h.NWrong.Set && h.NWrong.V >= 0 && h.NWrong.V < 1e18 {
		w := int64(h.NWrong.V)
		m.Wrong = &w
	}
	return m
}

// findJSONReport looks for a JSON report with a "results" list on a line
// of its own anywhere in the output (a launcher may print it after the text
// table). Only lines that open an object are tried, so the search is linear
// in practice.
func findJSONReport(data []byte) (*Result, bool) {
	off := 0
	for off < len(data) {
		end := bytes.IndexByte(data[off:], '\n')
		lineEnd := len(data)
		if end >= 0 {
			lineEnd = off + end
		}
		line := strings.TrimRight(string(data[off:lineEnd]), "\r")
		stripped := stripPrefix(line)
		trimmed := strings.TrimLeft(stripped, " \t")
		if strings.HasPrefix(trimmed, "{") {
			start := off + (len(line) - len(trimmed))
			var rep jsonReport
			if err := json.NewDecoder(bytes.NewReader(data[start:])).Decode(&rep); err == nil && rep.Results != nil {
				return rep.result(), true
			}
		}
		if end < 0 {
			break
		}
		off = lineEnd + 1
	}
	return nil, false
}

func (rep *jsonReport) result() *Result {
	res := &Result{Layout: LayoutJSON}
	if rep.Config != nil {
		seen := map[string]bool{}
		for _, d := range rep.Config.Devices {
			res.Ranks++
			if d.Hostname != "" && !seen[d.Hostname] {
				seen[d.Hostname] = true
				res.Hosts = appendCapped(res.Hosts, d.Hostname)
			}
		}
	}
	for _, r := range rep.Results {
		if !r.Size.Set || r.Size.V < 0 || r.Size.V > 1<<62 {
			continue
		}
		row := Row{SizeBytes: int64(r.Size.V), Type: r.Type, Redop: r.Redop, Root: strings.TrimSpace(r.Root),
			OutOfPlace: r.OutOfPlace.measurement(), InPlace: r.InPlace.measurement()}
		if r.Count.Set && r.Count.V >= 0 && r.Count.V < 1<<62 {
			row.Count = int64(r.Count.V)
		}
		if len(res.Rows) < 4096 {
			res.Rows = append(res.Rows, row)
		}
	}
	if rep.OutOfBounds != nil && rep.OutOfBounds.Count.Set {
		n := int64(rep.OutOfBounds.Count.V)
		res.OutOfBounds = &n
	}
	if rep.AverageBusBandwidth != nil && rep.AverageBusBandwidth.Bandwidth.Set {
		v := rep.AverageBusBandwidth.Bandwidth.V
		res.AvgBusBW = &v
	}
	for _, e := range rep.Errors {
		if strings.TrimSpace(e) != "" {
			res.Errors = appendCapped(res.Errors, e)
		}
	}
	return res
}
