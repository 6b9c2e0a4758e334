package gpuvalidate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpufleet/upgrade-plugins/pkg/cli"
	"github.com/gpufleet/upgrade-plugins/pkg/gpucheck"
)

func node(name, pool, version string, capacity, alloc int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"cloud.google.com/gke-nodepool": pool}}}
	n.Status.NodeInfo.KubeletVersion = version
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Status.Capacity = corev1.ResourceList{gpucheck.GPUResource: *resource.NewQuantity(int64(capacity), resource.DecimalSI)}
	n.Status.Allocatable = corev1.ResourceList{gpucheck.GPUResource: *resource.NewQuantity(int64(alloc), resource.DecimalSI)}
	return n
}

func dyn() *dynamicfake.FakeDynamicClient {
	kinds := map[schema.GroupVersionResource]string{}
	for _, v := range gpucheck.ResourceSliceVersions {
		kinds[schema.GroupVersionResource{Group: "resource.k8s.io", Version: v, Resource: "resourceslices"}] = "ResourceSliceList"
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds)
}

func configzFixture(t *testing.T, perNode map[string]string, forbidden bool) {
	t.Helper()
	old := newConfigzFetcher
	t.Cleanup(func() { newConfigzFetcher = old })
	newConfigzFetcher = func(kubernetes.Interface) gpucheck.ConfigzFetcher {
		return func(_ context.Context, n string) ([]byte, error) {
			if forbidden {
				return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes/proxy"}, n, nil)
			}
			b, err := os.ReadFile("../../pkg/gpucheck/testdata/" + perNode[n])
			return b, err
		}
	}
}

func run(t *testing.T, kube *fake.Clientset, args ...string) (string, string, int) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cli.NewTestClientGetter().WithKube(kube).WithDynamic(dyn()), streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	if err != nil {
		var fe *cli.FindingsError
		if !asFindings(err, &fe) {
			errOut.WriteString("error: " + err.Error() + "\n")
		}
	}
	return out.String(), errOut.String(), cli.ExitCode(err)
}

func asFindings(err error, fe **cli.FindingsError) bool {
	f, ok := err.(*cli.FindingsError)
	if ok {
		*fe = f
	}
	return ok
}

