//go:build e2e

package rbace2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
	"github.com/gpufleet/upgrade-plugins/pkg/checkpoint"
)

// TestCheckpointAgentRole proves deploy/rbac/checkpoint-agent.yaml: under it
// the agent answers a request on its JobSet and stops cleanly; without
// either rule it exits 3 at once with one line naming the verb.
func TestCheckpointAgentRole(t *testing.T) {
	t.Parallel()
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	// A suspended JobSet: the agent needs the object only, not its pods.
	js := harness.TrainingJobSet(ns, "trainer", "", 1, 1)
	js.Spec.Suspend = ptr.To(true)
	if _, err := cp.JobSetClient().JobsetV1alpha2().JobSets(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := loadRoles(t, "checkpoint-agent")
	if len(rs.cluster.Rules) != 0 {
		t.Fatal("checkpoint-agent.yaml: the agent needs no cluster-wide rule")
	}
	const bin = "gpufleet-checkpoint-agent"
	args := func(dir string) []string {
		return []string{"--namespace", ns, "--root", "JobSet/trainer", "--dir", dir, "--labels-file", "",
			"--poll-interval", "200ms", "--heartbeat-interval", "500ms"}
	}
	user := grant(t, cp, "checkpoint-agent", "full", rs, ns, nil)

	// The full flow: a request answered ready-to-stop, then SIGTERM.
	dir := t.TempDir()
	full := append([]string{"--kubeconfig", cp.Kubeconfig, "--as", user}, args(dir)...)
	cmd := exec.CommandContext(ctx, plugintest.Binary(t, bin), full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	target := checkpoint.Target{Resource: jobsetGVR, Namespace: ns, Name: "trainer"}
	keys := checkpoint.DefaultKeys()
	req := checkpoint.Request{State: checkpoint.Requested, ID: "rbac-1", RequestedAt: time.Now()}
	if err := (&checkpoint.Requester{Client: dyn, Keys: keys}).Request(ctx, target, req, nil); err != nil {
		t.Fatal(err)
	}
	err := harness.Eventually(ctx, "ready-to-stop", time.Minute, func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(filepath.Join(dir, "request.json")); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "ready.json"), []byte(`{"id":"rbac-1","step":1}`), 0o644)
		}
		st, err := checkpoint.Read(ctx, dyn, keys, target)
		return err == nil && st.Response.ObservedRequestID == "rbac-1" && st.Response.Status == checkpoint.StatusReadyToStop, nil
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	werr := cmd.Wait()
	t.Logf("agent as %s:\n%s", user, stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Errorf("agent exit: %v", werr)
	}
	if strings.Contains(stderr.String(), "forbidden") {
		t.Error("forbidden under the full role")
	}
	flows := map[string]flow{"start": {args: args(t.TempDir()), code: 3}}
	checkRemovals(t, cp, "checkpoint-agent", bin, ns, rs, flows, []removal{
		{flow: "start", code: 3, line: denied("get", "jobsets")},
		{flow: "start", code: 3, line: denied("patch", "jobsets")},
	})
}
