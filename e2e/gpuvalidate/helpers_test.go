//go:build e2e

package gpuvalidatee2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

const plugin = "kubectl-gpu_validate"

// runPlugin runs the built plugin against the control plane.
func runPlugin(t *testing.T, cp *harness.ControlPlane, args ...string) plugintest.Result {
	t.Helper()
	full := append([]string{"--kubeconfig", cp.Kubeconfig}, args...)
	r := plugintest.Run(t, plugin, full...)
	t.Logf("kubectl gpu-validate %s -> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
	return r
}

// report is the part of the JSON report the tests read.
type report struct {
	Kind  string `json:"kind"`
	Items []struct {
		Name     string `json:"name"`
		Status   string `json:"status"`
		Findings []struct {
			Check, Level, Message string
		} `json:"findings"`
		GPUs *struct {
			Expected, Found int
			State           string
		} `json:"gpus"`
		ConfigBaseline string `json:"configBaseline"`
	} `json:"items"`
	NCCL []struct {
		Pool string `json:"pool"`
		Gate struct {
			Verdict       string  `json:"verdict"`
			BusBW         float64 `json:"busBwGBps"`
			BaselineBusBW float64 `json:"baselineBusBwGBps"`
		} `json:"gate"`
		BaselineSaved bool   `json:"baselineSaved"`
		Error         string `json:"error"`
	} `json:"nccl"`
	Summary struct {
		Nodes, Passed, Warned, Failed int
		GPUsExpected, GPUsFound       int
		BusBW                         []string `json:"busBw"`
	} `json:"summary"`
}

func parseReport(t *testing.T, r plugintest.Result) report {
	t.Helper()
	var rep report
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, r.Stdout)
	}
	return rep
}

func (r report) status(node string) (string, string) {
	for _, it := range r.Items {
		if it.Name == node {
			var msgs []string
			for _, f := range it.Findings {
				msgs = append(msgs, f.Level+": "+f.Message)
			}
			return it.Status, strings.Join(msgs, "\n")
		}
	}
	return "", ""
}

// createNodes creates KWOK GPU nodes, editing each before creation, and
// waits until they are Ready.
func createNodes(t *testing.T, cp *harness.ControlPlane, pool harness.GPUPool, edit func(i int, n *corev1.Node)) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for i := 0; i < pool.Nodes; i++ {
		n := harness.GPUNode(fmt.Sprintf("%s-%d", pool.Name, i), pool, pool.Name+"-rs0")
		if edit != nil {
			edit(i, n)
		}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", n.Name, err)
		}
		names = append(names, n.Name)
		name := n.Name
		t.Cleanup(func() { _ = cp.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	for _, name := range names {
		err := harness.Eventually(ctx, "node "+name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
			n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return err == nil && harness.NodeReady(n), err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// pointKubelet makes the apiserver reach a node's "kubelet" at ip:port.
func pointKubelet(n *corev1.Node, ip string, port int) {
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: ip}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
}

// proxyableIP returns a global unicast IPv4 address of this host. The
// apiserver refuses to proxy nodes/NAME/proxy to loopback or link-local
// addresses (isProxyableHostname), so the configz stand-in cannot listen on
// 127.0.0.1; it listens on this one address only, on a random port.
//
// Traffic to a host interface address leaves the loopback range, so the
// test runs only when E2E_HOST_IP=1 says this machine allows it; otherwise
// the drift gate is covered by the unit tests alone.
func proxyableIP(t *testing.T) string {
	t.Helper()
	if os.Getenv("E2E_HOST_IP") != "1" {
		t.Skip("set E2E_HOST_IP=1 to let the configz stand-in listen on a host interface address (the apiserver does not proxy nodes/proxy to loopback)")
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
			return ipn.IP.String()
		}
	}
	t.Skip("this host has no global unicast IPv4 address for the configz stand-in (the apiserver does not proxy nodes/proxy to loopback)")
	return ""
}

// kubeletStandIn serves /configz over HTTPS on ip and returns its port.
func kubeletStandIn(t *testing.T, ip string, configz []byte) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/configz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(configz)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return l.Addr().(*net.TCPAddr).Port
}

func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logRule maps pods to a fixture log, as a KWOK ClusterLogs object.
type logRule struct {
	Namespaces []string
	Pods       []string
	Container  string
	Text       string
}

var (
	logServerOnce sync.Once
	logServerPort int
	logServerErr  error
)

// criLog turns plain lines into the CRI log format KWOK reads.
func criLog(text string) string {
	var b strings.Builder
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(&b, "%s stdout F %s\n", ts, l)
	}
	return b.String()
}

