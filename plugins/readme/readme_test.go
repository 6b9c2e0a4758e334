package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/shlex"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/plugins/crdmigrate"
	"github.com/gpufleet/upgrade-plugins/plugins/deprecations"
	"github.com/gpufleet/upgrade-plugins/plugins/gangdrain"
	"github.com/gpufleet/upgrade-plugins/plugins/gpuvalidate"
	"github.com/gpufleet/upgrade-plugins/plugins/pdbblockers"
	"github.com/gpufleet/upgrade-plugins/plugins/skew"
)

// plugins builds each plugin's command tree as its main does.
var plugins = map[string]func(genericiooptions.IOStreams) *cobra.Command{
	"skew": func(s genericiooptions.IOStreams) *cobra.Command {
		return skew.NewCmd(cli.NewClientGetter(s, skew.ConfigOptions), s)
	},
	"deprecations": func(s genericiooptions.IOStreams) *cobra.Command {
		return deprecations.NewCmd(cli.NewClientGetter(s, deprecations.ConfigOptions), s)
	},
	"gang-drain": func(s genericiooptions.IOStreams) *cobra.Command {
		return gangdrain.NewCmd(cli.NewClientGetter(s, gangdrain.ConfigOptions), s)
	},
	"gpu-validate": func(s genericiooptions.IOStreams) *cobra.Command {
		return gpuvalidate.NewCmd(cli.NewClientGetter(s, gpuvalidate.ConfigOptions), s)
	},
	"pdb-blockers": func(s genericiooptions.IOStreams) *cobra.Command {
		return pdbblockers.NewCmd(cli.NewClientGetter(s, pdbblockers.ConfigOptions), s)
	},
	"crd-migrate": func(s genericiooptions.IOStreams) *cobra.Command {
		return crdmigrate.NewCmd(cli.NewClientGetter(s, crdmigrate.ConfigOptions), s)
	},
}

// example is one command of a README example: the plugin, its arguments
// and the README line it starts on.
type example struct {
	// file is where the example is written: README.md, or the command
	// whose --help shows it.
	file   string
	line   int
	plugin string
	args   []string
	// out is the file the example's stdout is redirected to (`> FILE`),
	// which a later example may read.
	out string
	// after is true for a command that runs after another in the same
	// shell line (`a && b`, `a; b`).
	after bool
}

func (e example) String() string {
	return fmt.Sprintf("%s:%d: kubectl %s %s", e.file, e.line, e.plugin, strings.Join(e.args, " "))
}

// stand-ins for the placeholders README writes, so the example runs as a
// reader would run it after filling them in.
var placeholders = map[string]string{
	"<run-id>": "gd-20261204-135819-b3ec",
	"s3://…":   "file://STORE",
	// the by-hand transcript's store, its endpoint query elided
	"s3://fleet/byhand?…": "file://STORE",
	"<context>":           "readme",
	"$c":                  "readme", // the loop over contexts
	"<digest>":            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	// the --help examples' store
	"s3://gpufleet-state/prod": "file://STORE",
	// the apiserver's audit log, read on a control-plane node
	"/var/log/kubernetes/audit.log": "audit.log",
	// the operator's copy of etcd's client certificate, in the tmpfs the
	// shell's $XDG_RUNTIME_DIR names (here the test's work directory)
	"$XDG_RUNTIME_DIR/gpufleet-etcd/": "gpufleet-etcd/",
}

// examples reads README's code blocks and returns each command of the six
// plugins, with `\` continuations joined, comments dropped, and shell
// operators (&&, ;, |, redirections) split off.
func examples(t *testing.T, path string) []example {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return examplesIn(t, filepath.Base(path), data)
}

