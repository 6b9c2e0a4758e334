package nccl

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"math/rand"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func testSpec(t *testing.T, l Launcher, f Fabric) JobSpec {
	t.Helper()
	key, err := NewSSHKey(rand.New(rand.NewSource(1)))
	if err != nil {
		t.Fatal(err)
	}
	return JobSpec{Name: "gv-nccl-abc", Namespace: "gpu-validate", RunID: "abc", Launcher: l, Fabric: f,
		Image: "registry.example/nccl-tests@sha256:" + strings.Repeat("a", 64),
		Nodes: []string{"gpu-b", "gpu-a"}, GPUsPerNode: 8, SSHKey: key, Deadline: 10 * time.Minute}
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil || !ok {
		t.Fatalf("%s %s: no field %v (%v)", u.GetKind(), u.GetName(), path, err)
	}
	return v
}

func podTemplate(t *testing.T, m *Manifest) map[string]any {
	main := m.Main()
	switch main.GetKind() {
	case "Job":
		return nested(t, main, "spec", "template").(map[string]any)
	case "JobSet":
		rjs := nested(t, main, "spec", "replicatedJobs").([]any)
		return rjs[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["template"].(map[string]any)
	default:
		return nested(t, main, "spec", "mpiReplicaSpecs", "Worker", "template").(map[string]any)
	}
}

func TestRender_Launchers(t *testing.T) {
	for _, l := range Launchers {
		t.Run(string(l), func(t *testing.T) {
			m, err := Render(testSpec(t, l, FabricInfiniBand))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range m.Objects {
				kinds = append(kinds, o.GetKind())
				if o.GetLabels()[RunLabel] != "abc" || o.GetNamespace() != "gpu-validate" {
					t.Errorf("%s: labels %v ns %q", o.GetKind(), o.GetLabels(), o.GetNamespace())
				}
			}
			want := map[Launcher]string{LauncherJob: "Secret,Service,Job", LauncherJobSet: "Secret,JobSet", LauncherMPIJob: "MPIJob"}[l]
			if got := strings.Join(kinds, ","); got != want {
				t.Errorf("kinds %s, want %s", got, want)
			}
			tmpl := &unstructured.Unstructured{Object: podTemplate(t, m)}
			spec := nested(t, tmpl, "spec").(map[string]any)
			if spec["restartPolicy"] != "Never" {
				t.Errorf("restartPolicy %v", spec["restartPolicy"])
			}
			terms := nested(t, tmpl, "spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms").([]any)
			if len(terms) != 2 {
				t.Fatalf("node terms %v", terms)
			}
			for i, want := range []string{"gpu-a", "gpu-b"} {
				fields := terms[i].(map[string]any)["matchFields"].([]any)[0].(map[string]any)
				if fields["key"] != "metadata.name" || len(fields["values"].([]any)) != 1 || fields["values"].([]any)[0] != want {
					t.Errorf("node pinning %v", fields)
				}
			}
			if anti := nested(t, tmpl, "spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution").([]any); len(anti) != 1 {
				t.Errorf("anti-affinity %v", anti)
			}
			c := nested(t, tmpl, "spec", "containers").([]any)[0].(map[string]any)
			lim := c["resources"].(map[string]any)["limits"].(map[string]any)
			if lim["nvidia.com/gpu"] != "8" || lim["rdma/rdma_shared_device_a"] != "1" {
				t.Errorf("limits %v", lim)
			}
			if caps := c["securityContext"].(map[string]any)["capabilities"].(map[string]any)["add"].([]any); caps[0] != "IPC_LOCK" {
				t.Errorf("caps %v", caps)
			}
			vols := spec["volumes"].([]any)
			if vols[0].(map[string]any)["emptyDir"].(map[string]any)["medium"] != "Memory" {
				t.Errorf("volumes %v", vols)
			}
			y, err := m.YAML()
			if err != nil || bytes.Contains(y, []byte("creationTimestamp")) || bytes.Contains(y, []byte("status:")) {
				t.Errorf("yaml: %v\n%s", err, y)
			}
			if m.ExpectedRanks() != 16 {
				t.Errorf("ranks %d", m.ExpectedRanks())
			}
		})
	}
}

func TestRender_NoRetriesAndDeadline(t *testing.T) {
	m, _ := Render(testSpec(t, LauncherJob, FabricTCP))
	job := m.Main()
	if nested(t, job, "spec", "backoffLimit") != int64(0) || nested(t, job, "spec", "activeDeadlineSeconds") != int64(600) ||
		nested(t, job, "spec", "completionMode") != "Indexed" || nested(t, job, "spec", "parallelism") != int64(2) {
		t.Errorf("job spec %v", job.Object["spec"])
	}
	script := nested(t, &unstructured.Unstructured{Object: podTemplate(t, m)}, "spec", "containers").([]any)[0].(map[string]any)["command"].([]any)[2].(string)
	for _, s := range []string{"gv-nccl-abc-0.gv-nccl-abc slots=8", "-np 16 -N 8", "-x NCCL_DEBUG -x NCCL_IB_DISABLE -x NCCL_NET", "all_reduce_perf -b 1073741824 -e 8589934592 -f 2 -g 1 -c 1"} {
		if !strings.Contains(script, s) {
			t.Errorf("script lacks %q:\n%s", s, script)
		}
	}
	js, _ := Render(testSpec(t, LauncherJobSet, FabricTCP))
	if fp := nested(t, js.Main(), "spec", "failurePolicy").(map[string]any); fp["maxRestarts"] != nil {
		t.Errorf("jobset failure policy %v", fp)
	}
	mpi, _ := Render(testSpec(t, LauncherMPIJob, FabricEFA))
	if nested(t, mpi.Main(), "spec", "runPolicy", "backoffLimit") != int64(0) || nested(t, mpi.Main(), "spec", "slotsPerWorker") != int64(8) {
		t.Errorf("mpijob %v", mpi.Main().Object["spec"])
	}
}

func TestRender_Fabrics(t *testing.T) {
	for _, f := range Fabrics {
		m, err := Render(testSpec(t, LauncherJob, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		y, _ := m.YAML()
		want := map[Fabric]string{FabricInfiniBand: "NCCL_NET\n          value: IB", FabricRoCE: "NCCL_IB_GID_INDEX", FabricEFA: "vpc.amazonaws.com/efa: \"32\"",
			FabricTCP: "value: Socket"}[f]
		if !strings.Contains(string(y), want) {
			t.Errorf("%s: yaml lacks %q", f, want)
		}
	}
	// GKE GPUDirect-TCPX/TCPXO is refused with the alternative named
	// rather than rendered without RxDM (NCCL would fall back to TCP).
	for _, name := range []string{"gke", "tcpxo", "multinetwork"} {
		if _, err := ParseFabric(name); !errors.Is(err, ErrGKEFabric) || !strings.Contains(err.Error(), "nccl-test-latest.yaml") {
			t.Errorf("ParseFabric(%q) = %v", name, err)
		}
	}
}

func TestRender_Invalid(t *testing.T) {
	for name, mut := range map[string]func(*JobSpec){
		"no image": func(s *JobSpec) { s.Image = "" },
		"no nodes": func(s *JobSpec) { s.Nodes = nil },
		"no gpus":  func(s *JobSpec) { s.GPUsPerNode = 0 },
		"no key":   func(s *JobSpec) { s.SSHKey = nil },
		"sizes":    func(s *JobSpec) { s.MinBytes, s.MaxBytes = 8, 4 },
		"long":     func(s *JobSpec) { s.Name = strings.Repeat("a", 41) },
	} {
		s := testSpec(t, LauncherJob, FabricTCP)
		mut(&s)
		if _, err := Render(s); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	for _, bad := range []string{"slurm", ""} {
		if _, err := ParseLauncher(bad); err == nil {
			t.Errorf("ParseLauncher(%q)", bad)
		}
		if _, err := ParseFabric(bad); err == nil {
			t.Errorf("ParseFabric(%q)", bad)
		}
	}
}

func TestSSHKey(t *testing.T) {
	k, err := NewSSHKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(k.PrivatePEM, []byte("-----BEGIN EC PRIVATE KEY-----")) || !bytes.HasPrefix(k.AuthorizedKey, []byte("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABB")) {
		t.Errorf("key %s / %s", k.PrivatePEM, k.AuthorizedKey)
	}
}

func TestResolveImage(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(host + "/nccl/nccl-tests:2.16")
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ctx := context.Background()
	got, err := ResolveImage(ctx, tag.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/nccl/nccl-tests@" + d.String(); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	pinned := host + "/nccl/nccl-tests@" + d.String()
	if got, _ := ResolveImage(ctx, pinned); got != pinned {
		t.Errorf("digest changed: %s", got)
	}
	if _, err := ResolveImage(ctx, host+"/nccl/missing:1"); err == nil || !strings.Contains(err.Error(), "resolving image") {
		t.Errorf("missing image: %v", err)
	}
	if _, err := ResolveImage(ctx, "UPPER/case::x"); err == nil {
		t.Error("bad reference resolved")
	}
}

// The efa profile forces NCCL onto the OFI plugin (NCCL_NET), so that a
// plugin that does not load is an error rather than a silent run over
// sockets; the default fabric follows the nodes' devices.
func TestFabricEFAForcesOFIAndDetection(t *testing.T) {
	p, err := FabricEFA.profile(FabricOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range p.env {
		env[e.Name] = e.Value
	}
	if env["NCCL_NET"] != "AWS Libfabric" || env["FI_PROVIDER"] != "efa" {
		t.Errorf("efa env: %v", env)
	}
	efa := corev1.ResourceList{EFAResource: resource.MustParse("32"), "nvidia.com/gpu": resource.MustParse("8")}
	ib := corev1.ResourceList{"rdma/rdma_shared_device_a": resource.MustParse("1")}
	none := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	for _, tc := range []struct {
		nodes []corev1.ResourceList
		want  Fabric
		rdma  string
	}{
		{[]corev1.ResourceList{efa, efa}, FabricEFA, ""},
		{[]corev1.ResourceList{ib, ib}, FabricInfiniBand, "rdma/rdma_shared_device_a"},
		{[]corev1.ResourceList{ib, none}, FabricTCP, ""},
		{[]corev1.ResourceList{none}, FabricTCP, ""},
	} {
		if f, rdma, why := DetectFabric(tc.nodes); f != tc.want || rdma != tc.rdma || why == "" {
			t.Errorf("%v: %s %q %q", tc.nodes, f, rdma, why)
		}
	}
}
