package runbooke2e

import (
	"strings"
	"testing"
)

// TestInstallerUnderSudo checks the RKE2 installer piped to sudo with
// its variables on sudo's command line, and refuses them set before sudo,
// where env_reset drops them.
func TestInstallerUnderSudo(t *testing.T) {
	for _, c := range []struct {
		line, err string
	}{
		{"curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_CHANNEL=v1.36 sh -", ""},
		{"curl -sfL https://get.rke2.io | INSTALL_RKE2_CHANNEL=v1.36 sudo sh -", `INSTALL_RKE2_CHANNEL="" is not an RKE2 channel`},
		{"curl -sfL https://get.rke2.io | sudo INSTALL_RKE2_CHANNEL=v1.36 INSTALL_RKE2_TYPE=agent sh -", "would install RKE2 agent on cp-0"},
	} {
		w := NewWorld("rke2", "skip-level")
		h := &Hosts{W: w}
		n, _ := w.Node("cp-0")
		res := h.Run([]string{c.line}, []*Node{n}, map[string]string{})
		if len(res) == 0 {
			t.Fatalf("%s: no result", c.line)
		}
		got := res[len(res)-1].Err
		if c.err == "" {
			if got != "" {
				t.Errorf("%s: %s", c.line, got)
			} else if n.Host.Kubelet != Patch("1.36") {
				t.Errorf("%s: installed %s, want %s", c.line, n.Host.Kubelet, Patch("1.36"))
			}
		} else if !strings.Contains(got, c.err) {
			t.Errorf("%s: error %q, want %q", c.line, got, c.err)
		}
	}
}
