// Package contracttest runs every command of a plugin through the same bad
// inputs and checks the suite's contract for each: one "error:" line on
// stderr, no panic or stack trace, a "hint:" that names the command that
// failed (its own --help, not the plugin's), and the documented exit code.
//
// Commands run in process, built the way each binary's main builds them and
// run through cli.Run as main runs them, against a kubeconfig with one
// context whose server is never reached: every input here fails before a
// request.
package contracttest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// NewRoot builds a plugin's root command on streams, as its main does.
type NewRoot func(streams genericiooptions.IOStreams) *cobra.Command

// Case is one bad input given to every command that has the flag it needs.
type Case struct {
	Name string
	// Flag is the flag a command must have for the case to apply; empty
	// applies to every command.
	Flag string
	// Without is a flag a command must not have for the case to apply.
	Without string
	// Args are appended to the command's path.
	Args func(dir string) []string
	// Says is what the error line must name, so that the case is the
	// error reported and not an earlier one.
	Says string
	// Lenient cases may also succeed (exit 0 or 1 with no error line): a
	// command that never reads the kubeconfig has nothing to refuse.
	Lenient bool
	// Refused cases print nothing on stdout: the input is refused before
	// any report is made.
	Refused bool
}

// Cases are the shared bad inputs; the bad files each file flag gets are
// FileCases.
var Cases = []Case{
	{Name: "unknown-flag", Args: func(string) []string { return []string{"--no-such-flag"} }},
	{Name: "bad-output", Flag: "output", Says: "bogus", Args: func(string) []string { return []string{"-o", "bogus"} }},
	{Name: "unknown-context", Flag: "context", Says: "no-such-context", Lenient: true, Args: func(string) []string { return []string{"--context", "no-such-context"} }},
	{Name: "dry-run-bad", Flag: "dry-run", Says: "bogus", Args: func(string) []string { return []string{"--dry-run=bogus"} }},
	{Name: "dry-run-read-only", Without: "dry-run", Says: "has no --dry-run", Args: func(string) []string { return []string{"--dry-run=client"} }},
	{Name: "dry-run-client", Flag: "dry-run", Lenient: true, Args: func(string) []string { return []string{"--dry-run=client", "--context", "no-such-context"} }},
}

// Want is the exit code expected for a command and case ("kubectl
// deprecations unparsable-file"), when it is not 2 (usage or local
// configuration error). The file cases (FileCases) are keyed by command,
// flag and case ("kubectl deprecations --filename wrong-kind") and expect
// 3 unless listed; Accepted there means the flag takes that file (a
// Deployment is a manifest to scan).
type Want map[string]int

// Accepted, in Want, is a file case the flag takes as valid input: the
// command goes on (to its end, or to an error not about the file) or
// refuses it (3).
const Accepted = -1

// FileCase is one bad file given to every flag that names a file the
// command reads (cli.InputFileFlags): each is refused with exit 3, one
// error line that names the flag and the file in the suite's words, and
// nothing on stdout.
type FileCase struct {
	Name string
	// File is the path under the test's directory ("-" is stdin, empty).
	File string
}

// FileCases are the bad files.
var FileCases = []FileCase{
	{Name: "missing", File: "/nonexistent/gpufleet-input.yaml"},
	// The shell passes a pattern that matched nothing as it is.
	{Name: "unmatched-glob", File: "nothing-*.yaml"},
	{Name: "empty", File: "empty.yaml"},
	{Name: "empty-stdin", File: "-"},
	{Name: "unparsable", File: "broken.yaml"},
	{Name: "wrong-kind", File: "deploy.yaml"},
}

// rawText is library text an error line must not show: the decoder's
// own words, and the kind and apiVersion of a file that had none.
var rawText = []string{"error unmarshaling", "error converting YAML", "while decoding", "json: ", " yaml: ", `got kind ""`, `apiVersion ""`, "cannot unmarshal"}

// Base are arguments a command needs before a case can reach the flag under
// test (a required argument or flag), by command ("kubectl gang-drain
// restore"), and for a file flag by command and flag ("kubectl
// gpu-validate nodes --xid-catalog": the flag applies only with --xid).
type Base map[string][]string

// Files are fixtures a command's Base arguments name, written into the
// test's directory before the walk: name to content. "{dir}" in a Base
// argument is that directory.
type Files map[string]string

