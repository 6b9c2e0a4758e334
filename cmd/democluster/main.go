// Command democluster runs the local control plane of pkg/localcluster with
// the GPU-fleet scenario of testdata/demo, and walks the runbook of
// upgrading one pool, for `make demo`.
//
//	democluster up   [--dir .demo] [--kueue] [--jobset]  start in the background, print the kubeconfig path
//	democluster down [--dir .demo]                  stop it, wait until every process it started has exited and freed its ports, remove its state
//	democluster serve [--dir .demo] [--kueue] [--jobset] run in the foreground until SIGINT/SIGTERM
//	democluster runbook [--dir .demo] [--bin bin] [--kubeconfig K] [--evidence DIR]
//	                                                run the upgrade runbook against a running cluster
//	democluster upgrade-pool --kubeconfig K [--context C] --selector SEL --kubelet VERSION
//	                                                the runbook's SIMULATED node-pool upgrade, alone
//
// up starts "serve" detached from the terminal, waits until the scenario is
// in place and exits; the control plane keeps running until down. runbook
// runs each plugin as a user would, through kubectl, prints each command
// before its output and exit code, writes each step's -o json output to
// the evidence folder (default .demo/evidence) and ends with a summary.
//
// With --kueue and --jobset, a manager that does not start is tried again;
// if it still does not, up fails naming it and its log rather than run the
// demo without its training gang.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster/scenario"
)

const usage = `usage: democluster up|down|serve|status|runbook|upgrade-pool [--dir DIR] [--kueue] [--jobset] [--scenario FILE]`

