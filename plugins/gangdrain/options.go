package gangdrain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gang"
	"github.com/gpufleet/upgrade-plugins/pkg/inference"
)

// Options holds the parsed state shared by the subcommands of
// `kubectl gang-drain`.
type Options struct {
	Print *cli.PrintFlags

	// Nodes and Selector choose the nodes (plan, run).
	Nodes    []string
	Selector string
	// Args are the RUN|NODE arguments of restore, or the RUN of status.
	Args []string

	Annotation         string
	ProtocolPrefix     string
	OnTimeout          string
	AckTimeout         time.Duration
	CheckpointDeadline time.Duration
	HeartbeatTimeout   time.Duration
	MaxGangsInFlight   int
	PodDeleteQPS       float32
	MaxUnavailableGPUs string
	DeleteEmptyDirData bool
	Force              bool
	DisableEviction    bool
	DryRun             bool
	Reason             string
	RunID              string
	Timeout            time.Duration
	PollInterval       time.Duration
	StopTimeout        time.Duration
	EvictionTimeout    time.Duration
	RestoreTimeout     time.Duration

	// dryRun is --dry-run of run and restore.
	dryRun cli.DryRunFlag
	// inf are the --inference flags of plan, run and restore.
	inf inferenceFlags

	keys   checkpoint.Keys
	budget gang.Budget
	onTO   gang.OnTimeout

	cg    cli.ClientGetter
	clock clock.WithTicker
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Print:              cli.NewPrintFlags(),
		OnTimeout:          string(gang.OnTimeoutAbort),
		AckTimeout:         2 * time.Minute,
		CheckpointDeadline: 30 * time.Minute,
		HeartbeatTimeout:   2 * time.Minute,
		MaxGangsInFlight:   4,
		PodDeleteQPS:       DefaultPodDeleteQPS,
		Reason:             "node maintenance",
		PollInterval:       time.Second,
		StopTimeout:        15 * time.Minute,
		RestoreTimeout:     15 * time.Minute,
		inf:                inferenceFlags{Surge: !inference.DefaultOptions().NoSurge, MaxColdStart: inference.DefaultOptions().MaxColdStart},
		IOStreams:          streams,
		clock:              clock.RealClock{},
	}
}

func (o *Options) addSelectFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", o.Selector, "Choose nodes by label selector, e.g. gpufleet.dev/rack-set=rs-14 (combined with NODE arguments).")
}

func (o *Options) addProtocolFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Annotation, "annotation", o.Annotation, "Request annotation key (KEY or KEY=requested), e.g. platform.example.com/checkpoint-and-yield=requested; the other protocol keys use its domain as prefix.")
	f.StringVar(&o.ProtocolPrefix, "protocol-prefix", o.ProtocolPrefix, "Prefix of the checkpoint-and-yield annotation keys (default gpufleet.dev/, or the domain of --annotation).")
	f.StringVar(&o.OnTimeout, "on-timeout", o.OnTimeout, "What to do with a gang whose checkpoint does not come (no acknowledgement, deadline or heartbeat passed, failed, declined, or no protocol): stop (stop it anyway), abort (withdraw the request, leave it running, fail its nodes) or wait.")
	f.DurationVar(&o.AckTimeout, "ack-timeout", o.AckTimeout, "How long a gang has to acknowledge a checkpoint request (0: no limit).")
	f.DurationVar(&o.CheckpointDeadline, "checkpoint-deadline", o.CheckpointDeadline, "How long a gang has to report ready-to-stop (0: no deadline).")
	f.DurationVar(&o.HeartbeatTimeout, "heartbeat-timeout", o.HeartbeatTimeout, "Longest silence allowed between a responder's heartbeats (0: not checked).")
	f.IntVar(&o.MaxGangsInFlight, "max-gangs-in-flight", o.MaxGangsInFlight, "Gangs checkpointing or stopping at the same time (0: no limit).")
	f.Float32Var(&o.PodDeleteQPS, "pod-delete-qps", o.PodDeleteQPS, "Requests per second (burst twice that) with which run deletes a stopped gang's pods itself as each of its Jobs is suspended, two per pod (the Job's tracking finalizer, then the pod), each gang through a rate limiter of its own; 0 leaves them to the Job controller, which kube-controller-manager's --kube-api-qps paces.")
	f.StringVar(&o.MaxUnavailableGPUs, "max-unavailable-gpus", o.MaxUnavailableGPUs, "GPUs of the chosen nodes taken out at once, as a number or a percentage (N or P%); the other nodes wait for a later run.")
	f.BoolVar(&o.DeleteEmptyDirData, "delete-emptydir-data", o.DeleteEmptyDirData, "Evict pods with emptyDir volumes (their data is lost).")
	f.BoolVar(&o.Force, "force", o.Force, "Evict pods that no controller recreates.")
	f.StringVar(&o.Reason, "reason", o.Reason, "Reason written into checkpoint requests.")
}