// Run checks every runnable command under the root that newRoot builds.
func Run(t *testing.T, newRoot NewRoot, want Want, base Base) {
	t.Helper()
	RunWith(t, newRoot, want, base, nil)
}

// RunWith is Run with fixture files for the Base arguments.
func RunWith(t *testing.T, newRoot NewRoot, want Want, base Base, files Files) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	inDir := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = strings.ReplaceAll(a, "{dir}", dir)
		}
		return out
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("apiVersion: v1\nkind: [Pod\nmetadata: {name: \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "deploy.yaml"), []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: web, image: nginx}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: only
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: only
  context: {cluster: only, user: only}
current-context: only
users:
- name: only
  user: {token: x}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("NO_COLOR", "1")
	t.Setenv("HOME", dir)

	paths := runnablePaths(newRoot)
	for _, path := range paths {
		probe := find(newRoot(genericiooptions.NewTestIOStreamsDiscard()), path)
		name := displayName(probe)
		table := helpExitCodes(t, newRoot, path, name)
		// Every run of the walk: the exit code is one its --help lists,
		// and what it printed holds to the suite's vocabulary and width.
		suite := func(where string, code int, stdout, stderr string) {
			t.Helper()
			if !table[code] {
				t.Errorf("%s: exit %d, which the exit code table of %s --help does not list (%v)", where, code, name, codes(table))
			}
			CheckOutput(t, where, stdout, stderr)
		}
		for _, tc := range Cases {
			if (tc.Flag != "" && probe.Flag(tc.Flag) == nil) || (tc.Without != "" && probe.Flag(tc.Without) != nil) {
				continue
			}
			args := append(append(append([]string(nil), path...), inDir(base[name])...), tc.Args(dir)...)
			code, stdout, stderr := run(newRoot, args)
			t.Logf("%s [%s]: exit %d: %s", name, tc.Name, code, strings.ReplaceAll(strings.TrimSpace(stderr), "\n", " | "))
			check(t, name, tc, args, code, stderr, want)
			suite(name+" ["+tc.Name+"]", code, stdout, stderr)
			if tc.Refused && stdout != "" {
				t.Errorf("%s [%s]: the input is refused, yet stdout has:\n%s", name, tc.Name, stdout)
			}
		}
		for _, f := range cli.InputFileFlags(probe) {
			for _, fc := range FileCases {
				file := fc.File
				if file != "-" && !filepath.IsAbs(file) {
					file = filepath.Join(dir, file)
				}
				args := append(append(append(append([]string(nil), path...), inDir(base[name])...), inDir(base[name+" --"+f.Name])...), "--"+f.Name, file)
				code, stdout, stderr := run(newRoot, args)
				t.Logf("%s --%s [%s]: exit %d: %s", name, f.Name, fc.Name, code, strings.ReplaceAll(strings.TrimSpace(stderr), "\n", " | "))
				checkFile(t, name, f.Name, f.Shorthand, fc, file, args, code, stdout, stderr, want)
				suite(name+" --"+f.Name+" ["+fc.Name+"]", code, stdout, stderr)
			}
		}
	}
}

// checkFile checks one bad file given to one flag.
func checkFile(t *testing.T, name, flag, short string, fc FileCase, file string, args []string, code int, stdout, stderr string, want Want) {
	t.Helper()
	where := name + " --" + flag + " [" + fc.Name + "] " + strings.Join(args, " ")
	var errLines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "error:") {
			errLines = append(errLines, l)
		}
	}
	expect, ok := want[name+" --"+flag+" "+fc.Name]
	if !ok {
		expect = cli.ExitUnavailable
	}
	if expect == Accepted {
		// Taken as input: the run went on, to the end or to an error
		// that is not about the file (the cluster here is never reached).
		if len(errLines) == 0 || !strings.Contains(errLines[0], filepath.Base(file)) {
			return
		}
		expect = cli.ExitUnavailable
	}
	if code != expect {
		t.Errorf("%s: exit %d, want %d\n%s", where, code, expect, stderr)
	}
	if stdout != "" {
		t.Errorf("%s: the file is refused, yet stdout has:\n%s", where, stdout)
	}
	if len(errLines) != 1 {
		t.Errorf("%s: %d error lines, want 1:\n%s", where, len(errLines), stderr)
		return
	}
	l := errLines[0]
	if !strings.Contains(l, "--"+flag) && (short == "" || !strings.Contains(l, "-"+short+" ")) {
		t.Errorf("%s: the error does not name the flag --%s:\n%s", where, flag, l)
	}
	if shown := filepath.Base(file); !strings.Contains(l, shown) {
		t.Errorf("%s: the error does not name the file %s:\n%s", where, shown, l)
	}
	for _, raw := range rawText {
		if strings.Contains(l, raw) {
			t.Errorf("%s: the error shows a library's text %q:\n%s", where, raw, l)
		}
	}
}

