package runbooke2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
	"github.com/gpufleet/upgrade-plugins/pkg/localcluster"
)

// The GPU checks the runbook pastes (kubectl gpu-validate --xid --dcgm)
// run one pod per node and read its log through the pods/log API. A KWOK
// pod stays Running until deleted and has no log, so on its own the
// check waits out its 10-minute timeout. CheckPods stands in for the
// node's side: it marks each check pod to complete (KWOK's Stage for
// localcluster.KwokCompleteLabel), as the check's container exits on a
// node, and a second KWOK process serves the containers' logs (its
// kubelet-like server, ClusterLogs rules) to the apiserver: a clean
// kernel log for the Xid check, a passing DCGM level-1 run for DCGM. The
// scenario's nodes name that server as their kubelet endpoint.
type CheckPods struct {
	Port   int
	cancel context.CancelFunc
	cmd    *exec.Cmd
}

// checkPodSelector selects gpu-validate's check pods (gpucheck.NodePodSpec.Pod).
const checkPodSelector = "app.kubernetes.io/managed-by=kubectl-gpu_validate"

// xidCleanLog is what the Xid check's journalctl -k prints on a node
// whose GPUs raised no Xid: the driver's load line only.
func xidCleanLog() string {
	ts := time.Now().UTC().Add(-5 * time.Minute).Format("2006-01-02T15:04:05-0700")
	return ts + " gpu-node kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06\n"
}

// criLog turns plain lines into the CRI log format KWOK serves.
func criLog(text string) string {
	var b strings.Builder
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, l)
	}
	return b.String()
}

// StartCheckPods starts the log server and the completer.
func StartCheckPods(dir, nodes, kwok, stages, kubeconfig string, client kubernetes.Interface) (*CheckPods, error) {
	dir = filepath.Join(dir, "kwok-logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	dcgm, err := os.ReadFile(filepath.Join(root, "pkg", "gpucheck", "testdata", "dcgm-4.4.2-level1-pass.log"))
	if err != nil {
		return nil, err
	}
	// KWOK refuses to start without Stages; this one manages no nodes.
	var docs []string
	for _, f := range []string{"node/fast/node-initialize.yaml", "pod/fast/pod-ready.yaml"} {
		b, err := os.ReadFile(filepath.Join(stages, f))
		if err != nil {
			return nil, err
		}
		docs = append(docs, strings.TrimPrefix(strings.TrimSpace(string(b)), "---\n")+"\n")
	}
	for i, r := range []struct{ container, text string }{{"xid", xidCleanLog()}, {"dcgm", string(dcgm)}} {
		f := filepath.Join(dir, r.container+".log")
		if err := os.WriteFile(f, []byte(criLog(r.text)), 0o600); err != nil {
			return nil, err
		}
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
			"metadata": map[string]any{"name": fmt.Sprintf("runbook-%d", i)},
			"spec": map[string]any{
				"selector": map[string]any{},
				"logs":     []any{map[string]any{"containers": []string{r.container}, "logsFile": f}},
			},
		})
		docs = append(docs, string(b))
	}
	// kubectl exec into the etcd static pods (the backup's etcdctl
	// snapshot save, the restore's member list) runs the lane's etcdctl
	// (NodeFiles) on the pod's node's files.
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bin, "etcdctl"), []byte(fakeEtcdctl), 0o755); err != nil {
		return nil, err
	}
	for i := 0; i < 5; i++ {
		node := fmt.Sprintf("cp-%d", i)
		b, _ := yaml.Marshal(map[string]any{
			"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterExec",
			"metadata": map[string]any{"name": "runbook-etcd-" + node},
			"spec": map[string]any{
				"selector": map[string]any{"matchNamespaces": []string{"kube-system"}, "matchNames": []string{"etcd-" + node}},
				"execs": []any{map[string]any{"containers": []string{"etcd"}, "local": map[string]any{
					"workDir": nodes,
					"envs": []any{
						map[string]any{"name": "PATH", "value": bin + ":/usr/local/bin:/usr/bin:/bin"},
						map[string]any{"name": "RUNBOOK_NODE_ROOT", "value": filepath.Join(nodes, node)},
						map[string]any{"name": "RUNBOOK_NODE", "value": node},
					},
				}}},
			},
		})
		docs = append(docs, string(b))
	}
	cfg := filepath.Join(dir, "kwok-logs.yaml")
	if err := os.WriteFile(cfg, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &CheckPods{Port: l.Addr().(*net.TCPAddr).Port}
	l.Close()
	logFile, err := os.Create(filepath.Join(dir, "kwok.log"))
	if err != nil {
		return nil, err
	}
	c.cmd = exec.Command(kwok, "--kubeconfig="+kubeconfig,
		"--manage-nodes-with-annotation-selector=gpufleet.dev/kwok-logs-only=none",
		"--server-address=127.0.0.1:"+strconv.Itoa(c.Port), "--config="+cfg)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	c.cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	c.cmd.SysProcAttr = dieWithParent()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback server
	err = wait(context.Background(), "the KWOK log server", func(ctx context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("kwok exited: %v", err)
		default:
		}
		resp, err := hc.Get("https://127.0.0.1:" + strconv.Itoa(c.Port) + "/healthz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		_ = c.cmd.Process.Kill()
		b, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("%v; kwok log:\n%s", err, b)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	w, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{LabelSelector: checkPodSelector})
	if err != nil {
		c.Close()
		return nil, err
	}
	patch := []byte(`{"metadata":{"labels":{"` + localcluster.KwokCompleteLabel + `":"true"}}}`)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if ev.Type != watch.Added || !ok || p.Labels[localcluster.KwokCompleteLabel] == "true" || p.Labels[gpucheck.CheckPodLabel] == "" {
				continue
			}
			_, _ = client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}()
	return c, nil
}

// Close stops the completer and the log server.
func (c *CheckPods) Close() {
	if c == nil {
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
}
