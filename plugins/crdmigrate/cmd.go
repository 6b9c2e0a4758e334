package crdmigrate

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl crd-migrate`:
// a 30s timeout per request (a dead context cannot stall a loop; the run
// retries timed-out requests), and no -n, since CRDs are cluster-wide.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s", NoNamespace: true}

var rootLong = templates.LongDesc(`
	Report the storage state of CustomResourceDefinitions and rewrite their
	stored objects to the storage version, then trim status.storedVersions.

	Before a version can be dropped from a CRD's spec.versions, every object
	stored at it must be rewritten at the new storage version and the old
	version removed from status.storedVersions. Without arguments or with
	"status", the command only reports; "run" migrates.`)

var rootExample = templates.Examples(`
  # Storage state of every CRD (the default subcommand is status)
  kubectl crd-migrate

  # Rewrite the stored objects of one CRD, resumably, then trim storedVersions
  kubectl crd-migrate run workloads.kueue.x-k8s.io

  # Check every context of the kubeconfig
  for c in $(kubectl config get-contexts -o name); do
    kubectl crd-migrate status --context "$c" -q || echo "$c needs a migration"
  done`)

var statusLong = templates.LongDesc(`
	Show, for each CRD (all of them by default), its storage version, served
	and deprecated versions, status.storedVersions, the number of stored
	objects (paged metadata lists), the conversion strategy and the health
	of its conversion webhook and of the validating and mutating webhooks
	that an update of its objects goes through (ready endpoints behind their
	Services), with a status: OK (nothing to do), WARN (storedVersions lists
	an old version: a migration is needed) or BLOCKED (a webhook the
	migration needs is down).

	The exit code is 1 when a CRD is at or above --fail-on: warning (the
	default) counts WARN and BLOCKED, blocking only BLOCKED.`)

var statusExample = templates.Examples(`
  # Every CRD
  kubectl crd-migrate status

  # Two CRDs, as JSON
  kubectl crd-migrate status workloads.kueue.x-k8s.io jobsets.jobset.x-k8s.io -o json

  # Fail only on blocked CRDs, in a script
  kubectl crd-migrate status --fail-on blocking -q`)

var runLong = templates.LongDesc(`
	Rewrite every stored object of the named CRDs (or, with --all, of every
	CRD whose storedVersions lists an old version) so that the apiserver
	stores it at the current storage version, then set status.storedVersions
	to the storage version alone through the /status subresource and read it
	back. storedVersions is never trimmed after a partial run.

	A pre-flight check runs first and refuses (exit 1, nothing changed) when
	the conversion webhook or a validating or mutating webhook with
	failurePolicy Fail that the writes go through has no ready endpoints, or
	when a server-side dry-run update of one object fails.

	--method auto (the default) uses the in-tree StorageVersionMigration API
	(storagemigration.k8s.io/v1, or v1beta1 on older servers) when it is
	served and kube-controller-manager runs its controller, and the
	client-side loop otherwise. The client-side loop lists 500 objects per
	page at the storage version and updates each one as read, with its
	resourceVersion: the apiserver re-encodes it at the storage version and
	skips the etcd write when the bytes are already identical, so objects
	already migrated cost nothing. After every page the continue token and
	the counters are saved in a ConfigMap (namespace --checkpoint-namespace,
	default kube-system, which only administrators can write), so running the
	same command again after an interruption, a failure or a kill resumes
	where it stopped. --qps, --burst and --workers apply to the client-side
	loop; transient errors (throttling, 5xx, an apiserver restart) are
	retried with backoff, honouring Retry-After, up to --retries times.

	A webhook that fails during the run stops it on the object it failed on,
	and the command exits 4: fix the webhook and run it again to resume.

	--dry-run counts the objects and estimates the time at --qps, and runs
	the pre-flight checks (whose write is a server-side dry run); it changes
	nothing.`)

var runExample = templates.Examples(`
  # Migrate one CRD
  kubectl crd-migrate run workloads.kueue.x-k8s.io

  # What would migrating every CRD that needs it cost at 200 requests per second?
  kubectl crd-migrate run --all --dry-run --qps 200

  # Force the client-side loop, faster
  kubectl crd-migrate run clusterpolicies.nvidia.com --method client --qps 200 --workers 16

  # Migrate on every cluster; exit 4 means "run again to resume"
  for c in $(kubectl config get-contexts -o name); do
    kubectl crd-migrate run --all --context "$c" || echo "$c: exit $?"
  done`)

// NewCmd returns the root command of kubectl-crd_migrate. Without a
// subcommand it runs status.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	rootStatus := NewStatusOptions(streams)
	cmd := &cobra.Command{
		Use:               "crd-migrate [CRD...]",
		Short:             "Rewrite stored custom resources to the storage version and trim storedVersions",
		Long:              rootLong,
		Example:           rootExample,
		Args:              cobra.ArbitraryArgs,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl crd-migrate"},
		ValidArgsFunction: completeCRDs(cg),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cg, rootStatus, cmd, args)
		},
	}
	cli.SetStatusWords(cmd, statusWords...)
	rootStatus.AddFlags(cmd)
	cmd.AddCommand(newStatusCmd(cg, streams), newRunCmd(cg, streams))
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}

func runStatus(cg cli.ClientGetter, o *StatusOptions, cmd *cobra.Command, args []string) error {
	if err := o.Complete(cg, cmd, args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return cli.UsageErr(err)
	}
	cmd.SilenceUsage = true
	return o.Run(cmd.Context())
}

func newStatusCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewStatusOptions(streams)
	cmd := &cobra.Command{
		Use:               "status [CRD...]",
		Short:             "Report the storage state of CRDs and whether they need a migration",
		Long:              statusLong,
		Example:           statusExample,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeCRDs(cg),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cg, o, cmd, args)
		},
	}
	cli.SetStatusWords(cmd, statusWords...)
	o.AddFlags(cmd)
	return cmd
}

func newRunCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := NewRunOptions(streams)
	cmd := &cobra.Command{
		Use:               "run (CRD... | --all)",
		Short:             "Rewrite every stored object at the storage version, then trim storedVersions",
		Long:              runLong,
		Example:           runExample,
		Args:              cobra.ArbitraryArgs,
		ValidArgsFunction: completeCRDs(cg),
		RunE:              cli.RunE(cg, o),
	}
	// The run's words, and the dry run's (the status words).
	cli.SetStatusWords(cmd, cli.StatusOK, cli.StatusDone, cli.StatusWarn, cli.StatusBlocked, cli.StatusFail, cli.StatusError)
	o.AddFlags(cmd)
	return cmd
}
