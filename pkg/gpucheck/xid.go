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

// Xid classes. The class of an Xid follows from its immediate action in
// NVIDIA's Xid catalog (see ClassOfAction and xid-catalog.csv).
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
	// Action is the catalog's immediate action.
	Action string `json:"action,omitempty"`
	// Decoded is NVIDIA's decode of an Xid 144-150 line; Undecoded says the
	// line did not decode.
	Decoded   *NVLink5Decoded `json:"decoded,omitempty"`
	Undecoded bool            `json:"undecoded,omitempty"`
	// Note says more than the class, for a person.
	Note string `json:"note,omitempty"`
}

// XidCatalogSource is the page the embedded catalog comes from.
const XidCatalogSource = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

// ClassifyXid classifies a code with the embedded catalog.
func ClassifyXid(code int) XidCode {
	return defaultXidCatalog.Classify(code, "")
}

// XidEvent is one Xid (or NVSwitch SXid) event of a kernel log: its line
// and the continuation lines the driver prints for it.
type XidEvent struct {
	Code   int      `json:"code"`
	PCI    string   `json:"pci"`
	SXid   bool     `json:"sxid,omitempty"`
	Class  XidClass `json:"class"`
	Name   string   `json:"name"`
	Detail string   `json:"detail,omitempty"`
	// Action is the catalog's immediate action (for Xid 154 the action
	// its line names, for Xid 144-150 the one NVIDIA's decode gives).
	Action string `json:"action,omitempty"`
	// Decoded is NVIDIA's decode of an Xid 144-150 line.
	Decoded *NVLink5Decoded `json:"decoded,omitempty"`
	// Note says more than the class: no action published, a decode that
	// failed, an Xid 154 a later one replaced.
	Note string `json:"note,omitempty"`
	// Raw is the line as logged, kept for a line the gate could not decode.
	Raw string `json:"raw,omitempty"`
	// Continuations counts the lines of the same event after the first
	// (an SXid's "Severity ..." and "Data {...}" lines).
	Continuations int `json:"continuations,omitempty"`
	// severity: a continuation line gave the event its severity.
	severity bool
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
	return defaultXidCatalog.ParseKernelLog(r, since)
}

// xidContinuationRe is a continuation line of an event: the NVSwitch
// driver prints "Severity %d Engine instance %02d Sub-engine instance %02d"
// and "Data {0x%08x, ...}" with the same SXid prefix after the event's own
// line (_nvswitch_dump_error_entry in NVIDIA/open-gpu-kernel-modules
// src/common/nvswitch/kernel/error_nvswitch.c at 1739a20e); the severity is
// NVSWITCH_ERROR_SEVERITY_TYPE, 0 non-fatal and 1 fatal
// (ctrl_dev_nvswitch.h).
var xidContinuationRe = regexp.MustCompile(`^(?:Severity (\d+) |Data \{)`)

// ParseKernelLog is the package's ParseKernelLog with this catalog.
func (c *XidCatalog) ParseKernelLog(r io.Reader, since time.Time) ([]XidEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var out []XidEvent
	type key struct {
		sxid bool
		pci  string
		code int
	}
	last := map[key]int{} // the latest event of a device and code
	for sc.Scan() {
		line := sc.Text()
		var ev XidEvent
		if m := xidRe.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			ev = XidEvent{Code: code, PCI: m[1], Detail: strings.TrimSpace(m[3])}
		} else if m := sxidRe.FindStringSubmatch(line); m != nil {
			code, err := strconv.Atoi(m[2])
			if err != nil {
				continue
			}
			ev = XidEvent{Code: code, PCI: m[1], SXid: true, Detail: strings.TrimSpace(m[3])}
		} else {
			continue
		}
		ev.Time = lineTime(line)
		if !since.IsZero() && !ev.Time.IsZero() && ev.Time.Before(since) {
			continue
		}
		k := key{ev.SXid, ev.PCI, ev.Code}
		if m := xidContinuationRe.FindStringSubmatch(ev.Detail); m != nil {
			// A line of the event before it; a Severity line opens a new
			// event when the last one has its severity already.
			if i, ok := last[k]; ok && (m[1] == "" || !out[i].severity) {
				out[i].Continuations++
				if m[1] != "" {
					out[i].severity = true
					if m[1] == "1" && out[i].SXid {
						out[i].Class = XidFatal
					}
				}
				continue
			}
		}
		if ev.SXid {
			ev.Name, ev.Class = "NVSwitch SXid", XidWarning
			lower := strings.ToLower(ev.Detail)
			if strings.HasPrefix(lower, "fatal") || strings.HasPrefix(lower, "severity 1 ") {
				ev.Class = XidFatal
			}
			if strings.HasPrefix(lower, "severity ") || strings.HasPrefix(lower, "data {") {
				// Its own line is not in the log (before --since, or
				// rotated): the event counts once.
				ev.Note = "the event's own line is not in the log; this is its continuation"
				ev.severity = strings.HasPrefix(lower, "severity ")
			}
		} else {
			info := c.Classify(ev.Code, ev.Detail)
			ev.Class, ev.Name, ev.Action, ev.Decoded, ev.Note = info.Class, info.Name, info.Action, info.Decoded, info.Note
			if info.Undecoded {
				ev.Raw = strings.TrimSpace(line)
			}
		}
		if len(ev.Detail) > 300 {
			ev.Detail = ev.Detail[:300]
		}
		if len(ev.Raw) > 500 {
			ev.Raw = ev.Raw[:500]
		}
		last[k] = len(out)
		out = append(out, ev)
		if len(out) >= 10000 {
			break
		}
	}
	resolveXid154(out)
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading kernel log: %w", err)
	}
	return out, nil
}

