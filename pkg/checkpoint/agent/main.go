package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// Exit codes of the agent, the values pkg/cli gives every plugin.
const (
	ExitOK          = 0 // stopped by SIGTERM or SIGINT
	ExitUsage       = 2 // bad flags, no root object named
	ExitUnavailable = 3 // forbidden, root object missing, cluster unreachable
)

const usage = `gpufleet-checkpoint-agent: answer kubectl gang-drain checkpoint-and-yield
requests on the gang's root object for a trainer that reads and writes files
in --dir (see docs/checkpoint-and-yield.md).

Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage, 3 forbidden or unreachable.

Flags:
`

// Main runs the agent with command-line args and returns its exit code.
// Errors are one line on stderr.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpufleet-checkpoint-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var (
		kubeconfig = fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
		as         = fs.String("as", "", "user to impersonate, as kubectl --as (to try a Role)")
		ro         RootOptions
		dir        = fs.String("dir", "/var/run/gpufleet", "directory shared with the trainer (an emptyDir)")
		sig        = fs.String("signal", "", "signal sent to --process on a new, withdrawn or stopped request, e.g. SIGUSR1 (needs shareProcessNamespace)")
		process    = fs.String("process", "", "command name of the trainer's processes to signal, e.g. python")
		progress   = fs.Duration("progress-timeout", 60*time.Second, "while a request is open the trainer must touch <dir>/progress at least this often, or the heartbeat stops and the drain's --heartbeat-timeout decides; 0 keeps the heartbeat while the agent runs")
		poll       = fs.Duration("poll-interval", 2*time.Second, "how often the root object is read")
		filePoll   = fs.Duration("file-poll-interval", 250*time.Millisecond, "how often --dir is read while a request is open")
		heartbeat  = fs.Duration("heartbeat-interval", 5*time.Second, "how often the heartbeat is refreshed (keep under half the drain's --heartbeat-timeout)")
		prefix     = fs.String("protocol-prefix", "", "annotation prefix of the protocol (default gpufleet.dev/), as gang-drain --protocol-prefix")
		annotation = fs.String("annotation", "", "request annotation as gang-drain --annotation KEY=requested; its domain is the prefix")
		allRanks   = fs.Bool("all-ranks", false, "answer from this pod even when its labels say it is not rank 0 (one agent per gang must answer)")
	)
	fs.StringVar(&ro.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the gang (default $POD_NAMESPACE)")
	fs.StringVar(&ro.PodName, "pod-name", os.Getenv("POD_NAME"), "the agent's own pod, to walk its owners (default $POD_NAME)")
	fs.StringVar(&ro.LabelsFile, "labels-file", "/etc/podinfo/labels", "downward-API file of the pod's labels; names a JobSet, LeaderWorkerSet or Kueue pod group")
	fs.StringVar(&ro.Root, "root", "", "root object as KIND/NAME (JobSet/x, Job/x, PyTorchJob/x, MPIJob/x, TrainJob/x, LeaderWorkerSet/x, Workload/x); overrides the pod")
	fs.StringVar(&ro.RootAPIVersion, "root-api-version", "", "apiVersion of --root when not the usual one")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return code
	}
	if fs.NArg() > 0 {
		return fail(ExitUsage, fmt.Errorf("unexpected arguments %q: the agent takes flags only", fs.Args()))
	}
	signal, err := ParseSignal(*sig)
	if err != nil {
		return fail(ExitUsage, err)
	}
	if signal != 0 && *process == "" {
		return fail(ExitUsage, errors.New("--signal needs --process NAME"))
	}
	keys := checkpoint.DefaultKeys()
	if *prefix != "" || *annotation != "" {
		reqKey := ""
		if *annotation != "" {
			if reqKey, err = checkpoint.ParseAnnotationFlag(*annotation); err != nil {
				return fail(ExitUsage, err)
			}
		}
		if keys, err = checkpoint.NewKeys(*prefix, reqKey); err != nil {
			return fail(ExitUsage, err)
		}
	}
	if st, err := os.Stat(*dir); err != nil || !st.IsDir() {
		return fail(ExitUsage, fmt.Errorf("--dir %s is not a directory: mount the emptyDir shared with the trainer there", *dir))
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{AuthInfo: clientcmdapi.AuthInfo{Impersonate: *as}}).ClientConfig()
	if err != nil {
		return fail(ExitUsage, fmt.Errorf("no cluster configuration: %w", err))
	}
	cfg.UserAgent = "gpufleet-checkpoint-agent"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fail(ExitUsage, err)
	}
	logger := log.New(stderr, "", log.LUTC|log.Ldate|log.Lmicroseconds)
	if !*allRanks && ro.LabelsFile != "" {
		// Every pod of a replicated job gets the sidecar; the gang answers
		// through one, rank 0's.
		if labels, err := ReadLabelsFile(ro.LabelsFile); err == nil {
			if l, v, not := NotRankZero(labels); not {
				logger.Printf("idle: this pod is not rank 0 (%s=%s); rank 0's agent answers for the gang", l, v)
				<-ctx.Done()
				return ExitOK
			}
		}
	}
	target, how, err := ResolveTarget(ctx, dyn, ro)
	if err != nil {
		if ro.Namespace == "" || strings.HasPrefix(err.Error(), "--root") || strings.HasPrefix(err.Error(), "cannot find") {
			return fail(ExitUsage, err)
		}
		return fail(ExitUnavailable, err)
	}
	logger.Printf("root object %s (from %s)", target, how)
	a := &Agent{
		Client: dyn, Target: target, Keys: keys, Dir: Dir(*dir),
		Signal: signal, Process: *process, ProgressTimeout: *progress,
		PollInterval: *poll, FilePollInterval: *filePoll, HeartbeatInterval: *heartbeat,
		Logf: logger.Printf,
	}
	if err := a.Check(ctx); err != nil {
		if ctx.Err() != nil {
			return ExitOK
		}
		return fail(ExitUnavailable, err)
	}
	if err := a.Run(ctx); err != nil {
		return fail(ExitUnavailable, err)
	}
	if req, _, open := Dir(*dir).ReadRequest(); open {
		logger.Printf("stopping (signal); request %s stays open in %s for the next agent", req.ID, *dir)
	} else {
		logger.Printf("stopping (signal); no request open")
	}
	return ExitOK
}
