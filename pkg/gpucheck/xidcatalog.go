package gpucheck

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The Xid catalog is data: xid-catalog.csv holds NVIDIA's published table
// (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
// one row per Xid with its immediate ("Resolution Bucket (Immediate
// Action)") and investigatory actions and the page it came from. The gate's
// class of every Xid follows from its immediate action alone (ClassOfAction),
// so a row is corrected by correcting the data, never the code.
//
//go:embed xid-catalog.csv
var embeddedXidCatalog []byte

// Immediate actions of NVIDIA's Xid catalog ("Resolution Bucket (Immediate
// Action)" column of the page above).
const (
	ActionIgnore         = "IGNORE"
	ActionRestartApp     = "RESTART_APP"
	ActionResetGPU       = "RESET_GPU"
	ActionRestartVM      = "RESTART_VM"
	ActionRestartBM      = "RESTART_BM"
	ActionContactSupport = "CONTACT_SUPPORT"
	ActionCheckMech      = "CHECK_MECHANICALS"
	ActionUpdateSWFW     = "UPDATE_SWFW"
	ActionCheckUVM       = "CHECK_UVM"
	ActionNVLinkWorkflow = "WORKFLOW_NVLINK_ERR"
	// ActionNVLink5Workflow is the NVLink 5 (Blackwell, GB200) workflow of
	// Xid 144-150.
	ActionNVLink5Workflow = "WORKFLOW_NVLINK5_ERR"
	ActionXid45Workflow   = "WORKFLOW_XID_45"
	ActionXid48Workflow   = "WORKFLOW_XID_48"
	// ActionXid154 means the line itself names the action: Xid 154 says
	// "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset
	// Required)".
	ActionXid154 = "XID_154"
)

// ClassOfAction is the gate's class for an immediate action:
//   - IGNORE: info (no operational impact);
//   - RESTART_APP: application (the application's fault; the GPU keeps working);
//   - RESET_GPU, RESTART_VM, RESTART_BM, CONTACT_SUPPORT, CHECK_MECHANICALS,
//     UPDATE_SWFW and the NVLink and Xid 48 workflows: fatal (the node must
//     not take work until the action is done; WORKFLOW_NVLINK5_ERR is only
//     the rows' class, see below);
//   - WORKFLOW_XID_45: warning ("Solo: RESTART_FM, not solo: IGNORE (follow
//     other Xid)"; XidFindings lowers it to info when another Xid of the
//     same GPU is present);
//   - XID_154: decided per line by Xid154Class, and per GPU by the last
//     Xid 154 in the log (ParseKernelLog);
//   - WORKFLOW_NVLINK5_ERR: Classify decides each line by NVIDIA's decode of Xid
//     144-150 (DecodeNVLink5): IGNORE info, RESET_GPU fatal, XID_154_EVAL
//     as the GPU's Xid 154 says, else application (RESTART_APP); a line
//     that does not decode warns;
//   - no action (Xid 162-172 in the 2025-10-29 sheet): the class of the
//     row whose description is the same (Xid 169 is Xid 62's), fatal when
//     the mnemonic names it fatal (Xid 167), else warning;
//   - CHECK_UVM and any action this code does not know: warning.
func ClassOfAction(action string) XidClass {
	switch action {
	case ActionIgnore:
		return XidInformational
	case ActionRestartApp:
		return XidApplication
	case ActionResetGPU, ActionRestartVM, ActionRestartBM, ActionContactSupport, ActionCheckMech,
		ActionUpdateSWFW, ActionNVLinkWorkflow, ActionNVLink5Workflow, ActionXid48Workflow:
		return XidFatal
	}
	return XidWarning
}

// xid154Re reads the action Xid 154 names. The driver prints, for example,
// "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)";
// the values listed by NVIDIA are None, Drain P2P, Drain and Reset, GPU
// Reset Required and Node Reboot Required.
var xid154Re = regexp.MustCompile(`(?i)recovery action changed from\s+\S+\s+\(([^)]*)\)\s+to\s+(\S+)\s+\(([^)]*)\)`)

// Xid154Class classifies an Xid 154 line by the recovery action it names:
// "None" is info, any other action is fatal, and a line that names none is
// a warning. It returns the action named.
func Xid154Class(detail string) (XidClass, string) {
	m := xid154Re.FindStringSubmatch(detail)
	if m == nil {
		return XidWarning, ""
	}
	to := strings.TrimSpace(m[3])
	if strings.EqualFold(to, "none") || m[2] == "0x0" {
		return XidInformational, to
	}
	return XidFatal, to
}

