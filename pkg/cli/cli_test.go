package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
)

func TestExitCode(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	cases := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"findings", Findings(3), ExitFindings},
		{"wrapped findings", fmt.Errorf("ctx a: %w", Findings(1)), ExitFindings},
		{"usage", Usagef("bad flag"), ExitUsage},
		{"incomplete", Incomplete(errors.New("timeout")), ExitIncomplete},
		{"cluster", ClusterErr(errors.New("x")), ExitUnavailable},
		{"forbidden", apierrors.NewForbidden(gr, "p", errors.New("no")), ExitUnavailable},
		{"unauthorized", apierrors.NewUnauthorized("who"), ExitUnavailable},
		{"timeout", apierrors.NewTimeoutError("slow", 1), ExitUnavailable},
		{"network", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Err: errors.New("refused")}}, ExitUnavailable},
		{"deadline", context.DeadlineExceeded, ExitUnavailable},
		{"canceled", context.Canceled, ExitInterrupted},
		{"unknown context", errors.New(`context was not found for specified context: nope`), ExitUsage},
		{"hint keeps code", WithHint(Usagef("x"), "kubectl y"), ExitUsage},
		{"hint on plain error", WithHint(apierrors.NewForbidden(gr, "p", errors.New("no")), "kubectl auth can-i"), ExitUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ExitCode(tc.err); got != tc.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestWorst(t *testing.T) {
	cases := []struct {
		codes []int
		want  int
	}{
		{nil, 0},
		{[]int{0, 1}, 1},
		{[]int{1, 4}, 4},
		{[]int{4, 3}, 3},
		{[]int{3, 2, 1}, 2},
		{[]int{2, 130}, 130},
		{[]int{0, 0}, 0},
	}
	for _, tc := range cases {
		if got := Worst(tc.codes...); got != tc.want {
			t.Errorf("Worst(%v) = %d, want %d", tc.codes, got, tc.want)
		}
	}
}

func TestUseColor(t *testing.T) {
	env := func(kv ...string) Env {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name string
		mode string
		env  Env
		tty  bool
		want bool
	}{
		{"always beats NO_COLOR", ColorAlways, env("NO_COLOR", "1"), false, true},
		{"never beats tty", ColorNever, env(), true, false},
		{"NO_COLOR beats tty", ColorAuto, env("NO_COLOR", "1"), true, false},
		{"empty NO_COLOR ignored", ColorAuto, env("NO_COLOR", ""), true, true},
		{"dumb terminal", ColorAuto, env("TERM", "dumb"), true, false},
		{"tty", ColorAuto, env("TERM", "xterm"), true, true},
		{"not a tty", ColorAuto, env("TERM", "xterm"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := UseColor(tc.mode, tc.env, tc.tty); got != tc.want {
				t.Errorf("UseColor = %v, want %v", got, tc.want)
			}
		})
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is not a terminal")
	}
}

func TestColorizerStatus(t *testing.T) {
	off := Colorizer{}
	if got := off.Status("BLOCKED"); got != "BLOCKED" {
		t.Errorf("disabled colorizer changed the word: %q", got)
	}
	on := Colorizer{Enabled: true}
	if got := on.Status("BLOCKED"); got != "\x1b[31mBLOCKED\x1b[0m" {
		t.Errorf("BLOCKED = %q", got)
	}
	if got := on.Status("OK"); got != "\x1b[32mOK\x1b[0m" {
		t.Errorf("OK = %q", got)
	}
	if got := on.Status("gpu-node-1"); got != "gpu-node-1" {
		t.Errorf("non-status word coloured: %q", got)
	}
}

func TestTablePrint(t *testing.T) {
	tbl := Table{Columns: []Column{{Name: "node"}, {Name: "status"}, {Name: "detail", Wide: true}}}
	tbl.AddRow("gpu-1", "OK", "8/8")
	tbl.AddRow("gpu-long-name", Colorizer{Enabled: true}.Status("FAIL"), "")
	var b bytes.Buffer
	if err := tbl.Print(&b, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "NODE            STATUS\n" +
		"gpu-1           OK\n" +
		"gpu-long-name   \x1b[31mFAIL\x1b[0m\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := tbl.Print(&b, TableOptions{Wide: true, NoHeaders: true}); err != nil {
		t.Fatal(err)
	}
	want = "gpu-1           OK     8/8\n" +
		"gpu-long-name   \x1b[31mFAIL\x1b[0m   -\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("wide table (-want +got):\n%s", diff)
	}
}

