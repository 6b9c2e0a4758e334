package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// writeContexts writes a kubeconfig of n contexts, each with its own
// cluster and user, the first one current.
func writeContexts(t *testing.T, n int) string {
	t.Helper()
	var kc strings.Builder
	kc.WriteString("apiVersion: v1\nkind: Config\ncurrent-context: c0\nclusters:\n")
	for i := range n {
		fmt.Fprintf(&kc, "- name: c%d\n  cluster: {server: 'https://10.0.0.%d:6443', insecure-skip-tls-verify: true}\n", i, i+1)
	}
	kc.WriteString("users:\n")
	for i := range n {
		fmt.Fprintf(&kc, "- name: u%d\n  user: {token: token-%d}\n", i, i)
	}
	kc.WriteString("contexts:\n")
	for i := range n {
		fmt.Fprintf(&kc, "- name: c%d\n  context: {cluster: c%d, user: u%d, namespace: ns%d}\n", i, i, i, i)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestForContextLoadsKubeconfigOnce: a fan-out over many contexts reads
// and decodes the kubeconfig once, not once per context.
func TestForContextLoadsKubeconfigOnce(t *testing.T) {
	path := writeContexts(t, 20)
	cg := NewClientGetter(genericiooptions.NewTestIOStreamsDiscard(), ConfigOptions{}).(*configGetter)
	*cg.flags.KubeConfig = path
	for i := range 20 {
		sub := cg.ForContext(fmt.Sprintf("c%d", i))
		c, err := sub.ToRESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("https://10.0.0.%d:6443", i+1); c.Host != want || c.BearerToken != fmt.Sprintf("token-%d", i) {
			t.Errorf("c%d: host %s token %q, want %s and its own token", i, c.Host, c.BearerToken, want)
		}
		if ns, _, err := sub.Namespace(); err != nil || ns != fmt.Sprintf("ns%d", i) {
			t.Errorf("c%d: namespace %q (%v)", i, ns, err)
		}
	}
	if n := cg.sharedLoader().loads; n != 1 {
		t.Errorf("the kubeconfig was loaded %d times for 20 contexts, want once", n)
	}
}

// TestSharedKubeconfigMatchesConfigFlags: for each kubeconfig flag, the
// client config of a context reached by ForContext is the one
// cli-runtime's ConfigFlags builds from the same flags for that context.
func TestSharedKubeconfigMatchesConfigFlags(t *testing.T) {
	path := writeContexts(t, 3)
	dir := t.TempDir()
	ca, cert, key := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, f := range []string{ca, cert, key} {
		if err := os.WriteFile(f, []byte("-"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := [][]string{
		nil,
		{"--namespace", "other"},
		{"--as", "alice", "--as-group", "g1", "--as-group", "g2", "--as-uid", "42", "--as-user-extra", "k=v", "--as-user-extra", "k=w"},
		{"--token", "override"},
		{"--client-certificate", cert, "--client-key", key},
		{"--certificate-authority", ca, "--insecure-skip-tls-verify=false"},
		{"--disable-compression"},
		{"--proxy-url", "http://proxy.example:3128"},
		{"--request-timeout", "7s"},
		{"--tls-server-name", "kubernetes"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			cg := NewClientGetter(genericiooptions.NewTestIOStreamsDiscard(), ConfigOptions{DefaultTimeout: "30s"}).(*configGetter)
			cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
			cg.AddFlags(cmd)
			if err := cmd.ParseFlags(append([]string{"--kubeconfig", path}, args...)); err != nil {
				t.Fatal(err)
			}
			got, err := cg.ForContext("c2").ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			gotNS, _, _ := cg.ForContext("c2").Namespace()

			// cli-runtime's own, for the same context and flags.
			ref := genericclioptions.NewConfigFlags(true)
			refCmd := &cobra.Command{Use: "x"}
			ref.AddFlags(refCmd.PersistentFlags())
			if err := refCmd.ParseFlags(append([]string{"--kubeconfig", path, "--context", "c2", "--request-timeout", "30s"}, args...)); err != nil {
				t.Fatal(err)
			}
			want, err := ref.ToRESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			wantNS, _, _ := ref.ToRawKubeConfigLoader().Namespace()
			// --server and --tls-server-name name one cluster's endpoint:
			// ForContext leaves them to each context's own cluster entry.
			want.TLSClientConfig.ServerName = ""
			// The getter's own wrapping (warnings, QPS) is not the loader's.
			got.WarningHandler, want.WarningHandler = nil, nil
			got.WarningHandlerWithContext, want.WarningHandlerWithContext = nil, nil
			got.Proxy, want.Proxy = nil, nil // funcs: compared through ProxyURL below
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rest config differs from cli-runtime's:\n got %+v\nwant %+v", got, want)
			}
			if gotNS != wantNS {
				t.Errorf("namespace %q, cli-runtime %q", gotNS, wantNS)
			}
		})
	}
}