// helpExitCodes reads the exit codes a command's --help lists under
// "Exit codes:" (cli.ExitCodesFor), and checks that the table is there and
// that --help keeps to the width rule in it.
func helpExitCodes(t *testing.T, newRoot NewRoot, path []string, name string) map[int]bool {
	t.Helper()
	code, stdout, stderr := run(newRoot, append(append([]string(nil), path...), "--help"))
	if code != cli.ExitOK {
		t.Errorf("%s --help: exit %d\n%s", name, code, stderr)
	}
	_, table, ok := strings.Cut(stdout, "Exit codes:\n")
	if !ok {
		t.Errorf("%s --help has no exit code table:\n%s", name, stdout)
		return map[int]bool{cli.ExitOK: true, cli.ExitUsage: true}
	}
	out := map[int]bool{}
	for _, l := range strings.Split(table, "\n") {
		m := exitRow.FindStringSubmatch(l)
		if m == nil {
			if strings.TrimSpace(l) == "" || !strings.HasPrefix(l, " ") {
				break
			}
			continue
		}
		c, _ := strconv.Atoi(m[1])
		out[c] = true
		if n := utf8.RuneCountInString(l); n > cli.DefaultTableWidth {
			t.Errorf("%s --help: an exit code row runs to %d columns, past %d:\n%s", name, n, cli.DefaultTableWidth, l)
		}
	}
	for _, c := range []int{cli.ExitOK, cli.ExitUsage, cli.ExitInterrupted} {
		// A command an interrupt stops by design (the checkpoint agent, a
		// sidecar its pod's SIGTERM or SIGINT ends) says so in the row of
		// the code it then returns, in place of 130.
		if c == cli.ExitInterrupted && !out[c] && strings.Contains(table, "SIGINT") {
			continue
		}
		if !out[c] {
			t.Errorf("%s --help: the exit code table lacks %d:\n%s", name, c, table)
		}
	}
	return out
}

// exitRow is a row of an exit code table: "  3    could not ...".
var exitRow = regexp.MustCompile(`^  ([0-9]+) +\S`)

func codes(table map[int]bool) []int {
	var out []int
	for c := range table {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// CheckOutput holds what one run printed to the suite's contract beyond
// its exit code: its tables to the vocabulary (CheckTables) and to 120
// columns, its counts to their number (CheckPlurals), and every "error:"
// and "hint:" line to a status-free wording: an error line says what went
// wrong in words, not with a status word of a table (FAIL, ERROR, ...),
// which only a STATUS column and a report's status field carry.
func CheckOutput(t *testing.T, where, stdout, stderr string) {
	t.Helper()
	CheckTables(t, where, stdout)
	CheckPlurals(t, where, stdout)
	CheckPlurals(t, where, stderr)
	lines := strings.Split(ansi.ReplaceAllString(stdout, ""), "\n")
	for i := 0; i < len(lines); i++ {
		if _, ok := headerColumns(lines[i]); !ok {
			continue
		}
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			if n := utf8.RuneCountInString(lines[i]); n > cli.DefaultTableWidth {
				t.Errorf("%s: a table line runs to %d columns, past %d:\n%s", where, n, cli.DefaultTableWidth, lines[i])
			}
		}
	}
	for _, l := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(l, "error: ")
		if !ok {
			continue
		}
		for _, w := range strings.Fields(rest) {
			w = strings.Trim(w, ".,:;()")
			if s, ok := cli.ParseStatus(w); ok && w == s.String() && len(w) > 2 {
				t.Errorf("%s: the error line uses the status word %s, which only a STATUS column carries:\n%s", where, w, l)
			}
		}
	}
}

func find(root *cobra.Command, path []string) *cobra.Command {
	c, _, err := root.Find(path)
	if err != nil {
		return root
	}
	return c
}

// displayName is the command as users type it: "kubectl skew plan".
func displayName(c *cobra.Command) string {
	return strings.TrimSpace(c.CommandPath())
}

