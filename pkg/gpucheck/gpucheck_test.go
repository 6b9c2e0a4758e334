package gpucheck

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/nccl"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gpuNode(name string, capacity, alloc int, labels map[string]string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if capacity >= 0 {
		n.Status.Capacity = corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(capacity), resource.DecimalSI)}
		n.Status.Allocatable = corev1.ResourceList{GPUResource: *resource.NewQuantity(int64(alloc), resource.DecimalSI)}
	}
	return n
}

func TestCheckCount(t *testing.T) {
	four := 4
	eight := 8
	cases := []struct {
		name    string
		in      CountInput
		state   CountState
		level   Level
		found   int
		source  ExpectedSource
		message string
	}{
		{"healthy", CountInput{Node: gpuNode("a", 8, 8, nil), ExpectedFlag: 8}, CountOK, LevelInfo, 8, SourceFlag, "8/8 GPUs"},
		{"7 of 8 missing", CountInput{Node: gpuNode("a", 7, 7, nil), ExpectedFlag: 8}, CountMissing, LevelFail, 7, SourceFlag, "missing GPUs: capacity 7 of 8"},
		{"unhealthy", CountInput{Node: gpuNode("a", 8, 7, nil), ExpectedFlag: 8}, CountUnhealthy, LevelFail, 7, SourceFlag, "unhealthy GPUs: allocatable 7 of 8"},
		{"not advertised", CountInput{Node: gpuNode("a", -1, 0, nil), ExpectedFlag: 8}, CountNotAdvertised, LevelFail, 0, SourceFlag, "not advertised (expected 8, flag)"},
		{"label", CountInput{Node: gpuNode("a", 8, 8, map[string]string{GPUCountLabel: "8"})}, CountOK, LevelInfo, 8, SourceLabel, ""},
		{"pool majority", CountInput{Node: gpuNode("a", 7, 7, nil), PoolMajority: 8, PoolSize: 5}, CountMissing, LevelFail, 7, SourcePool, "pool-majority"},
		// GFD counts the GPUs NVML still sees: one lost at reboot gives a
		// label of 7 on a node of a pool of 8-GPU nodes.
		{"label lowered by a lost GPU", CountInput{Node: gpuNode("a", 7, 7, map[string]string{GPUCountLabel: "7"}), PoolMajority: 8, PoolSize: 5}, CountMissing, LevelFail, 7, SourcePool, "capacity 7 of 8 expected (pool-majority)"},
		{"label above the majority", CountInput{Node: gpuNode("a", 7, 7, map[string]string{GPUCountLabel: "8"}), PoolMajority: 7, PoolSize: 5}, CountMissing, LevelFail, 7, SourceLabel, "capacity 7 of 8 expected (label)"},
		{"no expectation", CountInput{Node: gpuNode("a", 8, 8, nil)}, CountUnknown, LevelWarning, 8, SourceNone, "no expected count"},
		{"extra", CountInput{Node: gpuNode("a", 8, 8, nil), ExpectedFlag: 4}, CountExtra, LevelWarning, 8, SourceFlag, "more than"},
		{"dra ok", CountInput{Node: gpuNode("a", -1, 0, nil), ExpectedFlag: 8, DRADevices: &eight}, CountOK, LevelInfo, 8, SourceFlag, "DRA driver"},
		{"dra missing", CountInput{Node: gpuNode("a", -1, 0, nil), ExpectedFlag: 8, DRADevices: &four}, CountMissing, LevelFail, 4, SourceFlag, "DRA ResourceSlices"},
		{"mig reported", CountInput{Node: func() *corev1.Node {
			n := gpuNode("a", 2, 2, nil)
			n.Status.Capacity["nvidia.com/mig-3g.40gb"] = resource.MustParse("12")
			return n
		}(), ExpectedFlag: 8}, CountMIG, LevelInfo, 2, SourceFlag, "MIG layout 12x nvidia.com/mig-3g.40gb"},
		{"mig single", CountInput{Node: gpuNode("a", 56, 56, map[string]string{MIGStrategyLabel: "single", MIGConfigLabel: "all-1g.10gb"}), ExpectedFlag: 8}, CountMIG, LevelInfo, 56, SourceFlag, "single strategy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, fs := CheckCount(tc.in)
			if c.State != tc.state || c.Found != tc.found || c.ExpectedSource != tc.source || len(fs) != 1 || fs[0].Level != tc.level {
				t.Fatalf("got %+v %+v", c, fs)
			}
			if !strings.Contains(fs[0].Message, tc.message) {
				t.Errorf("message %q lacks %q", fs[0].Message, tc.message)
			}
		})
	}
}

