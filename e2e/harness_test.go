//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// TestKwokStages checks the Stage set: Job pods keep running, and only pods
// labelled gpufleet.dev/kwok-complete=true complete (and KWOK survives a
// label selector in a Stage).
func TestKwokStages(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	nodes, err := cp.CreateGPUNodes(ctx, harness.GPUPool{Name: "stages-" + ns[len(ns)-5:], Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.CoreV1().Nodes().Delete(context.Background(), nodes[0].Name, metav1.DeleteOptions{})
	})

	if _, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, harness.Job(ns, "done", 1, 1, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.BatchV1().Jobs(ns).Create(ctx, harness.Job(ns, "train", 2, 2, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := harness.Eventually(ctx, "job done to complete", 90*time.Second, func(ctx context.Context) (bool, error) {
		j, err := cp.Client.BatchV1().Jobs(ns).Get(ctx, "done", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := cp.WaitPodsReady(ctx, ns, "app=train", 2, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	j, err := cp.Client.BatchV1().Jobs(ns).Get(ctx, "train", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status.Succeeded != 0 || j.Status.Active != 2 {
		t.Fatalf("job train: active %d succeeded %d, want 2 running and none done", j.Status.Active, j.Status.Succeeded)
	}
	if dead, _ := cp.Exited(harness.Kwok); dead {
		t.Fatalf("kwok exited; see %s", cp.LogPath(harness.Kwok))
	}
}

// TestDeprecatedAPIIsRecorded checks that a call to a deprecated API shows in
// the apiserver metric and, with the caller's user agent, in the audit log.
func TestDeprecatedAPIIsRecorded(t *testing.T) {
	cp := harness.Shared(t)
	ctx := context.Background()
	cfg := rest.CopyConfig(cp.Config)
	cfg.UserAgent = "e2e-legacy-client/1.0"
	cs := kubernetes.NewForConfigOrDie(cfg)
	if err := cs.Discovery().RESTClient().Get().AbsPath("/apis/resource.k8s.io/v1beta1/resourceslices").Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	metrics, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := `apiserver_requested_deprecated_apis{group="resource.k8s.io",removed_release="1.38",resource="resourceslices",subresource="",version="v1beta1"} 1`
	if !strings.Contains(string(metrics), want) {
		t.Errorf("metrics lack %s", want)
	}
	if err := harness.Eventually(ctx, "audit event", 10*time.Second, func(context.Context) (bool, error) {
		return auditHas(t, cp.AuditLogPath, "e2e-legacy-client/1.0"), nil
	}); err != nil {
		t.Fatal(err)
	}
}

func auditHas(t *testing.T, path, userAgent string) bool {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			UserAgent   string            `json:"userAgent"`
			Annotations map[string]string `json:"annotations"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.UserAgent != userAgent {
			continue
		}
		if ev.Annotations["k8s.io/deprecated"] == "true" && ev.Annotations["k8s.io/removed-release"] == "1.38" {
			return true
		}
	}
	return false
}

// TestAPIServerRestart checks the fault-test helpers: objects survive a
// graceful restart and a crash of kube-apiserver, since etcd keeps running.
func TestAPIServerRestart(t *testing.T) {
	cp := harness.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := cp.Namespace(t)
	began := time.Now()
	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("graceful restart took %s", time.Since(began).Round(100*time.Millisecond))
	began = time.Now()
	cp.KillAPIServer()
	if err := cp.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("crash and start took %s", time.Since(began).Round(100*time.Millisecond))
	if _, err := cp.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace after restarts: %v", err)
	}
}