// logServer starts a second KWOK process that manages no nodes and only
// serves container logs (its kubelet-like server) from the ClusterLogs
// rules, and returns its port. Nodes whose kubelet endpoint points at
// 127.0.0.1:port get their pods' logs from it through the apiserver.
func logServer(t *testing.T, cp *harness.ControlPlane) int {
	t.Helper()
	logServerOnce.Do(func() {
		dir, err := os.MkdirTemp(cp.Dir, "gpuvalidate-kwok-logs-") // removed with the plane
		if err != nil {
			logServerErr = err
			return
		}
		// KWOK refuses to start without Stages; this one manages no
		// nodes, so the harness's Stage files are only there to load.
		var docs []string
		for _, f := range []string{"node/fast/node-initialize.yaml", "pod/fast/pod-ready.yaml"} {
			b, err := os.ReadFile(filepath.Join(cp.Binaries.KwokStages, f))
			if err != nil {
				logServerErr = err
				return
			}
			docs = append(docs, strings.TrimPrefix(strings.TrimSpace(string(b)), "---\n")+"\n")
		}
		for i, r := range logRules(t) {
			f := filepath.Join(dir, fmt.Sprintf("log-%d.log", i))
			if err := os.WriteFile(f, []byte(criLog(r.Text)), 0o600); err != nil {
				logServerErr = err
				return
			}
			obj := map[string]any{
				"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
				"metadata": map[string]any{"name": fmt.Sprintf("gpuvalidate-%d", i)},
				"spec": map[string]any{
					"selector": map[string]any{"matchNamespaces": r.Namespaces, "matchNames": r.Pods},
					"logs":     []any{map[string]any{"containers": []string{r.Container}, "logsFile": f}},
				},
			}
			b, _ := yaml.Marshal(obj)
			docs = append(docs, string(b))
		}
		cfg := filepath.Join(dir, "kwok-logs.yaml")
		if err := os.WriteFile(cfg, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			logServerErr = err
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			logServerErr = err
			return
		}
		logServerPort = l.Addr().(*net.TCPAddr).Port
		l.Close()
		logFile, _ := os.Create(filepath.Join(dir, "kwok.log"))
		cmd := exec.Command(cp.Binaries.Kwok,
			"--kubeconfig="+cp.Kubeconfig,
			"--manage-nodes-with-annotation-selector=gpufleet.dev/kwok-logs-only=none",
			"--server-address=127.0.0.1:"+strconv.Itoa(logServerPort),
			"--config="+cfg,
		)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = dieWithParent()
		if err := cmd.Start(); err != nil {
			logServerErr = err
			return
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed loopback test server
		logServerErr = harness.Eventually(context.Background(), "KWOK log server", 60*time.Second, func(ctx context.Context) (bool, error) {
			select {
			case err := <-exited:
				return false, fmt.Errorf("kwok exited: %v", err)
			default:
			}
			resp, err := client.Get("https://127.0.0.1:" + strconv.Itoa(logServerPort) + "/healthz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return true, nil
		})
		if logServerErr != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "kwok.log"))
			logServerErr = fmt.Errorf("%v; kwok log:\n%s", logServerErr, b)
		}
	})
	if logServerErr != nil {
		t.Fatalf("KWOK log server: %v", logServerErr)
	}
	return logServerPort
}

// completePods finishes every pod that appears in ns (KWOK completes pods
// labelled gpufleet.dev/kwok-complete=true), as the checks' containers
// would on real nodes. It stops when the test ends.
func completePods(t *testing.T, cp *harness.ControlPlane, ns string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := cp.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"metadata":{"labels":{"` + harness.KwokCompleteLabel + `":"true"}}}`)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Labels[harness.KwokCompleteLabel] == "true" {
				continue
			}
			_, _ = cp.Client.CoreV1().Pods(ns).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
	}()
}

// fixedNamespace creates a namespace with a known name (log rules select
// by namespace) and deletes it when the test ends.
func fixedNamespace(t *testing.T, cp *harness.ControlPlane, name string) string {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"gpufleet.dev/e2e": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cp.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err = harness.Eventually(context.Background(), "service account default in "+name, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}