func TestPoolMajority(t *testing.T) {
	nodes := []corev1.Node{*gpuNode("a", 8, 8, nil), *gpuNode("b", 8, 7, nil), *gpuNode("c", 7, 7, nil), *gpuNode("d", -1, 0, nil)}
	if c, n := PoolMajority(nodes); c != 8 || n != 3 {
		t.Errorf("got %d over %d", c, n)
	}
	if c, _ := PoolMajority([]corev1.Node{*gpuNode("a", 4, 4, nil), *gpuNode("b", 8, 8, nil)}); c != 8 {
		t.Errorf("tie: %d", c)
	}
}

func slice(version, name, node, driver, pool string, gen int64, devices int) *unstructured.Unstructured {
	var devs []any
	for i := 0; i < devices; i++ {
		devs = append(devs, map[string]any{"name": "gpu-" + string(rune('0'+i))})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.k8s.io/" + version, "kind": "ResourceSlice",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"driver": driver, "nodeName": node, "pool": map[string]any{"name": pool, "generation": gen, "resourceSliceCount": int64(1)}, "devices": devs},
	}}
}

func TestCountDRADevices(t *testing.T) {
	for _, v := range []string{"v1", "v1beta1"} {
		t.Run(v, func(t *testing.T) {
			kinds := map[schema.GroupVersionResource]string{}
			for _, sv := range ResourceSliceVersions {
				kinds[schema.GroupVersionResource{Group: "resource.k8s.io", Version: sv, Resource: "resourceslices"}] = "ResourceSliceList"
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds,
				slice(v, "s1", "gpu-a", DRADriver, "gpu-a", 2, 8),
				slice(v, "s0", "gpu-a", DRADriver, "gpu-a", 1, 8), // stale generation
				slice(v, "s2", "gpu-b", DRADriver, "gpu-b", 1, 7),
				slice(v, "s3", "gpu-b", "nic.example.com", "gpu-b", 1, 4))
			dyn.PrependReactor("list", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetResource().Version != v {
					return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
				}
				return false, nil, nil
			})
			got, err := CountDRADevices(context.Background(), dyn, "")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(DRACounts{Version: v, PerNode: map[string]int{"gpu-a": 8, "gpu-b": 7}}, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func loadConfigz(t *testing.T, name string) map[string]any {
	cfg, err := ParseConfigz(fixture(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDiffKubeletConfig(t *testing.T) {
	old := loadConfigz(t, "configz-1.36.json")
	clean := DiffKubeletConfig(old, loadConfigz(t, "configz-1.37-clean.json"), "v1.36.4", "v1.37.2")
	want := []ConfigDiff{{Field: "someNew137Field", New: `"x"`, Class: DriftExpected, Note: "field only the newer kubelet reports"}}
	if d := cmp.Diff(want, clean); d != "" {
		t.Errorf("clean (-want +got)\n%s", d)
	}
	drift := DiffKubeletConfig(old, loadConfigz(t, "configz-1.37-drift.json"), "v1.36.4", "v1.37.2")
	classes := map[string]DriftClass{}
	for _, d := range drift {
		classes[d.Field] = d.Class
	}
	if d := cmp.Diff(map[string]DriftClass{
		"evictionHard.memory.available": DriftGPU, "imageGCHighThresholdPercent": DriftOther,
		"someNew137Field": DriftExpected, "topologyManagerPolicy": DriftGPU,
	}, classes); d != "" {
		t.Errorf("drift (-want +got)\n%s", d)
	}
	fs := ConfigFindings("gpu-old-0", drift)
	if StatusOf(fs) != StatusFail || !strings.Contains(fs[2].Message, `topologyManagerPolicy is "best-effort" ("single-numa-node" on gpu-old-0)`) {
		t.Errorf("findings %+v", fs)
	}
}

func TestDiffKubeletConfig_DefaultChanges(t *testing.T) {
	old := map[string]any{"failCgroupV1": false, "cpuManagerPolicy": "static"}
	nw := map[string]any{"failCgroupV1": true, "cpuManagerPolicy": "static", "podLogsDir": "/var/log/pods"}
	diffs := DiffKubeletConfig(old, nw, "v1.34.3", "v1.35.1")
	for _, d := range diffs {
		if d.Class != DriftExpected {
			t.Errorf("%+v not expected", d)
		}
	}
	// The same change within one version is drift.
	diffs = DiffKubeletConfig(old, nw, "v1.35.0", "v1.35.1")
	if diffs[0].Field != "failCgroupV1" || diffs[0].Class != DriftOther {
		t.Errorf("%+v", diffs)
	}
	if fs := ConfigFindings("b", nil); fs[0].Message != "kubelet config matches b" {
		t.Error(fs)
	}
}

func TestParseConfigz_Errors(t *testing.T) {
	for _, in := range []string{"", "[]", `{"x":1}`, `{"kubeletconfig":[]}`, `{"kubeletconfig":null}`} {
		if _, err := ParseConfigz([]byte(in)); err == nil {
			t.Errorf("ParseConfigz(%q) succeeded", in)
		}
	}
}

func TestParseKernelLog(t *testing.T) {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type ev struct {
		Code  int
		Class XidClass
		PCI   string
		Timed bool
	}
	cases := map[string][]ev{
		"kernel-journal.log":   {{13, XidApplication, "PCI:0000:3b:00", true}, {43, XidInformational, "PCI:0000:3b:00", true}, {79, XidFatal, "PCI:0000:5d:00", true}, {12028, XidWarning, "PCI:0000:07:00.0", true}},
		"kernel-dmesg-iso.log": {{94, XidApplication, "PCI:0000:9a:00", true}, {31, XidApplication, "PCI:0000:9a:00", true}},
		"kernel-dmesg-raw.log": {{74, XidFatal, "PCI:0000:cb:00", false}, {200, XidWarning, "PCI:0000:cb:00", false}},
		"kernel-clean.log":     nil,
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			evs, err := ParseKernelLog(bytes.NewReader(fixture(t, file)), since)
			if err != nil {
				t.Fatal(err)
			}
			var got []ev
			for _, e := range evs {
				got = append(got, ev{e.Code, e.Class, e.PCI, !e.Time.IsZero()})
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
	evs, _ := ParseKernelLog(bytes.NewReader(fixture(t, "kernel-journal.log")), since)
	fs := XidFindings(evs)
	if StatusOf(fs) != StatusFail || !strings.Contains(fs[2].Message, "Xid 79 (GPU has fallen off the bus, fatal) x1 on PCI:0000:5d:00") {
		t.Errorf("%+v", fs)
	}
	if fs := XidFindings(nil); StatusOf(fs) != StatusPass {
		t.Error(fs)
	}
}

func TestParseDCGM(t *testing.T) {
	for _, in := range []string{"", "dcgmi: command not found", `{"other": 1}`, "{", `{"runtime_error": "top level: dcgmi never writes it there"}`} {
		if _, err := ParseDCGM(strings.NewReader(in)); err != ErrNoDCGMResult {
			t.Errorf("ParseDCGM(%q) err %v", in, err)
		}
	}
	// The command's exit lines are what ParseDCGM splits the log at.
	cmd := strings.Join(DCGMCommand(), " ")
	for _, c := range []string{"dcgmi diag -r 1 -j; echo \"gpu-validate: dcgmi diag -r 1 -j exited $?\"", "dcgmi diag -r 1; echo \"gpu-validate: dcgmi diag -r 1 exited $?\""} {
		if !strings.Contains(cmd, c) {
			t.Errorf("DCGMCommand %q lacks %q", cmd, c)
		}
	}
}

func TestNodePodRunner(t *testing.T) {
	kube := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Now())
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		p.Status.Phase = corev1.PodSucceeded
		return false, nil, nil
	})
	r := &NodePodRunner{Kube: kube, Clock: clk}
	spec := NodePodSpec{Check: "xid", Namespace: "gv", RunID: "r1", Image: DefaultXidImage, Command: XidCommand(time.Now()), HostRoot: true}
	res := r.Run(context.Background(), spec, []string{"gpu-a", strings.Repeat("n", 70)})
	for _, x := range res {
		if x.Err != nil || x.Phase != corev1.PodSucceeded || x.Log != "fake logs" || len(x.Pod) > 63 {
			t.Errorf("%+v", x)
		}
	}
	if pods, _ := kube.CoreV1().Pods("gv").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("pods left behind: %d", len(pods.Items))
	}
	p := spec.Pod("gpu-a")
	if p.Spec.NodeName != "gpu-a" || !*p.Spec.Containers[0].SecurityContext.Privileged || p.Spec.Volumes[0].HostPath.Path != "/" {
		t.Errorf("pod %+v", p.Spec)
	}
}

func FuzzParseKernelLog(f *testing.F) {
	for _, n := range []string{"kernel-journal.log", "kernel-dmesg-iso.log", "kernel-dmesg-ctime.log", "kernel-dmesg-raw.log"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		evs, _ := ParseKernelLog(strings.NewReader(s), time.Time{})
		_ = XidFindings(evs)
	})
}

func FuzzParseDCGM(f *testing.F) {
	for _, n := range []string{"dcgm-4.4.2-level1-pass.log", "dcgm-4.4.2-level1-fail-field-query.log", "dcgm-4.4.2-level1-runtime-error.log", "dcgm-3.3.8-level1-warn-env.log"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(string(b))
	}
	// The table layout (cells as dcgmi's Diag.cpp draws them).
	f.Add("|-----  Metadata  ----------+----|\n| DCGM Version | 4.4.2 |\n+-----  Integration  -------+---+\n| pcie | Fail - GPUs: 0, 2 |\n| Warning | There was an internal error during the test:  |\n|  | x |\n|  | GPU0: Fail |\n")
	f.Add("Error: Unable to complete diagnostic\n")
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseDCGM(strings.NewReader(s)); err == nil {
			_ = DCGMFindings(r, false)
		}
	})
}

func FuzzParseConfigz(f *testing.F) {
	for _, n := range []string{"configz-1.36.json", "configz-1.37-drift.json"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(string(b))
	}
	base, _ := ParseConfigz(mustRead("testdata/configz-1.36.json"))
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseConfigz([]byte(s))
		if err != nil {
			return
		}
		_ = ConfigFindings("b", DiffKubeletConfig(base, cfg, "v1.36.0", s))
	})
}