// examplesIn reads the examples of the code blocks in data, written in
// file.
func examplesIn(t *testing.T, file string, data []byte) []example {
	t.Helper()
	var out []example
	sc := bufio.NewScanner(bytes.NewReader(data))
	inBlock, n, pending, start := false, 0, "", 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock, pending = !inBlock, ""
			continue
		}
		if !inBlock {
			continue
		}
		if pending == "" {
			s := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			if _, piped, ok := strings.Cut(s, "| kubectl "); ok && !strings.HasPrefix(s, "kubectl ") {
				s = "kubectl " + piped // `helm template ... | kubectl deprecations -f -`
			}
			if !strings.HasPrefix(s, "kubectl ") {
				continue
			}
			line, start = s, n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		cmdline := pending + line
		pending = ""
		for ph, v := range placeholders {
			cmdline = strings.ReplaceAll(cmdline, ph, v)
		}
		words, err := shlex.Split(cmdline)
		if err != nil {
			t.Errorf("README.md:%d: cannot split %q: %v", start, cmdline, err)
			continue
		}
		// A shell operator written against a word ("-q;") is a word of
		// its own.
		var split []string
		for _, w := range words {
			if op, ok := strings.CutSuffix(w, ";"); ok && op != "" {
				split = append(split, op, ";")
				continue
			}
			split = append(split, w)
		}
		words = split
		after := false
		for len(words) > 0 {
			i := slices.IndexFunc(words, func(w string) bool { return w == "&&" || w == ";" || w == "|" || w == "||" })
			seg := words
			if i >= 0 {
				seg, words = words[:i], words[i+1:]
			} else {
				words = nil
			}
			if len(seg) >= 2 && seg[0] == "kubectl" && plugins[seg[1]] != nil {
				out = append(out, example{file: file, line: start, plugin: seg[1], args: withoutRedirects(seg[2:]), out: redirect(seg[2:]), after: after})
			}
			after = true
		}
	}
	return out
}

// withoutRedirects drops `> file`, `2>&1` and the like: the test captures
// the streams itself.
func withoutRedirects(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == ">" || a == ">>" || a == "2>" || a == "<":
			i++
		case strings.HasPrefix(a, ">") || strings.HasPrefix(a, "2>") || strings.HasPrefix(a, "<"):
		default:
			out = append(out, a)
		}
	}
	return out
}

// redirect is the file `> FILE` sends stdout to, "" for none.
func redirect(args []string) string {
	for i, a := range args {
		switch {
		case a == ">" && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, ">") && len(a) > 1 && a[1] != '>':
			return a[1:]
		}
	}
	return ""
}

// fixture is a saved input an example reads.
type fixture struct {
	kind string // what it must hold, for the message when two differ
	// from is a file of the repository (read in place), or "" for body.
	from string
	body string
	// replace holds old, new pairs applied to the body.
	replace []string
	// each, for a directory, names the files it holds, each the body.
	each []string
}

const preflightBaseline = `apiVersion: gpufleet.dev/v1alpha1
kind: SkewPreflightReport
target: "1.37"
evidence:
  collectedAt: "2026-12-04T13:57:43Z"
`

