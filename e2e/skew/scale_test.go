//go:build e2e

package skewe2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpufleet/upgrade-plugins/e2e/bench"
	"github.com/gpufleet/upgrade-plugins/e2e/harness"
	"github.com/gpufleet/upgrade-plugins/e2e/plugintest"
)

// auditEvent is the part of an audit log line the tests read.
type auditEvent struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// nodeRequests returns the audited node requests of kubectl-skew.
func nodeRequests(t testing.TB, cp *harness.ControlPlane) []auditEvent {
	t.Helper()
	return requests(t, cp, "nodes")
}

// requests are kubectl-skew's requests for resource in the audit log.
func requests(t testing.TB, cp *harness.ControlPlane, resource string) []auditEvent {
	t.Helper()
	f, err := os.Open(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || !strings.HasPrefix(e.UserAgent, "kubectl-skew/") || e.ObjectRef == nil || e.ObjectRef.Resource != resource {
			continue
		}
		out = append(out, e)
	}
	return out
}

// TestSkewPagedNodeList checks in the audit log that the inventory pages
// the node list and never asks for one node at a time.
func TestSkewPagedNodeList(t *testing.T) {
	cp := scenario(t)
	before := len(nodeRequests(t, cp))
	if r := skew(t, cp, "-q", "--chunk-size", "2"); r.ExitCode != 1 {
		t.Fatalf("%s", r)
	}
	var reqs []auditEvent
	_ = harness.Eventually(context.Background(), "audit events", 10*time.Second, func(context.Context) (bool, error) {
		reqs = nodeRequests(t, cp)[before:]
		return len(reqs) >= 3, nil
	})
	n, _ := cp.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	wantPages := (len(n.Items) + 1) / 2
	if len(reqs) != wantPages {
		t.Errorf("%d node requests for %d nodes in pages of 2, want %d", len(reqs), len(n.Items), wantPages)
	}
	for _, e := range reqs {
		if e.Verb != "list" || !strings.Contains(e.RequestURI, "limit=2") || e.ObjectRef.Name != "" {
			t.Errorf("node request %s %s: want paged lists only", e.Verb, e.RequestURI)
		}
	}

	// The plan also reads each GPU pool for inference workloads: from the
	// inventory's own node list and one pod list of every namespace,
	// paged alike, for all its GPU pools at once.
	beforeNodes, beforePods := len(nodeRequests(t, cp)), len(requests(t, cp, "pods"))
	if r := skew(t, cp, "plan", "--target", "v1.38", "-q", "--chunk-size", "2"); r.ExitCode > 1 {
		t.Fatalf("%s", r)
	}
	p, _ := cp.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var podLists []auditEvent
	_ = harness.Eventually(context.Background(), "audit events", 10*time.Second, func(context.Context) (bool, error) {
		reqs = nodeRequests(t, cp)[beforeNodes:]
		podLists = nil
		for _, e := range requests(t, cp, "pods")[beforePods:] {
			if e.ObjectRef.Namespace == "" && !strings.Contains(e.RequestURI, "Selector=") {
				podLists = append(podLists, e)
			}
		}
		return len(reqs) >= wantPages && len(podLists) >= (len(p.Items)+1)/2, nil
	})
	if len(reqs) != wantPages {
		t.Errorf("plan: %d node requests for %d nodes in pages of 2, want %d (the inventory's list, shared by the inference read)", len(reqs), len(n.Items), wantPages)
	}
	if want := (len(p.Items) + 1) / 2; len(podLists) != want {
		t.Errorf("plan: %d lists of pods in all namespaces for %d pods in pages of 2, want %d (one paged list for every GPU pool)", len(podLists), len(p.Items), want)
	}
	for _, e := range append(reqs, podLists...) {
		if e.Verb != "list" || !strings.Contains(e.RequestURI, "limit=2") || e.ObjectRef.Name != "" {
			t.Errorf("plan: request %s %s: want paged lists only", e.Verb, e.RequestURI)
		}
	}
}

// scaleNode is a node shaped like a kubelet's: labels, conditions,
// addresses, images and node info. It is not KWOK's, so nothing updates it.
func scaleNode(i int) *corev1.Node {
	pool := fmt.Sprintf("scale-pool-%d", i%10)
	version := []string{"v1.37.2", "v1.36.5", "v1.35.9", "v1.34.6"}[i%4]
	name := fmt.Sprintf("scale-%05d", i)
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods: resource.MustParse("110"), harness.GPUResource: resource.MustParse("8"),
		corev1.ResourceEphemeralStorage: resource.MustParse("3Ti"),
	}
	var images []corev1.ContainerImage
	for j := 0; j < 20; j++ {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("nvcr.io/nvidia/image-%02d@sha256:%064d", j, j), fmt.Sprintf("nvcr.io/nvidia/image-%02d:24.%02d", j, j)},
			SizeBytes: int64(1e9 + j),
		})
	}
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: "kubelet reports " + reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			harness.PoolLabel: pool, harness.GPUProductLabel: "NVIDIA-H100-80GB-HBM3", harness.RackSetLabel: fmt.Sprintf("rs-%d", i%64),
			"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "region-1", "node.kubernetes.io/instance-type": "a3-highgpu-8g",
			"nvidia.com/gpu.count": "8", "nvidia.com/cuda.driver.major": "550", "gpufleet.dev/scale": "true",
		}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), ProviderID: "gce://project/zone-a/" + name},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res.DeepCopy(),
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.200.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "containerd://2.1.4", KernelVersion: "6.8.0-1015-gcp", OSImage: "Ubuntu 24.04.2 LTS",
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i*7), BootID: fmt.Sprintf("%032x", i*13)},
			Images: images,
		},
	}
}