// resolveXid154 tracks Xid 154 per GPU. Each one says the GPU's recovery
// action changed from one value to another, so the last one of a GPU is
// its state: an earlier one it replaced is information ("changed from 0x1
// (GPU Reset Required) to 0x0 (None)" clears a reset), and an NVLink5
// XID_154_EVAL event follows it ("If an XID 154 is seen along with this
// error, take that action. If no XID 154 present, RESTART_APP", NVIDIA's
// Xid catalog).
func resolveXid154(evs []XidEvent) {
	final := map[string]int{}
	for i, e := range evs {
		if !e.SXid && strings.HasPrefix(e.Action, ActionXid154) && !strings.HasPrefix(e.Action, ActionXid154Eval) {
			final[e.PCI] = i
		}
	}
	for i := range evs {
		e := &evs[i]
		if e.SXid {
			continue
		}
		switch {
		case strings.HasPrefix(e.Action, ActionXid154Eval):
			if j, ok := final[e.PCI]; ok {
				e.Class = evs[j].Class
				e.Action = ActionXid154Eval + ", " + evs[j].Action
				e.Note = "NVIDIA's decode says: take the action of the GPU's Xid 154"
			} else {
				e.Action = ActionXid154Eval + ", no Xid 154: " + ActionRestartApp
			}
		case strings.HasPrefix(e.Action, ActionXid154):
			if j := final[e.PCI]; j != i {
				e.Class = XidInformational
				e.Note = "a later Xid 154 of this GPU changed the recovery action to " + strings.TrimPrefix(evs[j].Action, ActionXid154+": ")
			}
		}
	}
}

// XidFindings fails on fatal events, warns on warnings and summarises
// application-level and ignorable ones, naming the catalog's action.
// Xid 45 (WORKFLOW_XID_45: "Solo: RESTART_FM, not solo: IGNORE (follow
// other Xid)") is info when another Xid of the same GPU is in the log.
func XidFindings(events []XidEvent) []Finding {
	others := map[string]bool{}
	for _, e := range events {
		if !e.SXid && e.Code != 45 {
			others[e.PCI] = true
		}
	}
	type key struct {
		code   int
		sxid   bool
		class  XidClass
		action string
		name   string
		note   string
	}
	groups := map[key][]XidEvent{}
	var keys []key
	for _, e := range events {
		if !e.SXid && e.Action == ActionXid45Workflow && others[e.PCI] {
			e.Class = XidInformational
		}
		k := key{e.Code, e.SXid, e.Class, e.Action, e.Name, e.Note}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].code != keys[j].code {
			return keys[i].code < keys[j].code
		}
		return keys[i].action < keys[j].action
	})
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
		msg := fmt.Sprintf("%s %d (%s, %s) x%d on %s", kind, k.code, e.Name, k.class, len(evs), strings.Join(pl, " "))
		if e.Decoded != nil {
			msg += "; decoded: " + e.Decoded.String()
		}
		if k.action != "" {
			msg += "; NVIDIA's immediate action: " + k.action
		}
		if e.Note != "" {
			msg += "; " + e.Note
		}
		if e.Raw != "" {
			msg += "; line: " + e.Raw
		}
		lvl := LevelInfo
		switch k.class {
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
