package cli

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/spf13/cobra"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClientGetter is the narrow interface plugins use to reach one cluster. In
// production it wraps genericclioptions.ConfigFlags; tests use
// TestClientGetter with fake clientsets.
type ClientGetter interface {
	genericclioptions.RESTClientGetter

	// Kube returns the typed Kubernetes clientset.
	Kube() (kubernetes.Interface, error)
	// Dynamic returns a dynamic client.
	Dynamic() (dynamic.Interface, error)
	// Discovery returns a discovery client.
	Discovery() (discovery.DiscoveryInterface, error)
	// APIExtensions returns the CustomResourceDefinition clientset.
	APIExtensions() (apiextclient.Interface, error)

	// Namespace returns the namespace from -n or the kubeconfig context, and
	// whether -n was given explicitly.
	Namespace() (string, bool, error)
	// Metadata names the context and server for reports.
	Metadata() Metadata
	// Contexts lists every context in the kubeconfig, sorted.
	Contexts() ([]string, error)
	// ForContext returns a getter for another context of the same kubeconfig.
	ForContext(name string) ClientGetter
}

// ConfigOptions tune the production ClientGetter.
type ConfigOptions struct {
	// DefaultTimeout is the --request-timeout default ("30s" for read-only
	// checks, so a dead context cannot stall a loop; "0" for none).
	DefaultTimeout string
	// NoNamespace hides -n for plugins where a namespace makes no sense.
	NoNamespace bool
	// QPS and Burst for the REST client (0 keeps client-go's defaults).
	QPS   float32
	Burst int
}

type configGetter struct {
	flags   *genericclioptions.ConfigFlags
	opts    ConfigOptions
	streams genericiooptions.IOStreams
	quiet   bool

	// shared is set on a getter ForContext made: its client config comes
	// from the kubeconfig files its parent's fan-out loaded once.
	shared *sharedKubeconfig
	ccOnce sync.Once
	cc     clientcmd.ClientConfig
	// ownShared is what the contexts reached from this getter share.
	sharedOnce sync.Once
	ownShared  *sharedKubeconfig
}

// NewClientGetter returns the production ClientGetter for a plugin. Its
// AddFlags registers the kubeconfig flags (--kubeconfig, --context, -n, --as,
// --request-timeout ...); NewCmd calls it through BindFlags.
func NewClientGetter(streams genericiooptions.IOStreams, opts ConfigOptions) ClientGetter {
	flags := genericclioptions.NewConfigFlags(true).WithDiscoveryBurst(300).WithDiscoveryQPS(50)
	if opts.DefaultTimeout != "" {
		t := opts.DefaultTimeout
		flags.Timeout = &t
	}
	if opts.NoNamespace {
		flags.Namespace = nil
	}
	g := &configGetter{flags: flags, opts: opts, streams: streams}
	flags.WithWarningPrinter(streams)
	flags.WrapConfigFn = g.wrap
	return g
}

// AddFlags registers the kubeconfig flags as persistent flags of cmd.
func (g *configGetter) AddFlags(cmd *cobra.Command) {
	g.flags.AddFlags(cmd.PersistentFlags())
	registerContextCompletion(cmd, g)
}

// SetQuiet silences API server warnings (for -q).
func (g *configGetter) SetQuiet(q bool) { g.quiet = q }

// BindFlags registers the getter's flags on cmd when the getter has any
// (the production getter does; test getters do not).
func BindFlags(cg ClientGetter, cmd *cobra.Command) {
	if b, ok := cg.(interface{ AddFlags(*cobra.Command) }); ok {
		b.AddFlags(cmd)
	}
}

// SetQuiet silences API server warnings for -q when the getter supports it.
func SetQuiet(cg ClientGetter, quiet bool) {
	if q, ok := cg.(interface{ SetQuiet(bool) }); ok {
		q.SetQuiet(quiet)
	}
}

// ContextFlagSet reports whether --context was given.
func ContextFlagSet(cg ClientGetter) bool {
	if g, ok := cg.(*configGetter); ok {
		return g.flags.Context != nil && *g.flags.Context != ""
	}
	return false
}

