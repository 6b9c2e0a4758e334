package cli

import (
	"io"
	"strings"
	"testing"
)

func TestShorten(t *testing.T) {
	red := "\x1b[31m"
	reset := "\x1b[0m"
	for _, tc := range []struct {
		in    string
		width int
		elide Elision
		want  string
	}{
		{"short", 10, ElideEnd, "short"},
		{"exactly10!", 10, ElideEnd, "exactly10!"},
		{"the pod has no controller", 10, ElideEnd, "the pod h…"},
		{"the pod has no controller", 10, ElideStart, "…ontroller"},
		{"train-llama-worker-0-17", 11, ElideMiddle, "train…-0-17"},
		{"charts/app/templates/deploy.yaml:12", 20, ElideStart, "…ates/deploy.yaml:12"},
		{red + "BLOCKED-FOREVER" + reset, 8, ElideEnd, red + "BLOCKED…" + reset},
		{"ünïcödé-wide", 5, ElideEnd, "ünïc…"},
	} {
		got := Shorten(tc.in, tc.width, tc.elide)
		if got != tc.want {
			t.Errorf("Shorten(%q, %d, %d) = %q, want %q", tc.in, tc.width, tc.elide, got, tc.want)
		}
		if w := visibleWidth(got); w > tc.width {
			t.Errorf("Shorten(%q, %d) is %d wide", tc.in, tc.width, w)
		}
	}
}

func TestTableFitsBudget(t *testing.T) {
	tb := Table{Columns: []Column{{Name: "NODE"}, {Name: "POD", Shrink: true, Elide: ElideMiddle}, {Name: "REASON", Shrink: true, Min: 12}, {Name: "FIX"}}}
	long := strings.Repeat("x", 80)
	tb.AddRow("node-1", "ns/"+long+"-0", "blocked: "+long, "kubectl delete pdb x")
	tb.AddRow("node-2", "ns/short", "ok", "-")
	var b strings.Builder
	if err := tb.Print(&b, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if w := visibleWidth(l); w > DefaultTableWidth {
			t.Errorf("line is %d wide, budget %d: %q", w, DefaultTableWidth, l)
		}
	}
	if !strings.Contains(b.String(), ElisionMark) || !strings.Contains(b.String(), "kubectl delete pdb x") {
		t.Errorf("want shortened cells with the mark and the fix whole:\n%s", b.String())
	}
	// -o wide and a negative budget keep every value whole.
	for _, o := range []TableOptions{{Wide: true}, {Width: -1}} {
		b.Reset()
		if err := tb.Print(&b, o); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), ElisionMark) || !strings.Contains(b.String(), "blocked: "+long) {
			t.Errorf("%+v: want full values:\n%s", o, b.String())
		}
	}
	// Columns stop at their minimum: a table of unshrinkable width stays
	// over budget rather than cutting below Min.
	b.Reset()
	if err := tb.Print(&b, TableOptions{Width: 10}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n")[1:2] {
		if !strings.Contains(l, "blocked: xx…") {
			t.Errorf("REASON should stop at its minimum 12: %q", l)
		}
	}
}

