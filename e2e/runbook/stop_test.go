package runbooke2e

import (
	"strings"
	"testing"
)

func TestStop(t *testing.T) {
	// The runbook's block for an OS family without packages
	// (pkg/skew packages.go osOtherStop), as it is pasted on a node.
	osOther := `{ if grep -qE '^ID(_LIKE)?=.*(debian|ubuntu)' /etc/os-release; then echo "paste that family's block above" >&2; else echo "no kubeadm/kubelet packages for this OS family" >&2; fi; false; }`
	cases := []struct {
		name  string
		lines []string
		stop  bool
		msg   string
	}{
		{"os family stop", []string{"# on the node:", osOther}, true, "no kubeadm/kubelet packages for this OS family"},
		{"exit 1 in a subshell", []string{`( echo "stop here: restore by hand" >&2; exit 1 )`}, true, "stop here: restore by hand"},
		{"a failing command is no stop", []string{"kubectl get nodes", "false"}, false, ""},
		{"no message", []string{"{ false; }"}, false, ""},
		{"message on stdout", []string{`{ echo "x"; false; }`}, false, ""},
		{"ends in exit 0", []string{`{ echo "done" >&2; exit 0; }`}, false, ""},
		{"stop not last", []string{`{ echo "x" >&2; false; }`, "kubectl get nodes"}, false, ""},
	}
	for _, c := range cases {
		stop, msgs := Stop(c.lines)
		if stop != c.stop {
			t.Errorf("%s: Stop = %v, want %v", c.name, stop, c.stop)
		}
		if c.msg != "" && !strings.Contains(strings.Join(msgs, "\n"), c.msg) {
			t.Errorf("%s: messages %q lack %q", c.name, msgs, c.msg)
		}
	}
}
