package deprecations

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// Every input is read or refused: a path that does not exist, a file, a
// directory or a stream that holds no object, and an audit log with no
// event are refused with exit 3 before anything reaches stdout, in one
// line that names the flag and the path.
func TestUnreadableInputRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.yaml", "")
	comments := write("comments.yaml", "---\n# nothing here\n---\n")
	values := write("values/values.yaml", "replicas: 3\nimage: {tag: v1}\n")
	emptyJSON := write("obj.json", "{}\n")
	blankLog := write("audit.log", "\n\n")
	badYAML := write("bad.yaml", "foo: [\n")
	configMapLog := write("configmaps.log", `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}`+"\n"+`{"x":1}`+"\n")
	noManifests := filepath.Join(dir, "nomanifests")
	write("nomanifests/README.md", "# docs\n")
	missing := filepath.Join(dir, "missing.yaml")
	pattern := filepath.Join(dir, "*.yml")

	for _, tc := range []struct {
		name, stdin string
		args        []string
		says        []string
	}{
		{"missing file", "", []string{"-f", missing}, []string{"-f " + missing, "does not exist"}},
		{"pattern that matched nothing", "", []string{"-f", pattern}, []string{"-f " + pattern, "a pattern that matched no file"}},
		{"missing file beside a good one", "", []string{"-f", "testdata/ci", "-f", missing}, []string{"-f " + missing}},
		{"empty file", "", []string{"-f", empty}, []string{"-f " + empty, "0 objects read"}},
		{"comments only", "", []string{"-f", comments}, []string{"-f " + comments, "no Kubernetes object"}},
		{"JSON with no object", "", []string{"-f", emptyJSON}, []string{"-f " + emptyJSON, "no Kubernetes object"}},
		{"directory of plain YAML", "", []string{"-f", filepath.Dir(values)}, []string{"-f " + filepath.Dir(values), "1 file read, 0 objects"}},
		{"directory with no manifest", "", []string{"-f", noManifests}, []string{"-f " + noManifests, "0 files read"}},
		{"empty file beside a good directory", "", []string{"-f", "testdata/ci", "-f", empty}, []string{"-f " + empty}},
		{"empty stdin", "", []string{"-f", "-"}, []string{"-f - (stdin)", "0 objects read"}},
		{"missing audit log", "", []string{"--audit-log", filepath.Join(dir, "nope.log")}, []string{"--audit-log " + filepath.Join(dir, "nope.log"), "does not exist"}},
		{"blank audit log", "", []string{"--source", "audit", "--audit-log", blankLog}, []string{"--audit-log " + blankLog, "2 lines read, 0 events"}},
		{"YAML that does not parse", "", []string{"-f", badYAML}, []string{"-f " + badYAML, "1 document not scanned", "does not parse: line 1: did not find expected node content"}},
		{"audit log of JSON that is not events", "", []string{"--source", "audit", "--audit-log", configMapLog}, []string{"--audit-log " + configMapLog, "2 lines read, 0 events, 2 lines not an event, the first: line 1: kind \"ConfigMap\", apiVersion \"v1\", not an audit.k8s.io/v1 Event"}},
		{"empty audit stdin", "", []string{"--source", "audit", "--audit-log", "-"}, []string{"--audit-log - (stdin)", "0 lines read"}},
		{"kustomization that does not build", "", []string{"-k", "testdata/ci"}, []string{"-k testdata/ci", "does not build"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			streams, in, out, errOut := genericiooptions.NewTestIOStreams()
			in.WriteString(tc.stdin)
			cmd := NewCmd(cli.NewTestClientGetter(), streams)
			cmd.SetArgs(append(tc.args, "--target", "v1.30", "--color", "never"))
			err := cmd.ExecuteContext(context.Background())
			if code := cli.ExitCode(err); code != cli.ExitUnavailable {
				t.Fatalf("exit %d, want 3: %v\n%s%s", code, err, out, errOut)
			}
			if out.Len() != 0 {
				t.Errorf("stdout before the error:\n%s", out)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error of more than one line: %q", msg)
			}
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not say %q", msg, s)
				}
			}
		})
	}

	// Read, not refused: an empty file inside a directory that holds
	// objects, and an audit log of events none of which is deprecated.
	write("mixed/empty.yaml", "")
	write("mixed/pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	okLog := write("ok.log", `{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"get","objectRef":{"resource":"pods","apiVersion":"v1"}}`+"\n")
	for _, args := range [][]string{
		{"-f", filepath.Join(dir, "mixed")},
		{"--source", "audit", "--audit-log", okLog},
	} {
		out, errOut, code := runCmd(t, cli.NewTestClientGetter(), "", append(args, "--target", "v1.30", "--color", "never")...)
		if code != cli.ExitOK {
			t.Errorf("%v: exit %d, want 0\n%s%s", args, code, out, errOut)
		}
	}
}
