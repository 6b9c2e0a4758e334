package gpucheck

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Xid 144-150 (NVLink5) carry their resolution in the line: NVIDIA's
// catalog gives them the immediate action WORKFLOW_NVLINK5_ERR, whose
// guidance is to decode the line's IntrInfo and error status with the sheet
// "XID 144-150 Decode". That sheet is data, xid-nvlink5-decode.csv; a row
// gives, for a sub component (its bits in IntrInfo) and an error status,
// the immediate action: IGNORE, RESET_GPU or XID_154_EVAL ("If an XID 154
// is seen along with this error, take that action. If no XID 154 present,
// RESTART_APP").
//
//go:embed xid-nvlink5-decode.csv
var embeddedNVLink5Decode []byte

// ActionXid154Eval is the NVLink5 decode's "take Xid 154's action if one is
// present, else RESTART_APP".
const ActionXid154Eval = "XID_154_EVAL"

// bitMask is a 32-bit pattern of NVIDIA's decode sheet: care has the bits
// written 0 or 1, want their values.
type bitMask struct{ care, want uint32 }

func parseBitMask(s string) (bitMask, error) {
	var m bitMask
	if s == "" {
		return m, nil
	}
	if len(s) != 32 {
		return m, fmt.Errorf("mask %q: want 32 characters", s)
	}
	for i, c := range s {
		bit := uint32(1) << (31 - i)
		switch c {
		case '0':
			m.care |= bit
		case '1':
			m.care |= bit
			m.want |= bit
		case '-':
		default:
			return m, fmt.Errorf("mask %q: %q is not 0, 1 or -", s, c)
		}
	}
	return m, nil
}

func (m bitMask) set() bool            { return m.care != 0 }
func (m bitMask) match(v uint32) bool  { return m.set() && v&m.care == m.want }
func (r NVLink5Rule) names() []string  { return strings.Split(r.Unit, "/") }
func (r NVLink5Rule) anyStatus() bool  { return len(r.Statuses) == 0 }
func (r NVLink5Rule) promotable() bool { return r.Action2 != "" }
func (r NVLink5Rule) hasStatus(s uint32) bool {
	if r.anyStatus() {
		return true
	}
	for _, x := range r.Statuses {
		if x == s {
			return true
		}
	}
	return false
}

// NVLink5Rule is one row of the decode sheet.
type NVLink5Rule struct {
	Xid int `json:"xid"`
	// Unit is the sub component, "V1/V2" where drivers before R575 name it
	// differently.
	Unit string `json:"unit"`
	// IntrInfoV1 and IntrInfoV2 are the masks of IntrInfo before and from
	// driver R575.
	IntrInfoV1 string `json:"intrInfoV1"`
	IntrInfoV2 string `json:"intrInfoV2"`
	// Statuses are the error statuses of the row; none means any.
	Statuses []uint32 `json:"errorStatus,omitempty"`
	Action   string   `json:"immediateAction"`
	Severity string   `json:"severity"`
	// Action2 applies instead when IntrInfo matches the action-2 masks.
	Action2V1 string `json:"action2IntrInfoV1,omitempty"`
	Action2V2 string `json:"action2IntrInfoV2,omitempty"`
	Action2   string `json:"action2,omitempty"`

	v1, v2, a2v1, a2v2 bitMask
}

var nvlink5Rules = mustParseData("xid-nvlink5-decode.csv", embeddedNVLink5Decode, parseNVLink5Decode)

// NVLink5Decode returns the embedded decode sheet.
func NVLink5Decode() []NVLink5Rule { return nvlink5Rules }

func parseNVLink5Decode(data []byte) ([]NVLink5Rule, error) {
	recs, err := readDataCSV(data, "xid,unit,intrinfo_v1,intrinfo_v2,error_status,immediate_action,severity,action2_intrinfo_v1,action2_intrinfo_v2,action2")
	if err != nil {
		return nil, err
	}
	var out []NVLink5Rule
	for _, rec := range recs {
		x, err := strconv.Atoi(rec[0])
		if err != nil || x < 144 || x > 150 {
			return nil, fmt.Errorf("xid %q is not 144-150", rec[0])
		}
		r := NVLink5Rule{Xid: x, Unit: rec[1], IntrInfoV1: rec[2], IntrInfoV2: rec[3], Action: rec[5], Severity: rec[6],
			Action2V1: rec[7], Action2V2: rec[8], Action2: rec[9]}
		for _, s := range strings.Split(rec[4], "|") {
			if s == "" {
				continue
			}
			v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
			if err != nil {
				return nil, fmt.Errorf("xid %d %s: error status %q", x, r.Unit, s)
			}
			r.Statuses = append(r.Statuses, uint32(v))
		}
		for _, m := range []struct {
			dst *bitMask
			src string
		}{{&r.v1, r.IntrInfoV1}, {&r.v2, r.IntrInfoV2}, {&r.a2v1, r.Action2V1}, {&r.a2v2, r.Action2V2}} {
			if *m.dst, err = parseBitMask(m.src); err != nil {
				return nil, fmt.Errorf("xid %d %s: %w", x, r.Unit, err)
			}
		}
		if !r.v1.set() || !r.v2.set() || r.Action == "" || (r.Action2 != "") != r.a2v1.set() {
			return nil, fmt.Errorf("xid %d %s: masks and action are required, action-2 masks go with an action 2", x, r.Unit)
		}
		out = append(out, r)
	}
	return out, nil
}