func (o *Options) addRunFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&o.DisableEviction, "disable-eviction", o.DisableEviction, "BREAK-GLASS: delete pods instead of evicting them, ignoring PodDisruptionBudgets. Recorded on each node with who used it.")
	o.dryRun = cli.DryRunFlag{Client: "print the steps the run would take, from what it reads, and change nothing", NoServer: "the steps wait on each gang's checkpoint answer, which no server-side dry run gets"}
	o.dryRun.AddFlags(cmd)
	f.StringVar(&o.RunID, "run-id", o.RunID, "Resume (or name) this run instead of the one recorded on the nodes.")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "Stop after this long, leaving a state the same command resumes (exit 4); 0 waits for ever. Transient API errors (an apiserver restart, throttling, 5xx) are retried until then.")
	f.DurationVar(&o.StopTimeout, "stop-timeout", o.StopTimeout, "How long a stopped gang's pods have to go away.")
	f.DurationVar(&o.EvictionTimeout, "eviction-timeout", o.EvictionTimeout, "How long to keep retrying a refused eviction of one pod (0: until --timeout).")
	f.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "How often states are re-read.")
}

// Complete fills in the client getter and the positional arguments.
func (o *Options) Complete(cg cli.ClientGetter, _ *cobra.Command, args []string) error {
	o.cg = cg
	o.Args = args
	cli.SetQuiet(cg, o.Print.Quiet)
	return nil
}

// Validate checks the flags without touching the network.
func (o *Options) Validate() error {
	if err := o.Print.Validate(); err != nil {
		return err
	}
	if err := o.dryRun.Validate(); err != nil {
		return err
	}
	o.DryRun = o.dryRun.Enabled()
	key := ""
	if o.Annotation != "" {
		k, err := checkpoint.ParseAnnotationFlag(o.Annotation)
		if err != nil {
			return err
		}
		key = k
	}
	keys, err := checkpoint.NewKeys(o.ProtocolPrefix, key)
	if err != nil {
		return err
	}
	o.keys = keys
	if o.onTO, err = gang.ParseOnTimeout(o.OnTimeout); err != nil {
		return err
	}
	if o.budget, err = gang.ParseBudget(o.MaxUnavailableGPUs); err != nil {
		return err
	}
	if o.MaxGangsInFlight < 0 {
		return errors.New("--max-gangs-in-flight must not be negative")
	}
	if o.PodDeleteQPS < 0 {
		return errors.New("--pod-delete-qps must not be negative (0 leaves a stopped gang's pods to the Job controller)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--ack-timeout", o.AckTimeout}, {"--checkpoint-deadline", o.CheckpointDeadline}, {"--heartbeat-timeout", o.HeartbeatTimeout}, {"--timeout", o.Timeout}, {"--eviction-timeout", o.EvictionTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("%s must not be negative", d.name)
		}
	}
	if o.PollInterval <= 0 {
		return errors.New("--poll-interval must be positive")
	}
	if o.Selector != "" {
		if err := cli.ParseSelector(o.Selector); err != nil {
			return err
		}
	}
	return nil
}

func (o *Options) validateNodeChoice() error {
	if len(o.Args) == 0 && o.Selector == "" {
		return cli.NoNodes()
	}
	return nil
}

// drainer builds the pkg/gang drainer from the flags.
func (o *Options) drainer(ctx context.Context, requester string) (*gang.Drainer, error) {
	kube, err := o.cg.Kube()
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	dyn, err := o.cg.Dynamic()
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	d := &gang.Drainer{Kube: kube, Dynamic: dyn, Clock: o.clock, Options: gang.Options{
		RunID:              o.RunID,
		Requester:          requester,
		Reason:             o.Reason,
		Keys:               o.keys,
		Timeouts:           checkpoint.Timeouts{Ack: o.AckTimeout, Heartbeat: o.HeartbeatTimeout},
		CheckpointDeadline: o.CheckpointDeadline,
		OnTimeout:          o.onTO,
		MaxGangsInFlight:   o.MaxGangsInFlight,
		MaxUnavailableGPUs: o.budget,
		DeleteEmptyDirData: o.DeleteEmptyDirData,
		Force:              o.Force,
		DisableEviction:    o.DisableEviction,
		DeleteStoppedPods:  o.PodDeleteQPS > 0,
		DryRun:             o.DryRun,
		PollInterval:       o.PollInterval,
		StopTimeout:        o.StopTimeout,
		EvictionTimeout:    o.EvictionTimeout,
		RestoreTimeout:     o.RestoreTimeout,
	}}
	if o.PodDeleteQPS > 0 {
		d.PodClient = o.podClient()
	}
	installed, err := kueueInstalled(ctx, kube)
	if err != nil {
		// Running as if Kueue were absent would evict a queued gang's
		// ranks one by one.
		return nil, cli.ClusterErr(fmt.Errorf("asking the API server whether Kueue is installed: %w", err))
	}
	if installed {
		kc, err := kueueClient(o.cg)
		if err != nil {
			return nil, cli.UsageErr(err)
		}
		d.Kueue = kc
	}
	return d, nil
}

