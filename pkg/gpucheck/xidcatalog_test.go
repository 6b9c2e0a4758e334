package gpucheck

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// realOutputs is the shared folder of real recorded outputs, read in place
// (its README gives the source of every file): the nearest
// shared/real-outputs above the package, the checkout's sibling for a
// clone and its parent's for a git worktree.
var realOutputs = findShared("real-outputs")

func findShared(name string) string {
	dir, err := filepath.Abs(".")
	for err == nil {
		p := filepath.Join(dir, "shared", name)
		if fi, serr := os.Stat(p); serr == nil && fi.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return filepath.Join("..", "..", "..", "shared", name)
}

func readReal(t *testing.T, parts ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{realOutputs}, parts...)...))
	if os.IsNotExist(err) {
		t.Skipf("%s not present", filepath.Join(parts...))
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestXidCatalogMatchesNVIDIA checks every row of the embedded catalog
// against the shared CSV of NVIDIA's published table.
func TestXidCatalogMatchesNVIDIA(t *testing.T) {
	b := readReal(t, "xid", "xid-catalogue.csv")
	r := csv.NewReader(bytes.NewReader(b))
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	cat := DefaultXidCatalog()
	seen := map[int]bool{}
	for _, row := range rows[1:] {
		code, err := strconv.Atoi(row[0])
		if err != nil {
			t.Fatalf("row %v", row)
		}
		seen[code] = true
		e, ok := cat.Lookup(code)
		if !ok {
			t.Errorf("Xid %d missing from the embedded catalog", code)
			continue
		}
		got := []string{strconv.Itoa(e.Code), e.Mnemonic, e.Description, e.ImmediateAction, e.InvestigatoryAction, e.SourceURL}
		for i := range got {
			if got[i] != strings.TrimSpace(row[i]) {
				t.Errorf("Xid %d column %s: embedded %q, NVIDIA %q", code, rows[0][i], got[i], row[i])
			}
		}
	}
	for _, e := range cat.Entries {
		if !seen[e.Code] {
			t.Errorf("Xid %d is in the embedded catalog but not in NVIDIA's", e.Code)
		}
	}
}

// TestXidCatalogRows pins the shape of the embedded data and the class of
// every row (the class follows from the immediate action alone, or, for a
// row without one, from its description or mnemonic).
func TestXidCatalogRows(t *testing.T) {
	cat := DefaultXidCatalog()
	if cat.Source != XidCatalogSource || cat.SheetDate == "" || cat.Checked == "" {
		t.Errorf("source %q, sheet %q, checked %q", cat.Source, cat.SheetDate, cat.Checked)
	}
	if len(cat.Entries) != 172 {
		t.Errorf("%d rows, want 172 (Xid 1-172)", len(cat.Entries))
	}
	for i, e := range cat.Entries {
		if e.Code != i+1 {
			t.Fatalf("row %d is Xid %d", i, e.Code)
		}
		if e.SourceURL != XidCatalogSource {
			t.Errorf("Xid %d source %q", e.Code, e.SourceURL)
		}
		want := ClassOfAction(e.ImmediateAction)
		if e.ImmediateAction == "" {
			want, _ = cat.noActionClass(e)
		}
		if e.Class != want {
			t.Errorf("Xid %d class %s for %q", e.Code, e.Class, e.ImmediateAction)
		}
	}
}

// TestXidCatalogClasses checks the classes that the previous hand-written
// table had wrong or lacked against NVIDIA's immediate action.
func TestXidCatalogClasses(t *testing.T) {
	want := map[int]struct {
		action string
		class  XidClass
	}{
		109: {ActionResetGPU, XidFatal}, // was application
		38:  {ActionIgnore, XidInformational},
		121: {ActionIgnore, XidInformational},
		43:  {ActionIgnore, XidInformational},
		46:  {ActionResetGPU, XidFatal},
		110: {ActionResetGPU, XidFatal},
		136: {ActionResetGPU, XidFatal},
		155: {ActionResetGPU, XidFatal},
		156: {ActionResetGPU, XidFatal},
		158: {ActionResetGPU, XidFatal},
		151: {ActionRestartVM, XidFatal},
		79:  {ActionRestartBM, XidFatal},
		13:  {ActionRestartApp, XidApplication},
		48:  {ActionXid48Workflow, XidFatal},
		63:  {ActionIgnore, XidInformational},
		74:  {ActionNVLinkWorkflow, XidFatal},
		119: {ActionResetGPU, XidFatal},
	}
	// Xid 144-150 without a line to decode: a warning (see
	// TestNVLink5Decode for decoded lines).
	for code := 144; code <= 150; code++ {
		want[code] = struct {
			action string
			class  XidClass
		}{ActionNVLink5Workflow, XidWarning}
	}
	for code, w := range want {
		got := ClassifyXid(code)
		if got.Action != w.action || got.Class != w.class {
			t.Errorf("Xid %d: %s/%s, want %s/%s", code, got.Action, got.Class, w.action, w.class)
		}
	}
	if got := ClassifyXid(999); got.Class != XidWarning {
		t.Errorf("unknown Xid: %+v", got)
	}
}

func TestXid154(t *testing.T) {
	// Xid 154 names the action itself; "None" needs nothing.
	log := strings.Join([]string{
		"NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
		"NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
	}, "\n")
	evs, err := ParseKernelLog(strings.NewReader(log), time.Time{})
	if err != nil || len(evs) != 2 {
		t.Fatal(evs, err)
	}
	if evs[0].Class != XidFatal || evs[0].Action != "XID_154: Node Reboot Required" {
		t.Errorf("%+v", evs[0])
	}
	if evs[1].Class != XidInformational || evs[1].Action != "XID_154: None" {
		t.Errorf("%+v", evs[1])
	}
	fs := XidFindings(evs)
	if len(fs) != 2 || StatusOf(fs) != StatusFail {
		t.Errorf("%+v", fs)
	}
	if c, _ := Xid154Class("GPU recovery action changed"); c != XidWarning {
		t.Error(c)
	}
}

func TestXid45SoloOrNot(t *testing.T) {
	solo := []XidEvent{{Code: 45, PCI: "a", Class: XidWarning, Action: ActionXid45Workflow}}
	if fs := XidFindings(solo); fs[0].Level != LevelWarning {
		t.Errorf("solo 45: %+v", fs)
	}
	with := append(solo, XidEvent{Code: 48, PCI: "a", Class: XidFatal, Action: ActionXid48Workflow})
	fs := XidFindings(with)
	if fs[0].Level != LevelInfo || fs[1].Level != LevelFail {
		t.Errorf("45 after 48: %+v", fs)
	}
}

// TestXidRealLogs reads the real kernel logs of the shared folder.
func TestXidRealLogs(t *testing.T) {
	type want struct {
		code  int
		sxid  bool
		class XidClass
		n     int
	}
	cases := map[string][]want{
		"dmesg-ctime_xid13_xid109_peermem.log":        {{13, false, XidApplication, 3}, {109, false, XidFatal, 1}},
		"dmesg-with-xid-119_H100_gsp-rpc-timeout.log": {{119, false, XidFatal, 0}},
		"dmesg_xid79_with_sxid20034_nvswitch.log":     {{79, false, XidFatal, 1}, {20034, true, XidFatal, 0}},
		"xid63_row-remapper_single-line.log":          {{63, false, XidInformational, 1}},
	}
	for file, ws := range cases {
		t.Run(file, func(t *testing.T) {
			evs, err := ParseKernelLog(bytes.NewReader(readReal(t, "xid", file)), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			count := map[[2]int]int{}
			for _, e := range evs {
				s := 0
				if e.SXid {
					s = 1
				}
				count[[2]int{e.Code, s}]++
			}
			for _, w := range ws {
				s := 0
				if w.sxid {
					s = 1
				}
				n := count[[2]int{w.code, s}]
				if n == 0 || (w.n > 0 && n != w.n) {
					t.Errorf("Xid %d: %d events, want %d", w.code, n, w.n)
				}
				worst := XidClass("")
				for _, e := range evs {
					if e.Code == w.code && e.SXid == w.sxid && (worst == "" || e.Class == XidFatal) {
						worst = e.Class
					}
				}
				if worst != w.class {
					t.Errorf("Xid %d: class %s, want %s", w.code, worst, w.class)
				}
			}
			wantStatus := StatusPass
			for _, w := range ws {
				if w.class == XidFatal {
					wantStatus = StatusFail
				}
			}
			if got := StatusOf(XidFindings(evs)); got != wantStatus {
				t.Errorf("status %s, want %s", got, wantStatus)
			}
		})
	}
}

func TestParseXidCatalogErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"# source: x\nxid,mnemonic\n1,a\n",
		"# source: x\nxid,mnemonic,description,immediate_action,investigatory_action,source_url\n",
		"# source: x\nxid,mnemonic,description,immediate_action,investigatory_action,source_url\nx,a,b,c,d,e\n",
		"# source: x\nxid,mnemonic,description,immediate_action,investigatory_action,source_url\n1,a,b,IGNORE,,u\n1,a,b,IGNORE,,u\n",
		"xid,mnemonic,description,immediate_action,investigatory_action,source_url\n1,a,b,IGNORE,,u\n",
	} {
		if _, err := ParseXidCatalog([]byte(in)); err == nil {
			t.Errorf("ParseXidCatalog(%q) succeeded", in)
		}
	}
	c, err := ParseXidCatalog([]byte("# source: https://example.test/x\n# sheet-date: 2027-01-01\nxid,mnemonic,description,immediate_action,investigatory_action,source_url\n109,X,Y,IGNORE,,\n"))
	if err != nil || c.Classify(109, "").Class != XidInformational || c.Entries[0].SourceURL != "https://example.test/x" {
		t.Fatal(c, err)
	}
}

