package cli

import (
	"fmt"
	"io"
	"strings"
)

// Column describes one table column. Wide columns only show with -o wide.
type Column struct {
	Name string
	Wide bool
}

// Table is a kubectl-style table: upper-case headers and columns separated
// by spaces, padded like kubectl's tab writer (three spaces between columns,
// the last column unpadded). Cells may contain ANSI colour; widths count
// only what the terminal shows.
type Table struct {
	Columns []Column
	Rows    [][]string
}

// AddRow appends a row; cells beyond the columns are ignored.
func (t *Table) AddRow(cells ...string) {
	t.Rows = append(t.Rows, cells)
}

// TableOptions controls table rendering.
type TableOptions struct {
	NoHeaders bool
	Wide      bool
}

const columnPadding = 3

// Print writes the table to w.
func (t *Table) Print(w io.Writer, opts TableOptions) error {
	var idx []int
	for i, c := range t.Columns {
		if !c.Wide || opts.Wide {
			idx = append(idx, i)
		}
	}
	var lines [][]string
	if !opts.NoHeaders {
		h := make([]string, len(idx))
		for j, i := range idx {
			h[j] = strings.ToUpper(t.Columns[i].Name)
		}
		lines = append(lines, h)
	}
	for _, r := range t.Rows {
		l := make([]string, len(idx))
		for j, i := range idx {
			if i < len(r) {
				l[j] = strings.ReplaceAll(r[i], "\n", " ")
			}
			if l[j] == "" {
				l[j] = "<none>"
			}
		}
		lines = append(lines, l)
	}
	widths := make([]int, len(idx))
	for _, l := range lines {
		for j, c := range l {
			if w := visibleWidth(c); w > widths[j] {
				widths[j] = w
			}
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.Reset()
		for j, c := range l {
			b.WriteString(c)
			if j < len(l)-1 {
				b.WriteString(strings.Repeat(" ", widths[j]-visibleWidth(c)+columnPadding))
			}
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return fmt.Errorf("writing table: %w", err)
		}
	}
	return nil
}
