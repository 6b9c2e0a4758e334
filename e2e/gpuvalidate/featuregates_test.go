//go:build e2e

package gpuvalidatee2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/pkg/apilifecycle"
)

// The removed-gate data that the kubelet configuration check judges by
// agrees with a real component of the control plane's release (v1.37.2):
// kube-apiserver, which registers the same Kubernetes feature gates as the
// kubelet (k8s.io/kubernetes pkg/features), refuses a gate the data says
// was removed ("unrecognized feature gate") and accepts one it does not
// list, named as the flag takes it (CustomCPUCFSQuotaPeriod, whose Go
// constant is CPUCFSQuotaPeriod). One gate per release that removed any,
// and DevicePluginCDIDevices (removed in 1.34), keep it to a dozen runs.
func TestRemovedFeatureGatesRefusedByTheRelease(t *testing.T) {
	cp := harness.Shared(t)
	fg := apilifecycle.DefaultFeatureGates()
	pick := map[string]string{}
	for _, g := range fg.Gates {
		if _, ok := pick[g.RemovedIn.String()]; !ok {
			pick[g.RemovedIn.String()] = g.Name
		}
	}
	pick["device plugin CDI"] = "DevicePluginCDIDevices"
	run := func(gate string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, cp.Binaries.KubeAPIServer, "--feature-gates="+gate+"=true", "--version").CombinedOutput()
		return string(out)
	}
	for removedIn, gate := range pick {
		if out := run(gate); !strings.Contains(out, "unrecognized feature gate: "+gate) {
			t.Errorf("%s (removed in %s by the data): kube-apiserver %s accepts it:\n%s", gate, removedIn, harness.KubeVersion, out)
		}
	}
	if out := run("CustomCPUCFSQuotaPeriod"); strings.Contains(out, "unrecognized feature gate") || !strings.Contains(out, "Kubernetes v") {
		t.Errorf("CustomCPUCFSQuotaPeriod refused:\n%s", out)
	}
	if _, ok := fg.Removed("CustomCPUCFSQuotaPeriod"); ok {
		t.Error("CustomCPUCFSQuotaPeriod listed as removed")
	}
}