func TestNodes_SevenOfEight(t *testing.T) {
	configzFixture(t, nil, false)
	kube := fake.NewClientset(node("gpu-a-0", "h100-a", "v1.37.2", 8, 8), node("gpu-a-1", "h100-a", "v1.37.2", 7, 7))
	out, errOut, code := run(t, kube, "nodes", "gpu-a-0", "gpu-a-1", "--expected-gpus", "8", "--config-drift=false", "--color", "never")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"gpu-a-0   h100-a   v1.37.2   8/8    OK", "gpu-a-1   h100-a   v1.37.2   7/8    FAIL     missing GPUs: capacity 7 of 8 expected (flag)", "2 nodes: 1 passed, 0 warned, 1 failed; GPUs 15 found of 16 expected"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestNodes_ConfigDriftJSON(t *testing.T) {
	configzFixture(t, map[string]string{"old-0": "configz-1.36.json", "new-0": "configz-1.37-drift.json", "new-1": "configz-1.37-clean.json"}, false)
	kube := fake.NewClientset(node("old-0", "p", "v1.36.4", 8, 8), node("new-0", "p", "v1.37.2", 8, 8), node("new-1", "p", "v1.37.2", 8, 8))
	out, errOut, code := run(t, kube, "nodes", "new-0", "new-1", "--expected-gpus", "8", "-o", "json")
	if code != cli.ExitFindings {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Kind != "GPUValidateReport" || rep.Items[0].Status != gpucheck.StatusFail || rep.Items[1].Status != gpucheck.StatusPass || rep.Items[0].ConfigBaseline != "old-0" {
		t.Errorf("%s", out)
	}
	if !strings.Contains(out, `topologyManagerPolicy is \"best-effort\" (\"single-numa-node\" on old-0)`) {
		t.Errorf("no topology drift in %s", out)
	}
}

func TestNodes_ConfigzForbidden(t *testing.T) {
	configzFixture(t, nil, true)
	kube := fake.NewClientset(node("old-0", "p", "v1.36.4", 8, 8), node("new-0", "p", "v1.37.2", 8, 8))
	out, errOut, code := run(t, kube, "nodes", "new-0", "--expected-gpus", "8")
	if code != cli.ExitUnavailable || !strings.Contains(errOut, "nodes/proxy") || !strings.Contains(out, "forbidden (needs get on nodes/proxy)") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
}

func TestNCCL_GKEFabricRefused(t *testing.T) {
	kube := fake.NewClientset(node("a", "p", "v1.37.2", 8, 8))
	_, errOut, code := run(t, kube, "nccl", "a", "--image", "x", "--fabric", "tcpxo", "--gpus-per-node", "8", "--print-manifest")
	if code != cli.ExitUsage || !strings.Contains(errOut, "RxDM") || !strings.Contains(errOut, "--fabric tcp") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestNodes_Usage(t *testing.T) {
	kube := fake.NewClientset(node("a", "p", "v1.37.2", 8, 8))
	for _, args := range [][]string{
		{"nodes"},
		{"nodes", "a", "-l", "x=y"},
		{"nodes", "a", "--nccl"},
		{"nodes", "a", "--since", "2h"},
		{"nodes", "a", "--nccl", "--image", "x", "--tolerance", "abc"},
		{"nodes", "a", "-o", "json", "-q"},
		{"nodes", "missing"},
		{"nccl", "a", "--image", "x", "--launcher", "slurm"},
		{"nccl", "a", "--image", "x", "--fabric", "gke"},
	} {
		if _, errOut, code := run(t, kube, args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}

func TestNCCL_PrintManifestOffline(t *testing.T) {
	streams, _, out, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(&cli.TestClientGetter{Err: os.ErrNotExist}, streams)
	cmd.SetArgs([]string{"nccl", "gpu-a", "gpu-b", "--image", "registry.example/nccl@sha256:" + strings.Repeat("b", 64), "--gpus-per-node", "8", "--print-manifest", "--launcher", "jobset"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: JobSet", "nvidia.com/gpu: \"8\"", "IPC_LOCK", "medium: Memory", "# The SSH key of the launcher is not printed", "kubectl create secret generic gpu-validate-nccl-"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("manifest lacks %q", want)
		}
	}
	// No private key in what goes into runbooks and Git.
	for _, bad := range []string{"kind: Secret", "PRIVATE KEY", "id_ecdsa: "} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("manifest holds %q", bad)
		}
	}
}

// TestNCCL_PrintManifestNoRegistry: printing looks no image up unless
// asked with --no-resolve=false; --dry-run=client prints the same.
func TestNCCL_PrintManifestNoRegistry(t *testing.T) {
	old := resolveImage
	t.Cleanup(func() { resolveImage = old })
	lookups := 0
	resolveImage = func(_ context.Context, ref string) (string, error) {
		lookups++
		return ref + "@sha256:" + strings.Repeat("d", 64), nil
	}
	for _, tc := range []struct {
		args    []string
		lookups int
		image   string
	}{
		{[]string{"--print-manifest"}, 0, "image: nccl:1\n"},
		{[]string{"--dry-run=client"}, 0, "image: nccl:1\n"},
		{[]string{"--print-manifest", "--no-resolve=false"}, 1, "image: nccl:1@sha256:"},
	} {
		lookups = 0
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		cmd := NewCmd(&cli.TestClientGetter{Err: os.ErrNotExist}, streams)
		cmd.SetArgs(append([]string{"nccl", "gpu-a", "gpu-b", "--image", "nccl:1", "--gpus-per-node", "8"}, tc.args...))
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if lookups != tc.lookups || !strings.Contains(out.String(), tc.image) {
			t.Errorf("%v: %d registry lookups, want %d; image line %q missing", tc.args, lookups, tc.lookups, tc.image)
		}
	}
}

func TestNCCL_RunAgainstBaseline(t *testing.T) {
	old := resolveImage
	t.Cleanup(func() { resolveImage = old })
	resolveImage = func(_ context.Context, ref string) (string, error) {
		return ref + "@sha256:" + strings.Repeat("c", 64), nil
	}
	slow, _ := os.ReadFile("../../pkg/nccl/testdata/allreduce-slow.txt")
	kube := fake.NewClientset(node("gpu-a-0", "h100-a", "v1.37.2", 8, 8), node("gpu-a-1", "h100-a", "v1.37.2", 8, 8),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gpu-validate-nccl-baselines", Namespace: "default"},
			Data: map[string]string{"h100-a.json": `{"pool":"h100-a","busBwGBps":370,"sizeBytes":8589934592}`}})
	// The fake has no Job controller: answer the pod list with a finished
	// index-0 pod whose log the fake serves as "fake logs".
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		lbl := map[string]string{}
		for _, kv := range strings.Split(a.(k8stesting.ListAction).GetListRestrictions().Labels.String(), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				lbl[k] = v
			}
		}
		return true, &corev1.PodList{Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p0", Namespace: "default", Labels: lbl}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}}}, nil
	})
	_ = slow
	out, errOut, code := run(t, kube, "nccl", "gpu-a-0", "gpu-a-1", "--image", "nccl:1", "-o", "json", "--timeout", "3s")
	// "fake logs" holds no results: the gate fails with a reason.
	if code != cli.ExitFindings || !strings.Contains(out, "no all_reduce_perf results") {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	_ = bytes.MinRead
}

// When ResourceSlices cannot be read, the report itself says DRA devices
// were not counted: scripts reading -o json, which often drop stderr, must
// see why a DRA-only node shows no GPUs.
func TestNodes_DRAWarningInReport(t *testing.T) {
	configzFixture(t, nil, false)
	kube := fake.NewClientset(node("gpu-a-0", "h100-a", "v1.37.2", 8, 8))
	d := dyn()
	d.PrependReactor("list", "resourceslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "", nil)
	})
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(cli.NewTestClientGetter().WithKube(kube).WithDynamic(d), streams)
	cmd.SetArgs([]string{"nodes", "gpu-a-0", "--expected-gpus", "8", "--config-drift=false", "-o", "json"})
	err := cmd.ExecuteContext(context.Background())
	if code := cli.ExitCode(err); code != cli.ExitOK {
		t.Fatalf("exit %d: %v\n%s", code, err, errOut)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "DRA devices not counted") || !strings.Contains(rep.Warnings[0], "forbidden") {
		t.Errorf("warnings = %q", rep.Warnings)
	}
}

