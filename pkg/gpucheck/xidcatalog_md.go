package gpucheck

import (
	"fmt"
	"sort"
	"strings"
)

// XidCatalogMarkdown renders the catalog as the Markdown table of
// docs/xid.md (a test keeps that page equal to this output).
func XidCatalogMarkdown(c *XidCatalog) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Source: <%s>", c.Source)
	if c.SheetDate != "" {
		fmt.Fprintf(&b, " (sheet of %s", c.SheetDate)
		if c.Checked != "" {
			fmt.Fprintf(&b, ", checked %s", c.Checked)
		}
		b.WriteString(")")
	}
	b.WriteString(".\n\n| Xid | Mnemonic | Description | Immediate action | Class here |\n|---:|---|---|---|---|\n")
	for _, e := range c.Entries {
		action := e.ImmediateAction
		if action == "" {
			action = "(none published)"
		}
		class := e.ClassHere()
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s |\n", e.Code, mdCell(e.Mnemonic), mdCell(e.Description), action, class)
	}
	return b.String()
}

func mdCell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// dcgmGateCell is what the gate makes of a DCGM level-1 result.
func dcgmGateCell(result string) string {
	switch result {
	case "Fail":
		return "Fail → **FAIL**"
	case "Warn":
		return "Warn → WARN"
	case "Info":
		return "Info → PASS"
	case "Pass":
		return "Pass, message printed → WARN"
	case "Warn|Fail":
		return "Warn or Fail (by library) → WARN or **FAIL**"
	}
	return "—"
}

// DCGMLevel1Markdown renders dcgm-level1.csv as the table of docs/dcgm.md
// (a test keeps that page equal to this output): one row per code, DCGM's
// result and the gate's verdict per release line, and the fix.
func DCGMLevel1Markdown(rows []DCGMLevel1Row) string {
	type entry struct {
		name   string
		result map[string]string
		fix    string
	}
	var codes []int64
	byCode := map[int64]*entry{}
	for _, r := range rows {
		e, ok := byCode[r.Code]
		if !ok {
			e = &entry{name: r.Name, result: map[string]string{}}
			byCode[r.Code] = e
			codes = append(codes, r.Code)
		}
		e.result[r.Line] = r.Result
		if r.Fix != "" {
			e.fix = r.Fix
		}
	}
	sort.Slice(codes, func(i, j int) bool { return codes[i] < codes[j] })
	var b strings.Builder
	b.WriteString("| Code | Name |")
	for _, l := range DCGMLevel1Lines {
		fmt.Fprintf(&b, " DCGM %s → gate |", l)
	}
	b.WriteString(" Fix the gate prints |\n|---:|---|")
	for range DCGMLevel1Lines {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, c := range codes {
		e := byCode[c]
		fmt.Fprintf(&b, "| %d | `%s` |", c, e.name)
		for _, l := range DCGMLevel1Lines {
			cell := dcgmGateCell(e.result[l])
			if sev, ok := dcgmTableSeverity(c); l == "4" && e.result[l] == "Warn" && ok && sev == dcgmSeverityValue("ISOLATE") {
				// GetFailureResult (Diag.cpp v4.4.2) exits
				// DCGM_ST_NVVS_ISOLATE_ERROR on an ISOLATE code.
				cell = "Warn, dcgmi exits ISOLATE → **FAIL**"
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		fmt.Fprintf(&b, " %s |\n", mdCell(e.fix))
	}
	return b.String()
}

// NVLink5DecodeMarkdown renders xid-nvlink5-decode.csv as the table of
// docs/xid.md.
func NVLink5DecodeMarkdown(rules []NVLink5Rule) string {
	var b strings.Builder
	b.WriteString("| Xid | Sub component (V1/V2) | IntrInfo V1 (< R575) | IntrInfo V2 (≥ R575) | Error status | Immediate action | Class here | NVIDIA's severity |\n|---:|---|---|---|---|---|---|---|\n")
	for _, r := range rules {
		status := "any"
		if len(r.Statuses) > 0 {
			var ss []string
			for _, s := range r.Statuses {
				ss = append(ss, fmt.Sprintf("0x%08x", s))
			}
			status = strings.Join(ss, " or ")
		}
		action, class := r.Action, nvlink5Class(r.Action)
		if r.Action2 != "" {
			action += fmt.Sprintf("; %s when IntrInfo is `%s` / `%s`", r.Action2, r.Action2V1, r.Action2V2)
			class += " / " + nvlink5Class(r.Action2)
		}
		fmt.Fprintf(&b, "| %d | %s | `%s` | `%s` | %s | %s | %s | %s |\n", r.Xid, mdCell(r.Unit), r.IntrInfoV1, r.IntrInfoV2, status, action, class, mdCell(r.Severity))
	}
	return b.String()
}

func nvlink5Class(action string) string {
	if action == ActionXid154Eval {
		return "the GPU's Xid 154, else application"
	}
	return string(ClassOfAction(action))
}

// ClassHere is the row's class as a person reads it: the class of its
// action, or how the gate decides it where the line does.
func (e XidCatalogEntry) ClassHere() string {
	switch e.ImmediateAction {
	case ActionXid154:
		return "per line and GPU"
	case ActionNVLink5Workflow:
		return "per line, decoded"
	}
	return string(e.Class)
}
