package cli

import (
	"strings"
	"sync"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// sharedKubeconfig loads the kubeconfig files once for every context a
// fan-out reaches. cli-runtime's ConfigFlags reads and decodes the files
// again for each set of flags, so a getter per context made a sweep of a
// hundred contexts decode the whole kubeconfig a hundred times: about 57 ms
// each for a 550 KB file of a hundred contexts with embedded certificates,
// seconds of CPU before the first request. The merged config is read-only
// once loaded and shared by the contexts' client configs.
type sharedKubeconfig struct {
	*clientcmd.ClientConfigLoadingRules

	once sync.Once
	cfg  *clientcmdapi.Config
	err  error
	// loads counts reads of the files, for tests.
	loads int
}

var _ clientcmd.ClientConfigLoader = &sharedKubeconfig{}

// newSharedKubeconfig takes the loading rules ConfigFlags builds for f (the
// files in KUBECONFIG or the default, or --kubeconfig).
func newSharedKubeconfig(f *genericclioptions.ConfigFlags) *sharedKubeconfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.DefaultClientConfig = &clientcmd.DefaultClientConfig
	if f.KubeConfig != nil {
		rules.ExplicitPath = *f.KubeConfig
	}
	return &sharedKubeconfig{ClientConfigLoadingRules: rules}
}

// Load reads the files the first time and hands back the same merged
// config after that; callers must not change it.
func (s *sharedKubeconfig) Load() (*clientcmdapi.Config, error) {
	s.once.Do(func() {
		s.loads++
		s.cfg, s.err = s.ClientConfigLoadingRules.Load()
	})
	return s.cfg, s.err
}

// overridesOf binds f's flag values to client config overrides as
// ConfigFlags does for its own loader (k8s.io/cli-runtime v0.37.2,
// pkg/genericclioptions/config_flags.go, toRawKubeConfigLoader);
// TestSharedKubeconfigMatchesConfigFlags compares the two for every flag.
func overridesOf(f *genericclioptions.ConfigFlags) *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{ClusterDefaults: clientcmd.ClusterDefaults}
	set := func(p *string, dst *string) {
		if p != nil {
			*dst = *p
		}
	}
	if f.CertFile != nil {
		o.AuthInfo.ClientCertificate, o.AuthInfo.ClientCertificateData = *f.CertFile, nil
	}
	if f.KeyFile != nil {
		o.AuthInfo.ClientKey, o.AuthInfo.ClientKeyData = *f.KeyFile, nil
	}
	if f.BearerToken != nil {
		o.AuthInfo.Token, o.AuthInfo.TokenFile = *f.BearerToken, ""
	}
	set(f.Impersonate, &o.AuthInfo.Impersonate)
	if f.ImpersonateUserExtra != nil && len(*f.ImpersonateUserExtra) > 0 {
		extra := map[string][]string{}
		for _, kv := range *f.ImpersonateUserExtra {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			extra[k] = append(extra[k], v)
		}
		o.AuthInfo.ImpersonateUserExtra = extra
	}
	set(f.ImpersonateUID, &o.AuthInfo.ImpersonateUID)
	if f.ImpersonateGroup != nil {
		o.AuthInfo.ImpersonateGroups = *f.ImpersonateGroup
	}
	set(f.Username, &o.AuthInfo.Username)
	set(f.Password, &o.AuthInfo.Password)
	set(f.APIServer, &o.ClusterInfo.Server)
	set(f.TLSServerName, &o.ClusterInfo.TLSServerName)
	set(f.CAFile, &o.ClusterInfo.CertificateAuthority)
	if f.Insecure != nil {
		o.ClusterInfo.InsecureSkipTLSVerify = *f.Insecure
	}
	if f.DisableCompression != nil {
		o.ClusterInfo.DisableCompression = *f.DisableCompression
	}
	set(f.ProxyURL, &o.ClusterInfo.ProxyURL)
	set(f.Context, &o.CurrentContext)
	set(f.ClusterName, &o.Context.Cluster)
	set(f.AuthInfoName, &o.Context.AuthInfo)
	set(f.Namespace, &o.Context.Namespace)
	set(f.Timeout, &o.Timeout)
	return o
}

// clientConfig is the getter's kubeconfig loader: cli-runtime's own for a
// getter of its own flags, and one over the shared files for a context a
// fan-out reached.
func (g *configGetter) clientConfig() clientcmd.ClientConfig {
	if g.shared == nil {
		return g.flags.ToRawKubeConfigLoader()
	}
	g.ccOnce.Do(func() {
		g.cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(g.shared, overridesOf(g.flags))
	})
	return g.cc
}

// sharedLoader is the loader the contexts reached from g share: g's own
// when g was reached that way, else one made for g's files on first use.
func (g *configGetter) sharedLoader() *sharedKubeconfig {
	if g.shared != nil {
		return g.shared
	}
	g.sharedOnce.Do(func() { g.ownShared = newSharedKubeconfig(g.flags) })
	return g.ownShared
}
