package gpucheck

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// XidClass says whether an Xid fails the gate.
type XidClass string

// Xid classes, from the immediate action of NVIDIA's Xid catalog:
// RESTART_APP is application-level, IGNORE informational, anything that
// needs a GPU reset, a reboot, fabric or support action is fatal.
const (
	XidFatal         XidClass = "fatal"
	XidApplication   XidClass = "application"
	XidWarning       XidClass = "warning"
	XidInformational XidClass = "info"
)

// XidCode describes one Xid code.
type XidCode struct {
	Code  int      `json:"code"`
	Name  string   `json:"name"`
	Class XidClass `json:"class"`
}

// XidCatalogSource is where XidTable comes from.
const XidCatalogSource = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

// XidTable classifies the Xid codes seen on data-centre GPUs (A100, H100,
// B200, GB200). The class follows the catalog's "Resolution Bucket
// (Immediate Action)" column; docs/xid.md lists the table with reasons.
// Codes not in the table are treated as warnings.
var XidTable = map[int]XidCode{
	8:   {8, "GPU stopped processing (channel idle timeout)", XidApplication},
	13:  {13, "Graphics engine exception", XidApplication},
	31:  {31, "GPU memory page fault", XidApplication},
	32:  {32, "Invalid or corrupted push buffer stream", XidApplication},
	38:  {38, "Driver firmware error", XidFatal},
	43:  {43, "GPU stopped processing", XidApplication},
	45:  {45, "Preemptive cleanup after a previous error", XidInformational},
	48:  {48, "Double bit ECC error", XidFatal},
	61:  {61, "Internal micro-controller breakpoint/warning", XidFatal},
	62:  {62, "Internal micro-controller halt", XidFatal},
	63:  {63, "ECC page retirement or row remapping recorded", XidWarning},
	64:  {64, "ECC page retirement or row remapping failure", XidFatal},
	68:  {68, "Video decoder exception", XidApplication},
	69:  {69, "Graphics engine class error", XidApplication},
	74:  {74, "NVLink error", XidFatal},
	79:  {79, "GPU has fallen off the bus", XidFatal},
	92:  {92, "High single-bit ECC error rate", XidWarning},
	94:  {94, "Contained ECC error", XidWarning},
	95:  {95, "Uncontained ECC error", XidFatal},
	109: {109, "Context switch timeout", XidApplication},
	119: {119, "GSP RPC timeout", XidFatal},
	120: {120, "GSP error", XidFatal},
	121: {121, "C2C link error", XidFatal},
	140: {140, "Unrecovered ECC error", XidFatal},
	143: {143, "GPU initialization failure", XidFatal},
	154: {154, "GPU recovery action changed (reset or reboot required)", XidFatal},
}

// ClassifyXid returns the table entry, or a warning for unknown codes.
func ClassifyXid(code int) XidCode {
	if x, ok := XidTable[code]; ok {
		return x
	}
	return XidCode{Code: code, Name: "not in the catalog table", Class: XidWarning}
}

// XidEvent is one Xid (or NVSwitch SXid) line of a kernel log.
type XidEvent struct {
	Code   int      `json:"code"`
	PCI    string   `json:"pci"`
	SXid   bool     `json:"sxid,omitempty"`
	Class  XidClass `json:"class"`
	Name   string   `json:"name"`
	Detail string   `json:"detail,omitempty"`
	// Time is when the kernel logged it; zero when the line has no wall
	// clock (raw dmesg prints seconds since boot).
	Time time.Time `json:"time,omitempty"`
}

var (
	xidRe  = regexp.MustCompile(`NVRM: Xid \(([^)]*)\): (\d+)(?:,\s*(.*))?`)
	sxidRe = regexp.MustCompile(`SXid \(([^)]*)\): (\d+)(?:,\s*(.*))?`)
	// 2026-12-01T10:00:00,123456+00:00 (dmesg --time-format iso) or
	// 2026-12-01T10:00:00+0000 (journalctl -o short-iso).
	isoRe = regexp.MustCompile(`^\[?(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:[.,]\d+)?([+-]\d{2}:?\d{2}|Z)?`)
	// [Tue Dec  1 10:00:00 2026] (dmesg -T).
	ctimeRe = regexp.MustCompile(`^\[(\w{3} \w{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]`)
)

func lineTime(line string) time.Time {
	if m := isoRe.FindStringSubmatch(line); m != nil {
		zone := m[2]
		layout := "2006-01-02T15:04:05"
		s := m[1]
		switch {
		case zone == "Z":
			s += "Z"
			layout += "Z07:00"
		case len(zone) == 5:
			s += zone
			layout += "-0700"
		case len(zone) == 6:
			s += zone
			layout += "-07:00"
		}
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	if m := ctimeRe.FindStringSubmatch(line); m != nil {
		if t, err := time.Parse("Mon Jan _2 15:04:05 2006", m[1]); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// ParseKernelLog extracts Xid and SXid events from a kernel log (dmesg,
// dmesg -T or --time-format iso, journalctl -k -o short-iso, syslog).
// Events with a wall-clock time before since are dropped; events without
// one are kept. At most 10000 events are returned.
func ParseKernelLog(r io.Reader, since time.Time) ([]XidEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var out []XidEvent
	for sc.Scan() {
		line := sc.Text()
		var ev XidEvent
		if m := xidRe.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			info := ClassifyXid(code)
			ev = XidEvent{Code: code, PCI: m[1], Class: info.Class, Name: info.Name, Detail: strings.TrimSpace(m[3])}
		} else if m := sxidRe.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			ev = XidEvent{Code: code, PCI: m[1], SXid: true, Detail: strings.TrimSpace(m[3]), Name: "NVSwitch SXid", Class: XidWarning}
			if strings.HasPrefix(strings.ToLower(ev.Detail), "fatal") {
				ev.Class = XidFatal
			}
		} else {
			continue
		}
		if len(ev.Detail) > 300 {
			ev.Detail = ev.Detail[:300]
		}
		ev.Time = lineTime(line)
		if !since.IsZero() && !ev.Time.IsZero() && ev.Time.Before(since) {
			continue
		}
		out = append(out, ev)
		if len(out) >= 10000 {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading kernel log: %w", err)
	}
	return out, nil
}

// XidFindings fails on fatal events, warns on warnings and summarises
// application-level ones.
func XidFindings(events []XidEvent) []Finding {
	type key struct {
		code int
		sxid bool
	}
	groups := map[key][]XidEvent{}
	var keys []key
	for _, e := range events {
		k := key{e.Code, e.SXid}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].code < keys[j].code })
	var out []Finding
	for _, k := range keys {
		evs := groups[k]
		e := evs[0]
		pcis := map[string]bool{}
		for _, x := range evs {
			pcis[x.PCI] = true
		}
		var pl []string
		for p := range pcis {
			pl = append(pl, p)
		}
		sort.Strings(pl)
		kind := "Xid"
		if k.sxid {
			kind = "SXid"
		}
		msg := fmt.Sprintf("%s %d (%s, %s) x%d on %s", kind, k.code, e.Name, e.Class, len(evs), strings.Join(pl, " "))
		lvl := LevelInfo
		switch e.Class {
		case XidFatal:
			lvl = LevelFail
		case XidWarning:
			lvl = LevelWarning
		}
		out = append(out, Finding{Check: CheckXid, Level: lvl, Message: msg})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: CheckXid, Level: LevelInfo, Message: "no Xid events"})
	}
	return out
}