// XidCatalogEntry is one row of the catalog.
type XidCatalogEntry struct {
	Code                int    `json:"xid"`
	Mnemonic            string `json:"mnemonic"`
	Description         string `json:"description"`
	ImmediateAction     string `json:"immediateAction"`
	InvestigatoryAction string `json:"investigatoryAction,omitempty"`
	SourceURL           string `json:"sourceURL"`
	// Class is ClassOfAction(ImmediateAction); for a row without an
	// action, noActionClass.
	Class XidClass `json:"class"`
}

// XidCatalog is the Xid catalog and where it came from.
type XidCatalog struct {
	// Source is the page the catalog was taken from.
	Source string `json:"source"`
	// SheetDate is the date of the catalog sheet; Checked when the data
	// was last compared with the page (YYYY-MM-DD).
	SheetDate string `json:"sheetDate,omitempty"`
	Checked   string `json:"checked,omitempty"`
	// File is the file it was read from ("" for the embedded one).
	File    string            `json:"file,omitempty"`
	Entries []XidCatalogEntry `json:"entries"`
	// NVLink5Decode is NVIDIA's sheet "XID 144-150 Decode" the gate decodes
	// Xid 144-150 lines with (embedded, xid-nvlink5-decode.csv).
	NVLink5Decode []NVLink5Rule `json:"nvlink5Decode,omitempty"`

	byCode map[int]int
}

var xidCatalogColumns = []string{"xid", "mnemonic", "description", "immediate_action", "investigatory_action", "source_url"}

// ParseXidCatalog reads a catalog in the CSV layout of xid-catalog.csv:
// "# key: value" header lines (source, sheet-date, checked), then a header
// row and one row per Xid.
func ParseXidCatalog(data []byte) (*XidCatalog, error) {
	c := &XidCatalog{byCode: map[int]int{}, NVLink5Decode: nvlink5Rules}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "source":
			c.Source = v
		case "sheet-date":
			c.SheetDate = v
		case "checked":
			c.Checked = v
		}
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.FieldsPerRecord = len(xidCatalogColumns)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("xid catalog: %w", err)
	}
	for i, h := range header {
		if strings.TrimSpace(h) != xidCatalogColumns[i] {
			return nil, fmt.Errorf("xid catalog: column %d is %q, want %s", i+1, h, strings.Join(xidCatalogColumns, ","))
		}
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("xid catalog: %w", err)
		}
		code, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil || code <= 0 {
			return nil, fmt.Errorf("xid catalog: xid %q is not a positive number", rec[0])
		}
		if _, dup := c.byCode[code]; dup {
			return nil, fmt.Errorf("xid catalog: xid %d listed twice", code)
		}
		e := XidCatalogEntry{Code: code, Mnemonic: strings.TrimSpace(rec[1]), Description: strings.TrimSpace(rec[2]),
			ImmediateAction: strings.TrimSpace(rec[3]), InvestigatoryAction: strings.TrimSpace(rec[4]), SourceURL: strings.TrimSpace(rec[5])}
		if e.SourceURL == "" {
			e.SourceURL = c.Source
		}
		e.Class = ClassOfAction(e.ImmediateAction)
		c.byCode[code] = len(c.Entries)
		c.Entries = append(c.Entries, e)
	}
	if len(c.Entries) == 0 {
		return nil, fmt.Errorf("xid catalog: no rows")
	}
	if c.Source == "" {
		return nil, fmt.Errorf("xid catalog: no \"# source:\" line naming where the data comes from")
	}
	sort.Slice(c.Entries, func(i, j int) bool { return c.Entries[i].Code < c.Entries[j].Code })
	for i, e := range c.Entries {
		c.byCode[e.Code] = i
	}
	for i, e := range c.Entries {
		if e.ImmediateAction == "" {
			c.Entries[i].Class, _ = c.noActionClass(e)
		}
	}
	return c, nil
}

