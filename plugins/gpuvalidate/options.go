package gpuvalidate

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

// Options holds the parsed state of `kubectl gpu-validate nodes` and
// `kubectl gpu-validate nccl`.
type Options struct {
	Print  *cli.PrintFlags
	FailOn *cli.FailOnFlag

	Selector       string
	Nodes          []string
	ExpectedGPUs   int
	PoolLabel      string
	KubeletVersion string

	ConfigDrift  bool
	BaselineNode string

	XID      bool
	Since    string
	XidImage string
	// XidCatalogFile replaces the embedded Xid catalog.
	XidCatalogFile string
	// RemovedGatesFile replaces the embedded removed feature gates.
	RemovedGatesFile string

	DCGM          bool
	DCGMImage     string
	DCGMWarnFails bool

	NCCL          bool
	Image         string
	NoResolve     bool
	Launcher      string
	Fabric        string
	RDMAResource  string
	EFADevices    int
	GPUsPerNode   int
	GateSize      string
	Tolerance     string
	MinBusBW      float64
	SaveBaseline  bool
	PrintManifest bool
	Deadline      time.Duration
	Keep          bool

	Timeout  time.Duration
	Parallel int

	ncclOnly  bool
	since     time.Time
	sinceAgo  time.Duration
	gateSize  int64
	tolerance float64
	launcher  nccl.Launcher
	fabric    nccl.Fabric

	xidCatalog *gpucheck.XidCatalog
	gates      *apilifecycle.FeatureGates

	// dryRun is --dry-run of nccl: client prints the manifests, server
	// creates them with dryRun=All.
	dryRun cli.DryRunFlag
	// noResolveSet says --no-resolve was given.
	noResolveSet bool

	// Contexts checks several kubeconfig contexts at once (nodes only).
	Contexts *cli.ContextFlags

	cg        cli.ClientGetter
	namespace string
	clock     clock.Clock
	genericiooptions.IOStreams
}

// NewOptions returns Options with their defaults.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		Print:       cli.NewPrintFlags(),
		FailOn:      cli.NewFailOnFlag(),
		ConfigDrift: true,
		XidImage:    gpucheck.DefaultXidImage,
		DCGMImage:   gpucheck.DefaultDCGMImage,
		Launcher:    string(nccl.LauncherJob),
		GateSize:    "8G",
		Tolerance:   "10%",
		Deadline:    15 * time.Minute,
		Timeout:     20 * time.Minute,
		Parallel:    8,
		clock:       clock.RealClock{},
		IOStreams:   streams,
	}
}

// AddNodeFlags registers the node selection flags.
func (o *Options) AddNodeFlags(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", o.Selector, "Label selector of the nodes to validate (instead of NODE arguments).")
	cmd.Flags().StringVar(&o.PoolLabel, "pool-label", o.PoolLabel, "Node label that names the pool (default: the first of "+strings.Join(gpucheck.PoolLabels, ", ")+", the list kubectl skew uses; a node with none is grouped by its instance type).")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "Stop after this long: checks not finished by then are reported as not evaluated (exit 3) and their pods deleted. It also bounds each check pod and the NCCL job.")
}

// AddContextFlags registers --contexts, --all-contexts and --parallel,
// which counts contexts here as in every plugin.
func (o *Options) AddContextFlags(cmd *cobra.Command) {
	o.Contexts = cli.NewContextFlags()
	o.Contexts.AddFlags(cmd)
}