func createScaleNodes(b *testing.B, cp *harness.ControlPlane, n int) {
	cfg := rest.CopyConfig(cp.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	existing, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "gpufleet.dev/scale=true", Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(len(existing.Items)))
	if len(existing.Items) > 0 {
		next.Store(0) // create what is missing; AlreadyExists is fine
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if _, err := kc.CoreV1().Nodes().Create(ctx, scaleNode(i), metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d node creates failed", failed.Load())
	}
	b.Logf("created %d nodes in %s", n, time.Since(start).Round(time.Millisecond))
}

// measure runs a command reps times under hack/peakrss and returns the
// median wall time, the median CPU time (user+system) and the median peak
// RSS in MiB of the whole process (children included for shell pipelines).
// Started straight from this test binary, a command's ru_maxrss would
// count the binary's own memory (see plugintest.PeakRSS).
func measure(b *testing.B, reps int, name string, args ...string) (time.Duration, time.Duration, float64) {
	var walls, cpus []time.Duration
	var rss []float64
	for i := 0; i < reps; i++ {
		cmd := exec.Command(plugintest.PeakRSS(b), append([]string{name}, args...)...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = nil, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
				b.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
			}
		}
		_, kib, ok := plugintest.SplitPeakRSS(stderr.String())
		if !ok {
			b.Fatalf("%s %v: no peak RSS from hack/peakrss\n%s", name, args, stderr.String())
		}
		walls = append(walls, wall)
		cpus = append(cpus, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		rss = append(rss, float64(kib)/1024)
	}
	sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	sort.Float64s(rss)
	return walls[reps/2], cpus[reps/2], rss[reps/2]
}

// BenchmarkSkewScale compares kubectl-skew with kubectl on a cluster of
// E2E_SCALE_NODES nodes (default 5000), as whole processes. It only runs
// with E2E_SCALE=1:
//
//	E2E_SCALE=1 go test -tags e2e -run '^$' -bench SkewScale -benchtime 1x ./e2e/skew/
func BenchmarkSkewScale(b *testing.B) {
	if os.Getenv("E2E_SCALE") == "" {
		b.Skip("set E2E_SCALE=1 to run the scale benchmark")
	}
	n := 5000
	if s := os.Getenv("E2E_SCALE_NODES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	cp := harness.Shared(b)
	createScaleNodes(b, cp, n)
	kubectl := cp.Binaries.Kubectl
	kc := "--kubeconfig=" + cp.Kubeconfig
	skewBin := plugintest.Binary(b, "kubectl-skew")
	reps := 5
	type row struct {
		what      string
		wall, cpu time.Duration
		rss       float64
	}
	var rows []row
	add := func(what string, name string, args ...string) {
		w, c, r := measure(b, reps, name, args...)
		rows = append(rows, row{what, w, c, r})
	}
	add("kubectl version --client (process start)", kubectl, "version", "--client", "-o", "json")
	add("kubectl get --raw /api/v1/nodes", kubectl, kc, "get", "--raw", "/api/v1/nodes")
	add("kubectl get nodes -o json", kubectl, kc, "get", "nodes", "-o", "json")
	add("census one-liner (custom-columns | awk | sort | uniq -c)", "/bin/sh", "-c",
		kubectl+" "+kc+" get nodes -o custom-columns=NAME:.metadata.name,KUBELET:.status.nodeInfo.kubeletVersion | awk 'NR>1{print $2}' | sort | uniq -c >/dev/null")
	pathEnv := "PATH=" + filepath.Dir(kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")
	add("kubectl-skew -o json (full inventory and check)", "/usr/bin/env", pathEnv, skewBin, kc, "-o", "json")
	add("kubectl-skew (table)", "/usr/bin/env", pathEnv, skewBin, kc)
	add("kubectl-skew plan --target v1.38", "/usr/bin/env", pathEnv, skewBin, kc, "plan", "--target", "v1.38")

	// The plugin beside its floor, the raw read of what it must read (the
	// nodes), alternating, median of the pairwise ratios.
	findingsOK := func(runs []plugintest.Result) error {
		for _, r := range runs {
			if r.ExitCode > 1 {
				return fmt.Errorf("exit %d: %s", r.ExitCode, plugintest.LastLines(r.Stderr, 5))
			}
		}
		return nil
	}
	bench.Compare(b, context.Background(),
		bench.Side{Name: "kubectl-skew -o json", Check: findingsOK, Procs: []bench.Proc{{Args: []string{skewBin, kc, "-o", "json"}, Env: []string{pathEnv}}}},
		bench.Side{Name: "kubectl get --raw /api/v1/nodes", Check: findingsOK, Procs: []bench.Proc{{Args: []string{kubectl, kc, "get", "--raw", "/api/v1/nodes"}}}}, 0)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/usr/bin/env", pathEnv, skewBin, kc, "-q").Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%d nodes, median of %d whole-process runs:\n%-60s %10s %10s %12s\n", n, reps, "COMMAND", "WALL", "CPU", "PEAK RSS")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-60s %9.2fs %9.2fs %8.1f MiB\n", r.what, r.wall.Seconds(), r.cpu.Seconds(), r.rss)
	}
	b.Log(sb.String())
	// go test truncates long benchmark logs; the table also goes to stderr.
	fmt.Fprint(os.Stderr, sb.String())
	for _, r := range rows {
		if strings.HasPrefix(r.what, "kubectl-skew -o json") {
			b.ReportMetric(r.wall.Seconds(), "skew-s")
			b.ReportMetric(r.rss, "skew-MiB")
		}
		if strings.HasPrefix(r.what, "kubectl get --raw") {
			b.ReportMetric(r.wall.Seconds(), "raw-s")
		}
	}
}
