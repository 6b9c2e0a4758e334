package fleetrun

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpufleet/upgrade-plugins/pkg/fleetfile"
)

// fleet120 is the seed's interview fleet: 120 clusters, half of them
// training cells, two minors behind, four rings (canary, staging, prod,
// training), windows on prod and training, DR pairs across prod and
// staging, each cluster with three pools (two GPU, one CPU).
func fleet120(tb testing.TB) (*fleetfile.Fleet, map[string]ClusterInfo) {
	return fleetOf(tb, 120)
}

// fleetOf is fleet120's shape at n clusters: the rings and DR pairs in the
// same proportions (n a multiple of 30 keeps them whole).
func fleetOf(tb testing.TB, n int) (*fleetfile.Fleet, map[string]ClusterInfo) {
	tb.Helper()
	canary, staging, training, pairs := n/30, n/6, n/2, n*16/120
	f := loadFleet(tb, func(f *fleetfile.Fleet) {
		f.Metadata.Name = fmt.Sprintf("fleet-%d", n)
		withSecrets(f)
		f.Spec.Clusters = nil
		ring := func(name string, soak fleetfile.Duration, max int) fleetfile.Ring {
			return fleetfile.Ring{Name: name, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"gpufleet.dev/ring": name}}, Soak: soak, MaxConcurrent: max}
		}
		f.Spec.Rings = []fleetfile.Ring{ring("canary", "48h", 2), ring("staging", "72h", 4), ring("prod", "72h", 8), ring("training", "", 1)}
		f.Spec.Rings[2].Approval = &fleetfile.Approval{Approvers: 2}
		f.Spec.Caps = fleetfile.Caps{MaxConcurrentClusters: 8, MaxGPUPercentInFlight: 10}
		for i := 0; i < n; i++ {
			r, env := "prod", "prod"
			switch {
			case i < canary:
				r, env = "canary", "staging"
			case i < staging:
				r, env = "staging", "staging"
			case i >= training:
				r = "training"
			}
			labels := map[string]string{"gpufleet.dev/ring": r, "env": env}
			if i >= staging && i < staging+pairs {
				labels["gpufleet.dev/dr-pair"] = fmt.Sprintf("pair-%02d", i-staging)
			} else if i >= canary && i < staging {
				labels["gpufleet.dev/dr-pair"] = fmt.Sprintf("pair-%02d", i-canary)
			}
			f.Spec.Clusters = append(f.Spec.Clusters, fleetfile.Cluster{Name: fmt.Sprintf("%s-%03d", r, i), Labels: labels})
		}
	})
	in := map[string]ClusterInfo{}
	for i, c := range f.Spec.Clusters {
		gpus := 512
		if i >= training {
			gpus = 4096 // training cells
		}
		in[c.Name] = ClusterInfo{Inventory: inventory("v1.36.3", "gpu-a", "v1.34.1", "gpu-b", "v1.35.2", "cpu", "v1.36.3"), GPUs: gpus}
	}
	return f, in
}

// TestRenderObjectsUnder1MiB: every rendered object of a 120- and a
// 500-cluster run, in either layout (one Workflow, or a Workflow per
// cluster), stays under 1 MiB, the default limit Argo's packer puts
// on a Workflow (getMaxWorkflowSize, 1024 * 1024, in
// workflow/packer/packer.go at argo-workflows v3.7.15). These are the
// objects as applied; a Workflow's status grows as it runs (README,
// "Object sizes").
func TestRenderObjectsUnder1MiB(t *testing.T) {
	readme := strings.Join(strings.Fields(readFile(t, filepath.Join("..", "..", "README.md"))), " ")
	for _, perCluster := range []bool{false, true} {
		for _, n := range []int{120, 500} {
			f, in := fleetOf(t, n)
			p := mustPlan(t, f, in, monday0930)
			p.Run = fmt.Sprintf("r%d", n)
			r, err := Render(p, RenderOptions{WorkflowPerCluster: perCluster})
			if err != nil {
				t.Fatal(err)
			}
			largest, run := RenderedObject{}, RenderedObject{}
			for _, o := range r.Objects {
				if o.Bytes > largest.Bytes {
					largest = o
				}
				if o.Kind == "Workflow" {
					run = o
				}
			}
			if largest.Bytes >= 1<<20 {
				t.Errorf("%d clusters: %s %s is %d bytes", n, largest.Kind, largest.Name, largest.Bytes)
			}
			if want := n + 4 + 1 + map[bool]int{true: 3}[perCluster]; len(r.Objects) != want { // + the launcher's account, Role and binding
				t.Errorf("%d clusters: %d objects", n, len(r.Objects))
			}
			t.Logf("per-cluster %v, %d clusters: %d objects, %d bytes in all, largest %s %s %d bytes, the run's Workflow %d bytes", perCluster, n, len(r.Objects), len(r.YAML), largest.Kind, largest.Name, largest.Bytes, run.Bytes)
			// The README states these sizes as this render computes them.
			want := fmt.Sprintf("%d-cluster run's largest object is its %s, %s bytes\n(%d objects, %.2f MB of YAML in all)", n, largest.Kind, thousands(largest.Bytes), len(r.Objects), float64(len(r.YAML))/1e6)
			if perCluster {
				kind := "a cluster's WorkflowTemplate"
				if largest.Kind == "Workflow" {
					kind = "the run's Workflow"
				}
				want = fmt.Sprintf("with a Workflow per cluster, a %d-cluster run's largest object is %s, %s bytes\n(%d objects, %.2f MB of YAML in all)", n, kind, thousands(largest.Bytes), len(r.Objects), float64(len(r.YAML))/1e6)
			}
			if !strings.Contains(readme, strings.Join(strings.Fields(want), " ")) {
				t.Errorf("README does not state the %d-cluster sizes as rendered: want %q", n, want)
			}
		}
	}
}

// thousands writes n with commas: 33966 is 33,966.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// BenchmarkPlanAndRender120 plans (lint, batches, 120 skew plans) and
// renders a 120-cluster fleet from read inventories: the work between
// reading the clusters and writing YAML.
func BenchmarkPlanAndRender120(b *testing.B) {
	f, in := fleet120(b)
	var largest, total int
	b.ReportAllocs()
	for b.Loop() {
		p, err := MakePlan(f, in, monday0930.Add(time.Duration(b.N)))
		if err != nil {
			b.Fatal(err)
		}
		p.Run = "r120"
		r, err := Render(p, RenderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		total = len(r.YAML)
		for _, o := range r.Objects {
			largest = max(largest, o.Bytes)
		}
	}
	if largest >= 1<<20 {
		b.Fatalf("an object of %d bytes", largest)
	}
	b.ReportMetric(float64(largest), "largest-object-bytes")
	b.ReportMetric(float64(total), "yaml-bytes")
}