func mustRead(p string) []byte {
	b, _ := os.ReadFile(p)
	return b
}

// A feature gate a release between the two kubelets removed had to go
// from the newer kubelet's configuration, which refuses it: expected, not
// GPU-relevant drift. Dropped where the newer kubelet still knows it, it
// is drift. DevicePluginCDIDevices is GA from 1.31 and declared through
// v1.33.0, not at v1.34.0 (featuregates-removed.yaml of pkg/apilifecycle).
func TestDiffKubeletConfig_RemovedFeatureGate(t *testing.T) {
	old := loadConfigz(t, "configz-1.36.json")
	old["featureGates"].(map[string]any)["DevicePluginCDIDevices"] = true
	nw := loadConfigz(t, "configz-1.37-clean.json")
	delete(nw, "someNew137Field")
	diffs := DiffKubeletConfig(old, nw, "v1.33.4", "v1.34.1")
	if len(diffs) != 1 || diffs[0].Field != "featureGates.DevicePluginCDIDevices" || diffs[0].Class != DriftExpected ||
		!strings.Contains(diffs[0].Note, "removed in 1.34") {
		t.Errorf("removed in 1.34, node moved 1.33 -> 1.34: %+v", diffs)
	}
	if fs := ConfigFindings("gpu-old-0", diffs); StatusOf(fs) == StatusFail {
		t.Errorf("findings %+v", fs)
	}
	diffs = DiffKubeletConfig(old, nw, "v1.32.4", "v1.33.1")
	if len(diffs) != 1 || diffs[0].Class != DriftGPU {
		t.Errorf("still known to 1.33: %+v", diffs)
	}
	// Set on the newer node too (an older kubelet there): drift as any value.
	nw["featureGates"].(map[string]any)["DevicePluginCDIDevices"] = false
	if diffs = DiffKubeletConfig(old, nw, "v1.33.4", "v1.34.1"); len(diffs) != 1 || diffs[0].Class != DriftGPU {
		t.Errorf("set differently on both: %+v", diffs)
	}
}

