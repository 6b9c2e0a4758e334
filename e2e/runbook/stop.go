package runbooke2e

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Stop reports whether a block deliberately stops the reader, and what it
// tells them: its last command is a group ({ ...; } or a subshell) that
// writes its message on stderr (echo or printf >&2) and then ends in
// false or a non-zero exit whatever happened before, as the runbook's
// block for an OS family without the packages does. A reader who pastes
// such a block stops there: the blocks after it are not reached, which
// is not the same as failed.
func Stop(lines []string) (bool, []string) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(strings.Join(lines, "\n")+"\n"), "")
	if err != nil || len(f.Stmts) == 0 {
		return false, nil
	}
	last := f.Stmts[len(f.Stmts)-1]
	var body []*syntax.Stmt
	switch c := last.Cmd.(type) {
	case *syntax.Block:
		body = c.Stmts
	case *syntax.Subshell:
		body = c.Stmts
	default:
		return false, nil
	}
	if len(body) == 0 || !fails(body[len(body)-1]) {
		return false, nil
	}
	var msgs []string
	syntax.Walk(last, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		ce, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(ce.Args) < 2 || !toStderr(st) {
			return true
		}
		if name := ce.Args[0].Lit(); name != "echo" && name != "printf" {
			return true
		}
		var words []string
		for _, a := range ce.Args[1:] {
			var b strings.Builder
			_ = syntax.NewPrinter().Print(&b, a)
			words = append(words, strings.Trim(b.String(), `"'`))
		}
		msgs = append(msgs, strings.Join(words, " "))
		return true
	})
	return len(msgs) > 0, msgs
}

// fails says whether a statement always fails: false, or exit with a
// non-zero status.
func fails(st *syntax.Stmt) bool {
	ce, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 || st.Negated {
		return false
	}
	switch ce.Args[0].Lit() {
	case "false":
		return len(ce.Args) == 1
	case "exit":
		return len(ce.Args) == 2 && ce.Args[1].Lit() != "" && ce.Args[1].Lit() != "0"
	}
	return false
}

// toStderr says whether a statement writes its standard output to stderr.
func toStderr(st *syntax.Stmt) bool {
	for _, r := range st.Redirs {
		if (r.N == nil || r.N.Value == "1") && r.Op == syntax.DplOut && r.Word.Lit() == "2" {
			return true
		}
	}
	return false
}