func TestPrintFlagsValidate(t *testing.T) {
	cases := []struct {
		name    string
		f       PrintFlags
		wantErr string
	}{
		{"default", *NewPrintFlags(), ""},
		{"empty output is table", PrintFlags{Color: ColorAuto, formats: []string{OutputTable}}, ""},
		{"unknown format", PrintFlags{Output: "xml", Color: ColorAuto, formats: []string{OutputTable, OutputJSON}}, `unknown output format "xml"`},
		{"no-headers with json", PrintFlags{Output: OutputJSON, NoHeaders: true, Color: ColorAuto, formats: []string{OutputJSON}}, "--no-headers has no effect with -o json"},
		{"quiet with yaml", PrintFlags{Output: OutputYAML, Quiet: true, Color: ColorAuto, formats: []string{OutputYAML}}, "--quiet cannot be combined with -o yaml"},
		{"bad color", PrintFlags{Output: OutputTable, Color: "sometimes", formats: []string{OutputTable}}, `unknown --color value "sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("Validate() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestPrintStructured(t *testing.T) {
	type item struct {
		Name string `json:"name"`
	}
	type report struct {
		Header
		Items []item `json:"items"`
	}
	r := report{Header: NewHeader("TestReport", Metadata{Context: "prod", ServerVersion: "v1.37.2"}), Items: []item{{"a -> <b> & c"}}}
	var b bytes.Buffer
	if err := PrintStructured(&b, OutputJSON, r); err != nil {
		t.Fatal(err)
	}
	want := `{
  "apiVersion": "gpufleet.dev/v1alpha1",
  "kind": "TestReport",
  "metadata": {
    "context": "prod",
    "serverVersion": "v1.37.2"
  },
  "items": [
    {
      "name": "a -> <b> & c"
    }
  ]
}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("json (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := PrintStructured(&b, OutputYAML, r); err != nil {
		t.Fatal(err)
	}
	wantYAML := "apiVersion: gpufleet.dev/v1alpha1\nitems:\n- name: a -> <b> & c\nkind: TestReport\nmetadata:\n  context: prod\n  serverVersion: v1.37.2\n"
	if diff := cmp.Diff(wantYAML, b.String()); diff != "" {
		t.Errorf("yaml (-want +got):\n%s", diff)
	}
}

func TestFailOn(t *testing.T) {
	f := NewFailOnFlag()
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(SeverityInfo, SeverityWarning, SeverityBlocking, SeverityBlocking); n != 2 {
		t.Errorf("blocking counts %d, want 2", n)
	}
	f.Value = "info"
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := f.Count(SeverityNone, SeverityInfo, SeverityWarning); n != 2 {
		t.Errorf("info counts %d, want 2", n)
	}
	f.Value = "loud"
	if err := f.Validate(); err == nil {
		t.Error("unknown level accepted")
	}
}

func TestFanOutOneGoodOneUnreachable(t *testing.T) {
	good := NewTestClientGetter().WithKube(fake.NewClientset())
	good.Meta.Context = "good"
	root := NewTestClientGetter()
	root.PerContext = map[string]*TestClientGetter{"good": good}

	cf := NewContextFlags()
	cf.Contexts = []string{"good", "test"}
	if err := cf.Validate(false); err != nil {
		t.Fatal(err)
	}
	names, err := cf.Resolve(root)
	if err != nil {
		t.Fatal(err)
	}
	// "test" is the root getter without a kube client: it behaves as unreachable.
	results := FanOut(context.Background(), names, 2, func(ctx context.Context, name string) (string, error) {
		md, err := Connect(ctx, root.ForContext(name))
		return md.ServerVersion, err
	})
	if len(results) != 2 || results[0].Context != "good" || results[1].Context != "test" {
		t.Fatalf("results out of order: %+v", results)
	}
	if results[0].Err != nil {
		t.Errorf("good context failed: %v", results[0].Err)
	}
	if results[1].Err == nil || ExitCode(results[1].Err) != ExitUnavailable {
		t.Errorf("unreachable context: err %v, code %d", results[1].Err, ExitCode(results[1].Err))
	}
	codes := []int{ExitCode(results[0].Err), ExitCode(results[1].Err)}
	if Worst(codes...) != ExitUnavailable {
		t.Errorf("worst = %d", Worst(codes...))
	}

	cf.Contexts = []string{"nope"}
	if _, err := cf.Resolve(root); ExitCode(err) != ExitUsage {
		t.Errorf("unknown context: %v (code %d)", err, ExitCode(err))
	}
}

func TestFanOutBoundsConcurrency(t *testing.T) {
	running, max := 0, 0
	mu := make(chan struct{}, 1)
	names := []string{"a", "b", "c", "d", "e", "f"}
	FanOut(context.Background(), names, 2, func(ctx context.Context, name string) (int, error) {
		mu <- struct{}{}
		running++
		if running > max {
			max = running
		}
		<-mu
		time.Sleep(5 * time.Millisecond)
		mu <- struct{}{}
		running--
		<-mu
		return 0, nil
	})
	if max > 2 {
		t.Errorf("ran %d at once with --parallel 2", max)
	}
}

func TestContextFlagsValidate(t *testing.T) {
	cf := NewContextFlags()
	cf.AllContexts = true
	cf.Contexts = []string{"a"}
	if cf.Validate(false) == nil {
		t.Error("--all-contexts with --contexts accepted")
	}
	cf = NewContextFlags()
	cf.Contexts = []string{"a"}
	if cf.Validate(true) == nil {
		t.Error("--context with --contexts accepted")
	}
	cf = NewContextFlags()
	cf.Parallel = 0
	if cf.Validate(false) == nil {
		t.Error("--parallel 0 accepted")
	}
}

func newTestRoot(run func() error) (*cobra.Command, *bytes.Buffer, *bytes.Buffer, genericiooptions.IOStreams) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	pf := NewPrintFlags()
	cmd := &cobra.Command{
		Use:   "kubectl-test",
		Short: "A test plugin",
		Args:  cobra.NoArgs,
		RunE:  func(*cobra.Command, []string) error { return run() },
	}
	pf.AddFlags(cmd)
	Setup(cmd, streams)
	return cmd, out, errOut, streams
}

func TestRunExitCodesAndErrors(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		err        error
		wantCode   int
		wantStderr string
	}{
		{"ok", nil, nil, 0, ""},
		{"findings print nothing", nil, Findings(2), 1, ""},
		{"a bare exit code prints nothing", nil, &ExitError{Code: 252}, 252, ""},
		{"bad flag", []string{"--bogus"}, nil, 2, "error: unknown flag: --bogus\nhint: kubectl-test --help\n"},
		{"unexpected arg", []string{"extra"}, nil, 2, "error: unknown command \"extra\" for \"kubectl-test\"\nhint: kubectl-test --help\n"},
		{"cluster error with hint", nil, WithHint(ClusterErr(errors.New("cannot reach the cluster (context prod): connection refused")), "kubectl cluster-info --context prod"), 3,
			"error: cannot reach the cluster (context prod): connection refused\nhint: kubectl cluster-info --context prod\n"},
		{"multi-line cause on one line", nil, ClusterErr(errors.New("first\nsecond")), 3, "error: first; second\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, out, errOut, streams := newTestRoot(func() error { return tc.err })
			cmd.SetArgs(tc.args)
			code := Run(context.Background(), cmd, streams)
			if out.Len() != 0 {
				t.Errorf("stdout must stay empty, got %q", out.String())
			}
			if code != tc.wantCode {
				t.Errorf("code %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			if diff := cmp.Diff(tc.wantStderr, errOut.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunRecoversPanic(t *testing.T) {
	cmd, _, errOut, streams := newTestRoot(func() error { panic("boom") })
	cmd.SetArgs(nil)
	if code := Run(context.Background(), cmd, streams); code != ExitUnavailable {
		t.Errorf("code %d", code)
	}
	if !strings.HasPrefix(errOut.String(), "error: internal error: boom") || strings.Contains(errOut.String(), "goroutine") {
		t.Errorf("stderr %q", errOut.String())
	}
}

// TestRunWritesCPUProfile: GPUFLEET_CPUPROFILE receives a pprof profile
// (gzip-compressed protobuf) of the run, and a path that cannot be written
// costs a warning, not the run.
func TestRunWritesCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	t.Setenv(ProfileEnv, path)
	cmd, _, _, streams := newTestRoot(func() error { return nil })
	cmd.SetArgs(nil)
	if code := Run(context.Background(), cmd, streams); code != ExitOK {
		t.Errorf("code %d", code)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile is not gzip data: % x", b[:min(len(b), 8)])
	}
	t.Setenv(ProfileEnv, filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	cmd, _, errOut, streams := newTestRoot(func() error { return nil })
	cmd.SetArgs(nil)
	if code := Run(context.Background(), cmd, streams); code != ExitOK {
		t.Errorf("unwritable profile: code %d", code)
	}
	if !strings.Contains(errOut.String(), "Warning: "+ProfileEnv) {
		t.Errorf("stderr %q", errOut.String())
	}
}

func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd, _, _, streams := newTestRoot(func() error { cancel(); return context.Canceled })
	cmd.SetArgs(nil)
	if code := Run(ctx, cmd, streams); code != ExitInterrupted {
		t.Errorf("code %d, want 130", code)
	}
}

func TestHelpHasExitCodesAndVersion(t *testing.T) {
	cmd, out, _, streams := newTestRoot(func() error { return nil })
	cmd.SetArgs([]string{"--help"})
	if code := Run(context.Background(), cmd, streams); code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, want := range []string{"Exit codes:", "130  interrupted", "--color", "-o, --output", "-v, --v"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "--log_dir") || strings.Contains(out.String(), "--alsologtostderr") {
		t.Errorf("klog flags leak into help")
	}

	cmd, out, _, streams = newTestRoot(func() error { return nil })
	cmd.SetArgs([]string{"version", "-o", "json"})
	if code := Run(context.Background(), cmd, streams); code != 0 {
		t.Fatalf("version exit %d", code)
	}
	if !strings.Contains(out.String(), `"version": "v0.0.0-dev"`) || !strings.Contains(out.String(), `"goVersion"`) {
		t.Errorf("version json: %s", out.String())
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false, false)
	p.Update("3/10")
	p.Event("cordoned node %s", "gpu-1")
	p.Done()
	if b.String() != "cordoned node gpu-1\n" {
		t.Errorf("off a terminal: %q", b.String())
	}
	b.Reset()
	p = NewProgress(&b, true, false)
	p.Update("3/10")
	p.Event("done")
	if b.String() != "\r\x1b[K3/10\r\x1b[Kdone\n" {
		t.Errorf("on a terminal: %q", b.String())
	}
	b.Reset()
	p = NewProgress(&b, true, true)
	p.Update("x")
	p.Event("y")
	if b.Len() != 0 {
		t.Errorf("quiet printed %q", b.String())
	}
}

type fakeRunner struct {
	completeErr, validateErr, runErr error
	ran                              bool
}

func (f *fakeRunner) Complete(ClientGetter, *cobra.Command, []string) error { return f.completeErr }
func (f *fakeRunner) Validate() error                                       { return f.validateErr }
func (f *fakeRunner) Run(context.Context) error                             { f.ran = true; return f.runErr }

func TestRunE(t *testing.T) {
	cases := []struct {
		name     string
		r        fakeRunner
		wantCode int
		wantRan  bool
	}{
		{"ok", fakeRunner{}, ExitOK, true},
		{"validate is usage", fakeRunner{validateErr: errors.New("bad")}, ExitUsage, false},
		{"complete keeps its code", fakeRunner{completeErr: ClusterErr(errors.New("down"))}, ExitUnavailable, false},
		{"run findings", fakeRunner{runErr: Findings(1)}, ExitFindings, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			cmd := &cobra.Command{Use: "x"}
			err := RunE(NewTestClientGetter(), &r)(cmd, nil)
			if ExitCode(err) != tc.wantCode || r.ran != tc.wantRan {
				t.Errorf("code %d ran %v, want %d %v", ExitCode(err), r.ran, tc.wantCode, tc.wantRan)
			}
		})
	}
}

func TestContextsOutcome(t *testing.T) {
	for _, tc := range []struct {
		codes []int
		want  int
		msg   string
	}{
		{[]int{ExitOK, ExitOK}, ExitOK, ""},
		{[]int{ExitOK, ExitFindings}, ExitFindings, ""},
		{[]int{ExitFindings, ExitUnavailable, ExitOK}, ExitUnavailable, "1 of 3 contexts could not be checked"},
		{[]int{ExitUsage, ExitUnavailable}, ExitUsage, "2 of 2 contexts"}, // usage ranks above unavailable
	} {
		err := ContextsOutcome(tc.codes)
		if got := ExitCode(err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.codes, got, tc.want)
		}
		if tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("%v: error %v, want %q", tc.codes, err, tc.msg)
		}
	}
}