// The default Xid window starts at the earlier of the node's boot and its
// last Ready: the command works it out on the node from /proc/stat's
// btime, and the parser keeps what it prints, so an Xid logged while the
// driver loaded at boot, before the node became Ready, is read.
func TestXidWindowFromBoot(t *testing.T) {
	ready := time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)
	n := gpuNode("a", 8, 8, nil)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}
	v := &Validator{Clock: clocktesting.NewFakeClock(ready.Add(time.Hour))}
	cmd, since := v.xidWindow(n)
	if !since.IsZero() || len(cmd) != 3 || !strings.Contains(cmd[2], fmt.Sprintf("s=%d;", ready.Unix())) ||
		!strings.Contains(cmd[2], "btime") || !strings.Contains(cmd[2], `--since "@$s"`) {
		t.Errorf("default window: %q since %s", cmd, since)
	}
	// Run the window's shell logic against a /proc/stat of a boot five
	// minutes before Ready: the start is the boot.
	dir := t.TempDir()
	stat := filepath.Join(dir, "stat")
	boot := ready.Add(-5 * time.Minute)
	if err := os.WriteFile(stat, []byte(fmt.Sprintf("cpu  1 2 3\nbtime %d\nprocesses 9\n", boot.Unix())), 0o600); err != nil {
		t.Fatal(err)
	}
	script := strings.SplitN(cmd[2], "chroot", 2)[0]
	script = strings.ReplaceAll(script, "/proc/stat", stat) + `echo "$s"`
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(boot.Unix()) {
		t.Errorf("window start %q (%v), want the boot %d", out, err, boot.Unix())
	}
	// The parser keeps a boot-time Xid the old window dropped.
	log := boot.Add(time.Minute).Format("2006-01-02T15:04:05-0700") + " gpu-a kernel: NVRM: Xid (PCI:0000:04:00): 79, pid=0, name=, GPU has fallen off the bus.\n"
	evs, err := ParseKernelLog(strings.NewReader(log), since)
	if err != nil || len(evs) != 1 || StatusOf(XidFindings(evs)) != StatusFail {
		t.Errorf("boot-time Xid: %+v %v", evs, err)
	}
	// --since still bounds both.
	v.Since = ready
	if cmd, since := v.xidWindow(n); !since.Equal(ready) || !strings.Contains(cmd[2], "2026-12-01 10:05:00 UTC") {
		t.Errorf("--since: %q %s", cmd, since)
	}
}

