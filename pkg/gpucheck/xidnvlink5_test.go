package gpucheck

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nvlink5 builds an Xid 144-150 line in the format NVIDIA's catalog gives
// under WORKFLOW_NVLINK5_ERR: "Xid (PCI:0000:BB:DF): <Xid Number> <sub
// component> <fatal vs nonfatal> <Crosscontain> <injected> <link>
// (<intrInfo> <errorStatus> <errorDebugData[0]> ... [4])". No real capture
// of these lines has been found (../shared/real-outputs/README.md).
func nvlink5(pci string, xid, rest string) string {
	return "NVRM: Xid (PCI:" + pci + "): " + xid + ", " + rest
}

func xidLog(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func xidStatus(t *testing.T, log string) (Status, string, []XidEvent) {
	t.Helper()
	evs, err := ParseKernelLog(strings.NewReader(log), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	fs := XidFindings(evs)
	return StatusOf(fs), dcgmMessages(fs), evs
}

// TestNVLink5Decode decodes Xid 144-150 with NVIDIA's sheet "XID 144-150
// Decode" (xid-nvlink5-decode.csv): non-fatal IGNORE sub-codes do not fail,
// RESET_GPU ones do, a promotable row takes its action 2 when IntrInfo
// says so, both IntrInfo layouts (before and from driver R575) decode, and a
// line that does not decode warns with the line itself (fails when the
// driver printed it Fatal).
func TestNVLink5Decode(t *testing.T) {
	const gpu = "0000:04:00"
	tail := " 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
	cases := []struct {
		name, line string
		status     Status
		message    string
	}{
		{"RLW_REMAP 0x100 is IGNORE (V2 IntrInfo)", nvlink5(gpu, "145", "RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000004 0x00000100"+tail),
			StatusPass, "Xid 145 (NVLINK: RLW Error, info) x1 on PCI:0000:04:00; decoded: RLW_REMAP Nonfatal, IntrInfo 0x00000004, error status 0x00000100: IGNORE (Non-fatal); NVIDIA's immediate action: IGNORE"},
		{"the same in V1 IntrInfo", nvlink5(gpu, "145", "RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000082 0x00000100"+tail),
			StatusPass, "NVIDIA's immediate action: IGNORE"},
		{"SAW_MVB 0x2 is RESET_GPU", nvlink5(gpu, "144", "SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000002"+tail),
			StatusFail, "Xid 144 (NVLINK: SAW Error, fatal) x1 on PCI:0000:04:00; decoded: SAW_MVB Fatal, IntrInfo 0x00000001, error status 0x00000002: RESET_GPU (Fatal); NVIDIA's immediate action: RESET_GPU"},
		{"every bit of the status decodes, the gravest wins", nvlink5(gpu, "144", "SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000012"+tail),
			StatusFail, "RESET_GPU"},
		{"IGNORE bits together stay IGNORE", nvlink5(gpu, "144", "SAW_MVB Nonfatal XC0 i0 Link 00 (0x00000001 0x00000025"+tail),
			StatusPass, "IGNORE"},
		{"promotable RLW_RXPIPE stays IGNORE", nvlink5(gpu, "145", "RLW_RXPIPE Nonfatal XC0 i0 Link 00 (0x00000006 0x00000001"+tail),
			StatusPass, "IGNORE (Non-fatal*)"},
		{"promoted RLW_RXPIPE takes action 2", nvlink5(gpu, "145", "RLW_RXPIPE Fatal XC0 i0 Link 00 (0x00000086 0x00000001"+tail),
			StatusFail, "RESET_GPU (Non-fatal*)"},
		// The sub component's name is V1's before R575 and V2's from it
		// ("NETIR_LINK_EVT/NETIR_LINK_DOWN"); the link-down reason is in
		// IntrInfo[25:20].
		{"NETIR_LINK_EVT link down by the peer (V1)", nvlink5(gpu, "149", "NETIR_LINK_EVT Fatal XC0 i0 Link 07 (0x015001c6 0x00000000"+tail),
			StatusFail, "NETIR_LINK_EVT Fatal, IntrInfo 0x015001c6, error status 0x00000000: RESET_GPU (Link Fatal)"},
		{"NETIR_LINK_DOWN link down by the peer (V2)", nvlink5(gpu, "149", "NETIR_LINK_DOWN Fatal XC0 i0 Link 07 (0x01500011 0x00000000"+tail),
			StatusFail, "RESET_GPU (Link Fatal)"},
		// Printed Fatal by the driver and not decodable: fails.
		{"a V2 IntrInfo under the V1 name does not decode", nvlink5(gpu, "149", "NETIR_LINK_EVT Fatal XC0 i0 Link 07 (0x01500011 0x00000000"+tail),
			StatusFail, "the line says Fatal and does not decode"},
		{"NETIR_LINK_EVT with an IGNORE reason", nvlink5(gpu, "149", "NETIR_LINK_EVT Fatal XC0 i0 Link 07 (0x026001c6 0x00000000"+tail),
			StatusPass, "IGNORE (Link Fatal)"},
		{"a status the sheet lacks warns with the line", nvlink5(gpu, "147", "TREX Nonfatal XC0 i0 Link 00 (0x0000000e 0x00000002"+tail),
			StatusWarn, "does not decode with NVIDIA's XID 144-150 Decode sheet (sub component, fatal bit, IntrInfo, error status): check it by hand; line: NVRM: Xid (PCI:0000:04:00): 147, TREX Nonfatal XC0 i0 Link 00 (0x0000000e 0x00000002"},
		{"a line without registers warns with the line", nvlink5(gpu, "146", "TLW error on link 3"),
			StatusWarn, "line: NVRM: Xid (PCI:0000:04:00): 146, TLW error on link 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, msgs, _ := xidStatus(t, xidLog(tc.line))
			if st != tc.status || !strings.Contains(msgs, tc.message) {
				t.Errorf("%s\n%s", st, msgs)
			}
		})
	}
}

// TestXid154PerGPU: an Xid 154 is the GPU's recovery action from then on;
// a later one that changes it back to None clears it, and an NVLink5
// XID_154_EVAL event takes the GPU's Xid 154 action, else RESTART_APP.
func TestXid154PerGPU(t *testing.T) {
	set := "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
	clear := "NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
	other := "NVRM: Xid (PCI:0000:05:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
	remap := nvlink5("0000:04:00", "145", "RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000004 0x00000001 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
	cases := []struct {
		name    string
		lines   []string
		status  Status
		message string
	}{
		{"set", []string{set}, StatusFail, "NVIDIA's immediate action: XID_154: GPU Reset Required"},
		{"set then cleared", []string{set, clear}, StatusPass, "a later Xid 154 of this GPU changed the recovery action to None"},
		{"cleared then set again", []string{set, clear, set}, StatusFail, "XID_154: GPU Reset Required"},
		{"another GPU's 154 clears nothing", []string{set, strings.Replace(clear, "04:00", "05:00", 1)}, StatusFail, "on PCI:0000:04:00"},
		{"XID_154_EVAL alone: RESTART_APP", []string{remap}, StatusPass, "Xid 145 (NVLINK: RLW Error, application) x1 on PCI:0000:04:00; decoded: RLW_REMAP Nonfatal, IntrInfo 0x00000004, error status 0x00000001: XID_154_EVAL (Non-fatal); NVIDIA's immediate action: XID_154_EVAL, no Xid 154: RESTART_APP"},
		{"XID_154_EVAL with the GPU's 154", []string{remap, set}, StatusFail, "NVIDIA's immediate action: XID_154_EVAL, XID_154: GPU Reset Required; NVIDIA's decode says: take the action of the GPU's Xid 154"},
		{"XID_154_EVAL with a cleared 154", []string{remap, set, clear}, StatusPass, "XID_154_EVAL, XID_154: None"},
		{"XID_154_EVAL and another GPU's 154", []string{remap, other}, StatusFail, "XID_154_EVAL, no Xid 154: RESTART_APP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, msgs, _ := xidStatus(t, xidLog(tc.lines...))
			if st != tc.status || !strings.Contains(msgs, tc.message) {
				t.Errorf("%s\n%s", st, msgs)
			}
		})
	}
}

// TestXidNoActionPublished: Xid 162-172 have no action in NVIDIA's sheet
// of 2025-10-29. Xid 169's description is Xid 62's, a reset: fatal; Xid
// 167's mnemonic names it fatal: fatal; the others warn. The rows are
// checked against the shared transcription of NVIDIA's catalogue, read in
// place.
func TestXidNoActionPublished(t *testing.T) {
	if b, err := os.ReadFile(filepath.Join(realOutputs, "xid", "xid-catalogue.csv")); err == nil {
		rows := map[string][]string{}
		r := csv.NewReader(bytes.NewReader(b))
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			rows[rec[0]] = rec
		}
		if rows["167"][1] != "PCIE_FATAL_TIMEOUT" || rows["167"][3] != "" || rows["169"][3] != "" ||
			rows["169"][2] != "Internal micro-controller halt" || rows["62"][2] != "Internal micro-controller halt (newer drivers)" || rows["62"][3] != "RESET_GPU" {
			t.Errorf("NVIDIA's rows changed: 62 %q, 167 %q, 169 %q", rows["62"], rows["167"], rows["169"])
		}
	} else {
		t.Logf("shared catalogue absent (%v): the embedded rows only", err)
	}
	st, msgs, _ := xidStatus(t, xidLog(
		"NVRM: Xid (PCI:0000:04:00): 167, PCIE_FATAL_TIMEOUT",
		"NVRM: Xid (PCI:0000:04:00): 169, SEC2 halted",
		"NVRM: Xid (PCI:0000:04:00): 162, PSHC reengaged"))
	if st != StatusFail ||
		!strings.Contains(msgs, "fail: Xid 167 (PCIE_FATAL_TIMEOUT, fatal) x1 on PCI:0000:04:00; NVIDIA's catalog publishes no action for this Xid; its mnemonic PCIE_FATAL_TIMEOUT names it fatal") ||
		!strings.Contains(msgs, "fail: Xid 169 (Internal micro-controller halt, fatal) x1 on PCI:0000:04:00; NVIDIA's catalog publishes no action for this Xid; its description is that of Xid 62 (PMU_HALT_ERROR), whose action is RESET_GPU, so it is classed fatal") ||
		!strings.Contains(msgs, "warning: Xid 162 (Power Smoothing HW Circuitry capability reengaged, warning)") {
		t.Errorf("%s\n%s", st, msgs)
	}
}

