package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCountsTakeTheirNumber walks every message the gates of skew
// preflight and verify (pkg/preflight), the drain blockers (pkg/eviction),
// the inference drain's plan and run (pkg/inference), the fleet programme
// (pkg/fleetrun) and the plugins' summaries (plugins/*) format, renders each count as 1, and fails on a count
// whose noun stays plural ("1 namespaces pin ...", "1 active alert(s)"):
// a count is written with cli.Plural, cli.PluralOf or skew.Nodes and
// skew.Minors, which take the noun's number.
func TestCountsTakeTheirNumber(t *testing.T) {
	var dirs []string
	// pkg/eviction writes the blocker messages pdb-blockers and
	// gang-drain print as they are.
	for _, pat := range []string{"../../pkg/preflight", "../../pkg/eviction", "../../pkg/inference", "../../pkg/fleetrun", "../*"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, m...)
	}
	formats := 0
	for _, dir := range dirs {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			for _, f := range pkg.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					lit, ok := n.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING || !strings.Contains(lit.Value, "%d") {
						return true
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						return true
					}
					formats++
					if bad := pluralAtOne(s); bad != "" {
						t.Errorf("%s: %q at a count of 1 reads %q: write the count with cli.Plural", fset.Position(lit.Pos()), s, bad)
					}
					return true
				})
			}
		}
	}
	if formats < 100 {
		t.Fatalf("only %d format strings with %%d found: the walk is broken", formats)
	}
}

// pluralAtOne renders the counts of a format string as 1 and returns the
// first "1 <plural noun>" it reads, or "".
func pluralAtOne(format string) string {
	if m := hedged.FindStringSubmatch(format); m != nil {
		return "1 " + m[1]
	}
	for _, m := range countNoun.FindAllStringSubmatchIndex(format, -1) {
		before := format[:m[0]]
		// "3 of %d nodes", "2 -> %d replicas", "%d/%d nodes": the noun
		// belongs to another count.
		if strings.HasSuffix(before, "of ") || strings.HasSuffix(before, "-> ") || strings.HasSuffix(before, "/") {
			continue
		}
		word := format[m[2]:m[3]]
		if singularS[word] || strings.HasSuffix(word, "ss") || !strings.HasSuffix(word, "s") {
			continue
		}
		return "1 " + word
	}
	return ""
}

// countNoun is a count and the word after it.
var countNoun = regexp.MustCompile(`%d ([A-Za-z][A-Za-z-]*)`)

// hedged is a count whose noun hedges its number: "%d node(s)".
var hedged = regexp.MustCompile(`%d ([A-Za-z -]*\((?:s|es)\))`)

// singularS are words after a count that end in s and are not a plural
// noun: verbs that agree with one, and nouns whose one is their many.
var singularS = map[string]bool{"is": true, "has": true, "was": true, "needs": true, "uses": true, "series": true,
	"s": true, "ms": true}

// The walk above reads a plural where there is one and passes the
// singular, a verb that agrees with one, and a noun of another count.
func TestPluralAtOne(t *testing.T) {
	for format, want := range map[string]string{
		"%d namespaces pin Pod Security":  "1 namespaces",
		"%d active alert(s) firing":       "1 active alert(s)",
		"ring %s: %d batch(es), at most":  "1 batch(es)",
		"recorded %d roles and %d grants": "1 roles",
		"%d of %d nodes not Ready":        "",
		"%d node is":                      "",
		"(%d -> %d replicas)":             "",
		"%d is behind":                    "",
		"%d GPUs":                         "1 GPUs",
	} {
		if got := pluralAtOne(format); got != want {
			t.Errorf("pluralAtOne(%q) = %q, want %q", format, got, want)
		}
	}
}