// An Overflow last column (a copy-paste fix) is never cut: the budget
// counts it at its minimum, the columns before it fit, and a longer fix
// runs past the budget.
func TestTableOverflowColumn(t *testing.T) {
	fix := "kubectl -n team-a patch pdb " + strings.Repeat("y", 60) + " --type merge -p '{\"spec\":{\"maxUnavailable\":1}}'"
	tb := Table{Columns: []Column{{Name: "POD", Shrink: true, Elide: ElideMiddle}, {Name: "REASON", Shrink: true}, {Name: "FIX", Overflow: true, Min: 20}}}
	tb.AddRow("ns/"+strings.Repeat("p", 70), "blocked: "+strings.Repeat("r", 70), fix)
	tb.AddRow("ns/short", "ok", "-")
	var b strings.Builder
	if err := tb.Print(&b, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if !strings.HasSuffix(lines[1], fix) {
		t.Errorf("the fix is cut: %q", lines[1])
	}
	start := strings.Index(lines[0], "FIX")
	// Fitted to the budget less FIX's reserve, not squeezed to minimums.
	if start != DefaultTableWidth-20 || visibleWidth(lines[2]) > DefaultTableWidth {
		t.Errorf("the columns before FIX do not fit with its reserve (FIX at %d):\n%s", start, b.String())
	}
	if !strings.Contains(lines[1], ElisionMark) {
		t.Errorf("want the columns before FIX shortened:\n%s", b.String())
	}
}

// A Min below the header's width stops at the header: the header line
// stays inside the budget and the columns after it in line.
func TestTableMinBelowHeader(t *testing.T) {
	tb := Table{Columns: []Column{{Name: "REPLACEMENT", Shrink: true, Min: 2}, {Name: "X"}}}
	tb.AddRow(strings.Repeat("r", 200), "x")
	var b strings.Builder
	if err := tb.Print(&b, TableOptions{Width: 5}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	if strings.Index(lines[0], "X") != visibleWidth(lines[1][:strings.Index(lines[1], "x")]) || !strings.HasPrefix(lines[1], strings.Repeat("r", 10)+ElisionMark+" ") {
		t.Errorf("columns out of line:\n%s", b.String())
	}
}

// Identifiers (columns neither Shrink nor Drop) stay whole; the other
// columns shrink to their minimum, then Drop columns go, last first; a
// table whose identifiers alone are too wide runs past the budget.
func TestTableIdentifiersWholeDropBeforeCut(t *testing.T) {
	node := "gke-gpu-pool-a100-80gb-spot-7f9c2d-q7xk"
	pod := "inference/llama-70b-serving-7d9f8c6b5d-x2k4q"
	newTable := func() Table {
		tb := Table{Columns: []Column{{Name: "NODE"}, {Name: "POD"}, {Name: "VERDICT"},
			{Name: "REASON", Shrink: true, Min: 12, Drop: true}, {Name: "NOTE", Drop: true}, {Name: "FOR"}}}
		tb.AddRow(node, pod, "LATER", "the pod is not Ready and the PDB counts it as healthy", "a note", "3h")
		return tb
	}
	for _, tc := range []struct {
		width      int
		want, lack []string
	}{
		// 120: NOTE goes; REASON shrinks.
		{120, []string{node, pod, "LATER", "the pod is not…", "3h"}, []string{"a note"}},
		// 110: both go, identifiers whole.
		{110, []string{node, pod, "LATER", "3h"}, []string{"REASON", "NOTE"}},
		// 60: narrower than the identifiers: they run past, whole.
		{60, []string{node, pod}, []string{"REASON", ElisionMark}},
		// Wide enough for all.
		{200, []string{"the pod is not Ready and the PDB counts it as healthy", "a note"}, nil},
	} {
		tb := newTable()
		var b strings.Builder
		if err := tb.Print(&b, TableOptions{Width: tc.width}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, s := range tc.want {
			if !strings.Contains(out, s) {
				t.Errorf("width %d: lacks %q:\n%s", tc.width, s, out)
			}
		}
		for _, s := range tc.lack {
			if strings.Contains(out, s) {
				t.Errorf("width %d: has %q:\n%s", tc.width, s, out)
			}
		}
		if tc.width >= 110 {
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if w := visibleWidth(l); w > tc.width {
					t.Errorf("width %d: line is %d wide: %q", tc.width, w, l)
				}
			}
		}
		// -o wide shows every column whole.
		b.Reset()
		_ = tb.Print(&b, TableOptions{Width: tc.width, Wide: true})
		if !strings.Contains(b.String(), "a note") || !strings.Contains(b.String(), "counts it as healthy") {
			t.Errorf("width %d: -o wide lacks a column:\n%s", tc.width, b.String())
		}
	}
}

// On a terminal wider than DefaultTableWidth the table uses its width;
// on a narrower or unknown one, DefaultTableWidth.
func TestTableTerminalWidth(t *testing.T) {
	defer func(f func(io.Writer) int) { terminalWidth = f }(terminalWidth)
	long := strings.Repeat("r", 150)
	for _, tc := range []struct {
		term, want int
	}{{0, DefaultTableWidth}, {80, DefaultTableWidth}, {120, DefaultTableWidth}, {140, 140}, {200, 158}} {
		terminalWidth = func(io.Writer) int { return tc.term }
		tb := Table{Columns: []Column{{Name: "NAME"}, {Name: "REASON", Shrink: true, Min: 10}}}
		tb.AddRow("pod-1", long)
		var b strings.Builder
		if err := tb.Print(&b, TableOptions{}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if w := visibleWidth(lines[1]); w != tc.want {
			t.Errorf("terminal %d: row is %d wide, want %d", tc.term, w, tc.want)
		}
	}
}
