package gangdrain

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl gang-drain`:
// no request timeout, since a drain waits on purpose; kubectl's own request
// rate (50 QPS, burst 300) rather than client-go's 5 QPS, at which the node
// records and evictions of a rack set queued behind the client's limiter.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "0", NoNamespace: true, QPS: 50, Burst: 300}

// ReadOnlyRequestTimeout is the --request-timeout default of plan and
// status, which only read: the same 30s as every read-only command of the
// suite, so a dead context cannot stall a loop.
const ReadOnlyRequestTimeout = "30s"

var (
	rootLong = templates.LongDesc(`
		Drain GPU nodes at a checkpoint boundary, stopping training gangs as a unit.

		A per-node drain evicts one rank and the whole gang restarts from an old
		checkpoint. gang-drain instead cordons the nodes, asks each gang with ranks
		on them to checkpoint (the checkpoint-and-yield protocol, see
		docs/checkpoint-and-yield.md), stops the whole gang together once it is
		ready (Kueue: Workload spec.active=false, so Kueue requeues it; otherwise
		suspend the JobSet or Job, or delete a bare pod group), then evicts the
		remaining pods honouring PodDisruptionBudgets. Its state lives in
		annotations on the nodes and on each gang's root object: status shows any
		run from any shell, running the same command again resumes, and restore
		undoes exactly what the run did.`)

	rootExample = templates.Examples(`
		# What a drain of a rack set would do, read-only
		kubectl gang-drain plan -l gpufleet.dev/rack-set=rs-14

		# Drain it: cordon, checkpoint-and-yield, stop gangs, evict the rest
		kubectl gang-drain run -l gpufleet.dev/rack-set=rs-14

		# After the upgrade: uncordon and readmit what that run stopped
		kubectl gang-drain restore gd-20260102-030405-ab12

		# Every run in every context
		for c in $(kubectl config get-contexts -o name); do kubectl gang-drain status --context "$c"; done`)
)

// NewCmd returns the root command of kubectl-gang_drain.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "gang-drain",
		Short:         "Drain GPU nodes at a checkpoint boundary, stopping training gangs as a unit",
		Long:          rootLong,
		Example:       rootExample,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gang-drain"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newPlanCmd(cg, streams), newRunCmd(cg, streams), newStatusCmd(cg, streams), newRestoreCmd(cg, streams))
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}

func runE(cg cli.ClientGetter, o *Options, run func(*cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cg, cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return cli.UsageErr(err)
		}
		cmd.SilenceUsage = true
		return run(cmd)
	}
}

func newPlanCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "plan [NODE...] [-l SELECTOR]",
		Short: "Show, read-only, the gangs on the nodes and what a drain would do",
		Long: templates.LongDesc(`
			Show, read-only, what draining the nodes would do: each gang with ranks on
			them (its pods on other nodes included), its GPUs and ranks in total and on
			the nodes, whether it speaks checkpoint-and-yield, the age of its last
			checkpoint, the GPU-hours a plain drain would lose against checkpoint-and-yield,
			the PodDisruptionBudget and other blockers of the remaining pods, and the
			steps run would take. Exit 1 when a gang cannot be stopped as a unit or a
			pod can never be evicted.

			With --inference, the plan of an inference pool instead: the model
			Deployments on the nodes with their replicas, PodDisruptionBudgets and
			weight bytes, the surge the free GPUs of the same product outside the pool
			allow, and the waves with the cold start of each (weight bytes over the
			hydrate bandwidth of their source), every model's Ready replicas at every
			step and the ETA. Exit 1 when the plan is refused: a step would take a model
			below its PodDisruptionBudget or --min-serving, or an input is missing.`),
		Example: templates.Examples(`
			kubectl gang-drain plan gpu-node-0412 gpu-node-0413
			kubectl gang-drain plan -l gpufleet.dev/rack-set=rs-14 -o yaml
			kubectl gang-drain plan --inference -l cloud.google.com/gke-nodepool=h100-serve --hydrate-bandwidth object-store=1250M/s --min-serving 0.75`),
		RunE: runE(cg, o, func(cmd *cobra.Command) error {
			if err := o.validateNodeChoice(); err != nil {
				return cli.UsageErr(err)
			}
			if err := o.validateInference(cmd); err != nil {
				return cli.UsageErr(err)
			}
			if o.inf.Inference {
				return o.RunInferencePlan(cmd.Context())
			}
			return o.RunPlan(cmd.Context())
		}),
	}
	// The pods' table: OK shows with -o wide only.
	cli.SetStatusWords(cmd, cli.StatusOK, cli.StatusWait, cli.StatusUnknown, cli.StatusBlocked)
	o.Print.AddFlags(cmd)
	o.addSelectFlags(cmd)
	o.addProtocolFlags(cmd)
	o.addInferenceFlags(cmd)
	cli.DefaultRequestTimeout(cmd, ReadOnlyRequestTimeout)
	return cmd
}

func newRunCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "run [NODE...] [-l SELECTOR]",
		Short: "Drain the nodes: cordon, checkpoint-and-yield, stop gangs as units, evict the rest",
		Long: templates.LongDesc(`
			Drain the nodes. The steps are: cordon every node (recording whether it was
			cordoned before); ask each gang with ranks on them to checkpoint and wait for
			ready-to-stop (--on-timeout decides what happens when it does not come);
			stop each gang as one unit (Kueue: Workload spec.active=false, never a
			suspend of a Kueue-managed job; otherwise suspend the JobSet or Job, or
			delete a bare pod group together) and wait until its pods are gone,
			including those on other nodes; then evict the remaining pods through the
			eviction API (PodDisruptionBudgets honoured, Retry-After respected,
			DaemonSet and mirror pods left alone).

			Progress goes to stderr, one line per state change. The run's state is
			kept in the cluster: Ctrl-C, a lost connection or --timeout leave a state
			that running the same command again completes (exit 4).

			With --inference the nodes are an inference pool: run refuses a plan that
			plan --inference refuses (exit 1, nothing changed); otherwise it cordons
			every node, scales the model Deployments up by the planned surge (recorded
			on each, so that restore undoes exactly that), drains the waves, each only
			once the replicas the previous one displaced are Ready elsewhere (weights
			loaded) and every model keeps its floor, and scales the surge back.`),
		Example: templates.Examples(`
			kubectl gang-drain run -l gpufleet.dev/rack-set=rs-14 --checkpoint-deadline 20m --on-timeout abort
			kubectl gang-drain run gpu-node-0412 --dry-run
			kubectl gang-drain run -l gpufleet.dev/rack-set=rs-14 --annotation platform.example.com/checkpoint-and-yield=requested
			kubectl gang-drain run --inference -l cloud.google.com/gke-nodepool=h100-serve --hydrate-bandwidth object-store=1250M/s --min-serving 0.75`),
		RunE: runE(cg, o, func(cmd *cobra.Command) error {
			if err := o.validateNodeChoice(); err != nil {
				return cli.UsageErr(err)
			}
			if err := o.validateInference(cmd); err != nil {
				return cli.UsageErr(err)
			}
			if o.inf.Inference {
				return o.RunInference(cmd.Context())
			}
			return o.RunDrain(cmd.Context())
		}),
	}
	o.Print.AddFlags(cmd)
	o.addSelectFlags(cmd)
	o.addProtocolFlags(cmd)
	o.addRunFlags(cmd)
	o.addInferenceFlags(cmd)
	return cmd
}

func newStatusCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "status [RUN]",
		Short: "Show gang-drain runs recorded in the cluster",
		Long: templates.LongDesc(`
			Show the gang-drain runs recorded on the cluster's nodes, from any shell:
			per node its state and whether it was cordoned before, per gang how it was
			stopped and its checkpoint answer.`),
		Example: templates.Examples(`
			kubectl gang-drain status
			kubectl gang-drain status gd-20260102-030405-ab12 -o json`),
		Args: cli.MaximumArgs(1),
		// It prints what the nodes record, a failed node included, and
		// judges nothing: the run that failed returned its own exit code.
		Annotations: map[string]string{cli.NoFindingsAnnotation: "true"},
		RunE: runE(cg, o, func(cmd *cobra.Command) error {
			return o.RunStatus(cmd.Context())
		}),
	}
	o.Print.AddFlags(cmd)
	cmd.Flags().StringVar(&o.ProtocolPrefix, "protocol-prefix", o.ProtocolPrefix, "Prefix of the checkpoint-and-yield annotation keys.")
	cli.DefaultRequestTimeout(cmd, ReadOnlyRequestTimeout)
	return cmd
}

func newRestoreCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:   "restore RUN|NODE...",
		Short: "Undo a run after the upgrade: uncordon and readmit what it stopped",
		Long: templates.LongDesc(`
			Undo a run after the upgrade. Uncordons only the nodes the run cordoned
			(a node cordoned before the run stays cordoned), then reactivates (Kueue
			spec.active=true) or unsuspends only the gangs the run stopped, each only
			once schedulable GPU capacity exists for it, and watches Kueue readmit
			them (Requeued, Admitted, pods Ready) so that no gang falls into a
			PodsReadyTimeout loop on still-cordoned nodes.`),
		Example: templates.Examples(`
			kubectl gang-drain restore gd-20260102-030405-ab12
			kubectl gang-drain restore gpu-node-0412 --dry-run`),
		Args: cli.MinimumArgs(1),
		RunE: runE(cg, o, func(cmd *cobra.Command) error {
			return o.RunRestore(cmd.Context())
		}),
	}
	o.Print.AddFlags(cmd)
	f := cmd.Flags()
	o.dryRun = cli.DryRunFlag{Client: "print what would be uncordoned and readmitted, and change nothing", NoServer: "readmission waits on Kueue, which no server-side dry run reaches"}
	o.dryRun.AddFlags(cmd)
	f.DurationVar(&o.RestoreTimeout, "restore-timeout", o.RestoreTimeout, "How long to watch readmission before giving up (exit 4; run restore again to keep watching).")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "Stop after this long, leaving a state restore resumes (exit 4); 0 waits for ever. Transient API errors (an apiserver restart, throttling, 5xx) are retried until then.")
	f.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "How often states are re-read.")
	f.StringVar(&o.RunID, "run-id", o.RunID, "Only restore nodes of this run.")
	f.BoolVar(&o.inf.Inference, "inference", o.inf.Inference, "Also scale back the model Deployments the run surged (found without it when the run's nodes record an --inference run; needed when a provider replaced them).")
	return cmd
}
