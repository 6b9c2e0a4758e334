package gpuvalidate

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl gpu-validate`.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s"}

var rootLong = templates.LongDesc(`
	Post-upgrade gates for GPU nodes. A node that says Ready with seven of its
	eight GPUs is worse than one that fails, so every wave of an upgrade is
	checked before the next one starts: readiness, kubelet version, the exact
	GPU count, kubelet configuration drift, and on request fatal Xid events,
	DCGM level-1 diagnostics and an NCCL all-reduce against the pool's
	baseline bus bandwidth.`)

var rootExample = templates.Examples(`
	# Gate a wave of upgraded nodes
	kubectl gpu-validate nodes -l cloud.google.com/gke-nodepool=h100-a --expected-gpus 8

	# Everything, including the NCCL smoke test against the pool's baseline
	kubectl gpu-validate nodes gpu-17 gpu-18 --xid --dcgm --nccl --image ghcr.io/example/nccl-tests:2.16

	# Print the NCCL test for a runbook
	kubectl gpu-validate nccl gpu-17 gpu-18 --image ghcr.io/example/nccl-tests:2.16 --print-manifest`)

// NewCmd returns the root command of kubectl-gpu_validate.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "gpu-validate",
		Short:         "Post-upgrade gates for GPU nodes: GPU count, kubelet config drift, XID, DCGM, NCCL",
		Long:          rootLong,
		Example:       rootExample,
		Args:          cobra.NoArgs,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl gpu-validate"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(newNodesCmd(cg, streams), newNCCLCmd(cg, streams), newXidCatalogCmd(cg, streams), newFeatureGatesCmd(cg, streams))
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}

var nodesLong = templates.LongDesc(`
	Validate GPU nodes after an upgrade: one verdict per node (PASS, WARN or
	FAIL) with its reasons, and a summary of the wave.

	Always checked: the Ready condition and kubelet version; the GPU count
	(allocatable nvidia.com/gpu against --expected-gpus, else the larger
	of the node's nvidia.com/gpu.count label and the majority of the pool's
	nodes of its instance type, GPU model and MIG layout: the label counts
	the GPUs the driver still sees), telling missing GPUs (capacity short), unhealthy GPUs (allocatable short) and a device
	plugin that advertises nothing apart, counting DRA devices of driver
	gpu.nvidia.com in ResourceSlices and reporting MIG layouts without failing
	them; and kubelet configuration drift against a node of the same pool on
	an older kubelet (or --baseline-node), read from
	/api/v1/nodes/NAME/proxy/configz (needs get on nodes/proxy).

	Opt-in: --xid runs a privileged pod per node that reads the kernel log
	from the node's boot (or its last Ready, when earlier) and fails on fatal Xid codes; --dcgm runs
	"dcgmi diag -r 1" (with -j and as the table) with all the node's GPUs
	and fails every test DCGM itself failed, whatever the severity, while
	DCGM's own warnings warn and name the fix (--dcgm-warn-fails fails
	them); --nccl runs an all-reduce
	across the nodes and gates the bus bandwidth at one large size against the
	pool's baseline in ConfigMap gpu-validate-nccl-baselines.`)

var nodesExample = templates.Examples(`
	# Gate a wave by label, 8 GPUs per node
	kubectl gpu-validate nodes -l gpufleet.dev/wave=3 --expected-gpus 8

	# Compare kubelet config with a known-good node and read the kernel log
	kubectl gpu-validate nodes gpu-17 --baseline-node gpu-02 --xid --since 2h

	# Record the pool's NCCL baseline on a known-good wave
	kubectl gpu-validate nodes -l pool=h100-a --nccl --image ghcr.io/example/nccl-tests:2.16 --save-baseline -n gpu-validate

	# The same pool in every context of the kubeconfig, one report
	kubectl gpu-validate nodes -l pool=h100-a --all-contexts --expected-gpus 8`)

func newNodesCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	cmd := &cobra.Command{
		Use:     "nodes (NODE... | -l SELECTOR) [flags]",
		Short:   "Gate a wave of upgraded GPU nodes",
		Long:    nodesLong,
		Example: nodesExample,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, gpucheck.Words...)
	o.AddNodeFlags(cmd)
	o.AddContextFlags(cmd)
	o.AddCheckFlags(cmd)
	o.AddNCCLFlags(cmd, false)
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	return cmd
}

var ncclLong = templates.LongDesc(`
	Run (or print) the NCCL all-reduce smoke test on a set of GPU nodes: one
	worker per node with all its GPUs, pinned to exactly those nodes, /dev/shm
	in memory, IPC_LOCK, no retries and a deadline, deleted afterwards. The
	image is resolved to a digest first so every node runs the same bits.

	--print-manifest (or --dry-run=client) prints the manifests offline when
	NODE arguments and --gpus-per-node are given, with --image as written
	(--no-resolve=false looks the digest up), and with no private key: the
	job and jobset launchers' SSH Secret is left out and a header comment
	gives the commands that create it when the manifests are applied (the
	mpijob launcher needs none; the MPI operator makes its own).
	--dry-run=server creates every object with dryRun=All instead.

	The bus bandwidth at one large message size (--gate-size, 8G) is compared
	with the pool's baseline, and fails when the run's GPUs per node or
	fabric are not the baseline's, or it runs on one node against a
	baseline of several or the other way (another shape measures something
	else; another count of several nodes is compared, with a warning, as
	nccl-tests corrects bus bandwidth for the rank count); --min-busbw sets an absolute floor, with or without a baseline
	(without either the result only warns). Any #wrong or out-of-bounds
	value fails whatever the bandwidth. --save-baseline records the measured
	value as the pool's baseline when the run is clean. Without --fabric
	the test runs over the baseline's fabric, else efa or ib where every
	node advertises vpc.amazonaws.com/efa or an rdma/ device, else tcp
	(which cannot see a broken IB or EFA fabric); a baseline measured over
	tcp on nodes that have such a fabric is not compared (the run goes
	over the fabric: save a baseline of it); efa forces NCCL onto the
	OFI plugin (NCCL_NET), so a plugin that does not load fails the run
	instead of falling back to sockets.`)

var ncclExample = templates.Examples(`
	# Print the manifests for a runbook or GitOps (JobSet launcher, InfiniBand)
	kubectl gpu-validate nccl gpu-17 gpu-18 --image ghcr.io/example/nccl-tests:2.16 \
	  --launcher jobset --fabric ib --gpus-per-node 8 --print-manifest

	# Run it and gate against the pool's baseline with 5% tolerance
	kubectl gpu-validate nccl -l pool=h100-a --image ghcr.io/example/nccl-tests:2.16 --tolerance 5% -n gpu-validate`)

func newNCCLCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewOptions(streams)
	o.ncclOnly = true
	o.NCCL = true
	o.ConfigDrift = false
	cmd := &cobra.Command{
		Use:     "nccl (NODE... | -l SELECTOR) --image IMAGE [flags]",
		Short:   "Run or print the NCCL all-reduce smoke test",
		Long:    ncclLong,
		Example: ncclExample,
		RunE:    cli.RunE(cg, o),
	}
	cli.SetStatusWords(cmd, gpucheck.Words...)
	o.AddNodeFlags(cmd)
	o.AddNCCLFlags(cmd, true)
	o.Print.AddFlags(cmd)
	o.FailOn.AddFlags(cmd)
	return cmd
}
