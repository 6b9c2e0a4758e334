//go:build e2e

package gpuvalidatee2e

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/e2e/harness"
)

// Namespaces with fixed names: KWOK's log rules select pods by namespace
// (Job pods have generated names) and by the check pods' fixed names.
const (
	nsWave = "gv-e2e-wave"
	nsDiag = "gv-e2e-diag"
	nsSlow = "gv-e2e-slow"
)

const testImage = "registry.example/nccl-tests@sha256:0000000000000000000000000000000000000000000000000000000000000000"

func kernelLog(lines ...string) string {
	ts := time.Now().UTC().Add(-5 * time.Minute).Format("2006-01-02T15:04:05-0700")
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s gpu-node kernel: %s\n", ts, l)
	}
	return b.String()
}

// dcgmNodes are the gv-diag nodes' DCGM check pod logs (DCGMCommand's
// output, pkg/gpucheck/testdata; see TestDCGMOwnVerdictPerReleaseLine),
// by node, and what the gate makes of each.
var dcgmNodes = []struct {
	node, fixture, status, message string
}{
	{"gv-diag-0", "dcgm-4.4.2-level1-pass.log", "ok", "DCGM level 1: 1 tests passed"},
	// DCGM 4 fails the level-1 test on DCGM_FR_FIELD_QUERY, severity MONITOR.
	{"gv-diag-1", "dcgm-4.4.2-level1-fail-field-query.log", "fail", "fail: DCGM Deployment/software failed on GPU3: Could not query field row_remap_pending for GPU 3: No data is available (-14) (error 27 DCGM_FR_FIELD_QUERY, severity MONITOR)"},
	{"gv-diag-2", "dcgm-4.4.2-level1-pass.log", "fail", "DCGM level 1: 1 tests passed"}, // fails on Xid
	// DCGM's own warnings warn and name the fix.
	{"gv-diag-3", "dcgm-4.4.2-level1-warn-persistence.log", "warn", "warning: DCGM Deployment/software warned: Persistence mode for GPU 0 is disabled."},
	{"gv-diag-4", "dcgm-3.3.8-level1-warn-env.log", "warn", "fix: unset the environment variable DCGM names in the --dcgm-image and rerun"},
	{"gv-diag-5", "dcgm-3.2.6-level1-warn-graphics.log", "warn", "warning: DCGM Deployment/Graphics Processes warned"},
	{"gv-diag-6", "dcgm-4.4.2-level1-runtime-error.log", "fail", "fail: dcgmi diag runtime error: Unable to complete diagnostic. Return: (-30)"},
}

// cuinitNode's log is the real DCGM 3.3.8 table of
// ../shared/real-outputs/dcgm (DCGM_FR_CUDA_API, MONITOR, fails GPU
// Memory), read in place when the checkout has it.
const cuinitNode = "gv-diag-7"

func realCuinit() string {
	root, err := harness.RepoRoot()
	if err != nil {
		return ""
	}
	for dir := root; ; dir = filepath.Dir(dir) {
		b, err := os.ReadFile(filepath.Join(dir, "shared", "real-outputs", "dcgm", "dcgm-3.3.8_diag-r3-fail-early_fail-cuinit_8xH100.txt"))
		if err == nil {
			return string(b)
		}
		if filepath.Dir(dir) == dir {
			return ""
		}
	}
}

