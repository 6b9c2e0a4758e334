package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster/scenario"
)

// runner walks the runbook against a running cluster.
type runner struct {
	ctx        context.Context
	scn        *scenario.Scenario
	kubeconfig string
	bin        string
	kubectl    string
	evidence   string
	env        []string
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	out        io.Writer
	timeout    time.Duration

	mu           sync.Mutex
	runID        string
	agentCmd     string
	checkpointed bool
	step         int
	shown        []string
	result       Result
}

// runRunbook is `democluster runbook`.
func runRunbook(ctx context.Context, c config) error {
	scnPath := c.scenario
	if scnPath == "" {
		root, err := localcluster.RepoRoot()
		if err != nil {
			return err
		}
		scnPath = filepath.Join(root, scenario.DefaultFile)
	}
	scn, err := scenario.Load(scnPath)
	if err != nil {
		return err
	}
	r := &runner{ctx: ctx, scn: scn, out: os.Stdout, timeout: 5 * time.Minute}
	if r.kubeconfig, err = filepath.Abs(orDefault(c.kubeconfigFlag, c.kubeconfig())); err != nil {
		return err
	}
	if r.bin, err = filepath.Abs(c.bin); err != nil {
		return err
	}
	r.kubectl = orDefault(c.kubectl, localcluster.BinariesIn(localcluster.CacheDir()).Kubectl)
	if r.evidence, err = filepath.Abs(orDefault(c.evidence, filepath.Join(c.dir, "evidence"))); err != nil {
		return err
	}
	for _, p := range []string{r.kubeconfig, r.kubectl, filepath.Join(r.bin, "kubectl-skew")} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("runbook needs %s: %w", p, err)
		}
	}
	if err := os.RemoveAll(r.evidence); err != nil {
		return err
	}
	if err := os.MkdirAll(r.evidence, 0o755); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", r.kubeconfig)
	if err != nil {
		return err
	}
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if r.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	path := r.bin + string(os.PathListSeparator) + filepath.Dir(r.kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	r.env = append(os.Environ(), "KUBECONFIG="+r.kubeconfig, "PATH="+path)
	r.result = Result{APIVersion: "gpufleet.dev/v1alpha1", Kind: "DemoRunbook", Pool: scn.Upgrade.Pool, OK: true}

	gang := r.gangRuns()
	stopTrainer := func() {}
	if gang {
		stop, err := r.startTrainer(ctx)
		if err != nil {
			return err
		}
		stopTrainer = stop
		defer func() { stopTrainer() }()
	}

	steps := runbook(scn)
	r.say("\n== The runbook: upgrade node pool %s to kubelet %s, one command at a time", scn.Upgrade.Pool, scn.Upgrade.KubeletVersion)
	r.say("Each step prints the command as you would paste it, in a shell set up with:")
	r.say("  export KUBECONFIG=%s PATH=%s:$PATH", r.display(r.kubeconfig), r.display(r.bin))
	if gang {
		r.say("The training gang %s/%s answers checkpoint requests as it would in its pod: the checkpoint", scn.Gang.Namespace, scn.Gang.JobSet)
		r.say("agent runs beside a scripted trainer (lines [agent] and [trainer]), here a local process:")
		r.say("  %s", r.agentCmd)
	}
	failed := false
	for i, s := range steps {
		r.step = i + 1
		sr := StepResult{Title: s.Title, Expected: s.Expect}
		r.say("\n== [%d/%d] %s", i+1, len(steps), s.Title)
		began := time.Now()
		if s.NeedsGang && !gang {
			sr.Skipped = "no training gang"
			r.say("(skipped: no training gang; Kueue and JobSet are not running)")
			r.result.Steps = append(r.result.Steps, sr)
			continue
		}
		err := r.runStep(s, &sr)
		sr.Seconds = time.Since(began).Round(10 * time.Millisecond).Seconds()
		if err != nil {
			sr.Error = err.Error()
			r.say("step failed: %v", err)
			failed = true
		} else if sr.ExitCode != sr.Expected {
			failed = true
		}
		r.result.Steps = append(r.result.Steps, sr)
		if failed {
			break
		}
	}
	stopTrainer()
	stopTrainer = func() {}
	r.mu.Lock()
	r.result.Checkpointed = r.checkpointed
	r.mu.Unlock()
	r.result.OK = !failed
	if !failed {
		r.summary()
	}
	if err := r.writeResult(); err != nil {
		return err
	}
	if failed {
		return fmt.Errorf("the runbook stopped at step %d (see above); evidence in %s", r.step, r.evidence)
	}
	return nil
}