// A pool may mix machine types, GPU models and MIG layouts (a Karpenter
// NodePool of several instance types): each node's count is compared with
// the majority of its own kind, so a healthy 4-GPU node beside 8-GPU ones
// is not failed (alone of its kind, it has no majority: a warning asks
// for --expected-gpus), while an 8-GPU node that lost one still fails
// against its kind.
func TestCountGateMajorityPerKind(t *testing.T) {
	kind := func(n *corev1.Node, instance, product string) corev1.Node {
		n.Labels = map[string]string{"karpenter.sh/nodepool": "gpu", instanceTypeLabel: instance, GPUProductLabel: product}
		return *n
	}
	all := []corev1.Node{
		kind(gpuNode("p5-0", 8, 8, nil), "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"),
		kind(gpuNode("p5-1", 8, 8, nil), "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"),
		kind(gpuNode("p5-2", 8, 8, nil), "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"),
		kind(gpuNode("p5-3", 7, 7, nil), "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"),
		kind(gpuNode("g6-0", 4, 4, nil), "g6.12xlarge", "NVIDIA-L4"),
	}
	kinds := map[schema.GroupVersionResource]string{}
	for _, sv := range ResourceSliceVersions {
		kinds[schema.GroupVersionResource{Group: "resource.k8s.io", Version: sv, Resource: "resourceslices"}] = "ResourceSliceList"
	}
	v := &Validator{Dynamic: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)}
	items := map[string]*NodeReport{}
	var nodes []*corev1.Node
	for i := range all {
		items[all[i].Name] = &NodeReport{Name: all[i].Name, Pool: PoolOf(&all[i], "")}
		nodes = append(nodes, &all[i])
	}
	v.countGate(context.Background(), nodes, all, items)
	for name, want := range map[string]Status{"p5-0": StatusPass, "p5-3": StatusFail, "g6-0": StatusWarn} {
		if got := StatusOf(items[name].Findings); got != want {
			t.Errorf("%s: %s, want %s: %+v", name, got, want, items[name].Findings)
		}
	}
}