// logRules are every log the checks of these tests read, served by KWOK.
func logRules(t *testing.T) []logRule {
	clean := kernelLog("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06")
	fatal := kernelLog("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.124.06",
		"NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
	// What passes: an NVLink5 sub code NVIDIA's decode says to ignore, and
	// an Xid 154 reset request a later Xid 154 of the GPU cleared.
	benign := kernelLog("NVRM: Xid (PCI:0000:04:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 03 (0x00000004 0x00000100 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
		"NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
		"NVRM: Xid (PCI:0000:04:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)")
	dcgmPass := string(repoFile(t, "pkg/gpucheck/testdata/dcgm-4.4.2-level1-pass.log"))
	good := string(repoFile(t, "pkg/nccl/testdata/allreduce-tagged.txt"))
	slow := string(repoFile(t, "pkg/nccl/testdata/allreduce-slow.txt"))
	// Specific pods first: KWOK uses the first rule that matches.
	var rules []logRule
	for _, n := range dcgmNodes {
		rules = append(rules, logRule{Namespaces: []string{nsDiag}, Pods: []string{"gpu-validate-dcgm-" + n.node}, Container: "dcgm",
			Text: string(repoFile(t, "pkg/gpucheck/testdata/"+n.fixture))})
	}
	if real := realCuinit(); real != "" {
		rules = append(rules, logRule{Namespaces: []string{nsDiag}, Pods: []string{"gpu-validate-dcgm-" + cuinitNode}, Container: "dcgm", Text: real})
	}
	return append(rules,
		logRule{Namespaces: []string{nsDiag}, Pods: []string{"gpu-validate-xid-gv-diag-2"}, Container: "xid", Text: fatal},
		logRule{Namespaces: []string{nsDiag}, Pods: []string{"gpu-validate-xid-gv-diag-0"}, Container: "xid", Text: benign},
		logRule{Namespaces: []string{nsDiag, nsWave}, Container: "dcgm", Text: dcgmPass},
		logRule{Namespaces: []string{nsDiag, nsWave}, Container: "xid", Text: clean},
		logRule{Namespaces: []string{nsWave}, Container: "nccl", Text: good},
		logRule{Namespaces: []string{nsSlow}, Container: "nccl", Text: slow},
	)
}

// logNodes creates a pool whose kubelet endpoint is the KWOK log server.
func logNodes(t *testing.T, cp *harness.ControlPlane, pool string, n int) []string {
	port := logServer(t, cp)
	return createNodes(t, cp, harness.GPUPool{Name: pool, Nodes: n}, func(_ int, node *corev1.Node) {
		pointKubelet(node, "127.0.0.1", port)
	})
}

func TestGPUValidateSevenOfEightGPUs(t *testing.T) {
	cp := harness.Shared(t)
	createNodes(t, cp, harness.GPUPool{Name: "gv-count", Nodes: 3}, func(i int, n *corev1.Node) {
		switch i {
		case 1: // one GPU gone from the node
			n.Status.Capacity[harness.GPUResource] = resource.MustParse("7")
			n.Status.Allocatable[harness.GPUResource] = resource.MustParse("7")
		case 2: // the device plugin marked one unhealthy
			n.Status.Allocatable[harness.GPUResource] = resource.MustParse("7")
		}
	})
	r := runPlugin(t, cp, "nodes", "-l", harness.PoolLabel+"=gv-count", "--expected-gpus", "8", "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("exit %d, want 1 (findings)", r.ExitCode)
	}
	rep := parseReport(t, r)
	for node, want := range map[string]string{"gv-count-0": "ok", "gv-count-1": "fail", "gv-count-2": "fail"} {
		if got, msgs := rep.status(node); got != want {
			t.Errorf("%s: %s, want %s\n%s", node, got, want, msgs)
		}
	}
	_, msgs := rep.status("gv-count-1")
	if !strings.Contains(msgs, "missing GPUs: capacity 7 of 8 expected") {
		t.Errorf("gv-count-1 findings: %s", msgs)
	}
	_, msgs = rep.status("gv-count-2")
	if !strings.Contains(msgs, "unhealthy GPUs: allocatable 7 of 8") {
		t.Errorf("gv-count-2 findings: %s", msgs)
	}
	if rep.Summary.GPUsExpected != 24 || rep.Summary.GPUsFound != 22 || rep.Summary.Failed != 2 {
		t.Errorf("summary %+v", rep.Summary)
	}
	// The table says the same to a person.
	tbl := runPlugin(t, cp, "nodes", "gv-count-1", "--expected-gpus", "8", "--color", "never")
	if tbl.ExitCode != 1 || !strings.Contains(tbl.Stdout, "7/8") || !strings.Contains(tbl.Stdout, "FAIL") {
		t.Errorf("table exit %d:\n%s", tbl.ExitCode, tbl.Stdout)
	}
	// Without --expected-gpus the pool's majority (8 of 3 nodes) is used.
	maj := parseReport(t, runPlugin(t, cp, "nodes", "gv-count-1", "-o", "json"))
	if st, msgs := maj.status("gv-count-1"); st != "fail" || !strings.Contains(msgs, "pool-majority") {
		t.Errorf("pool majority: %s\n%s", st, msgs)
	}
}

func TestGPUValidateDRANode(t *testing.T) {
	cp := harness.Shared(t)
	ctx := context.Background()
	createNodes(t, cp, harness.GPUPool{Name: "gv-dra", Nodes: 1}, func(_ int, n *corev1.Node) {
		delete(n.Status.Capacity, harness.GPUResource)
		delete(n.Status.Allocatable, harness.GPUResource)
	})
	var devs []string
	for i := 0; i < 7; i++ {
		devs = append(devs, fmt.Sprintf(`{"name":"gpu-%d"}`, i))
	}
	body := `{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"gv-dra-0-gpu"},` +
		`"spec":{"driver":"gpu.nvidia.com","nodeName":"gv-dra-0","pool":{"name":"gv-dra-0","generation":1,"resourceSliceCount":1},"devices":[` + strings.Join(devs, ",") + `]}}`
	res := cp.Client.Discovery().RESTClient().Post().AbsPath("/apis/resource.k8s.io/v1/resourceslices").Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx)
	if err := res.Error(); err != nil {
		t.Fatalf("create ResourceSlice: %v", err)
	}
	t.Cleanup(func() {
		_ = cp.Client.Discovery().RESTClient().Delete().AbsPath("/apis/resource.k8s.io/v1/resourceslices/gv-dra-0-gpu").Do(context.Background()).Error()
	})
	rep := parseReport(t, runPlugin(t, cp, "nodes", "gv-dra-0", "--expected-gpus", "8", "-o", "json"))
	if st, msgs := rep.status("gv-dra-0"); st != "fail" || !strings.Contains(msgs, "7 of 8 expected (flag) published in DRA ResourceSlices") {
		t.Errorf("DRA node: %s\n%s", st, msgs)
	}
}

