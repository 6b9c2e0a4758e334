package fleetrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// Access reaches the clusters of a run: through the kubeconfig contexts the
// fleet file names, or, when the file sets credentials, through a
// kubeconfig read from a Secret of the management cluster (the getter's own
// cluster: in an engine's pod, its service account).
type Access struct {
	// Getter is the command's own client getter (kubeconfig flags).
	Getter cli.ClientGetter
	// Credentials, when set, say where each cluster's kubeconfig is.
	Credentials *fleetfile.Credentials
	// Dir holds kubeconfigs read from Secrets while the command runs.
	Dir string

	merged string
}

// Target is one cluster as a command reaches it.
type Target struct {
	// Getter reaches the cluster in-process.
	Getter cli.ClientGetter
	// Kubeconfig ("" for the usual loading rules) and Context are what a
	// plugin run for the step is given.
	Kubeconfig string
	Context    string
}

// Args are the kubeconfig flags of a plugin run against the cluster.
func (t Target) Args() []string {
	var a []string
	if t.Kubeconfig != "" {
		a = append(a, "--kubeconfig", t.Kubeconfig)
	}
	return append(a, "--context", t.Context)
}

// For returns how to reach cluster c.
func (a *Access) For(ctx context.Context, c *ClusterPlan) (Target, error) {
	return a.ForCluster(ctx, c.Name, c.Context)
}

// ForCluster returns how to reach the named cluster, whose kubeconfig
// context is kctx.
func (a *Access) ForCluster(ctx context.Context, name, kctx string) (Target, error) {
	c := struct{ Name, Context string }{name, kctx}
	if a.Credentials == nil {
		kc, err := a.kubeconfigFile()
		if err != nil {
			return Target{}, err
		}
		return Target{Getter: a.Getter.ForContext(c.Context), Kubeconfig: kc, Context: c.Context}, nil
	}
	kc, err := a.Getter.Kube()
	if err != nil {
		return Target{}, cli.UsageErr(err)
	}
	secret, key := a.Credentials.SecretName(c.Name), a.Credentials.SecretKey()
	sec, err := kc.CoreV1().Secrets(a.Credentials.SecretNamespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		return Target{}, cli.ClusterErr(fmt.Errorf("reading the kubeconfig of cluster %s from Secret %s/%s: %w", c.Name, a.Credentials.SecretNamespace, secret, err))
	}
	data, ok := sec.Data[key]
	if !ok {
		return Target{}, cli.ClusterErr(fmt.Errorf("Secret %s/%s has no key %q holding the kubeconfig of cluster %s", a.Credentials.SecretNamespace, secret, key, c.Name))
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return Target{}, cli.ClusterErr(fmt.Errorf("Secret %s/%s: the kubeconfig of cluster %s does not parse: %w", a.Credentials.SecretNamespace, secret, c.Name, err))
	}
	useCtx := cfg.CurrentContext
	if _, ok := cfg.Contexts[c.Context]; ok {
		useCtx = c.Context
	}
	if useCtx == "" {
		return Target{}, cli.ClusterErr(fmt.Errorf("Secret %s/%s: the kubeconfig of cluster %s has no current context and no context %s", a.Credentials.SecretNamespace, secret, c.Name, c.Context))
	}
	if a.Dir == "" {
		if a.Dir, err = os.MkdirTemp("", "gpufleet-kubeconfig-"); err != nil {
			return Target{}, err
		}
	}
	p := filepath.Join(a.Dir, c.Name+".kubeconfig")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return Target{}, err
	}
	return Target{Getter: cli.ForKubeconfig(a.Getter, p, useCtx), Kubeconfig: p, Context: useCtx}, nil
}

// kubeconfigFile is the one kubeconfig file a command of a step is given
// ({{.Kubeconfig}}, --kubeconfig): the one --kubeconfig named, else the one
// the usual loading rules read (KUBECONFIG, ~/.kube/config); when KUBECONFIG
// lists several, their merge as kubectl sees it, written once to a private
// file of this command.
func (a *Access) kubeconfigFile() (string, error) {
	if kc := cli.ExplicitKubeconfig(a.Getter); kc != "" {
		return kc, nil
	}
	if a.merged != "" {
		return a.merged, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	var files []string
	for _, f := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	switch len(files) {
	case 0:
		return "", nil
	case 1:
		a.merged = files[0]
		return a.merged, nil
	}
	cfg, err := rules.Load()
	if err != nil {
		return "", cli.KubeconfigErr(err)
	}
	if a.Dir == "" {
		if a.Dir, err = os.MkdirTemp("", "gpufleet-kubeconfig-"); err != nil {
			return "", err
		}
	}
	p := filepath.Join(a.Dir, "merged.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		return "", err
	}
	a.merged = p
	return p, nil
}

// KubeconfigFiles names the kubeconfig files the getter reads, for
// messages about a context they lack.
func KubeconfigFiles(cg cli.ClientGetter) string {
	if kc := cli.ExplicitKubeconfig(cg); kc != "" {
		return kc
	}
	return strings.Join(clientcmd.NewDefaultClientConfigLoadingRules().GetLoadingPrecedence(), string(os.PathListSeparator))
}

// Close removes the kubeconfigs read from Secrets.
func (a *Access) Close() {
	if a.Dir != "" {
		_ = os.RemoveAll(a.Dir)
	}
}
