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
trap '__gf_fired=1; __gf_err "$?" "$LINENO" "$BASH_COMMAND"' ERR
`

// listStopped is the failure of an && list that stopped before its last
// command: bash runs no ERR trap for a command of an && or || list
// other than the last (bash(1), trap), so a list whose third command
// failed would stop without a failure and the block go on.
const listStopped = "an && list stopped before its last command"

// checkLists appends to each top-level statement of a workstation
// segment a check of its status (__gf_chk), on the statement's last
// line, so that lines keep their numbers; start is the script line of
// the segment's first line. The check reports a failing statement the
// ERR trap did not (one that stopped inside an && list), and returns 0:
// a status it returned would run the ERR trap for the check itself. A segment mvdan.cc/sh cannot parse is left as it is.
func checkLists(lines []string, start int) []string {
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
			all = append(all, ins{st.End().Offset(), fmt.Sprintf("; __gf_chk $? %d", line)})
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		src = src[:all[i].off] + all[i].text + src[all[i].off:]
	}
	out := strings.Split(src, "\n")
	if len(out) != len(lines) {
		return lines
	}
	return out
}

// Run runs one block. host is called for each host segment the shell
// reaches, in order; it returns an error to report.
func (s *Shell) Run(ctx context.Context, b *Block, lines []string, host func(seg Segment, env map[string]string)) (out string, fails []Failure, err error) {
	segs := segmentsOf(b, lines)
	var script strings.Builder
	head, tail := s.sessionLines(segs)
	script.WriteString(head + tail + preamble)
	lineOf := map[int]int{} // script line -> block line
	n := strings.Count(head+tail+preamble, "\n")
	for i, sg := range segs {
		if sg.Host != "" {
			n++
			lineOf[n] = sg.First
			fmt.Fprintf(&script, "__gf_host %d\n", i)
			continue
		}
		for j, l := range checkLists(sg.Lines, n+1) {
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

// segmentsOf splits filled lines at the block's segment boundaries.
func segmentsOf(b *Block, lines []string) []Segment {
	filled := &Block{Step: b.Step, Index: b.Index, Lines: lines, StartHost: b.StartHost}
	return filled.Segments()
}