func TestGPUValidateMIGReported(t *testing.T) {
	cp := harness.Shared(t)
	createNodes(t, cp, harness.GPUPool{Name: "gv-mig", Nodes: 1}, func(_ int, n *corev1.Node) {
		n.Status.Capacity[harness.GPUResource] = resource.MustParse("0")
		n.Status.Allocatable[harness.GPUResource] = resource.MustParse("0")
		n.Status.Capacity["nvidia.com/mig-3g.40gb"] = resource.MustParse("16")
		n.Status.Allocatable["nvidia.com/mig-3g.40gb"] = resource.MustParse("16")
	})
	r := runPlugin(t, cp, "nodes", "gv-mig-0", "--expected-gpus", "8", "-o", "json")
	if r.ExitCode != 0 {
		t.Fatalf("exit %d, want 0: MIG layouts are reported, not failed", r.ExitCode)
	}
	if st, msgs := parseReport(t, r).status("gv-mig-0"); st != "ok" || !strings.Contains(msgs, "MIG layout 16x nvidia.com/mig-3g.40gb") {
		t.Errorf("gv-mig-0: %s\n%s", st, msgs)
	}
}

func TestGPUValidateConfigDrift(t *testing.T) {
	cp := harness.Shared(t)
	ip := proxyableIP(t)
	bodies := []string{"configz-1.36.json", "configz-1.37-drift.json", "configz-1.37-clean.json"}
	createNodes(t, cp, harness.GPUPool{Name: "gv-cfg", Nodes: 3}, func(i int, n *corev1.Node) {
		port := kubeletStandIn(t, ip, repoFile(t, "pkg/gpucheck/testdata/"+bodies[i]))
		pointKubelet(n, ip, port)
		if i == 0 {
			n.Status.NodeInfo.KubeletVersion = "v1.36.4"
		}
	})
	// KWOK must leave the addresses and port alone, or the proxy goes elsewhere.
	n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), "gv-cfg-1", metav1.GetOptions{})
	if err != nil || n.Status.Addresses[0].Address != ip || n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Fatalf("node addresses rewritten: %+v %+v (%v)", n.Status.Addresses, n.Status.DaemonEndpoints, err)
	}
	r := runPlugin(t, cp, "nodes", "gv-cfg-1", "gv-cfg-2", "--expected-gpus", "8", "-o", "json")
	if r.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", r.ExitCode)
	}
	rep := parseReport(t, r)
	st, msgs := rep.status("gv-cfg-1")
	if st != "fail" || !strings.Contains(msgs, `GPU-relevant kubelet config drift topologyManagerPolicy is "best-effort" ("single-numa-node" on gv-cfg-0)`) {
		t.Errorf("gv-cfg-1: %s\n%s", st, msgs)
	}
	if st, msgs := rep.status("gv-cfg-2"); st != "ok" || !strings.Contains(msgs, "expected difference(s) from gv-cfg-0") {
		t.Errorf("gv-cfg-2: %s\n%s", st, msgs)
	}
	// A feature gate a release between the two kubelets removed
	// (DevicePluginCDIDevices, gone in 1.34) had to leave the newer
	// kubelet's configuration: an expected difference, not drift.
	withGate := strings.Replace(string(repoFile(t, "pkg/gpucheck/testdata/configz-1.36.json")), `"featureGates":{`, `"featureGates":{"DevicePluginCDIDevices":true,`, 1)
	gateBodies := [][]byte{[]byte(withGate), repoFile(t, "pkg/gpucheck/testdata/configz-1.36.json")}
	createNodes(t, cp, harness.GPUPool{Name: "gv-gate", Nodes: 2}, func(i int, n *corev1.Node) {
		port := kubeletStandIn(t, ip, gateBodies[i])
		pointKubelet(n, ip, port)
		n.Status.NodeInfo.KubeletVersion = []string{"v1.33.4", "v1.34.1"}[i]
	})
	r = runPlugin(t, cp, "nodes", "gv-gate-1", "--expected-gpus", "8", "-o", "json")
	if st, msgs := parseReport(t, r).status("gv-gate-1"); st != "ok" || !strings.Contains(msgs, "featureGates.DevicePluginCDIDevices") {
		t.Errorf("a removed gate dropped: %s (exit %d)\n%s", st, r.ExitCode, msgs)
	}
	// --baseline-node picks the reference explicitly.
	r = runPlugin(t, cp, "nodes", "gv-cfg-1", "--baseline-node", "gv-cfg-2", "--expected-gpus", "8", "-o", "json")
	if st, _ := parseReport(t, r).status("gv-cfg-1"); st != "fail" {
		t.Errorf("with --baseline-node: %s", st)
	}

	// Without get on nodes/proxy the plugin says so and exits 3.
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "gv-e2e-node-reader"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"list"}},
	}}
	if _, err := cp.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gv-e2e-node-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "gv-e2e-viewer"}}}
	if _, err := cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cp.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cp.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	r = runPlugin(t, cp, "nodes", "gv-cfg-1", "--expected-gpus", "8", "--as", "gv-e2e-viewer")
	if r.ExitCode != 3 || !strings.Contains(r.Stderr, "get on nodes/proxy is required") || !strings.Contains(r.Stderr, "hint: kubectl auth can-i get nodes --subresource=proxy") {
		t.Errorf("forbidden: exit %d\n%s", r.ExitCode, r.Stderr)
	}
}