func (g *configGetter) wrap(c *rest.Config) *rest.Config {
	if g.quiet {
		c.WarningHandler = rest.NoWarnings{}
	} else {
		c.WarningHandler = rest.NewWarningWriter(g.streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	}
	if g.opts.QPS > 0 {
		c.QPS = g.opts.QPS
	}
	if g.opts.Burst > 0 {
		c.Burst = g.opts.Burst
	}
	return c
}

func (g *configGetter) ToRESTConfig() (*rest.Config, error) {
	if g.shared == nil {
		return g.flags.ToRESTConfig()
	}
	c, err := g.clientConfig().ClientConfig()
	if err != nil {
		return nil, err
	}
	return g.wrap(c), nil
}
func (g *configGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.flags.ToDiscoveryClient()
}
func (g *configGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.flags.ToRESTMapper() }
func (g *configGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return g.clientConfig()
}

func (g *configGetter) Kube() (kubernetes.Interface, error) {
	c, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(c)
}

func (g *configGetter) Dynamic() (dynamic.Interface, error) {
	c, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(c)
}

func (g *configGetter) Discovery() (discovery.DiscoveryInterface, error) {
	c, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return discovery.NewDiscoveryClientForConfig(c)
}

func (g *configGetter) APIExtensions() (apiextclient.Interface, error) {
	c, err := g.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return apiextclient.NewForConfig(c)
}

func (g *configGetter) Namespace() (string, bool, error) {
	if g.flags.Namespace == nil {
		return "", false, nil
	}
	return g.clientConfig().Namespace()
}

func (g *configGetter) Metadata() Metadata {
	md := Metadata{}
	raw, err := g.clientConfig().RawConfig()
	if err == nil {
		md.Context = raw.CurrentContext
		if g.flags.Context != nil && *g.flags.Context != "" {
			md.Context = *g.flags.Context
		}
	}
	if c, err := g.ToRESTConfig(); err == nil {
		md.Server = c.Host
	}
	return md
}

func (g *configGetter) Contexts() ([]string, error) {
	raw, err := g.clientConfig().RawConfig()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (g *configGetter) ForContext(name string) ClientGetter {
	f := g.flags // the parsed flag values are shared through their pointers
	ctxName := name
	nf := genericclioptions.NewConfigFlags(true)
	nf.KubeConfig, nf.Context, nf.ClusterName, nf.AuthInfoName = f.KubeConfig, &ctxName, nil, nil
	nf.Namespace, nf.APIServer, nf.TLSServerName, nf.Insecure = f.Namespace, nil, nil, f.Insecure
	nf.CertFile, nf.KeyFile, nf.CAFile, nf.BearerToken = f.CertFile, f.KeyFile, f.CAFile, f.BearerToken
	nf.Impersonate, nf.ImpersonateUID, nf.ImpersonateGroup = f.Impersonate, f.ImpersonateUID, f.ImpersonateGroup
	nf.Timeout, nf.CacheDir, nf.DisableCompression = f.Timeout, f.CacheDir, f.DisableCompression
	nf.ImpersonateUserExtra, nf.ProxyURL = f.ImpersonateUserExtra, f.ProxyURL
	ng := &configGetter{flags: nf, opts: g.opts, streams: g.streams, quiet: g.quiet, shared: g.sharedLoader()}
	nf.WithWarningPrinter(g.streams)
	nf.WrapConfigFn = ng.wrap
	return ng
}

func registerContextCompletion(cmd *cobra.Command, g *configGetter) {
	_ = cmd.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		names, err := g.Contexts()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	if g.flags.Namespace != nil {
		_ = cmd.RegisterFlagCompletionFunc("namespace", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			kc, err := g.Kube()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			list, err := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, ns := range list.Items {
				names = append(names, ns.Name)
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// DefaultRequestTimeout gives one subcommand its own --request-timeout
// default, for a plugin whose root keeps none (a drain waits on purpose)
// but whose read-only subcommands must not stall a loop on a dead context.
// Its --help shows that default.
func DefaultRequestTimeout(cmd *cobra.Command, value string) {
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("request-timeout"); f != nil && !f.Changed {
			if err := f.Value.Set(value); err != nil {
				return err
			}
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		f := c.InheritedFlags().Lookup("request-timeout")
		if f == nil || !c.HasParent() {
			return
		}
		def := f.DefValue
		f.DefValue = value
		defer func() { f.DefValue = def }()
		c.Parent().HelpFunc()(c, args)
	})
}

// ForKubeconfig returns a getter for a context of another kubeconfig file,
// with cg's other settings (timeout, QPS, warnings): the fleet programme
// reaches a cluster through a kubeconfig it read from a Secret. A getter
// that is not the production one falls back to ForContext.
func ForKubeconfig(cg ClientGetter, path, context string) ClientGetter {
	g, ok := cg.(*configGetter)
	if !ok {
		return cg.ForContext(context)
	}
	ng := g.ForContext(context).(*configGetter)
	p := path
	ng.flags.KubeConfig = &p
	ng.shared = nil // another file: cli-runtime loads it
	return ng
}

// ExplicitKubeconfig is the kubeconfig file given with --kubeconfig ("" when
// none), so commands a plugin runs for the user can be given the same one.
func ExplicitKubeconfig(cg ClientGetter) string {
	if g, ok := cg.(*configGetter); ok && g.flags.KubeConfig != nil {
		return *g.flags.KubeConfig
	}
	return ""
}
