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
}

// XidCatalogSource is the page the embedded catalog comes from.
const XidCatalogSource = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

// ClassifyXid classifies a code with the embedded catalog.
func ClassifyXid(code int) XidCode {
	return defaultXidCatalog.Classify(code, "")
}

// XidEvent is one Xid (or NVSwitch SXid) line of a kernel log.
type XidEvent struct {
	Code   int      `json:"code"`
	PCI    string   `json:"pci"`
	SXid   bool     `json:"sxid,omitempty"`
	Class  XidClass `json:"class"`
	Name   string   `json:"name"`
	Detail string   `json:"detail,omitempty"`
	// Action is the catalog's immediate action (for Xid 154 the action
	// its line names).
	Action string `json:"action,omitempty"`
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

// ParseKernelLog is the package's ParseKernelLog with this catalog.
func (c *XidCatalog) ParseKernelLog(r io.Reader, since time.Time) ([]XidEvent, error) {
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
			detail := strings.TrimSpace(m[3])
			info := c.Classify(code, detail)
			ev = XidEvent{Code: code, PCI: m[1], Class: info.Class, Name: info.Name, Action: info.Action, Detail: detail}
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
	}
	groups := map[key][]XidEvent{}
	var keys []key
	for _, e := range events {
		if !e.SXid && e.Action == ActionXid45Workflow && others[e.PCI] {
			e.Class = XidInformational
		}
		k := key{e.Code, e.SXid, e.Class, e.Action}
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
		if k.action != "" {
			msg += "; NVIDIA's immediate action: " + k.action
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