// ReadXidCatalog reads a catalog file (the --xid-catalog flag).
func ReadXidCatalog(path string) (*XidCatalog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseXidCatalog(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.File = path
	return c, nil
}

var defaultXidCatalog = func() *XidCatalog {
	c, err := ParseXidCatalog(embeddedXidCatalog)
	if err != nil {
		panic("embedded xid-catalog.csv: " + err.Error()) // a build defect, caught by the tests
	}
	return c
}()

// DefaultXidCatalog returns the embedded catalog.
func DefaultXidCatalog() *XidCatalog { return defaultXidCatalog }

// Lookup returns the row of an Xid.
func (c *XidCatalog) Lookup(code int) (XidCatalogEntry, bool) {
	if c == nil {
		c = defaultXidCatalog
	}
	i, ok := c.byCode[code]
	if !ok {
		return XidCatalogEntry{}, false
	}
	return c.Entries[i], true
}

// Classify returns the class of an Xid event: its catalog row's class,
// Xid 154 by the action its line names, Xid 144-150 by NVIDIA's decode of
// the line (a line that does not decode warns), a warning for a code the
// catalog lacks or one with no published action (with a note saying so).
func (c *XidCatalog) Classify(code int, detail string) XidCode {
	e, ok := c.Lookup(code)
	if !ok {
		return XidCode{Code: code, Name: "not in the Xid catalog", Class: XidWarning}
	}
	x := XidCode{Code: code, Name: e.Description, Class: e.Class, Action: e.ImmediateAction}
	switch e.ImmediateAction {
	case ActionXid154:
		cls, to := Xid154Class(detail)
		x.Class = cls
		if to != "" {
			x.Action = "XID_154: " + to
		}
	case ActionNVLink5Workflow:
		d, ok := DecodeNVLink5(code, detail)
		if !ok {
			x.Class, x.Undecoded = XidWarning, true
			x.Note = "the line does not decode with NVIDIA's XID 144-150 Decode sheet (sub component, fatal bit, IntrInfo, error status): check it by hand"
			// The line's second field is the driver's own fatal bit
			// ("<sub component> <Fatal|Nonfatal> XC...", the catalog's
			// WORKFLOW_NVLINK5_ERR): a fatal error that does not decode
			// is not vouched for.
			if f := strings.Fields(detail); len(f) > 1 && strings.EqualFold(strings.TrimSuffix(f[1], ","), "Fatal") {
				x.Class = XidFatal
				x.Note = "the line says Fatal and does not decode with NVIDIA's XID 144-150 Decode sheet, so it fails until someone decodes it by hand"
			}
			break
		}
		x.Decoded = &d
		x.Action = d.Action
		x.Class = ClassOfAction(d.Action)
		if d.Action == ActionXid154Eval {
			x.Class = XidApplication // RESTART_APP unless an Xid 154 of the GPU says otherwise
		}
	case "":
		x.Class, x.Note = c.noActionClass(e)
	}
	return x
}

// noActionClass classes a row NVIDIA publishes no action for: as the row
// whose description is its own (Xid 169 "Internal micro-controller halt"
// is Xid 62's, RESET_GPU), fatal when its mnemonic names it fatal (Xid 167
// PCIE_FATAL_TIMEOUT), else a warning; the note says which.
func (c *XidCatalog) noActionClass(e XidCatalogEntry) (XidClass, string) {
	note := "NVIDIA's catalog publishes no action for this Xid"
	if same, ok := c.sameDescription(e); ok {
		return same.Class, note + fmt.Sprintf("; its description is that of Xid %d (%s), whose action is %s, so it is classed %s", same.Code, same.Mnemonic, same.ImmediateAction, same.Class)
	}
	for _, w := range strings.Split(strings.ToUpper(e.Mnemonic), "_") {
		if w == "FATAL" {
			return XidFatal, note + fmt.Sprintf("; its mnemonic %s names it fatal", e.Mnemonic)
		}
	}
	return XidWarning, note
}

// sameDescription finds a row with an action whose description is e's,
// a trailing parenthesis aside ("Internal micro-controller halt" is Xid
// 169's and, "(newer drivers)", Xid 62's).
func (c *XidCatalog) sameDescription(e XidCatalogEntry) (XidCatalogEntry, bool) {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if i := strings.LastIndex(s, " ("); i > 0 && strings.HasSuffix(s, ")") {
			s = s[:i]
		}
		return strings.ToLower(s)
	}
	want := norm(e.Description)
	for _, o := range c.Entries {
		if o.Code != e.Code && o.ImmediateAction != "" && norm(o.Description) == want && want != "unused" {
			return o, true
		}
	}
	return XidCatalogEntry{}, false
}