func run(newRoot NewRoot, args []string) (int, string, string) {
	in := &bytes.Buffer{}
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: in, Out: &out, ErrOut: &errOut}
	root := newRoot(streams)
	root.SetArgs(args)
	// Nothing here may wait on a server: a run that does is cut short and
	// shows as interrupted.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := cli.Run(ctx, root, streams)
	return code, out.String(), errOut.String()
}

func check(t *testing.T, name string, tc Case, args []string, code int, stderr string, want Want) {
	t.Helper()
	where := name + " [" + tc.Name + "] " + strings.Join(args, " ")
	var errLines, hints []string
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case strings.HasPrefix(l, "error:"):
			errLines = append(errLines, l)
		case strings.HasPrefix(l, "hint:"):
			hints = append(hints, l)
		}
	}
	for _, bad := range []string{"panic:", "goroutine ", "internal error", "Usage:", "strconv."} {
		if strings.Contains(stderr, bad) {
			t.Errorf("%s: stderr has %q:\n%s", where, bad, stderr)
		}
	}
	expect, ok := want[name+" "+tc.Name]
	if !ok {
		expect = cli.ExitUsage
	}
	if tc.Lenient && (code == cli.ExitOK || code == cli.ExitFindings) && len(errLines) == 0 {
		return
	}
	if code != expect {
		t.Errorf("%s: exit %d, want %d\n%s", where, code, expect, stderr)
	}
	if len(errLines) != 1 {
		t.Errorf("%s: %d error lines, want 1:\n%s", where, len(errLines), stderr)
		return
	}
	if tc.Says != "" && !strings.Contains(errLines[0], tc.Says) {
		t.Errorf("%s: the error does not name %q, so another error came first:\n%s", where, tc.Says, stderr)
	}
	if code != cli.ExitUsage {
		return
	}
	if len(hints) != 1 {
		t.Errorf("%s: want one hint:\n%s", where, stderr)
		return
	}
	// The hint is a command: this command's own (its --help, or the same
	// command with a flag that works), or the one that fixes the case.
	h := hints[0]
	if strings.Contains(h, "--help") && !strings.Contains(h, name+" --help") {
		t.Errorf("%s: hint points at another command's --help, want %s --help:\n%s", where, name, stderr)
	}
	if !strings.Contains(h, name) && !strings.Contains(h, caseHints[tc.Name]) {
		t.Errorf("%s: hint names neither %q nor %q:\n%s", where, name, caseHints[tc.Name], stderr)
	}
}

// caseHints are hints that fix a case whatever the command: an unknown
// context is answered by the list of contexts.
var caseHints = map[string]string{
	"unknown-context": "kubectl config get-contexts",
	"dry-run-client":  "kubectl config get-contexts",
}

// CheckHelpLegend checks the vocabulary of every runnable command under
// the root newRoot builds: the status words a command records
// (cli.SetStatusWords) are in the closed set, and its --help carries their
// legend as pkg/cli renders it.
func CheckHelpLegend(t *testing.T, newRoot NewRoot) {
	t.Helper()
	paths := runnablePaths(newRoot)
	legends := 0
	for _, path := range paths {
		probe := find(newRoot(genericiooptions.NewTestIOStreamsDiscard()), path)
		name := displayName(probe)
		words := cli.StatusWords(probe)
		if len(words) == 0 {
			continue
		}
		legends++
		for _, w := range words {
			if !w.Valid() {
				t.Errorf("%s: status word %q is not in pkg/cli's closed set", name, w)
			}
		}
		code, stdout, stderr := run(newRoot, append(append([]string(nil), path...), "--help"))
		if code != cli.ExitOK {
			t.Errorf("%s --help: exit %d\n%s", name, code, stderr)
			continue
		}
		if legend := cli.StatusLegend(words...); !strings.Contains(stdout, strings.TrimRight(legend, "\n")) {
			t.Errorf("%s --help lacks the legend of its status words:\n%s\nhelp:\n%s", name, legend, stdout)
		}
	}
	// Every plugin has a table with a STATUS column.
	if legends == 0 {
		t.Error("no command records its status words (cli.SetStatusWords)")
	}
}