// TestGPUValidateDCGMAndXid: the DCGM gate fails every node whose DCGM
// level-1 run DCGM itself failed, whatever the severity (FIELD_QUERY,
// MONITOR; a runtime error; the real 3.3.8 CUDA_API failure), warns on
// DCGM's own warnings on 3.2, 3.3 and 4.x and fails them with
// --dcgm-warn-fails; the Xid gate fails a fatal Xid and passes an NVLink5
// sub code NVIDIA says to ignore and a cleared Xid 154.
func TestGPUValidateDCGMAndXid(t *testing.T) {
	cp := harness.Shared(t)
	ns := fixedNamespace(t, cp, nsDiag)
	n := len(dcgmNodes)
	real := realCuinit() != ""
	if real {
		n++
	} else {
		t.Logf("../shared/real-outputs absent: %s not checked", cuinitNode)
	}
	logNodes(t, cp, "gv-diag", n)
	completePods(t, cp, ns)
	r := runPlugin(t, cp, "nodes", "-l", harness.PoolLabel+"=gv-diag", "--expected-gpus", "8", "--dcgm", "--xid", "--since", "1h", "-n", ns, "-o", "json", "--timeout", "2m")
	if r.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", r.ExitCode)
	}
	rep := parseReport(t, r)
	for _, want := range dcgmNodes {
		if st, msgs := rep.status(want.node); st != want.status || !strings.Contains(msgs, want.message) {
			t.Errorf("%s (%s): %s, want %s with %q\n%s", want.node, want.fixture, st, want.status, want.message, msgs)
		}
	}
	if st, msgs := rep.status("gv-diag-0"); !strings.Contains(msgs, "Xid 145 (NVLINK: RLW Error, info)") || !strings.Contains(msgs, "Xid 154 (GPU Recovery Action Changed, info) x1 on PCI:0000:04:00; NVIDIA's immediate action: XID_154: GPU Reset Required; a later Xid 154 of this GPU changed the recovery action to None") || st != "ok" {
		t.Errorf("gv-diag-0 Xids: %s\n%s", st, msgs)
	}
	if st, msgs := rep.status("gv-diag-2"); st != "fail" || !strings.Contains(msgs, "Xid 79 (GPU has fallen off the bus, fatal)") {
		t.Errorf("gv-diag-2: %s\n%s", st, msgs)
	}
	if st, msgs := rep.status(cuinitNode); real && (st != "fail" || !strings.Contains(msgs, "DCGM Hardware/GPU Memory failed: GPU 0 Error using CUDA API cuInit")) {
		t.Errorf("%s: %s\n%s", cuinitNode, st, msgs)
	}
	// DCGM's warnings fail the nodes with --dcgm-warn-fails.
	r = runPlugin(t, cp, "nodes", "gv-diag-3", "gv-diag-4", "gv-diag-5", "--expected-gpus", "8", "--dcgm", "--dcgm-warn-fails", "-n", ns, "-o", "json", "--timeout", "2m")
	rep = parseReport(t, r)
	for _, node := range []string{"gv-diag-3", "gv-diag-4", "gv-diag-5"} {
		if st, msgs := rep.status(node); st != "fail" || !strings.Contains(msgs, "(a failure under --dcgm-warn-fails)") {
			t.Errorf("%s with --dcgm-warn-fails: %s\n%s", node, st, msgs)
		}
	}
	if r.ExitCode != 1 {
		t.Errorf("--dcgm-warn-fails: exit %d, want 1", r.ExitCode)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil && len(pods.Items) > 0 {
		// Deleted pods may linger for a moment; they must be going.
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				t.Errorf("check pod %s left behind", p.Name)
			}
		}
	}
}