// TestSXidContinuationLines: the NVSwitch driver prints an SXid's
// "Severity" and "Data" lines after its own, with the same prefix; they
// are the same event. In the real log (../shared/real-outputs/xid) five
// events show: four with their own "Fatal" line, and one whose own line
// is not in the excerpt, known by its "Severity 1" (fatal) line.
func TestSXidContinuationLines(t *testing.T) {
	evs, err := ParseKernelLog(bytes.NewReader(readReal(t, "xid", "dmesg_xid79_with_sxid20034_nvswitch.log")), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var sx []XidEvent
	for _, e := range evs {
		if e.SXid {
			sx = append(sx, e)
		}
	}
	if len(sx) != 5 {
		t.Fatalf("%d SXid events, want 5: %+v", len(sx), sx)
	}
	conts := 0
	for _, e := range sx {
		conts += e.Continuations
		if e.Class != XidFatal {
			t.Errorf("%+v", e)
		}
	}
	if conts != 3 || !strings.HasPrefix(sx[2].Detail, "Severity 1 Engine instance 60") || sx[2].Note == "" {
		t.Errorf("continuations %d, orphan %+v", conts, sx[2])
	}
	if msgs := dcgmMessages(XidFindings(evs)); !strings.Contains(msgs, "SXid 20034 (NVSwitch SXid, fatal) x4 on PCI:0000:05:00.0 PCI:0000:06:00.0 PCI:0000:07:00.0\n") ||
		!strings.Contains(msgs, "SXid 20034 (NVSwitch SXid, fatal) x1 on PCI:0000:07:00.0; the event's own line is not in the log; this is its continuation") {
		t.Errorf("%s", msgs)
	}
	// A non-fatal event keeps its class through its continuation lines,
	// and a second Severity line after one is a new event.
	log := xidLog(
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Severity 0 Engine instance 32 Sub-engine instance 00",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Data {0x00000000, 0x00000001, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000}",
		"nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Severity 0 Engine instance 33 Sub-engine instance 00")
	st, msgs, evs := xidStatus(t, log)
	if len(evs) != 2 || evs[0].Continuations != 2 || evs[1].Continuations != 0 || st != StatusWarn || !strings.Contains(msgs, "x1 on PCI:0000:05:00.0; the event's own line") {
		t.Errorf("%s %+v\n%s", st, evs, msgs)
	}
}

func TestParseNVLink5DecodeErrors(t *testing.T) {
	const head = "xid,unit,intrinfo_v1,intrinfo_v2,error_status,immediate_action,severity,action2_intrinfo_v1,action2_intrinfo_v2,action2\n"
	mask := "------000000----------0000100001"
	for _, bad := range []string{
		"",
		"xid,unit\n144,X\n",
		head + "143,X," + mask + "," + mask + ",0x1,IGNORE,Non-fatal,,,\n",
		head + "144,X,0101," + mask + ",0x1,IGNORE,Non-fatal,,,\n",
		head + "144,X," + strings.Replace(mask, "-", "x", 1) + "," + mask + ",0x1,IGNORE,Non-fatal,,,\n",
		head + "144,X," + mask + "," + mask + ",0xZ,IGNORE,Non-fatal,,,\n",
		head + "144,X," + mask + "," + mask + ",0x1,,Non-fatal,,,\n",
		head + "144,X," + mask + "," + mask + ",0x1,IGNORE,Non-fatal,,,RESET_GPU\n",
	} {
		if _, err := parseNVLink5Decode([]byte(bad)); err == nil {
			t.Errorf("parseNVLink5Decode(%q) accepted", bad)
		}
	}
	if n := len(NVLink5Decode()); n != 95 {
		t.Errorf("%d rows, want 95 (94 transcribed and MSE Degraded)", n)
	}
}
