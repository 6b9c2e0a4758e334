package preflight

import (
	"strings"
	"testing"

	"github.com/gpufleet/upgrade-plugins/pkg/health"
)

// TestVerifyIdentityTokenMoved: an azure-workload-identity upgrade from
// v1.5.1 (token at /var/run/secrets/azure/tokens, pkg/webhook/consts.go
// TokenFileMountPath) to v1.6.0 (/var/run/secrets/azure/wi,
// VolumeMountPath) mounts the same audience elsewhere: a WARN naming both
// paths, not a FAIL; a token of that audience gone is still a FAIL.
func TestVerifyIdentityTokenMoved(t *testing.T) {
	b := health.IdentityBinding{Namespace: "az", ServiceAccount: "blob", Provider: health.IdentityAzure, Identity: "0000-1111"}
	env := []string{"AZURE_AUTHORITY_HOST", "AZURE_CLIENT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_TENANT_ID"}
	ev := func(vols ...string) *WorkloadIdentityEvidence {
		return &WorkloadIdentityEvidence{Bindings: []health.IdentityFact{{IdentityBinding: b, Injected: &health.Injection{Env: env, TokenVolumes: vols}}}}
	}
	base := ev("audience api://AzureADTokenExchange at /var/run/secrets/azure/tokens")
	regs := verifyWorkloadIdentity(base, ev("audience api://AzureADTokenExchange at /var/run/secrets/azure/wi"))
	if len(regs) != 1 || regs[0].Status != StatusWarn ||
		!strings.Contains(regs[0].Message, "the api://AzureADTokenExchange token is mounted at /var/run/secrets/azure/wi, at /var/run/secrets/azure/tokens at the baseline") {
		t.Errorf("moved: %+v", regs)
	}
	if regs := verifyWorkloadIdentity(base, base); len(regs) != 0 {
		t.Errorf("unchanged: %+v", regs)
	}
	regs = verifyWorkloadIdentity(base, ev("audience other at /var/run/secrets/azure/wi"))
	if len(regs) != 1 || regs[0].Status != StatusFail ||
		!strings.Contains(regs[0].Message, "no longer injects token volume audience api://AzureADTokenExchange at /var/run/secrets/azure/tokens") {
		t.Errorf("lost: %+v", regs)
	}
	// Still projected but no longer mounted in the container: the pod has
	// no token file, whatever the environment names. Lost: a FAIL.
	regs = verifyWorkloadIdentity(base, ev("audience api://AzureADTokenExchange at (not mounted in the container)"))
	if len(regs) != 1 || regs[0].Status != StatusFail ||
		!strings.Contains(regs[0].Message, "no longer injects token volume audience api://AzureADTokenExchange at /var/run/secrets/azure/tokens") {
		t.Errorf("not mounted: %+v", regs)
	}
}
