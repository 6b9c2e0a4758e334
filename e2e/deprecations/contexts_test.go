//go:build e2e

package deprecationse2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// TestDeprecationsContexts reads the live cluster and a dead context in one
// run: the live one's Helm finding is reported against its own server's
// next minor, the dead one is named with exit 3, and neither stops the
// other.
func TestDeprecationsContexts(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	manifest := "---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata:\n  name: nightly\n"
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.fleet.v1", Namespace: ns,
			Labels: map[string]string{"name": "fleet", "owner": "helm", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": releaseRecord(t, "fleet", ns, 1, "deployed", manifest)},
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	live := cfg.CurrentContext
	cfg.Clusters["dead"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	cfg.Contexts["dead"] = &clientcmdapi.Context{Cluster: "dead", AuthInfo: cfg.Contexts[live].AuthInfo}
	kc := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}

	r := plugintest.Run(t, binary, "--kubeconfig", kc, "--all-contexts", "-n", ns, "--source", "helm", "-o", "json", "--request-timeout", "5s")
	if r.ExitCode != 3 {
		t.Fatalf("exit %d, want 3 (one context is dead)\n%s", r.ExitCode, r)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Context  string  `json:"context"`
			Error    string  `json:"error"`
			ExitCode int     `json:"exitCode"`
			Report   *report `json:"report"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		t.Fatalf("%v\n%s", err, r)
	}
	if list.Kind != "DeprecationsReportList" || len(list.Items) != 2 {
		t.Fatalf("list: %s", r)
	}
	dead, got := list.Items[0], list.Items[1]
	if dead.Context != "dead" || dead.ExitCode != 3 || dead.Error == "" || dead.Report != nil {
		t.Errorf("dead context: %+v", dead)
	}
	if got.Context != live || got.ExitCode != 1 || got.Report == nil {
		t.Fatalf("live context: %+v\n%s", got, r)
	}
	if got.Report.TargetVersion != "1.38" {
		t.Errorf("target %s, want the live server's next minor v1.38", got.Report.TargetVersion)
	}
	if find(got.Report.Items, func(i item) bool { return i.Kind == "CronJob" && i.Who == "helm release "+ns+"/fleet" }) == nil {
		t.Errorf("the live context's Helm finding is missing\n%s", r.Stdout)
	}
	if !strings.Contains(r.Stderr, "context dead") {
		t.Errorf("stderr does not name the dead context:\n%s", r.Stderr)
	}

	tbl := plugintest.Run(t, binary, "--kubeconfig", kc, "--contexts", live, "-n", ns, "--source", "helm", "--color", "never")
	if tbl.ExitCode != 1 || !strings.HasPrefix(tbl.Stdout, "CONTEXT") || !strings.Contains(tbl.Stdout, live+" ") || !strings.Contains(tbl.Stdout, "CronJob") {
		t.Errorf("table: %s", tbl)
	}
}