// Earlier releases measured every NCCL baseline over tcp by default: on
// nodes with an EFA or RDMA fabric the run goes over that fabric and the
// tcp baseline is not compared; a baseline over the fabric keeps it, and
// --fabric always wins.
func TestFabricForTCPBaseline(t *testing.T) {
	efa := gpuNode("p5-0", 8, 8, nil)
	efa.Status.Allocatable[nccl.EFAResource] = *resource.NewQuantity(32, resource.DecimalSI)
	nodes := []*corev1.Node{efa}
	v := &Validator{}
	tcp := &nccl.Baseline{Pool: "p5", BusBW: 20, Fabric: "tcp"}
	f, _, why := v.fabricFor(nodes, tcp)
	if f != nccl.FabricEFA || !v.tcpBaselineOnFabric(tcp, f) || !strings.Contains(why, "measured over tcp, which cannot see that fabric") {
		t.Errorf("tcp baseline on EFA nodes: %s %q", f, why)
	}
	if f, _, _ := v.fabricFor(nodes, &nccl.Baseline{Fabric: "efa"}); f != nccl.FabricEFA || v.tcpBaselineOnFabric(&nccl.Baseline{Fabric: "efa"}, f) {
		t.Errorf("efa baseline: %s", f)
	}
	if f, _, _ := v.fabricFor([]*corev1.Node{gpuNode("cpu-net", 8, 8, nil)}, tcp); f != nccl.FabricTCP || v.tcpBaselineOnFabric(tcp, f) {
		t.Errorf("tcp baseline on nodes without a fabric: %s", f)
	}
	forced := &Validator{Fabric: nccl.FabricTCP}
	if f, _, _ := forced.fabricFor(nodes, tcp); f != nccl.FabricTCP || forced.tcpBaselineOnFabric(tcp, f) {
		t.Errorf("--fabric tcp: %s", f)
	}
}

// A finished check pod an earlier run left (--keep, or killed before its
// cleanup) is deleted and the check runs; a running one may be another
// run testing the node and stops the check.
func TestNodePodRunnerLeftover(t *testing.T) {
	spec := NodePodSpec{Check: "dcgm", Namespace: "gv", RunID: "r2", Image: DefaultDCGMImage, Command: DCGMCommand()}
	for _, tc := range []struct {
		phase corev1.PodPhase
		ok    bool
	}{{corev1.PodSucceeded, true}, {corev1.PodFailed, true}, {corev1.PodRunning, false}, {corev1.PodPending, false}} {
		old := spec.Pod("gpu-a")
		old.Labels[RunPodLabel] = "r1"
		old.UID = "old"
		old.Status.Phase = tc.phase
		kube := fake.NewClientset(old)
		kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			p.Status.Phase = corev1.PodSucceeded
			return false, nil, nil
		})
		r := &NodePodRunner{Kube: kube, Clock: clocktesting.NewFakeClock(time.Now())}
		res := r.Run(context.Background(), spec, []string{"gpu-a"})[0]
		if tc.ok && (res.Err != nil || res.Phase != corev1.PodSucceeded) {
			t.Errorf("%s pod left: %+v", tc.phase, res)
		}
		if !tc.ok {
			if res.Err == nil || !strings.Contains(res.Err.Error(), "already exists") {
				t.Errorf("%s pod left: err %v, want already exists", tc.phase, res.Err)
			}
			if p, err := kube.CoreV1().Pods("gv").Get(context.Background(), old.Name, metav1.GetOptions{}); err != nil || p.Labels[RunPodLabel] != "r1" {
				t.Errorf("%s pod of another run touched: %v", tc.phase, err)
			}
		}
	}
}
