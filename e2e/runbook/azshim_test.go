//go:build e2e

package runbooke2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// The az wrapper refuses a flag the installed az's nodepool upgrade does
// not take, as az itself would, before it sends anything.
func TestAzWrapperChecksFlagsWithAzsParser(t *testing.T) {
	real, err := exec.LookPath("az")
	if err != nil {
		t.Skip("az is not installed (make e2e-deps installs it)")
	}
	if !azCrashes("2.45.0") || azCrashes("2.46.0") || azCrashes("2.61.0") {
		t.Fatal("the version gate is not 2.46.0")
	}
	dir := t.TempDir()
	list := filepath.Join(dir, azNotExecuted)
	if err := writeAzWrapper(dir, real, azVersion(context.Background()), list); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "az"), "aks", "nodepool", "upgrade", "--resource-group", "rg", "--cluster-name", "c", "--name", "np", "--kubernetes-version", "1.38.1", "--control-plane-only", "--yes")
	cmd.Env = append(os.Environ(), "AZURE_CONFIG_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unrecognized arguments: --control-plane-only") {
		t.Fatalf("a flag nodepool upgrade does not take passed: %v\n%s", err, out)
	}
	if _, err := os.Stat(list); err == nil {
		t.Error("a refused command was listed as checked")
	}
}

// With azure-cli older than 2.46.0, the pasted nodepool upgrade reaches
// the AKS endpoint as the agent-pool PUT 2.46 sends, the pool moves, and
// the command is listed as not executed; a version the control plane is
// not on is refused with AKS's own error, and the command fails.
func TestAzWrapperSendsTheUpgrade(t *testing.T) {
	if _, err := exec.LookPath("az"); err != nil {
		t.Skip("az is not installed (make e2e-deps installs it)")
	}
	ctx := context.Background()
	if !azCrashes(azVersion(ctx)) {
		t.Skip("the installed az runs nodepool upgrade itself")
	}
	dir := t.TempDir()
	l, err := StartLane(dir, &rest.Config{Host: "http://127.0.0.1:1"}, nil, LaneOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := NewWorld("aks", "gpu-pools")
	l.AKS.W = w
	if err := l.azureLogin(ctx, w); err != nil {
		t.Fatal(err)
	}
	pool := w.Pools[0]
	az := func(args ...string) (string, error) {
		// The wrapper first in the blocks' PATH, as bash finds it there.
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "shims", "az"), args...)
		cmd.Env, cmd.Dir = l.Env(w), dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	l.Rec.Take()
	next := w.ControlPlane
	if out, err := az("aks", "nodepool", "upgrade", "--resource-group", w.ResourceGroup, "--cluster-name", w.Cluster, "--name", pool.Name, "--kubernetes-version", next, "--yes"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var put *Call
	for _, c := range l.Rec.Take() {
		if c.Method == "PUT" {
			put = &c
		}
	}
	if put == nil || put.Op != "AgentPools_CreateOrUpdate" || put.Version != next {
		t.Fatalf("no agent-pool PUT for %s: %+v", next, put)
	}
	if pool.Version != next {
		t.Errorf("pool %s on %s, want %s", pool.Name, pool.Version, next)
	}
	if got := takeAzNotExecuted(dir); len(got) != 1 || !strings.Contains(got[0].Checks[0], "Azure/azure-cli#25530") {
		t.Errorf("not listed as not executed: %+v", got)
	}
	newer := fmt.Sprintf("1.%d.1", minorNum(w.ControlPlane)+1)
	if out, err := az("aks", "nodepool", "upgrade", "--resource-group", w.ResourceGroup, "--cluster-name", w.Cluster, "--name", pool.Name, "--kubernetes-version", newer, "--yes"); err == nil || !strings.Contains(out, "NodePoolMcVersionIncompatible") {
		t.Errorf("a pool newer than the control plane was not refused: %v\n%s", err, out)
	}
}
