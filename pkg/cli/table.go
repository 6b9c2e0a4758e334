package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Column describes one table column. Wide columns only show with -o wide.
//
// A column with Shrink set may be shortened, in the default view only, when
// the table would be wider than its width budget (TableOptions.Width, 120
// columns unless set): the widest shrinkable column loses characters first,
// down to Min (never below the header's width), and a shortened cell shows
// the mark "…" where text was left out. Elide says which part goes. -o wide
// and the structured outputs always carry the full value.
type Column struct {
	Name   string
	Wide   bool
	Shrink bool
	Min    int
	Elide  Elision
	// Overflow marks a last column that is never shortened (a copy-paste
	// command): the budget counts it at Min (the header's width when
	// unset) and a longer cell runs past the budget, after the columns
	// before it were fitted.
	Overflow bool
	// Drop marks a column the default view leaves out when the table does
	// not fit its budget even with every shrinkable column at its
	// minimum: the last such column goes first. -o wide shows it. A
	// column that is neither Shrink nor Drop (an identifier: a node, pod,
	// object name, API or file path) is never shortened, and a table whose
	// identifiers alone are wider than the budget runs past it.
	Drop bool
}

// Elision says which part of a shortened cell is left out.
type Elision int

const (
	// ElideEnd keeps the start (reasons, messages).
	ElideEnd Elision = iota
	// ElideMiddle keeps both ends (object names: the prefix and the
	// distinguishing suffix).
	ElideMiddle
	// ElideStart keeps the end (file paths: the file name and line).
	ElideStart
)

// DefaultTableWidth is the width budget of a default table: what fits a
// terminal beside a runbook. On a terminal wider than this, the table uses
// the terminal's width (TableOptions.Width 0 only).
const DefaultTableWidth = 120

// ElisionMark replaces the characters a shortened cell leaves out.
const ElisionMark = "…"

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
	// Width is the budget shrinkable columns are shortened to fit in the
	// default view: 0 means DefaultTableWidth, or the terminal's width
	// when the table is written to a wider terminal; a negative value no
	// limit.
	Width int
}

// terminalWidth is the width of the terminal w is, 0 when w is not one.
var terminalWidth = func(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
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
	budget := opts.Width
	if budget == 0 {
		budget = max(DefaultTableWidth, terminalWidth(w))
	}
	for {
		lines, widths := t.cells(idx, opts)
		if !opts.Wide && budget > 0 {
			cols := make([]Column, len(idx))
			for j, i := range idx {
				cols[j] = t.Columns[i]
			}
			narrowed, fits := fitWidths(cols, widths, budget)
			if !fits {
				if j := lastDrop(cols); j >= 0 {
					idx = append(idx[:j:j], idx[j+1:]...)
					continue
				}
			}
			if narrowed {
				first := 0
				if !opts.NoHeaders {
					first = 1
				}
				for _, l := range lines[first:] {
					for j, c := range l {
						l[j] = Shorten(c, widths[j], cols[j].Elide)
					}
				}
			}
		}
		return writeLines(w, lines, widths)
	}
}

// lastDrop is the index of the last Drop column of cols, -1 when none.
func lastDrop(cols []Column) int {
	for j := len(cols) - 1; j >= 0; j-- {
		if cols[j].Drop {
			return j
		}
	}
	return -1
}

// cells are the header and row cells of the columns idx, and each
// column's width.
func (t *Table) cells(idx []int, opts TableOptions) ([][]string, []int) {
	var lines [][]string
	if !opts.NoHeaders {
		h := make([]string, len(idx))
		for j, i := range idx {
			// One word per header, so that awk's fields line up with
			// the columns: "LAST SEEN" is printed LAST-SEEN.
			h[j] = strings.ReplaceAll(strings.ToUpper(t.Columns[i].Name), " ", "-")
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
				l[j] = EmptyCell
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
	return lines, widths
}

func writeLines(w io.Writer, lines [][]string, widths []int) error {
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

// fitWidths narrows the shrinkable columns of widths, widest first, until
// the table fits budget or every shrinkable column is at its minimum. It
// reports whether any column was narrowed and whether the table fits.
func fitWidths(cols []Column, widths []int, budget int) (narrowed, fits bool) {
	floor := make([]int, len(cols))
	for j, c := range cols {
		// The header is never shortened: a column narrower than its
		// header would push the columns after it out of line.
		floor[j] = max(c.Min, visibleWidth(c.Name))
		if floor[j] < 2 {
			floor[j] = 2
		}
	}
	total := 0
	for j, w := range widths {
		if j == len(widths)-1 && cols[j].Overflow {
			w = min(w, floor[j])
		}
		total += w
		if j < len(widths)-1 {
			total += columnPadding
		}
	}
	for total > budget {
		widest := -1
		for j, c := range cols {
			if c.Shrink && !c.Overflow && widths[j] > floor[j] && (widest < 0 || widths[j] > widths[widest]) {
				widest = j
			}
		}
		if widest < 0 {
			break
		}
		widths[widest]--
		total--
		narrowed = true
	}
	return narrowed, total <= budget
}

// Shorten returns s cut to at most width visible characters, with
// ElisionMark where text was left out, keeping the part elide names. ANSI
// colour sequences are kept whole and do not count; a cut inside coloured
// text ends with a colour reset.
func Shorten(s string, width int, elide Elision) string {
	vis := visibleWidth(s)
	if vis <= width || width <= 0 {
		return s
	}
	keep := width - 1 // the mark is one column wide
	var head, tail int
	switch elide {
	case ElideStart:
		tail = keep
	case ElideMiddle:
		head = (keep + 1) / 2
		tail = keep - head
	default:
		head = keep
	}
	var b strings.Builder
	n := 0
	colored := false
	inEsc := false
	marked := false
	for _, r := range s {
		switch {
		case inEsc:
			b.WriteRune(r)
			if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
				inEsc = false
			}
			continue
		case r == '\x1b':
			inEsc = true
			colored = true
			b.WriteRune(r)
			continue
		}
		if n < head || n >= vis-tail {
			b.WriteRune(r)
		} else if !marked {
			b.WriteString(ElisionMark)
			marked = true
		}
		n++
	}
	if colored && !strings.HasSuffix(b.String(), "\x1b[0m") {
		b.WriteString("\x1b[0m")
	}
	return b.String()
}
