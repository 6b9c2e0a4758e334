package cli

import (
	"fmt"
	"sort"

	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestClientGetter is a ClientGetter backed by fake clientsets, for unit
// tests of commands. A client that was not set returns an error, the way an
// unreachable server would.
type TestClientGetter struct {
	KubeClient    kubernetes.Interface
	DynamicClient dynamic.Interface
	ExtClient     apiextclient.Interface
	NS            string
	NSExplicit    bool
	Meta          Metadata
	// PerContext answers ForContext; a missing name gets an unreachable getter.
	PerContext map[string]*TestClientGetter
	// Err, when set, is returned by every client constructor.
	Err error
}

var _ ClientGetter = (*TestClientGetter)(nil)

// NewTestClientGetter returns a getter for context "test" in namespace "default".
func NewTestClientGetter() *TestClientGetter {
	return &TestClientGetter{NS: "default", Meta: Metadata{Context: "test", Server: "https://test.invalid"}}
}

// WithKube sets the typed clientset.
func (g *TestClientGetter) WithKube(c kubernetes.Interface) *TestClientGetter {
	g.KubeClient = c
	return g
}

// WithDynamic sets the dynamic client.
func (g *TestClientGetter) WithDynamic(c dynamic.Interface) *TestClientGetter {
	g.DynamicClient = c
	return g
}

// WithAPIExtensions sets the CRD clientset.
func (g *TestClientGetter) WithAPIExtensions(c apiextclient.Interface) *TestClientGetter {
	g.ExtClient = c
	return g
}

func (g *TestClientGetter) missing(what string) error {
	if g.Err != nil {
		return g.Err
	}
	return fmt.Errorf("no %s client in this test", what)
}

// Kube implements ClientGetter.
func (g *TestClientGetter) Kube() (kubernetes.Interface, error) {
	if g.Err != nil || g.KubeClient == nil {
		return nil, g.missing("kubernetes")
	}
	return g.KubeClient, nil
}

// Dynamic implements ClientGetter.
func (g *TestClientGetter) Dynamic() (dynamic.Interface, error) {
	if g.Err != nil || g.DynamicClient == nil {
		return nil, g.missing("dynamic")
	}
	return g.DynamicClient, nil
}

// Discovery implements ClientGetter.
func (g *TestClientGetter) Discovery() (discovery.DiscoveryInterface, error) {
	if g.Err != nil || g.KubeClient == nil {
		return nil, g.missing("discovery")
	}
	return g.KubeClient.Discovery(), nil
}

// APIExtensions implements ClientGetter.
func (g *TestClientGetter) APIExtensions() (apiextclient.Interface, error) {
	if g.Err != nil || g.ExtClient == nil {
		return nil, g.missing("apiextensions")
	}
	return g.ExtClient, nil
}

// Namespace implements ClientGetter.
func (g *TestClientGetter) Namespace() (string, bool, error) { return g.NS, g.NSExplicit, nil }

// Metadata implements ClientGetter.
func (g *TestClientGetter) Metadata() Metadata { return g.Meta }

// Contexts implements ClientGetter.
func (g *TestClientGetter) Contexts() ([]string, error) {
	names := []string{g.Meta.Context}
	for n := range g.PerContext {
		if n != g.Meta.Context {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// ForContext implements ClientGetter.
func (g *TestClientGetter) ForContext(name string) ClientGetter {
	if c, ok := g.PerContext[name]; ok {
		return c
	}
	if name == g.Meta.Context {
		return g
	}
	return &TestClientGetter{Meta: Metadata{Context: name}, Err: fmt.Errorf("context %q is unreachable in this test", name)}
}

// ToRESTConfig implements genericclioptions.RESTClientGetter.
func (g *TestClientGetter) ToRESTConfig() (*rest.Config, error) {
	return &rest.Config{Host: g.Meta.Server}, nil
}

// ToDiscoveryClient implements genericclioptions.RESTClientGetter.
func (g *TestClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return nil, g.missing("cached discovery")
}

// ToRESTMapper implements genericclioptions.RESTClientGetter.
func (g *TestClientGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return nil, g.missing("REST mapper")
}

// ToRawKubeConfigLoader implements genericclioptions.RESTClientGetter.
func (g *TestClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	cfg := clientcmdapi.NewConfig()
	cfg.CurrentContext = g.Meta.Context
	return clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{})
}

var _ genericclioptions.RESTClientGetter = (*TestClientGetter)(nil)