// Contexts that do not answer must not hold the --parallel slots: with
// more of them than slots, a sweep would otherwise take one probe timeout
// for every slot's worth of them.
func TestFanOutProbedUnansweredContextsHoldNoSlot(t *testing.T) {
	const hang = 200 * time.Millisecond
	var names []string
	for i := range 25 {
		names = append(names, fmt.Sprintf("dead-%02d", i), fmt.Sprintf("good-%02d", i))
	}
	var mu sync.Mutex
	running, most, probing, mostProbing := 0, 0, 0, 0
	probe := func(ctx context.Context, name string) error {
		mu.Lock()
		probing++
		mostProbing = max(mostProbing, probing)
		mu.Unlock()
		defer func() { mu.Lock(); probing--; mu.Unlock() }()
		if strings.HasPrefix(name, "dead") {
			time.Sleep(hang)
			return ClusterErr(errors.New("timed out"))
		}
		return nil
	}
	began := time.Now()
	results := FanOutProbed(context.Background(), names, 4, probe, func(ctx context.Context, name string) (string, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return "checked " + name, nil
	})
	took := time.Since(began)
	if took > 2*hang {
		t.Errorf("took %s: 25 unanswered contexts at --parallel 4 should cost about one probe (%s), not one a slot", took, hang)
	}
	if most > 4 {
		t.Errorf("ran %d checks at once with --parallel 4", most)
	}
	if mostProbing > ProbeParallel {
		t.Errorf("%d probes at once, want at most %d", mostProbing, ProbeParallel)
	}
	for i, r := range results {
		if r.Context != names[i] {
			t.Fatalf("results out of order at %d: %s", i, r.Context)
		}
		dead := strings.HasPrefix(r.Context, "dead")
		if dead && (ExitCode(r.Err) != ExitUnavailable || r.Value != "") {
			t.Errorf("%s: err %v, value %q: want the probe's error and no check", r.Context, r.Err, r.Value)
		}
		if !dead && (r.Err != nil || r.Value != "checked "+r.Context) {
			t.Errorf("%s: err %v, value %q", r.Context, r.Err, r.Value)
		}
	}
}

