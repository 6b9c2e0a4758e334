// Package golden compares a test's output with a file under testdata/,
// and rewrites the file instead when the test runs with -update. Only
// tests import it.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Check compares got with testdata/file (or writes it with -update).
func Check(t testing.TB, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}

// TableLines returns the lines of the tables in out: each block of
// non-empty lines that starts with a header (upper case, columns three
// spaces apart) up to the next empty line. Prose around the tables (titles,
// summaries, warnings) is not a table line.
func TableLines(out string) []string {
	var lines []string
	in := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case l == "":
			in = false
		case !in && isHeader(l):
			in = true
		}
		if in {
			lines = append(lines, l)
		}
	}
	return lines
}

func isHeader(l string) bool {
	return strings.Contains(l, "   ") && l == strings.ToUpper(l) && strings.IndexFunc(l, unicode.IsLetter) == 0
}

// Width is the number of columns s takes in a terminal: runes, less ANSI
// colour sequences.
func Width(s string) int {
	n, inEsc := 0, false
	for _, r := range s {
		switch {
		case inEsc:
			inEsc = !unicode.IsLetter(r)
		case r == '\x1b':
			inEsc = true
		default:
			n++
		}
	}
	return n
}

// Overwide returns the table lines of out wider than width columns.
func Overwide(out string, width int) []string {
	var over []string
	for _, l := range TableLines(out) {
		if Width(l) > width {
			over = append(over, l)
		}
	}
	return over
}

// CheckFits fails t unless out has a table and every table line fits
// width columns (a default table's budget, cli.DefaultTableWidth).
func CheckFits(t testing.TB, out string, width int) {
	t.Helper()
	if len(TableLines(out)) == 0 {
		t.Errorf("no table in the output:\n%s", out)
	}
	for _, l := range Overwide(out, width) {
		t.Errorf("table line is %d columns, over %d:\n%s", Width(l), width, l)
	}
}

// Steady replaces the value of each named field of a -o json report with
// a fixed one of the same JSON type (a string "STEADY", a number 0), so a
// report that carries a run id, a duration or a time can be a golden file:
// what stays is its shape, which the report's JSON Schema is held to.
func Steady(out string, fields ...string) string {
	for _, f := range fields {
		str := regexp.MustCompile(`("` + regexp.QuoteMeta(f) + `": )"[^"]*"`)
		out = str.ReplaceAllString(out, `$1"STEADY"`)
		num := regexp.MustCompile(`("` + regexp.QuoteMeta(f) + `": )-?[0-9][0-9.eE+-]*`)
		out = num.ReplaceAllString(out, `${1}0`)
	}
	return out
}