// AddCheckFlags registers the per-node gate flags of `nodes`.
func (o *Options) AddCheckFlags(cmd *cobra.Command) {
	cmd.Flags().IntVar(&o.ExpectedGPUs, "expected-gpus", o.ExpectedGPUs, "GPUs every node must have allocatable (default: the larger of the nvidia.com/gpu.count label and the majority of the pool's nodes of the same instance type, GPU model and MIG layout).")
	cmd.Flags().StringVar(&o.KubeletVersion, "kubelet-version", o.KubeletVersion, "Fail nodes whose kubelet is not at this version (v1.37.2), or not on this minor (v1.37: any patch).")
	cmd.Flags().BoolVar(&o.ConfigDrift, "config-drift", o.ConfigDrift, "Compare each node's kubelet configuration (configz) with a baseline node; needs get on nodes/proxy.")
	cmd.Flags().StringVar(&o.BaselineNode, "baseline-node", o.BaselineNode, "Node whose kubelet configuration is the reference (default: a node of the same pool on an older kubelet).")
	cmd.Flags().BoolVar(&o.XID, "xid", o.XID, "Read each node's kernel log in a privileged pod (the -n namespace must allow privileged pods) and fail on fatal Xid events.")
	cmd.Flags().StringVar(&o.Since, "since", o.Since, "Kernel log window for --xid: a duration (2h) or an RFC 3339 time (default: from the earlier of the node's boot and its last Ready, so the Xids logged while the driver loads count).")
	cmd.Flags().StringVar(&o.XidImage, "xid-image", o.XidImage, "Image of the --xid pod (needs sh, chroot and dmesg).")
	cmd.Flags().StringVar(&o.XidCatalogFile, "xid-catalog", o.XidCatalogFile, "Xid catalog file (CSV: xid,mnemonic,description,immediate_action,investigatory_action,source_url) instead of the embedded one; see \"kubectl gpu-validate xid-catalog\".")
	_ = cmd.MarkFlagFilename("xid-catalog", "csv")
	cmd.Flags().StringVar(&o.RemovedGatesFile, "removed-gates", o.RemovedGatesFile, "Removed feature gate file (YAML: dataDate, source, gates[name, removedIn, lastStage]) instead of the embedded one; see \"kubectl gpu-validate feature-gates\".")
	_ = cmd.MarkFlagFilename("removed-gates", "yaml", "yml", "json")
	cmd.Flags().BoolVar(&o.DCGM, "dcgm", o.DCGM, "Run DCGM level-1 diagnostics (dcgmi diag -r 1, with -j and as the table) in a privileged pod with all of each node's GPUs (the GPUs must be free).")
	cmd.Flags().StringVar(&o.DCGMImage, "dcgm-image", o.DCGMImage, "Image of the --dcgm pod.")
	cmd.Flags().BoolVar(&o.DCGMWarnFails, "dcgm-warn-fails", o.DCGMWarnFails, "Fail nodes on DCGM's own warnings (persistence mode off, CUDA environment variables, graphics processes, a GPU count mismatch), which otherwise warn and name the fix; what DCGM fails always fails.")
	cmd.Flags().BoolVar(&o.NCCL, "nccl", o.NCCL, "Run the NCCL all-reduce smoke test across the nodes that passed the other gates.")
	cmd.Flags().IntVar(&o.Parallel, "max-pods-in-flight", o.Parallel, "How many per-node check pods (--xid, --dcgm) run at once. (Before, --parallel; --parallel now counts contexts, as in every plugin.)")
}

// AddNCCLFlags registers the NCCL test flags; full adds the ones only the
// nccl command has.
func (o *Options) AddNCCLFlags(cmd *cobra.Command, full bool) {
	cmd.Flags().StringVar(&o.Image, "image", o.Image, "nccl-tests image (all_reduce_perf built with MPI, Open MPI, and OpenSSH for the job and jobset launchers).")
	cmd.Flags().BoolVar(&o.NoResolve, "no-resolve", o.NoResolve, "Use --image as given instead of resolving it to a digest (a registry lookup). --print-manifest and --dry-run=client use it as given unless --no-resolve=false asks for the digest.")
	cmd.Flags().StringVar(&o.Launcher, "launcher", o.Launcher, "How to start the test: job (Indexed Job and headless Service), jobset or mpijob (MPIJob v2beta1).")
	cmd.Flags().StringVar(&o.Fabric, "fabric", o.Fabric, "Fabric profile: ib, roce, efa or tcp (GKE GPUDirect-TCPX/TCPXO is not offered: use Google's published nccl-test manifest). Default: the pool baseline's fabric, else efa where every node advertises vpc.amazonaws.com/efa, ib where every node advertises an rdma/ device, else tcp.")
	cmd.Flags().Float64Var(&o.MinBusBW, "min-busbw", o.MinBusBW, "Absolute floor of the gated bus bandwidth in GB/s: below it fails, with or without a baseline (0: none; without a baseline and a floor the result only warns).")
	cmd.Flags().StringVar(&o.RDMAResource, "rdma-resource", o.RDMAResource, "RDMA device resource for the ib and roce fabrics (default rdma/rdma_shared_device_a).")
	cmd.Flags().IntVar(&o.EFADevices, "efa-devices", o.EFADevices, "vpc.amazonaws.com/efa devices per worker for the efa fabric (default 32).")
	cmd.Flags().StringVar(&o.GateSize, "gate-size", o.GateSize, "Message size whose bus bandwidth is gated (also the top of the sweep).")
	cmd.Flags().StringVar(&o.Tolerance, "tolerance", o.Tolerance, "How far below the pool's baseline the bus bandwidth may fall.")
	cmd.Flags().BoolVar(&o.SaveBaseline, "save-baseline", o.SaveBaseline, "Store the measured bus bandwidth as the pool's baseline when the run is clean.")
	cmd.Flags().DurationVar(&o.Deadline, "deadline", o.Deadline, "activeDeadlineSeconds of the NCCL job.")
	cmd.Flags().BoolVar(&o.Keep, "keep", o.Keep, "Leave the test's objects and pods in place for debugging.")
	if full {
		cmd.Flags().IntVar(&o.GPUsPerNode, "gpus-per-node", o.GPUsPerNode, "GPUs per worker (default: the nodes' allocatable nvidia.com/gpu; with NODE arguments it allows --print-manifest offline).")
		cmd.Flags().BoolVar(&o.PrintManifest, "print-manifest", o.PrintManifest, "Print the test's manifests as YAML instead of running it (the same as --dry-run=client).")
		o.dryRun = cli.DryRunFlag{
			Client: "print the test's manifests as YAML, as --print-manifest does",
			Server: "send each of the test's objects to the API server as a create with dryRun=All, so admission, quota and Pod Security judge them, and run nothing",
		}
		o.dryRun.AddFlags(cmd)
	}
	_ = cmd.RegisterFlagCompletionFunc("launcher", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"job", "jobset", "mpijob"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = cmd.RegisterFlagCompletionFunc("fabric", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"ib", "roce", "efa", "tcp"}, cobra.ShellCompDirectiveNoFileComp
	})
}

