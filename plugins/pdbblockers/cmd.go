package pdbblockers

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"
	"k8s.io/utils/clock"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/eviction"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl pdb-blockers`:
// a 30s request timeout so a dead context cannot stall a loop, and enough
// client-side QPS for a few paged lists of a large cluster.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s", QPS: 100, Burst: 200}

var (
	long = templates.LongDesc(`
		Show which pods will block draining the given nodes, and exactly why, before
		and during the drain.

		For every pod on the nodes, pdb-blockers answers whether its eviction would
		succeed now, later (the drain waits, for example for replacement pods to become
		Ready) or never (someone has to change something), reproducing the API server's
		eviction rules: Pending, Succeeded, Failed and terminating pods skip their
		PodDisruptionBudget; a pod that is not Ready is let go under
		unhealthyPodEvictionPolicy AlwaysAllow, or under IfHealthyBudget while the budget
		has enough healthy pods; otherwise the budget's disruptionsAllowed decides. A pod
		selected by more than one PodDisruptionBudget is refused forever (HTTP 500).

		The nodes are drained in the order given, spending each budget as pods are
		evicted, so "waits for replacements" is told from "blocked forever". Blockers
		that never clear: minAvailable equal to the replica count, maxUnavailable 0, a
		budget whose controller failed to sync, several budgets on one pod, an empty
		selector. Others: karpenter.sh/do-not-disrupt on the pod or node, pods without a
		controller (kubectl drain needs --force), emptyDir data (needs
		--delete-emptydir-data), finalizers holding a terminating pod, and
		terminationGracePeriodSeconds longer than --drain-timeout. DaemonSet and mirror
		pods are ignored, as drain ignores them.

		Managed upgrades give up on a blocked drain after their own limit, so set
		--drain-timeout to the one that applies: GKE respects PodDisruptionBudgets for up
		to 1 hour during node upgrades, then evicts anyway; EKS managed node groups retry
		for 15 minutes, then fail the upgrade unless forced; AKS waits
		drainTimeoutInMinutes (30 by default); Karpenter waits forever unless the
		NodePool sets terminationGracePeriod.

		On cordoned nodes (a drain in progress) the FOR column says how long the pod has
		been blocking, counted from the cordon. Each blocker comes with a copy-paste fix.
		With --server-dry-run the first eviction per budget is also sent to the API
		server with dryRun=All, which checks the prediction without evicting anything;
		a dry run spends no budget, so its answer is compared with the pod's prediction
		on its own, and that pod is listed even when it evicts now.

		Exit 1 when a pod blocks: severity blocking when it never clears, warning when
		the drain will wait (--fail-on blocking ignores waits). The command only reads
		nodes, pods and PodDisruptionBudgets: one watch-list stream of each where the
		server and role allow watch, paged lists otherwise; --server-dry-run also needs
		create on pods/eviction. A namespace that may not be read is reported and the rest is
		still checked (exit 3 unless --allow-partial).

		With --contexts or --all-contexts the clusters are checked in parallel and
		reported together (kind PDBBlockersReportList); each fix names its context, and
		the exit code is the worst over them.`)

	example = templates.Examples(`
		# Which pods would block draining these nodes, in this order?
		kubectl pdb-blockers gpu-node-0412 gpu-node-0413

		# A rack set, with the first eviction per budget confirmed by a server-side dry run
		kubectl pdb-blockers -l gpufleet.dev/rack-set=rs-14 --server-dry-run

		# Every node, as JSON, against the EKS managed node group limit
		kubectl pdb-blockers --all-nodes --drain-timeout 15m -o json

		# A stuck drain: what blocks the cordoned nodes right now, and since when
		kubectl pdb-blockers -l gpufleet.dev/rack-set=rs-14 --delete-emptydir-data

		# Gate a script: exit 1 only on blockers that never clear
		kubectl pdb-blockers gpu-node-0412 -q --fail-on blocking && kubectl drain gpu-node-0412 --ignore-daemonsets

		# The GPU pools of every cluster in the kubeconfig, one table with a CONTEXT column
		kubectl pdb-blockers -l nvidia.com/gpu.present=true --all-contexts`)
)

// NewCmd returns the root command of kubectl-pdb_blockers.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	return NewCmdWithClock(cg, streams, clock.RealClock{})
}

// NewCmdWithClock is NewCmd with the clock that ages are judged against
// (a fake one in tests).
func NewCmdWithClock(cg cli.ClientGetter, streams genericiooptions.IOStreams, clk clock.PassiveClock) *cobra.Command {
	o := NewOptions(streams)
	o.clock = clk
	cmd := &cobra.Command{
		Use:               "pdb-blockers [NODE...] [-l SELECTOR] [--all-nodes]",
		Short:             "Show which pods will block a drain, and exactly why",
		Long:              long,
		Example:           example,
		Args:              cobra.ArbitraryArgs,
		SilenceErrors:     true,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl pdb-blockers"},
		RunE:              cli.RunE(cg, o),
		ValidArgsFunction: nodeCompletion(cg),
	}
	cli.SetStatusWords(cmd, eviction.OutcomeStatuses...)
	o.AddFlags(cmd)
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}