// jsonArgs are a read-only step's arguments for its -o json evidence: a
// Markdown runbook becomes the plan's JSON, and what the first run saved is
// not saved again.
func jsonArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--runbook":
		case args[i] == "--save":
			i++
		case strings.HasPrefix(args[i], "--save="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// joinArgs quotes what a shell would need quoted.
func joinArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$*?;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// gangRuns reports whether the scenario's training gang exists.
func (r *runner) gangRuns() bool {
	g := r.scn.Gang
	if g.JobSet == "" {
		return false
	}
	_, err := r.dyn.Resource(scenario.JobSetGVR).Namespace(g.Namespace).Get(r.ctx, g.JobSet, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		r.say("(cannot read the training gang: %v)", err)
	}
	return err == nil
}

// runStep runs one step and fills sr.
func (r *runner) runStep(s step, sr *StepResult) error {
	if s.Do != nil {
		if err := s.Do(r); err != nil {
			return err
		}
		sr.Commands = append(sr.Commands, r.takeShown()...)
		return nil
	}
	line := strings.ReplaceAll(s.Kubectl, "{{run}}", r.runID)
	line = strings.ReplaceAll(line, "{{evidence}}", r.display(r.evidence))
	args := strings.Fields(line)
	evidence := ""
	if s.Evidence != "" {
		evidence = filepath.Join(r.evidence, fmt.Sprintf("%02d-%s.json", r.step, s.Evidence))
		sr.Evidence = evidence
	}
	var code int
	var err error
	if s.Mutating && evidence != "" {
		shown := "kubectl " + strings.Join(args, " ") + " -o json > " + r.display(evidence)
		sr.Commands = append(sr.Commands, shown)
		r.say("$ %s", shown)
		code, err = r.kubectlTo(append(args, "-o", "json"), evidence, true)
	} else {
		shown := "kubectl " + strings.Join(args, " ")
		sr.Commands = append(sr.Commands, shown)
		r.say("$ %s", shown)
		code, err = r.kubectlTo(args, "", true)
	}
	if err != nil {
		return err
	}
	sr.ExitCode = code
	r.sayExit(code, s.Expect, s.Why)
	if code != s.Expect {
		return nil
	}
	if !s.Mutating && evidence != "" {
		// The same command as JSON, for the record.
		args := jsonArgs(args)
		shown := "kubectl " + strings.Join(args, " ") + " -o json > " + r.display(evidence)
		sr.Commands = append(sr.Commands, shown)
		if c, err := r.kubectlTo(append(args, "-o", "json"), evidence, false); err != nil || c != code {
			return fmt.Errorf("%s: exit %d (%v), but %d without -o json", shown, c, err, code)
		}
		r.say("evidence: %s", shown)
	}
	if s.Then != nil {
		if err := s.Then(r); err != nil {
			return err
		}
		sr.Commands = append(sr.Commands, r.takeShown()...)
	}
	return nil
}

func (r *runner) sayExit(code, want int, why string) {
	switch {
	case code == want && code == 0:
		r.say("-> exit 0")
	case code == want:
		r.say("-> exit %d, as expected: %s", code, why)
	default:
		r.say("-> exit %d, expected %d: the demo stops here", code, want)
	}
}

// kubectlTo runs kubectl with args. With stdoutFile set, stdout goes there
// and stderr is shown; otherwise both are shown (show) or dropped.
func (r *runner) kubectlTo(args []string, stdoutFile string, show bool) (int, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.kubectl, args...)
	cmd.Env = r.env
	var lw io.Writer = io.Discard
	if show {
		lw = &lineWriter{r: r}
	}
	cmd.Stderr = lw
	cmd.Stdout = lw
	if stdoutFile != "" {
		f, err := os.Create(stdoutFile)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		cmd.Stdout = f
	}
	err := cmd.Run()
	if w, ok := lw.(*lineWriter); ok {
		w.flush()
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case ctx.Err() != nil:
		return -1, fmt.Errorf("kubectl %s: no answer within %s", strings.Join(args, " "), r.timeout)
	case errors.As(err, &ee):
		return ee.ExitCode(), nil
	default:
		return -1, err
	}
}

// shell shows a command line as the user would paste it and runs it with
// bash; it fails unless the exit code is want.
func (r *runner) shell(line string, want int) error {
	r.say("$ %s", line)
	r.mu.Lock()
	r.shown = append(r.shown, line)
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", line)
	cmd.Env = r.env
	lw := &lineWriter{r: r}
	cmd.Stdout, cmd.Stderr = lw, lw
	err := cmd.Run()
	lw.flush()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s: exit %d", line, code)
	}
	return nil
}

func (r *runner) takeShown() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.shown
	r.shown = nil
	return s
}

func (r *runner) waitFor(what string, cond func(context.Context) (bool, error)) error {
	return localcluster.Poll(r.ctx, what, 250*time.Millisecond, 2*time.Minute, cond)
}

// readEvidence decodes the evidence file of the step named name.
func (r *runner) readEvidence(name string, v any) error {
	matches, _ := filepath.Glob(filepath.Join(r.evidence, "[0-9][0-9]-"+name+".json"))
	if len(matches) == 0 {
		return fmt.Errorf("no evidence of %s", name)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", matches[0], err)
	}
	return nil
}

// display shortens a path under the working directory, as a user in the
// repository would type it.
func (r *runner) display(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	rel, err := filepath.Rel(wd, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return p
	}
	if filepath.Base(p) == "kubeconfig" || p == r.bin {
		return "$PWD/" + rel
	}
	return rel
}

// say prints one line, never in the middle of another.
func (r *runner) say(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format+"\n", args...)
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// lineWriter passes a command's output on whole lines at a time, so the
// trainer's lines never cut one in half.
type lineWriter struct {
	r   *runner
	buf bytes.Buffer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf.Next(i + 1))
		w.r.mu.Lock()
		fmt.Fprint(w.r.out, "  "+ansi.ReplaceAllString(line, ""))
		w.r.mu.Unlock()
	}
}

func (w *lineWriter) flush() {
	if w.buf.Len() > 0 {
		w.r.mu.Lock()
		fmt.Fprintln(w.r.out, "  "+w.buf.String())
		w.r.mu.Unlock()
		w.buf.Reset()
	}
}