// TestNodes_DCGMWarnFailsFlag: the flag reaches the gate (the e2e test of
// gpu-validate shows its effect on a node).
func TestNodes_DCGMWarnFailsFlag(t *testing.T) {
	for args, want := range map[string]bool{"--dcgm": false, "--dcgm --dcgm-warn-fails": true} {
		cmd := &cobra.Command{}
		o := NewOptions(genericiooptions.NewTestIOStreamsDiscard())
		o.AddCheckFlags(cmd)
		if err := cmd.Flags().Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		if v := o.validator(clients{}, nil); v.DCGMWarnFails != want || !v.DCGM {
			t.Errorf("%q: DCGMWarnFails %v", args, v.DCGMWarnFails)
		}
	}
}

// TestNCCL_ServerDryRun: --dry-run=server sends every object of the test as
// a create with dryRun=All and runs nothing; an object the server refuses
// is a finding.
func TestNCCL_ServerDryRun(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		d := dyn()
		var created []string
		d.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			c := a.(k8stesting.CreateActionImpl)
			if len(c.CreateOptions.DryRun) != 1 || c.CreateOptions.DryRun[0] != metav1.DryRunAll {
				t.Errorf("create without dryRun=All: %v", a)
			}
			created = append(created, a.GetResource().Resource)
			if refuse && a.GetResource().Resource == "jobs" {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x", errors.New(`violates PodSecurity "baseline:latest": privileged`))
			}
			return true, c.GetObject(), nil
		})
		streams, _, out, errOut := genericiooptions.NewTestIOStreams()
		cmd := NewCmd(cli.NewTestClientGetter().WithKube(fake.NewClientset(node("gpu-a-0", "h100-a", "v1.37.2", 8, 8))).WithDynamic(d), streams)
		cmd.SetArgs([]string{"nccl", "gpu-a-0", "--image", "nccl:1", "--no-resolve", "--dry-run=server"})
		err := cmd.ExecuteContext(context.Background())
		want := cli.ExitOK
		if refuse {
			want = cli.ExitFindings
		}
		if code := cli.ExitCode(err); code != want || !strings.Contains(out.String(), "job.batch/gpu-validate-nccl-") {
			t.Errorf("refuse=%v: exit %d (%v)\n%s\n%s", refuse, code, err, out.String(), errOut.String())
		}
		if len(created) < 2 {
			t.Errorf("created %v", created)
		}
	}
}
