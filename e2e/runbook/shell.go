package runbooke2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// A block runs as a reader pastes it: one non-interactive bash per
// paste, standard input closed (a command that prompts reads end of file
// and fails instead of swallowing the next pasted line). An ERR trap
// records every command that fails. Each host segment is replaced by a
// call that hands it to the harness (the reader pasting it on the node)
// and waits until the harness has checked and applied it; the shell's
// NODE, NODES and UNIT go with it.

// Failure is a command of a block that exited non-zero.
type Failure struct {
	Code    int    `json:"code"`
	Line    int    `json:"line"` // index in the block
	Command string `json:"command"`
}

// HostRequest is a host segment reached by the shell.
type HostRequest struct {
	Segment int
	Env     map[string]string
	// Done is closed by the harness once it has handled the segment.
	Done chan struct{}
}

// Shell runs blocks in one working directory with one environment.
type Shell struct {
	Dir     string
	Env     []string
	Timeout time.Duration
	// Session is the file that carries the shell variables a block sets
	// (NODE, BACKUP_DIR, ...) to the blocks pasted after it, as one
	// terminal does; "" for none.
	Session string
}

// assigned matches a shell variable assignment at the start of a line.
var assigned = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)=`)

// sessionLines source the variables earlier blocks set and save the
// ones this block sets when it ends.
func (s *Shell) sessionLines(segs []Segment) (head, tail string) {
	if s.Session == "" {
		return "", ""
	}
	var vars []string
	seen := map[string]bool{}
	for _, sg := range segs {
		if sg.Host != "" {
			continue
		}
		for _, l := range sg.Lines {
			if m := assigned.FindStringSubmatch(l); m != nil && !seen[m[1]] {
				seen[m[1]] = true
				vars = append(vars, m[1])
			}
		}
	}
	head = fmt.Sprintf("[ -f %q ] && . %q\n", s.Session, s.Session)
	if len(vars) > 0 {
		tail = fmt.Sprintf("trap 'declare -p %s >>%q 2>/dev/null' EXIT\n", strings.Join(vars, " "), s.Session)
	}
	return head, tail
}

const preamble = `__gf_err() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" | tr '\n' ' ' >&3; printf '\n' >&3; }
__gf_host() { printf 'HOST %s\tNODE=%s\tNODES=%s\tUNIT=%s\n' "$1" "${NODE-}" "${NODES-}" "${UNIT-}" >&4; read -r __gf_ack <&5; }
__gf_chk() { if [ "$1" -ne 0 ] && [ -z "${__gf_fired-}" ]; then __gf_err "$1" "$2" "` + listStopped + `"; fi; __gf_fired=; return 0; }
__gf_pipe() { __gf_err "$1" "$2" "` + pipeMark + ` $3"; return "$1"; }
trap '__gf_err "$?" "$LINENO" "$BASH_COMMAND"; __gf_fired=1' ERR
`

// listStopped is the failure of an && list that stopped before its last
// command: bash runs no ERR trap for a command of an && or || list
// other than the last (bash(1), trap), so a list whose third command
// failed would stop without a failure and the block go on.
const listStopped = "an && list stopped before its last command"

// pipeMark names a pipeline's element other than its last in a record
// (__gf_pipe); the number after it indexes the block's elements.
const pipeMark = "__gf_pipe"

// pipeElem is a command whose status bash drops, as pasted: one of a
// pipeline other than its last, or one in a subshell or a function body
// (see checkLists).
type pipeElem struct {
	Line int // script line
	Text string
	Name string // the program it runs ("" when not a plain word)
	Why  string // where it is: pipeWhy, subshellWhy or funcWhy
}

// Where a command whose status bash drops is, as its failure says.
const (
	pipeWhy     = "in a pipeline, before its last command (bash drops its status)"
	subshellWhy = "in a ( … ) subshell, where bash runs no ERR trap"
	funcWhy     = "in a function body, where bash runs no ERR trap"
)

// checkLists appends to each top-level statement of a workstation
// segment a check of its status (__gf_chk), on the statement's last
// line, so that lines keep their numbers; start is the script line of
// the segment's first line. The check reports a failing statement the
// ERR trap did not (one that stopped inside an && list), and returns 0:
// a status it returned would run the ERR trap for the check itself.
//
// It also hands the status of every command of a pipeline but its last
// to __gf_pipe, wherever the pipeline is (a loop's body, a command
// substitution): bash drops those statuses (a pipeline's status is its
// last command's unless pipefail is set, and its ERR trap does not run
// for the others: bash(1), Pipelines and trap), so "kubectl get ... |
// sed ..." whose kubectl failed went on with nothing. Each such command
// A becomes "{ A || __gf_pipe $? LINE N; }", which keeps its status and
// what it reads and writes. set -o pipefail is not used: it changes what
// a pipeline returns, so "! diff a b | grep ..." and a pasted if would
// take another branch than the reader's shell does. A pipeline whose
// status the block tests (an if or while condition, the left side of &&
// or ||, one negated with !) is left as it is, the way the ERR trap
// leaves it: "kubectl get ... | grep -q x" there is a question, and its
// commands may fail as part of the answer. elems collects the wrapped
// commands; a segment mvdan.cc/sh cannot parse is left as it is.
//
// Bash runs no ERR trap in a ( … ) subshell or a function body either
// (it is not inherited there without set -E: bash(1), set -E and trap),
// so there only the status of the body's last command is seen, as the
// subshell's or the call's. Every other command of such a body (in its
// loops and branches too) whose status is not tested is handed to
// __gf_pipe the same way, "{ A || __gf_pipe $? LINE N; }": "( kubectl
// drain ...; echo done )" whose drain failed no longer ends clean. The
// body's last command is left to the ERR trap around it. set -E is not
// used: it would report a body's last command twice (inside, and as the
// subshell's status outside), and run the trap in every command
// substitution, whose status the statement around it already answers
// for.
func checkLists(lines []string, start int, elems *[]pipeElem) []string {
	src := strings.Join(lines, "\n")
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return lines
	}
	type ins struct {
		off  uint
		text string
	}
	var all []ins
	for _, st := range f.Stmts {
		if st.Background || st.Coprocess || st.Cmd == nil {
			continue
		}
		line := start + int(st.Pos().Line()) - 1
		if st.Semicolon.IsValid() {
			all = append(all, ins{st.End().Offset(), fmt.Sprintf(" __gf_chk $? %d;", line)})
		} else {
			all = append(all, ins{lineEnd(st).Offset(), fmt.Sprintf("; __gf_chk $? %d", line)})
		}
	}
	var added []pipeElem
	wrap := func(st *syntax.Stmt, why string) {
		line := start + int(st.Pos().Line()) - 1
		end := stmtEnd(st)
		added = append(added, pipeElem{Line: line, Text: src[st.Pos().Offset():end.Offset()], Name: program(st), Why: why})
		id := len(*elems) + len(added) - 1
		all = append(all, ins{st.Pos().Offset(), "{ "}, ins{end.Offset(), fmt.Sprintf(" || %s $? %d %d; }", pipeMark, line, id)})
	}
	tested, inner := testedNodes(f)
	for _, p := range untestedPipelines(f, tested, inner) {
		leaves := pipeLeaves(p)
		for _, lf := range leaves[:len(leaves)-1] {
			wrap(lf, pipeWhy)
		}
	}
	for _, u := range untrapped(f, tested) {
		wrap(u.st, u.why)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].off > all[j].off })
	for _, in := range all {
		src = src[:in.off] + in.text + src[in.off:]
	}
	out := strings.Split(src, "\n")
	if len(out) != len(lines) {
		return lines
	}
	*elems = append(*elems, added...)
	return out
}

// lineEnd is where a statement ends on the line it is written on: a here
// document's body comes after that line, so a check inserted there goes
// before the body, not after its delimiter.
func lineEnd(st *syntax.Stmt) syntax.Pos {
	if st.Semicolon.IsValid() {
		return st.End()
	}
	end := st.Pos()
	if st.Cmd != nil {
		end = st.Cmd.End()
	}
	for _, r := range st.Redirs {
		if e := r.Word.End(); e.After(end) {
			end = e
		}
	}
	return end
}

// stmtEnd is where a statement's command and redirections end, before
// its semicolon, on the line it is written on (see lineEnd).
func stmtEnd(st *syntax.Stmt) syntax.Pos {
	end := st.Pos()
	if st.Cmd != nil {
		end = st.Cmd.End()
	}
	for _, r := range st.Redirs {
		if e := r.Word.End(); e.After(end) {
			end = e
		}
	}
	return end
}

// untestedPipelines are the pipelines of f, at any depth, whose status is
// not tested (see checkLists and testedNodes).
func untestedPipelines(f *syntax.File, tested map[syntax.Node]bool, inner map[*syntax.Stmt]bool) []*syntax.Stmt {
	var out []*syntax.Stmt
	syntax.Walk(f, func(n syntax.Node) bool {
		if st, ok := n.(*syntax.Stmt); ok && !inner[st] && !tested[st] && isPipe(st) {
			out = append(out, st)
		}
		return true
	})
	return out
}

// testedNodes are the nodes of f whose status the block tests (an if or
// while condition, the left side of && or ||, a statement negated with
// !), and the statements that are elements of a larger pipeline. A
// command substitution starts afresh: what is inside one is not tested by
// the test around it, whose answer is the substitution's output.
func testedNodes(f *syntax.File) (map[syntax.Node]bool, map[*syntax.Stmt]bool) {
	tested := map[syntax.Node]bool{}
	inner := map[*syntax.Stmt]bool{} // an element of a larger pipeline
	var mark func(n syntax.Node)
	mark = func(n syntax.Node) {
		syntax.Walk(n, func(m syntax.Node) bool {
			switch m.(type) {
			case *syntax.CmdSubst, *syntax.ProcSubst:
				return false
			}
			tested[m] = true
			return true
		})
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			if n.Negated {
				mark(n)
			}
		case *syntax.IfClause:
			for _, st := range n.Cond {
				mark(st)
			}
		case *syntax.WhileClause:
			for _, st := range n.Cond {
				mark(st)
			}
		case *syntax.BinaryCmd:
			switch n.Op {
			case syntax.AndStmt, syntax.OrStmt:
				mark(n.X)
			case syntax.Pipe, syntax.PipeAll:
				inner[n.X], inner[n.Y] = true, true
			}
		}
		return true
	})
	return tested, inner
}

// untrappedStmt is a command in a subshell or a function body whose
// failure bash's ERR trap does not see (see checkLists).
type untrappedStmt struct {
	st  *syntax.Stmt
	why string
}

// untrapped are the commands of f's ( … ) subshells and function bodies,
// at any depth, whose status is neither tested nor the body's own: every
// command of the body but its last, the commands of its loops, and those
// of its blocks, branches and case items but their last when the block,
// branch or case is the body's last command. A nested subshell or
// function is a command of the body around it and a body of its own; a
// command running in the background is left out.
func untrapped(f *syntax.File, tested map[syntax.Node]bool) []untrappedStmt {
	var out []untrappedStmt
	var visit func(sts []*syntax.Stmt, why string, lastIsBodys bool)
	visit = func(sts []*syntax.Stmt, why string, lastIsBodys bool) {
		for i, st := range sts {
			own := lastIsBodys && i == len(sts)-1 // its status is the body's
			if tested[st] || st.Background || st.Coprocess || st.Cmd == nil {
				continue
			}
			switch c := st.Cmd.(type) {
			case *syntax.FuncDecl:
			case *syntax.Block:
				visit(c.Stmts, why, own)
			case *syntax.IfClause:
				for e := c; e != nil; e = e.Else {
					visit(e.Then, why, own)
				}
			case *syntax.CaseClause:
				for _, it := range c.Items {
					visit(it.Stmts, why, own)
				}
			case *syntax.WhileClause:
				visit(c.Do, why, false)
			case *syntax.ForClause:
				visit(c.Do, why, false)
			default:
				if !own {
					out = append(out, untrappedStmt{st, why})
				}
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Subshell:
			if !tested[n] {
				visit(n.Stmts, subshellWhy, true)
			}
		case *syntax.FuncDecl:
			if b, ok := n.Body.Cmd.(*syntax.Block); ok {
				visit(b.Stmts, funcWhy, true)
			}
		}
		return true
	})
	return out
}

func isPipe(st *syntax.Stmt) bool {
	b, ok := st.Cmd.(*syntax.BinaryCmd)
	return ok && !st.Negated && len(st.Redirs) == 0 && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll)
}

// pipeLeaves are a pipeline's commands in order.
func pipeLeaves(st *syntax.Stmt) []*syntax.Stmt {
	if !isPipe(st) {
		return []*syntax.Stmt{st}
	}
	b := st.Cmd.(*syntax.BinaryCmd)
	return append(pipeLeaves(b.X), pipeLeaves(b.Y)...)
}

// program is the program a simple command runs, past sudo and variable
// assignments; "" when its first word is not a plain word.
func program(st *syntax.Stmt) string {
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		return ""
	}
	for _, w := range c.Args {
		lit := w.Lit()
		if lit == "sudo" {
			continue
		}
		return lit
	}
	return ""
}

// answers says whether a pipeline's command other than the last exited
// with a status that is an answer its output already gives, not a
// failure: grep's 1 is "no lines were selected" (GNU grep manual, Exit
// Status), diff's and cmp's 1 "the inputs differ" (GNU diffutils manual,
// Invoking diff / Invoking cmp), and 141 (128 + SIGPIPE) is a writer the
// next command stopped reading (grep -q, grep -m1 and head exit at their
// first match).
func answers(e pipeElem, code int) bool {
	if code == 141 {
		return true
	}
	switch filepath.Base(e.Name) {
	case "grep", "egrep", "fgrep", "zgrep", "diff", "cmp":
		return code == 1
	}
	return false
}

// Run runs one block. host is called for each host segment the shell
// reaches, in order; it returns an error to report.
func (s *Shell) Run(ctx context.Context, b *Block, lines []string, host func(seg Segment, env map[string]string)) (out string, fails []Failure, err error) {
	segs := segmentsOf(b, lines)
	var script strings.Builder
	head, tail := s.sessionLines(segs)
	script.WriteString(head + tail + preamble)
	lineOf := map[int]int{} // script line -> block line
	var elems []pipeElem
	n := strings.Count(head+tail+preamble, "\n")
	for i, sg := range segs {
		if sg.Host != "" {
			n++
			lineOf[n] = sg.First
			fmt.Fprintf(&script, "__gf_host %d\n", i)
			continue
		}
		for j, l := range checkLists(sg.Lines, n+1, &elems) {
			n++
			lineOf[n] = sg.First + j
			script.WriteString(l + "\n")
		}
	}
	path := filepath.Join(s.Dir, ".block.sh")
	if err := os.WriteFile(path, []byte(script.String()), 0o600); err != nil {
		return "", nil, err
	}
	errR, errW, _ := os.Pipe()
	reqR, reqW, _ := os.Pipe()
	ackR, ackW, _ := os.Pipe()
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", path)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	cmd.Stdin = nil // /dev/null
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	cmd.ExtraFiles = []*os.File{errW, reqW, ackR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	errW.Close()
	reqW.Close()
	ackR.Close()
	hostDone := make(chan struct{})
	go func() {
		defer close(hostDone)
		sc := bufio.NewScanner(reqR)
		for sc.Scan() {
			f := strings.Split(strings.TrimPrefix(sc.Text(), "HOST "), "\t")
			i, _ := strconv.Atoi(f[0])
			env := map[string]string{}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			if i >= 0 && i < len(segs) {
				host(segs[i], env)
			}
			fmt.Fprintln(ackW, "ok")
		}
	}()
	var recs []string
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			if t := strings.TrimSpace(sc.Text()); t != "" {
				recs = append(recs, t)
			}
		}
	}()
	werr := cmd.Wait()
	<-errDone
	<-hostDone
	ackW.Close()
	for _, r := range recs {
		f := strings.SplitN(r, "\t", 3)
		if len(f) < 3 {
			continue
		}
		code, _ := strconv.Atoi(f[0])
		ln, _ := strconv.Atoi(f[1])
		c := strings.TrimSpace(f[2])
		if id, ok := strings.CutPrefix(c, pipeMark+" "); ok {
			i, err := strconv.Atoi(id)
			if err != nil || i < 0 || i >= len(elems) {
				continue
			}
			if elems[i].Why == pipeWhy && answers(elems[i], code) {
				continue
			}
			c = elems[i].Why + ": " + strings.TrimSpace(elems[i].Text)
		}
		if strings.Contains(c, pipeMark) {
			// a subshell or a call whose body has wrapped commands: bash
			// names it as it runs it, wrappers and all.
			c = unwrap(c)
			if strings.Contains(c, pipeMark) && lineOf[ln] < len(lines) {
				c = strings.TrimSpace(lines[lineOf[ln]])
			}
		}
		if c == listStopped && lineOf[ln] < len(lines) {
			c += ": " + strings.TrimSpace(lines[lineOf[ln]])
		}
		fails = append(fails, Failure{Code: code, Line: lineOf[ln], Command: c})
	}
	if ctx.Err() != nil {
		fails = append(fails, Failure{Code: -1, Line: -1, Command: fmt.Sprintf("the block did not finish within %s", s.Timeout)})
	} else if werr != nil && len(fails) == 0 {
		fails = append(fails, Failure{Code: cmd.ProcessState.ExitCode(), Line: -1, Command: "bash: " + werr.Error()})
	}
	return buf.String(), fails, nil
}

// wrapper is a command checkLists wrapped, as bash prints it.
var wrapper = regexp.MustCompile(`\{ ([^{}]*?) \|\| ` + pipeMark + ` \$\? \d+ \d+;? ?\}`)

// unwrap takes checkLists' wrappers off a command bash printed, inner
// ones first; one around text with braces of its own stays.
func unwrap(c string) string {
	for {
		u := wrapper.ReplaceAllString(c, "$1")
		if u == c {
			return c
		}
		c = u
	}
}

// segmentsOf splits filled lines at the block's segment boundaries.
func segmentsOf(b *Block, lines []string) []Segment {
	filled := &Block{Step: b.Step, Index: b.Index, Lines: lines, StartHost: b.StartHost}
	return filled.Segments()
}