// Complete reads the arguments and the namespace.
func (o *Options) Complete(cg cli.ClientGetter, cmd *cobra.Command, args []string) error {
	o.cg = cg
	o.noResolveSet = cmd.Flags().Changed("no-resolve")
	o.Nodes = args
	cli.SetQuiet(cg, o.Print.Quiet)
	ns, _, err := cg.Namespace()
	if err != nil {
		return cli.KubeconfigErr(err)
	}
	if ns == "" {
		ns = "default"
	}
	o.namespace = ns
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
	switch o.dryRun.Strategy() {
	case cli.DryRunClient:
		o.PrintManifest = true
	case cli.DryRunServer:
		if o.PrintManifest {
			return fmt.Errorf("--print-manifest prints the manifests; --dry-run=server sends them to the server: choose one")
		}
		if o.SaveBaseline {
			return fmt.Errorf("--save-baseline cannot be combined with --dry-run")
		}
	}
	if err := o.FailOn.Validate(); err != nil {
		return err
	}
	if o.Contexts != nil {
		if err := o.Contexts.Validate(cli.ContextFlagSet(o.cg)); err != nil {
			return err
		}
	}
	if len(o.Nodes) == 0 && o.Selector == "" {
		return cli.NoNodes()
	}
	if len(o.Nodes) > 0 && o.Selector != "" {
		return fmt.Errorf("pass NODE arguments or -l, not both")
	}
	if o.Selector != "" {
		if err := cli.ParseSelector(o.Selector); err != nil {
			return err
		}
	}
	if o.ExpectedGPUs < 0 {
		return fmt.Errorf("--expected-gpus must not be negative")
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout must be positive")
	}
	if o.Since != "" {
		if d, err := time.ParseDuration(o.Since); err == nil && d > 0 {
			o.sinceAgo = d
		} else if t, err := time.Parse(time.RFC3339, o.Since); err == nil {
			o.since = t
		} else {
			return fmt.Errorf("invalid --since %q: want a duration such as 2h or an RFC 3339 time", o.Since)
		}
	}
	o.xidCatalog = gpucheck.DefaultXidCatalog()
	if o.XidCatalogFile != "" {
		if !o.XID {
			return fmt.Errorf("--xid-catalog only applies with --xid")
		}
		c, err := readXidCatalog(o.XidCatalogFile)
		if err != nil {
			return err
		}
		o.xidCatalog = c
	}
	if o.RemovedGatesFile != "" {
		if !o.ConfigDrift {
			return fmt.Errorf("--removed-gates only applies with --config-drift")
		}
		fg, err := readRemovedGates(o.RemovedGatesFile)
		if err != nil {
			return err
		}
		o.gates = fg
	}
	if o.Since != "" && !o.XID {
		return fmt.Errorf("--since only applies with --xid")
	}
	if o.BaselineNode != "" && !o.ConfigDrift {
		return fmt.Errorf("--baseline-node only applies with --config-drift")
	}
	if o.NCCL {
		if o.Image == "" {
			return fmt.Errorf("the NCCL test needs --image (an nccl-tests image)")
		}
		var err error
		if o.launcher, err = nccl.ParseLauncher(o.Launcher); err != nil {
			return err
		}
		if o.Fabric != "" {
			if o.fabric, err = nccl.ParseFabric(o.Fabric); err != nil {
				return err
			}
		}
		if o.MinBusBW < 0 {
			return fmt.Errorf("--min-busbw must not be negative")
		}
		if o.gateSize, err = nccl.ParseBytes(o.GateSize); err != nil {
			return fmt.Errorf("--gate-size: %w", err)
		}
		if o.tolerance, err = nccl.ParseTolerance(o.Tolerance); err != nil {
			return fmt.Errorf("--tolerance: %w", err)
		}
		if o.Deadline < time.Minute {
			return fmt.Errorf("--deadline must be at least 1m")
		}
		if o.GPUsPerNode < 0 {
			return fmt.Errorf("--gpus-per-node must not be negative")
		}
	} else if o.Image != "" || o.SaveBaseline {
		return fmt.Errorf("--image and --save-baseline need --nccl")
	}
	if o.PrintManifest {
		// Printing works offline: no registry lookup unless asked for.
		if !o.noResolveSet {
			o.NoResolve = true
		}
		if o.SaveBaseline {
			return fmt.Errorf("--save-baseline cannot be combined with --print-manifest")
		}
		if o.Print.Output != cli.OutputTable && o.Print.Output != cli.OutputYAML {
			return fmt.Errorf("--print-manifest prints YAML; -o %s does not apply", o.Print.Output)
		}
	}
	if o.Parallel <= 0 {
		return fmt.Errorf("--max-pods-in-flight must be positive")
	}
	return nil
}