// TestXidDocFollowsData keeps docs/xid.md's table equal to the data; run
// with GPUFLEET_UPDATE_DOCS=1 to rewrite it.
func TestXidDocFollowsData(t *testing.T) {
	docFollowsData(t, "xid.md", "xid-catalog", "pkg/gpucheck/xid-catalog.csv", XidCatalogMarkdown(DefaultXidCatalog()))
}

// TestNVLink5DocFollowsData keeps docs/xid.md's decode table equal to
// xid-nvlink5-decode.csv.
func TestNVLink5DocFollowsData(t *testing.T) {
	docFollowsData(t, "xid.md", "xid-nvlink5-decode", "pkg/gpucheck/xid-nvlink5-decode.csv", NVLink5DecodeMarkdown(NVLink5Decode()))
}

// TestDCGMDocFollowsData keeps docs/dcgm.md's table equal to
// dcgm-level1.csv.
func TestDCGMDocFollowsData(t *testing.T) {
	docFollowsData(t, "dcgm.md", "dcgm-level1", "pkg/gpucheck/dcgm-level1.csv", DCGMLevel1Markdown(DCGMLevel1()))
}

// docFollowsData checks the generated part of a page of docs/, between
// its BEGIN and END markers, and rewrites it with GPUFLEET_UPDATE_DOCS=1.
func docFollowsData(t *testing.T, page, name, data, generated string) {
	t.Helper()
	path := filepath.Join("..", "..", "docs", page)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- BEGIN "+name+" (generated from "+data+") -->\n", "<!-- END "+name+" -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %q ... %q markers", path, begin, end)
	}
	want := doc[:i+len(begin)] + generated + doc[j:]
	if want == doc {
		return
	}
	if os.Getenv("GPUFLEET_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s does not match %s; run GPUFLEET_UPDATE_DOCS=1 go test ./pkg/gpucheck/ -run DocFollowsData", path, data)
}