// auditLine is one event of an apiserver audit log (audit.k8s.io/v1), for
// examples that pipe a log into --audit-log -.
const auditLine = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"list","objectRef":{"resource":"pods","apiVersion":"v1"}}` + "\n"

// inputFixture says what the file given to flag of plugin sub must hold;
// ok is false for a flag that does not read a file.
func inputFixture(plugin, sub, flag string) (fixture, bool) {
	switch {
	case flag == "--baseline":
		return fixture{kind: "a pre-flight report saved with kubectl skew preflight --save", body: preflightBaseline}, true
	case plugin == "skew" && sub == "fleet" && (flag == "-f" || flag == "--filename"):
		// Its store, the test's directory, is where `fleet status` reads.
		return fixture{kind: "a fleet file", from: "../../pkg/fleetrun/testdata/fleet.yaml", replace: []string{"file:///tmp/unused", "file://STORE"}}, true
	case plugin == "skew" && (flag == "-f" || flag == "--filename" || flag == "--from-file"):
		return fixture{kind: "a skew report (kubectl skew -o yaml)", from: "../../testdata/runbook/gke.yaml"}, true
	case plugin == "deprecations" && (flag == "-f" || flag == "--filename"):
		return fixture{kind: "manifests", from: "../deprecations/testdata/ci/app.yaml"}, true
	case flag == "--kubeconfig":
		// A person's own kubeconfig (fleet approve as alice): its server
		// refuses connections as the shell's does.
		return fixture{kind: "a kubeconfig", body: "apiVersion: v1\nkind: Config\ncurrent-context: readme\nclusters: [{name: refused, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\nusers: [{name: readme, user: {token: readme}}]\ncontexts: [{name: readme, context: {cluster: refused, user: readme}}]\n"}, true
	case plugin == "skew" && flag == "--from-dir":
		// One saved report per cluster of the fleet fixture.
		return fixture{kind: "a directory of skew reports", from: "../../testdata/runbook/gke.yaml",
			each: []string{"canary-a", "canary-b", "canary-c", "prod-use1", "prod-euw1", "prod-usw2", "train-a"}}, true
	case plugin == "deprecations" && flag == "--audit-log":
		return fixture{kind: "an audit log", body: auditLine}, true
	case flag == "--promql-checks":
		return fixture{kind: "a list of PromQL checks", from: "../../pkg/health/testdata/promql-checks.yaml"}, true
	case plugin == "skew" && (flag == "--etcd-cacert" || flag == "--etcd-cert" || flag == "--etcd-key"):
		// The flags refuse a file that holds no PEM block; the client
		// reads the files only when it reaches etcd.
		return fixture{kind: "a PEM file of etcd's CA, client certificate or key", body: "-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n"}, true
	case flag == "--probe-file":
		return fixture{kind: "a Pod manifest", body: "apiVersion: v1\nkind: Pod\nmetadata: {name: probe}\nspec:\n  containers: [{name: c, image: registry.k8s.io/pause:3.10}]\n"}, true
	}
	return fixture{}, false
}

// TestREADMEExamples runs every README example of the six plugins as a
// reader pastes it, in a shell whose kubeconfig points at a cluster that
// refuses connections: each must get past its flags and inputs (never a
// usage error, exit 2, and never an internal error), and one that needs
// the cluster must say it cannot reach it (exit 3). Inputs an example
// reads from a file (a saved report, a baseline, a fleet file) are the
// repository's fixtures of that kind; README must not use one file name
// for two kinds of input.
func TestREADMEExamples(t *testing.T) {
	exs := examples(t, "../../README.md")
	if len(exs) < 30 {
		t.Fatalf("found %d examples in README.md; the extraction is broken", len(exs))
	}
	runExamples(t, exs)
}

// TestHelpExamples runs every example of every command's --help (its
// Example text) as TestREADMEExamples runs README's, in the order each
// plugin's commands list them: a flag renamed or a subcommand moved fails
// here, not in a reader's shell. An example that writes a file (`-o yaml >
// rules.yaml`) leaves it for the next one to read.
func TestHelpExamples(t *testing.T) {
	var exs []example
	for _, name := range slices.Sorted(maps.Keys(plugins)) {
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			if c.Hidden {
				return
			}
			if c.Example != "" {
				exs = append(exs, examplesIn(t, c.CommandPath()+" --help", []byte("```\n"+c.Example+"\n```\n"))...)
			}
			for _, sub := range c.Commands() {
				walk(sub)
			}
		}
		walk(plugins[name](genericiooptions.NewTestIOStreamsDiscard()))
	}
	if len(exs) < 30 {
		t.Fatalf("found %d --help examples; the extraction is broken", len(exs))
	}
	runExamples(t, exs)
}

