package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// Exit codes of the agent, the values pkg/cli gives every plugin.
const (
	ExitUsage       = 2 // bad flags, no root object named
	ExitUnavailable = 3 // forbidden, root object missing, cluster unreachable
)

// Error is an error of the agent with the exit code it maps to.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Options are the agent's command-line settings.
type Options struct {
	Kubeconfig        string
	As                string
	Root              RootOptions
	Dir               string
	Signal            string
	Process           string
	ProgressTimeout   time.Duration
	PollInterval      time.Duration
	FilePollInterval  time.Duration
	HeartbeatInterval time.Duration
	Prefix            string
	Annotation        string
	AllRanks          bool
	// Args are positional arguments, which the agent refuses.
	Args []string
}

// NewOptions returns the defaults, the pod's namespace and name taken
// from POD_NAMESPACE and POD_NAME (the downward API).
func NewOptions() *Options {
	return &Options{
		Dir: "/var/run/gpufleet", ProgressTimeout: 60 * time.Second, PollInterval: 2 * time.Second,
		FilePollInterval: 250 * time.Millisecond, HeartbeatInterval: 5 * time.Second,
		Root: RootOptions{Namespace: os.Getenv("POD_NAMESPACE"), PodName: os.Getenv("POD_NAME"), LabelsFile: "/etc/podinfo/labels"},
	}
}

// AddFlags registers the agent's flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default: in-cluster, then $KUBECONFIG)")
	fs.StringVar(&o.As, "as", o.As, "user to impersonate, as kubectl --as (to try a Role)")
	fs.StringVar(&o.Dir, "dir", o.Dir, "directory shared with the trainer (an emptyDir)")
	fs.StringVar(&o.Signal, "signal", o.Signal, "signal sent to --process on a new, withdrawn or stopped request, e.g. SIGUSR1 (needs shareProcessNamespace)")
	fs.StringVar(&o.Process, "process", o.Process, "command name of the trainer's processes to signal, e.g. python")
	fs.DurationVar(&o.ProgressTimeout, "progress-timeout", o.ProgressTimeout, "while a request is open the trainer must touch <dir>/progress at least this often, or the heartbeat stops and the drain's --heartbeat-timeout decides; 0 keeps the heartbeat while the agent runs")
	fs.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "how often the root object is read")
	fs.DurationVar(&o.FilePollInterval, "file-poll-interval", o.FilePollInterval, "how often --dir is read while a request is open")
	fs.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", o.HeartbeatInterval, "how often the heartbeat is refreshed (keep under half the drain's --heartbeat-timeout)")
	fs.StringVar(&o.Prefix, "protocol-prefix", o.Prefix, "annotation prefix of the protocol (default gpufleet.dev/), as gang-drain --protocol-prefix")
	fs.StringVar(&o.Annotation, "annotation", o.Annotation, "request annotation as gang-drain --annotation KEY=requested; its domain is the prefix")
	fs.BoolVar(&o.AllRanks, "all-ranks", o.AllRanks, "answer from this pod even when its labels say it is not rank 0 (one agent per gang must answer)")
	fs.StringVarP(&o.Root.Namespace, "namespace", "n", o.Root.Namespace, "namespace of the gang (default $POD_NAMESPACE)")
	fs.StringVar(&o.Root.PodName, "pod-name", o.Root.PodName, "the agent's own pod, to walk its owners (default $POD_NAME)")
	fs.StringVar(&o.Root.LabelsFile, "labels-file", o.Root.LabelsFile, "downward-API file of the pod's labels; names a JobSet, LeaderWorkerSet or Kueue pod group")
	fs.StringVar(&o.Root.Root, "root", o.Root.Root, "root object as KIND/NAME (JobSet/x, Job/x, PyTorchJob/x, MPIJob/x, TrainJob/x, LeaderWorkerSet/x, Workload/x); overrides the pod")
	fs.StringVar(&o.Root.RootAPIVersion, "root-api-version", o.Root.RootAPIVersion, "apiVersion of --root when not the usual one")
}

// Run runs the agent until ctx ends (SIGTERM or SIGINT), which is a clean
// stop (nil). Its log goes to stderr; an error is an *Error with the exit
// code it maps to.
func (o *Options) Run(ctx context.Context, stderr io.Writer) error {
	ro := o.Root
	fail := func(code int, err error) error { return &Error{Code: code, Err: err} }
	if len(o.Args) > 0 {
		return fail(ExitUsage, fmt.Errorf("unexpected arguments %q: the agent takes flags only", o.Args))
	}
	signal, err := ParseSignal(o.Signal)
	if err != nil {
		return fail(ExitUsage, err)
	}
	if signal != 0 && o.Process == "" {
		return fail(ExitUsage, errors.New("--signal needs --process NAME"))
	}
	keys := checkpoint.DefaultKeys()
	if o.Prefix != "" || o.Annotation != "" {
		reqKey := ""
		if o.Annotation != "" {
			if reqKey, err = checkpoint.ParseAnnotationFlag(o.Annotation); err != nil {
				return fail(ExitUsage, err)
			}
		}
		if keys, err = checkpoint.NewKeys(o.Prefix, reqKey); err != nil {
			return fail(ExitUsage, err)
		}
	}
	if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
		return fail(ExitUsage, fmt.Errorf("--dir %s is not a directory: mount the emptyDir shared with the trainer there", o.Dir))
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{AuthInfo: clientcmdapi.AuthInfo{Impersonate: o.As}}).ClientConfig()
	if err != nil {
		return fail(ExitUsage, fmt.Errorf("no cluster configuration: %w", err))
	}
	cfg.UserAgent = "gpufleet-checkpoint-agent"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fail(ExitUsage, err)
	}
	logger := log.New(stderr, "", log.LUTC|log.Ldate|log.Lmicroseconds)
	if !o.AllRanks && ro.LabelsFile != "" {
		// Every pod of a replicated job gets the sidecar; the gang answers
		// through one, rank 0's.
		if labels, err := ReadLabelsFile(ro.LabelsFile); err == nil {
			if l, v, not := NotRankZero(labels); not {
				logger.Printf("idle: this pod is not rank 0 (%s=%s); rank 0's agent answers for the gang", l, v)
				<-ctx.Done()
				return nil
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
		Client: dyn, Target: target, Keys: keys, Dir: Dir(o.Dir),
		Signal: signal, Process: o.Process, ProgressTimeout: o.ProgressTimeout,
		PollInterval: o.PollInterval, FilePollInterval: o.FilePollInterval, HeartbeatInterval: o.HeartbeatInterval,
		Logf: logger.Printf,
	}
	if err := a.Check(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fail(ExitUnavailable, err)
	}
	if err := a.Run(ctx); err != nil {
		return fail(ExitUnavailable, err)
	}
	if req, _, open := Dir(o.Dir).ReadRequest(); open {
		logger.Printf("stopping (signal); request %s stays open in %s for the next agent", req.ID, o.Dir)
	} else {
		logger.Printf("stopping (signal); no request open")
	}
	return nil
}