// CheckTables checks the tables of a command's output (a golden file):
// no column is named VERDICT or RESULT (the status column is STATUS),
// every STATUS cell is a word of pkg/cli's closed set, no cell is <none>
// (an empty cell is -), and no identifier (a node, pod, name, object, API,
// file path, cluster) is cut. A table is a header line of upper-case
// words three spaces apart and the rows under it up to a blank line.
func CheckTables(t *testing.T, name, output string) {
	t.Helper()
	lines := strings.Split(ansi.ReplaceAllString(output, ""), "\n")
	for i := 0; i < len(lines); i++ {
		cols, ok := headerColumns(lines[i])
		if !ok {
			continue
		}
		status := -1
		var ids []int // the identifier columns, by index
		for k, c := range cols {
			switch c.name {
			case "VERDICT", "RESULT":
				t.Errorf("%s:%d: a status column named %s, want %s", name, i+1, c.name, cli.StatusColumn)
			case cli.StatusColumn:
				status = c.start
			}
			if identifierColumns[c.name] {
				ids = append(ids, k)
			}
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			row := []rune(lines[i])
			if strings.Contains(lines[i], "<none>") {
				t.Errorf("%s:%d: an empty cell shows <none>, want %s:\n%s", name, i+1, cli.EmptyCell, lines[i])
			}
			for _, k := range ids {
				from, to := cols[k].start, len(row)
				if k+1 < len(cols) {
					to = min(cols[k+1].start, len(row))
				}
				// "{{…}}" is deprecations' name for a template expression
				// in a manifest's name, not a cut.
				if from < to && strings.Contains(strings.ReplaceAll(string(row[from:to]), "{{…}}", ""), cli.ElisionMark) {
					t.Errorf("%s:%d: the identifier column %s is cut, want it whole:\n%s", name, i+1, cols[k].name, lines[i])
				}
			}
			if status < 0 || status >= len(row) {
				continue
			}
			word, _, _ := strings.Cut(string(row[status:]), " ")
			if !cli.Status(word).Valid() {
				t.Errorf("%s:%d: STATUS %q is not in pkg/cli's closed set:\n%s", name, i+1, word, lines[i])
			}
		}
	}
}

// CheckPlurals checks a command's output (a golden file) for counts
// written "3 node(s)": a count takes its noun's number ("1 node", "3
// nodes", cli.Plural).
func CheckPlurals(t *testing.T, name, output string) {
	t.Helper()
	for i, l := range strings.Split(ansi.ReplaceAllString(output, ""), "\n") {
		if m := countWithS.FindString(l); m != "" {
			t.Errorf("%s:%d: %q, want the noun in its number (cli.Plural):\n%s", name, i+1, m, l)
		}
	}
}

// countWithS matches a count and a noun that hedges its number: "3
// node(s)", "1 server dry run(s)".
var countWithS = regexp.MustCompile(`\b[0-9]+ [A-Za-z -]*\(s\)`)

// identifierColumns are the columns a user acts on by name: a table
// keeps them whole and shortens or drops the others.
// (GANG and a fleet's CLUSTER are not held to it yet: gang-drain's and
// the fleet tables still shorten them.)
var identifierColumns = map[string]bool{"NODE": true, "POD": true, "NAME": true, "OBJECT": true, "API": true, "PATH": true,
	"FILE": true, "CRD": true, "NAMESPACE": true, "RUN": true, "MODEL": true}

// ansi matches a colour escape sequence.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

type headerColumn struct {
	name  string
	start int // in runes
}

// headerColumns reads a table header: two or more upper-case words (A-Z,
// digits, - and /) separated by three or more spaces, from column 0.
func headerColumns(l string) ([]headerColumn, bool) {
	if l == "" || l[0] == ' ' {
		return nil, false
	}
	var cols []headerColumn
	r := []rune(l)
	for i := 0; i < len(r); {
		j := i
		for j < len(r) && r[j] != ' ' {
			if !(r[j] >= 'A' && r[j] <= 'Z' || r[j] >= '0' && r[j] <= '9' || r[j] == '-' || r[j] == '/') {
				return nil, false
			}
			j++
		}
		cols = append(cols, headerColumn{name: string(r[i:j]), start: i})
		k := j
		for k < len(r) && r[k] == ' ' {
			k++
		}
		if k < len(r) && k-j < 3 {
			return nil, false
		}
		i = k
	}
	return cols, len(cols) >= 2
}

// runnablePaths are the paths of every runnable, visible command under the
// root newRoot builds (help and completion left out).
func runnablePaths(newRoot NewRoot) [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Runnable() {
			paths = append(paths, path)
		}
		for _, s := range c.Commands() {
			walk(s, append(append([]string(nil), path...), s.Name()))
		}
	}
	walk(newRoot(genericiooptions.NewTestIOStreamsDiscard()), nil)
	return paths
}