// runExamples runs exs in order against a kubeconfig whose server refuses
// connections, with the repository's fixtures for the files they read.
func runExamples(t *testing.T, exs []example) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	// Every context refuses at once (127.0.0.1:1): no example waits on a
	// timeout. The fleet fixture's clusters are contexts too.
	var kc strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: readme\nclusters: [{name: refused, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\nusers: [{name: readme, user: {token: readme}}]\ncontexts:\n")
	for _, c := range []string{"readme", "canary-a", "canary-b", "canary-c", "prod-use1", "prod-euw1", "prod-usw2", "train-a"} {
		fmt.Fprintf(&kc, "- {name: %s, context: {cluster: refused, user: readme}}\n", c)
	}
	if err := os.WriteFile(kubeconfig, []byte(kc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("NO_COLOR", "1")
	t.Setenv("HOME", dir)
	wd := filepath.Join(dir, "work")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(wd)

	kinds := map[string]example{}
	kindOf := map[string]string{}
	for _, ex := range exs {
		for i := range ex.args {
			if strings.Contains(ex.args[i], "file://STORE") {
				ex.args[i] = strings.ReplaceAll(ex.args[i], "file://STORE", "file://"+filepath.Join(dir, "store"))
			}
		}
		sub := ""
		if len(ex.args) > 0 && !strings.HasPrefix(ex.args[0], "-") {
			sub = ex.args[0]
		}
		for i := 0; i+1 < len(ex.args); i++ {
			flag, file := ex.args[i], ex.args[i+1]
			if v, ok := strings.CutPrefix(flag, "--"); ok && strings.Contains(v, "=") {
				flag, file, _ = strings.Cut(flag, "=")
			}
			fx, ok := inputFixture(ex.plugin, sub, flag)
			if !ok || file == "-" {
				continue
			}
			if prev, seen := kindOf[file]; seen && prev != fx.kind {
				t.Errorf("%s: README uses %s as %s here and as %s at %s: give each its own name", ex, file, fx.kind, prev, kinds[file])
				continue
			}
			kindOf[file], kinds[file] = fx.kind, ex
			body := []byte(fx.body)
			if fx.from != "" {
				if body, err = os.ReadFile(filepath.Join(repo, fx.from)); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i+1 < len(fx.replace); i += 2 {
				body = bytes.ReplaceAll(body, []byte(fx.replace[i]), []byte(strings.ReplaceAll(fx.replace[i+1], "file://STORE", "file://"+filepath.Join(dir, "store"))))
			}
			paths := []string{file}
			switch {
			case fx.each != nil:
				paths = nil
				for _, name := range fx.each {
					paths = append(paths, filepath.Join(file, name+".yaml"))
				}
			case strings.HasPrefix(file, "./") && !strings.Contains(filepath.Base(file), "."):
				paths = []string{filepath.Join(file, "app.yaml")} // a directory of manifests
			}
			for _, p := range paths {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, body, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	for _, ex := range exs {
		t.Run(fmt.Sprintf("%s-L%d-%s", strings.ReplaceAll(ex.file, " ", "_"), ex.line, ex.plugin), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// A piped example reads stdin: what the pipe would carry.
			stdin := ""
			for i := 0; i+1 < len(ex.args); i++ {
				switch {
				case ex.args[i+1] == "-" && ex.args[i] == "--audit-log":
					stdin = auditLine
				case ex.args[i+1] == "-" && ex.plugin == "deprecations" && (ex.args[i] == "-f" || ex.args[i] == "--filename"):
					// what `helm template` would pipe in
					b, err := os.ReadFile(filepath.Join(repo, "../deprecations/testdata/ci/app.yaml"))
					if err != nil {
						t.Fatal(err)
					}
					stdin = string(b)
				}
			}
			streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &stdout, ErrOut: &stderr}
			cmd := plugins[ex.plugin](streams)
			cmd.SetArgs(ex.args)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := cli.Run(ctx, cmd, streams)
			msg := fmt.Sprintf("%s\n-> exit %d\nstderr: %s", ex, code, strings.TrimSpace(stderr.String()))
			switch {
			case code == cli.ExitUsage && strings.Contains(stderr.String(), "has no plan in"):
				// `fleet status` of the run README's `fleet plan` froze;
				// that plan needs the clusters, so here there is none
				// (e2e/fleet runs the pair on live clusters).
			case strings.Contains(stderr.String(), "internal error"):
				t.Errorf("internal error:\n%s", msg)
			case code == cli.ExitUsage:
				t.Errorf("a usage error as written:\n%s", msg)
			case code == cli.ExitUnavailable && !unreachable(stderr.String()):
				t.Errorf("exit 3 for another reason than the cluster it cannot reach:\n%s", msg)
			case code != cli.ExitOK && code != cli.ExitFindings && code != cli.ExitUnavailable:
				t.Errorf("exit %d:\n%s", code, msg)
			}
			if offline(ex) && (code > cli.ExitFindings || stdout.Len() == 0) {
				t.Errorf("an offline example must answer without the cluster:\n%s", msg)
			}
			// What an example redirects to a file, the next may read.
			if ex.out != "" && (code == cli.ExitOK || code == cli.ExitFindings) && stdout.Len() > 0 {
				if err := os.MkdirAll(filepath.Dir(ex.out), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(ex.out, stdout.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Log(msg)
		})
	}
}

// offline reports an example that needs no cluster: a plan of a saved
// report, the compatibility table, the CI scan of files.
func offline(ex example) bool {
	has := func(a string) bool { return slices.Contains(ex.args, a) }
	switch {
	case ex.plugin == "skew" && len(ex.args) > 0 && ex.args[0] == "plan":
		return has("-f") || has("--filename")
	case ex.plugin == "skew" && len(ex.args) > 0 && ex.args[0] == "compat":
		return true
	case ex.plugin == "deprecations":
		return has("--ci")
	}
	return false
}

// unreachable reports an error about the refused cluster.
func unreachable(stderr string) bool {
	return strings.Contains(stderr, "127.0.0.1:1") || strings.Contains(stderr, "connection refused") ||
		strings.Contains(stderr, "cannot reach") || strings.Contains(stderr, "no such host") // README's example hosts
}