// DefaultPodDeleteQPS is the --pod-delete-qps default: a 512-rank gang
// sends 1,024 requests, which at 200 per second (burst 400) take about
// 3 s. The API server's priority and fairness still bounds what it takes
// in at once.
const DefaultPodDeleteQPS = 200

// podClient returns the factory of the clients that delete stopped gangs'
// pods: each a clientset with a token bucket of its own at
// --pod-delete-qps (client-go builds one per clientset when the config
// has none), over one shared HTTP client.
func (o *Options) podClient() func() (kubernetes.Interface, error) {
	var (
		once sync.Once
		cfg  *rest.Config
		hc   *http.Client
		err  error
	)
	return func() (kubernetes.Interface, error) {
		once.Do(func() {
			var c *rest.Config
			if c, err = o.cg.ToRESTConfig(); err != nil {
				return
			}
			cfg = rest.CopyConfig(c)
			cfg.QPS, cfg.Burst, cfg.RateLimiter = o.PodDeleteQPS, max(1, int(2*o.PodDeleteQPS)), nil
			if cfg.UserAgent == "" {
				// As the other clients of the plugin name themselves.
				cfg.UserAgent = rest.DefaultKubernetesUserAgent()
			}
			hc, err = rest.HTTPClientFor(cfg)
		})
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfigAndClient(cfg, hc)
	}
}

// kueueClient builds the Kueue clientset. It lives here, not in pkg/cli,
// so that only gang-drain links Kueue's API types.
func kueueClient(cg cli.ClientGetter) (kueueclient.Interface, error) {
	c, err := cg.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kueueclient.NewForConfig(c)
}

// kueueInstalled asks discovery whether the Workload API is served. Only
// a group the server does not know means no; any other error is returned.
func kueueInstalled(_ context.Context, kube kubernetes.Interface) (bool, error) {
	res, err := kube.Discovery().ServerResourcesForGroupVersion("kueue.x-k8s.io/v1beta2")
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range res.APIResources {
		if r.Name == "workloads" {
			return true, nil
		}
	}
	return false, nil
}

// requester names the user running the command, from the API server's
// view of the credentials, falling back to the local user.
func (o *Options) requester(ctx context.Context) string {
	const tool = "kubectl-gang_drain"
	if kube, err := o.cg.Kube(); err == nil {
		if id, err := cli.WhoAmI(ctx, kube); err == nil {
			return id.User + " (" + tool + ")"
		}
	}
	if u := os.Getenv("USER"); u != "" {
		return u + " (" + tool + ")"
	}
	return tool
}

// connectNodes connects to the cluster and resolves the node choice, the
// start of plan and run.
func (o *Options) connectNodes(ctx context.Context) (cli.Metadata, []string, error) {
	md, err := cli.Connect(ctx, o.cg)
	if err != nil {
		return md, nil, err
	}
	nodes, err := o.resolveNodes(ctx, md)
	return md, nodes, err
}

// resolveNodes returns the NODE arguments plus the nodes matching -l.
func (o *Options) resolveNodes(ctx context.Context, md cli.Metadata) ([]string, error) {
	kube, err := o.cg.Kube()
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range o.Args {
		if _, err := kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, cli.Usagef("node %q not found", n)
			}
			return nil, cli.ClassifyClusterErr(err, md, "reading node "+n)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	if o.Selector != "" {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
		if err != nil {
			return nil, cli.ClassifyClusterErr(err, md, "listing nodes")
		}
		var sel []string
		for _, n := range list.Items {
			if !seen[n.Name] {
				seen[n.Name] = true
				sel = append(sel, n.Name)
			}
		}
		sort.Strings(sel)
		out = append(out, sel...)
	}
	if len(out) == 0 {
		return nil, cli.UsageErr(errors.New(cli.NoNodesMatch(o.Selector)))
	}
	return out, nil
}

// finish maps a pkg/gang error to the suite's exit codes.
func finish(ctx context.Context, err error, md cli.Metadata, hint string) error {
	if err == nil {
		return nil
	}
	var ee *cli.ExitError
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, gang.ErrConflict) {
		return cli.WithHint(cli.UsageErr(err), "kubectl gang-drain status")
	}
	// A refused request is exit 3 even when the run is resumable (3 ranks
	// above 4): rerunning does not help until the permission is granted.
	if apierrors.IsForbidden(err) {
		return cli.WithHint(cli.ClusterErr(err), hint)
	}
	if errors.Is(err, gang.ErrIncomplete) || ctx.Err() != nil {
		return cli.WithHint(cli.Incomplete(err), hint)
	}
	return cli.ClassifyClusterErr(err, md, "gang-drain")
}