// The same through the production getter: endpoints that refuse, and ones
// that accept a connection and never answer, each bounded by
// --request-timeout, all of them together within about one.
func TestFanOutReachableDeadEndpoints(t *testing.T) {
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	var kc strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user: {token: t}\nclusters:\n")
	var names []string
	for i := range 6 {
		addr := hang.Addr().String()
		if i%3 == 0 {
			addr = refused
		}
		fmt.Fprintf(&kc, "- name: c%d\n  cluster: {server: 'https://%s', insecure-skip-tls-verify: true}\n", i, addr)
		names = append(names, fmt.Sprintf("c%d", i))
	}
	kc.WriteString("contexts:\n")
	for _, n := range names {
		fmt.Fprintf(&kc, "- name: %s\n  context: {cluster: %s, user: u}\n", n, n)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const timeout = 500 * time.Millisecond
	cg := NewClientGetter(genericiooptions.NewTestIOStreamsDiscard(), ConfigOptions{DefaultTimeout: timeout.String()})
	*cg.(*configGetter).flags.KubeConfig = path
	*cg.(*configGetter).flags.CacheDir = t.TempDir()

	began := time.Now()
	results := FanOutReachable(context.Background(), cg, names, 1, func(ctx context.Context, name string) (bool, error) {
		return true, nil
	})
	took := time.Since(began)
	// Four hanging contexts at --parallel 1 took four timeouts when the
	// probe held a slot.
	if took > 2*timeout {
		t.Errorf("took %s for %d dead contexts at --parallel 1, want about one --request-timeout (%s)", took, len(names), timeout)
	}
	for _, r := range results {
		if r.Value || ExitCode(r.Err) != ExitUnavailable || !strings.Contains(r.Err.Error(), "context "+r.Context) {
			t.Errorf("%s: checked %v, err %v (exit %d): want exit 3 naming the context", r.Context, r.Value, r.Err, ExitCode(r.Err))
		}
	}
}
