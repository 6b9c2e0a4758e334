package deprecations

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
)

// The live-objects source sends a list per served resource; at client-go's
// default 5 requests a second a bare cluster took eight seconds of client
// waiting. Every context of a sweep gets the plugin's limits too.
func TestConfigOptionsRaiseTheClientRateLimit(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
current-context: a
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kc)
	cg := cli.NewClientGetter(genericiooptions.NewTestIOStreamsDiscard(), ConfigOptions)
	for name, g := range map[string]cli.ClientGetter{"current context": cg, "--contexts a": cg.ForContext("a")} {
		cfg, err := g.ToRESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.QPS < 50 || cfg.Burst < 100 {
			t.Errorf("%s: QPS %v, burst %d: want at least 50 and 100", name, cfg.QPS, cfg.Burst)
		}
	}
}