// nvlink5LineRe reads "<sub component> <Fatal|Nonfatal> ... (<intrInfo>
// <errorStatus> ...)", the format NVIDIA's catalog gives under
// WORKFLOW_NVLINK5_ERR.
var nvlink5LineRe = regexp.MustCompile(`^(\S+)\s+(\S+)\s[^()]*\((0x[0-9a-fA-F]{1,8})\s+(0x[0-9a-fA-F]{1,8})\b`)

// NVLink5Decoded is what the decode sheet makes of one Xid 144-150 line.
type NVLink5Decoded struct {
	Unit string `json:"unit"`
	// Printed is the line's own Fatal/Nonfatal word.
	Printed  string `json:"printed"`
	IntrInfo uint32 `json:"intrInfo"`
	Status   uint32 `json:"errorStatus"`
	// Action is the immediate action of the matching rows (the gravest when
	// several match), Severity theirs.
	Action   string `json:"action"`
	Severity string `json:"severity"`
}

func (d NVLink5Decoded) String() string {
	return fmt.Sprintf("%s %s, IntrInfo 0x%08x, error status 0x%08x: %s (%s)", d.Unit, d.Printed, d.IntrInfo, d.Status, d.Action, d.Severity)
}

func nvlink5ActionRank(a string) int {
	switch a {
	case ActionIgnore:
		return 0
	case ActionXid154Eval:
		return 1
	}
	return 2 // RESET_GPU, or an action this code does not know
}

// DecodeNVLink5 decodes the text after "Xid (PCI:...): 14x, " as NVIDIA's
// sheet says. ok is false when the line does not have the format or no row
// matches its IntrInfo and error status; an error status with several bits
// set decodes when every bit has a row.
func DecodeNVLink5(xid int, detail string) (NVLink5Decoded, bool) {
	m := nvlink5LineRe.FindStringSubmatch(strings.TrimSpace(detail))
	if m == nil {
		return NVLink5Decoded{}, false
	}
	intr, err1 := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(m[3]), "0x"), 16, 32)
	st, err2 := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(m[4]), "0x"), 16, 32)
	if err1 != nil || err2 != nil {
		return NVLink5Decoded{}, false
	}
	d := NVLink5Decoded{Unit: m[1], Printed: m[2], IntrInfo: uint32(intr), Status: uint32(st)}
	find := func(status uint32) []NVLink5Rule {
		var out []NVLink5Rule
		for _, r := range nvlink5Rules {
			if r.Xid != xid || !r.hasStatus(status) {
				continue
			}
			names := r.names()
			// The line names the sub component as its driver's version
			// does (V1 before R575, V2 from it); a name both share, or one
			// the row lacks, leaves both masks to the bits.
			v1ok := d.Unit != names[len(names)-1] || d.Unit == names[0]
			v2ok := d.Unit != names[0] || d.Unit == names[len(names)-1]
			// A promotable row's action-2 mask sets a bit its own mask
			// wants clear ("Decode for action 2").
			promoted := (v1ok && r.a2v1.match(d.IntrInfo)) || (v2ok && r.a2v2.match(d.IntrInfo))
			if !promoted && !(v1ok && r.v1.match(d.IntrInfo)) && !(v2ok && r.v2.match(d.IntrInfo)) {
				continue
			}
			if promoted {
				r.Action = r.Action2
			}
			out = append(out, r)
		}
		return out
	}
	rows := find(d.Status)
	if len(rows) == 0 && d.Status != 0 {
		for bit := uint32(1); bit != 0; bit <<= 1 {
			if d.Status&bit == 0 {
				continue
			}
			rs := find(bit)
			if len(rs) == 0 {
				return d, false
			}
			rows = append(rows, rs...)
		}
	}
	if len(rows) == 0 {
		return d, false
	}
	best := rows[0]
	for _, r := range rows[1:] {
		if nvlink5ActionRank(r.Action) > nvlink5ActionRank(best.Action) {
			best = r
		}
	}
	d.Action, d.Severity = best.Action, best.Severity
	return d, true
}
