package skew

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kubectl/pkg/util/templates"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	pkgskew "github.com/gpufleet/upgrade-plugins/pkg/skew"
)

// ConfigOptions are the kubeconfig flag defaults of `kubectl skew`: a 30s
// request timeout, and client-side QPS for preflight, which lists some
// sixty resources at once (every kind the removed-APIs gate scans, the
// gates' own reads). At client-go's default of 5 per second with a burst
// of 10 it waited seconds on its own rate limiter with the apiserver idle;
// the apiserver's priority and fairness is what protects it.
var ConfigOptions = cli.ConfigOptions{DefaultTimeout: "30s", NoNamespace: true, QPS: 100, Burst: 200}

var long = templates.LongDesc(`
	Check component versions against the Kubernetes version-skew policy.

	The inventory covers the apiserver (/version, with its emulation and
	minimum compatibility versions when reported), each apiserver,
	controller-manager, scheduler and cloud-controller-manager instance that
	kube-system static pods show (kubeadm; "not visible" on managed control
	planes), every kubelet grouped by node pool, kube-proxy and CoreDNS from
	their workloads' images, other known addons, and the kubectl on PATH.

	Each rule of the policy gives one row: OK, WARN (at the edge: inside the
	policy but exactly at its limit, so the next control-plane upgrade is
	blocked), FAIL (a violation), UNKNOWN, or INFO for inventory-only rows. The support window
	of the control plane's minor is printed in a table of its own: the
	provider's (EKS, AKS standard and extended support) where the embedded
	provider calendar has the minor (--provider-calendar overrides it), else
	the upstream end of life from the embedded release calendar (--calendar
	overrides it); "kubectl skew calendar" prints both. Extended support is
	WARN, past the window's end FAIL. Violations exit 1; --fail-on=warning
	also counts WARN and UNKNOWN. The summary line names every finding that
	decides the exit code: skew violations, the support window and the fleet
	policy.

	Forbidden reads in kube-system are skipped with a note; the rest is still
	reported. The node list is paged and no request is made per node.`)

var example = templates.Examples(`
	# Check the current context against the skew policy
	kubectl skew

	# Save the inventory for a change ticket, then plan the hops to v1.37 from it
	kubectl skew -o yaml > inventory.yaml
	kubectl skew plan -f inventory.yaml --target v1.37

	# One row per cluster, worst first, and the fleet rule N-1
	kubectl skew --all-contexts --policy n-1

	# Script over contexts: exit 1 means findings, 3 means unreachable
	for c in $(kubectl config get-contexts -o name); do kubectl skew --context "$c" -q || echo "$c: $?"; done

	# How many patch releases behind is each component?
	kubectl skew --check-registry`)

// NewCmd returns the root command of kubectl-skew.
func NewCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	return newCmd(cg, streams, defaultDeps())
}

func newCmd(cg cli.ClientGetter, streams genericiooptions.IOStreams, d deps) *cobra.Command {
	d.kubectl = onceKubectl(d.kubectl)
	o := NewOptions(streams)
	o.deps = d
	cmd := &cobra.Command{
		Use:         "skew",
		Short:       "Check component versions against the Kubernetes version-skew policy and plan upgrades",
		Long:        long,
		Example:     example,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl skew"},
		RunE:        cli.RunE(cg, o),
	}
	// The check's words, and ERROR for a context --contexts could not read.
	cli.SetStatusWords(cmd, append(pkgskew.Words, cli.StatusError)...)
	o.AddFlags(cmd)
	cmd.AddCommand(newPlanCmd(cg, streams, d))
	cmd.AddCommand(newPreflightCmd(cg, streams, d), newVerifyCmd(cg, streams, d), newCompatCmd(cg, streams, d), newCalendarCmd(cg, streams))
	cmd.AddCommand(newFleetCmd(cg, streams, d))
	cli.BindFlags(cg, cmd)
	cli.Setup(cmd, streams)
	return cmd
}