// localRegistry serves a random image from go-containerregistry's
// in-process registry and returns its tag and digest.
func localRegistry(t *testing.T) (string, string) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(strings.TrimPrefix(srv.URL, "http://") + "/nccl/nccl-tests:2.16")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	return tag.String(), d.String()
}

func TestGPUValidateHealthyWave(t *testing.T) {
	cp := harness.Shared(t)
	ns := fixedNamespace(t, cp, nsWave)
	logNodes(t, cp, "gv-wave", 2)
	completePods(t, cp, ns)
	image, digest := localRegistry(t)
	// A known-good wave records the pool's baseline.
	r := runPlugin(t, cp, "nodes", "-l", harness.PoolLabel+"=gv-wave", "--expected-gpus", "8", "--xid", "--since", "1h", "--dcgm",
		"--nccl", "--image", image, "--save-baseline", "-n", ns, "-o", "json", "--timeout", "2m")
	if r.ExitCode != 0 {
		t.Fatalf("exit %d, want 0", r.ExitCode)
	}
	rep := parseReport(t, r)
	if rep.Summary.Passed != 2 || rep.Summary.Failed != 0 || len(rep.NCCL) != 1 || !rep.NCCL[0].BaselineSaved || rep.NCCL[0].Gate.Verdict != "PASS" {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(r.Stdout, "@"+digest) {
		t.Errorf("image not pinned to %s", digest)
	}
	cm, err := cp.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "gpu-validate-nccl-baselines", metav1.GetOptions{})
	if err != nil || !strings.Contains(cm.Data["gv-wave.json"], `"busBwGBps": 370`) {
		t.Fatalf("baseline ConfigMap: %v %v", cm, err)
	}
	// The next wave is gated against it and passes; the table reports it.
	r = runPlugin(t, cp, "nccl", "-l", harness.PoolLabel+"=gv-wave", "--image", image, "-n", ns, "--timeout", "2m", "--color", "never")
	if r.ExitCode != 0 || !strings.Contains(r.Stdout, "NCCL pool gv-wave: busbw 370.0 GB/s at 8G on 2 nodes vs baseline 370.0 GB/s") {
		t.Errorf("second run: exit %d\n%s", r.ExitCode, r.Stdout)
	}
	jobs, _ := cp.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if len(jobs.Items) != 0 {
		t.Errorf("%d NCCL job(s) left behind", len(jobs.Items))
	}
}

func TestGPUValidateNCCLBelowBaseline(t *testing.T) {
	cp := harness.Shared(t)
	ns := fixedNamespace(t, cp, nsSlow)
	logNodes(t, cp, "gv-slow", 2)
	completePods(t, cp, ns)
	_, err := cp.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-validate-nccl-baselines"},
		Data:       map[string]string{"gv-slow.json": `{"pool":"gv-slow","busBwGBps":370,"sizeBytes":8589934592,"nodes":2,"gpusPerNode":8}`},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := runPlugin(t, cp, "nccl", "gv-slow-0", "gv-slow-1", "--image", testImage, "--no-resolve", "-n", ns, "-o", "json", "--timeout", "2m")
	if r.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", r.ExitCode)
	}
	rep := parseReport(t, r)
	if len(rep.NCCL) != 1 || rep.NCCL[0].Gate.Verdict != "FAIL" || rep.NCCL[0].Gate.BusBW != 250 {
		t.Fatalf("nccl %+v", rep.NCCL)
	}
	for _, n := range []string{"gv-slow-0", "gv-slow-1"} {
		if st, msgs := rep.status(n); st != "fail" || !strings.Contains(msgs, "busbw 250.0 GB/s at 8G is below the baseline 370.0 GB/s by 32.4% (tolerance 10%)") {
			t.Errorf("%s: %s\n%s", n, st, msgs)
		}
	}
}