type config struct {
	dir      string
	kueue    bool
	jobset   bool
	timeout  time.Duration
	scenario string
	// runbook
	kubeconfigFlag string
	bin            string
	kubectl        string
	evidence       string
	// upgrade-pool
	context  string
	selector string
	kubelet  string
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet("democluster "+cmd, flag.ExitOnError)
	var c config
	fs.StringVar(&c.dir, "dir", ".demo", "state directory: kubeconfig, pid file, logs")
	fs.BoolVar(&c.kueue, "kueue", false, "also run the Kueue manager (building it when missing)")
	fs.BoolVar(&c.jobset, "jobset", false, "also run the JobSet controller (building it when missing)")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Minute, "how long up waits, including a first build of the binaries")
	fs.StringVar(&c.scenario, "scenario", "", "the demo scenario (default "+scenario.DefaultFile+" in the repository)")
	fs.StringVar(&c.kubeconfigFlag, "kubeconfig", "", "runbook: the cluster's kubeconfig (default DIR/kubeconfig)")
	fs.StringVar(&c.bin, "bin", "bin", "runbook: the folder holding the plugin binaries")
	fs.StringVar(&c.kubectl, "kubectl", "", "runbook: kubectl to run (default the one built for the local control plane)")
	fs.StringVar(&c.evidence, "evidence", "", "runbook: where each step's -o json output goes (default DIR/evidence)")
	fs.StringVar(&c.context, "context", "", "upgrade-pool: the kubeconfig context")
	fs.StringVar(&c.selector, "selector", "", "upgrade-pool: label selector of the pool's nodes")
	fs.StringVar(&c.kubelet, "kubelet", "", "upgrade-pool: the kubelet version the nodes come back with")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(c.dir)
	if err != nil {
		fail(err)
	}
	c.dir = abs
	switch cmd {
	case "up":
		err = up(c)
	case "down":
		err = down(c)
	case "serve":
		err = serve(c)
	case "status":
		err = status(c)
	case "runbook":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = runRunbook(ctx, c)
		stop()
	case "upgrade-pool":
		err = upgradePool(c)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

// upgradePool runs the runbook's simulated node-pool upgrade on its own:
// the fleet programme's e2e suite puts it behind the fleet file's pool
// command, as a real fleet puts a provider's CLI there.
func upgradePool(c config) error {
	if c.kubeconfigFlag == "" || c.selector == "" || c.kubelet == "" {
		return fmt.Errorf("upgrade-pool needs --kubeconfig, --selector and --kubelet")
	}
	kubectl := orDefault(c.kubectl, localcluster.BinariesIn(localcluster.CacheDir()).Kubectl)
	flags := ""
	if c.context != "" {
		flags = "--context " + c.context
	}
	env := append(os.Environ(), "KUBECONFIG="+c.kubeconfigFlag, "PATH="+filepath.Dir(kubectl)+string(os.PathListSeparator)+os.Getenv("PATH"))
	fmt.Println("SIMULATED node-pool upgrade (the nodes are KWOK's): on a real cluster this is the provider's upgrade")
	for _, line := range simulatedUpgrade(c.selector, c.kubelet, flags) {
		fmt.Println("$ " + line)
		cmd := exec.Command("bash", "-c", line)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "democluster: %v\n", err)
	os.Exit(1)
}

func (c config) pidFile() string    { return filepath.Join(c.dir, "democluster.pid") }
func (c config) readyFile() string  { return filepath.Join(c.dir, "ready") }
func (c config) kubeconfig() string { return filepath.Join(c.dir, "kubeconfig") }
func (c config) logFile() string    { return filepath.Join(c.dir, "democluster.log") }
func (c config) clusterDir() string { return filepath.Join(c.dir, "cluster") }

// running returns the pid of a live serve process, or 0.
func (c config) running() int {
	b, err := os.ReadFile(c.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

func status(c config) error {
	pid := c.running()
	if pid == 0 {
		fmt.Println("demo cluster: not running")
		return nil
	}
	fmt.Printf("demo cluster: running (pid %d)\nkubeconfig: %s\n", pid, c.kubeconfig())
	return nil
}

func up(c config) error {
	if pid := c.running(); pid != 0 {
		if _, err := os.Stat(c.readyFile()); err == nil {
			fmt.Printf("demo cluster already running (pid %d)\n", pid)
			printReady(c)
			return nil
		}
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(c.readyFile())
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.logFile(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"serve", "--dir", c.dir}
	if c.kueue {
		args = append(args, "--kueue")
	}
	if c.jobset {
		args = append(args, "--jobset")
	}
	if c.scenario != "" {
		args = append(args, "--scenario", c.scenario)
	}
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = logf, logf, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if root, err := localcluster.RepoRoot(); err == nil {
		cmd.Env = append(os.Environ(), "GPUFLEET_REPO_ROOT="+root)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Printf("starting the demo control plane (log: %s)...\n", c.logFile())
	deadline := time.After(c.timeout)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("the control plane exited (%v); end of %s:\n%s", err, c.logFile(), tail(c.logFile(), 6000))
		case <-deadline:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("not ready after %s; see %s", c.timeout, c.logFile())
		case <-tick.C:
			if _, err := os.Stat(c.readyFile()); err == nil {
				printReady(c)
				return nil
			}
		}
	}
}

func printReady(c config) {
	b, _ := os.ReadFile(c.readyFile())
	fmt.Print(string(b))
	fmt.Printf("kubeconfig: %s\n", c.kubeconfig())
	fmt.Printf("try:        kubectl --kubeconfig %s get nodes -L %s\n", c.kubeconfig(), localcluster.PoolLabel)
}

// down stops the serve process, then makes sure every component it
// started has exited and released its ports (localcluster.Reap, from the
// state file in the cluster folder: a serve that was killed leaves its
// components to it) before it removes the state. It returns only then, so
// that an up right after it finds every port free.
func down(c config) error {
	pid := c.running()
	if pid == 0 {
		fmt.Println("demo cluster: not running")
	} else {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(90 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			// Its components carry a parent-death signal and follow it;
			// Reap below sees to any that do not.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := localcluster.Reap(c.clusterDir(), 60*time.Second); err != nil {
		return fmt.Errorf("stopping the demo cluster: %w; the state is kept in %s", err, c.dir)
	}
	if pid != 0 {
		fmt.Printf("demo cluster stopped (pid %d); every component exited and its ports are free\n", pid)
	}
	for _, p := range []string{c.pidFile(), c.readyFile(), c.kubeconfig()} {
		_ = os.Remove(p)
	}
	return os.RemoveAll(c.clusterDir())
}

func serve(c config) (err error) {
	if pid := c.running(); pid != 0 && pid != os.Getpid() {
		return fmt.Errorf("already running (pid %d); run democluster down first", pid)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	// What an earlier serve that was killed left running goes first.
	if err := localcluster.Reap(c.clusterDir(), 60*time.Second); err != nil {
		return err
	}
	if err := os.RemoveAll(c.clusterDir()); err != nil {
		return err
	}
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(c.pidFile())
	defer os.Remove(c.readyFile())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	opts := localcluster.Options{
		Dir:          c.clusterDir(),
		Kueue:        c.kueue,
		JobSet:       c.jobset,
		StartTimeout: 10 * time.Minute, // room for Kueue and JobSet to be started again (90 s a try)
		Log:          os.Stdout,
	}
	began := time.Now()
	cp, err := localcluster.Start(ctx, opts)
	if err != nil {
		return startError(err)
	}
	defer func() {
		if cerr := cp.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	kc, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.kubeconfig(), kc, 0o600); err != nil {
		return err
	}
	var scn *scenario.Scenario
	if c.scenario != "" {
		scn, err = scenario.Load(c.scenario)
	} else {
		scn, err = scenario.LoadDefault()
	}
	if err != nil {
		return err
	}
	queueing := cp.Options.Kueue && cp.Options.JobSet
	summary, err := scn.Create(ctx, cp, queueing)
	if err != nil {
		return fmt.Errorf("demo scenario: %w", err)
	}
	summary = fmt.Sprintf("demo control plane %s up in %s at %s\n%s", localcluster.KubeVersion, time.Since(began).Round(time.Second), cp.Host, summary)
	fmt.Print(summary)
	if err := os.WriteFile(c.readyFile(), []byte(summary), 0o600); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Println("democluster: stopping")
	return nil
}

// startError says which component did not start and where its log is.
// Kueue and JobSet carry the demo's training gang: the demo does not go on
// without them unless asked to (DEMO_QUEUEING=0).
func startError(err error) error {
	var ce *localcluster.ComponentError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Component == localcluster.Kueue || ce.Component == localcluster.JobSet {
		return fmt.Errorf("%w\n\n%s did not start, after retries (its log: %s). The demo's training gang needs Kueue and JobSet: "+
			"fix the cause above and run make demo again, or run the demo without the gang: DEMO_QUEUEING=0 make demo", err, ce.Component, ce.Log)
	}
	return fmt.Errorf("%w\n\n%s did not start (its log: %s)", err, ce.Component, ce.Log)
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
