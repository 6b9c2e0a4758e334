package gpucheck

import (
	"fmt"
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
		class := string(e.Class)
		if e.ImmediateAction == ActionXid154 {
			class = "per line"
		}
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
