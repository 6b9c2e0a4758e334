package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// rbacRow is one row of README's RBAC table.
type rbacRow struct {
	What, File, Needs string
}

// readmeRBAC reads the table under README's "## RBAC" heading: one row per
// role file, the first cell naming the plugin (and the command or flow,
// "skew probes"), the last what the role grants. README is the one place
// the roles are described; the krew caveats are rendered from it.
func readmeRBAC(readme []byte) ([]rbacRow, error) {
	var rows []rbacRow
	in := false
	sc := bufio.NewScanner(bytes.NewReader(readme))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			in = l == "## RBAC"
			continue
		}
		if !in || !strings.HasPrefix(l, "| ") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		if len(cells) != 4 || cells[0] == " plugin" || strings.HasPrefix(cells[0], "--") {
			continue
		}
		rows = append(rows, rbacRow{What: strings.TrimSpace(cells[0]), File: strings.Trim(strings.TrimSpace(cells[1]), "`"),
			Needs: strings.ReplaceAll(strings.TrimSpace(cells[3]), "`", "")})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no table under the README heading \"## RBAC\"")
	}
	return rows, sc.Err()
}

// Caveats is the RBAC part of pl's krew caveats: README's rows for the
// plugin (those whose first cell is its name, or starts with it), wrapped
// at 76 columns and indented for the manifest's caveats block.
func Caveats(rows []rbacRow, pl Plugin) (string, error) {
	var b strings.Builder
	b.WriteString("    RBAC, as README's RBAC section lists it (least-privilege roles in the\n")
	b.WriteString("    source repository's deploy/rbac/):")
	n := 0
	for _, r := range rows {
		if r.What != pl.Name && !strings.HasPrefix(r.What, pl.Name+" ") {
			continue
		}
		n++
		b.WriteString("\n")
		b.WriteString(wrap(fmt.Sprintf("- %s (%s): %s", r.What, r.File, r.Needs), 76, "    ", "      "))
	}
	if n == 0 {
		return "", fmt.Errorf("README's RBAC table has no row for %s", pl.Name)
	}
	return b.String(), nil
}

// wrap breaks s at spaces into lines of at most width columns after the
// indent (first line first, the others rest).
func wrap(s string, width int, first, rest string) string {
	var lines []string
	line := first
	empty := true
	for _, w := range strings.Fields(s) {
		if !empty && len(line)+1+len(w) > width+len(first) {
			lines = append(lines, line)
			line, empty = rest, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	return strings.Join(append(lines, line), "\n")
}

func readRBAC(path string) ([]rbacRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return readmeRBAC(b)
}
