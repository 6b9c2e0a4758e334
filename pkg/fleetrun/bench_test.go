package fleetrun

import (
	"fmt"
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
	tb.Helper()
	f := loadFleet(tb, func(f *fleetfile.Fleet) {
		f.Metadata.Name = "fleet-120"
		f.Spec.Clusters = nil
		ring := func(name string, soak fleetfile.Duration, max int) fleetfile.Ring {
			return fleetfile.Ring{Name: name, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"gpufleet.dev/ring": name}}, Soak: soak, MaxConcurrent: max}
		}
		f.Spec.Rings = []fleetfile.Ring{ring("canary", "48h", 2), ring("staging", "72h", 4), ring("prod", "72h", 8), ring("training", "", 1)}
		f.Spec.Rings[2].Approval = &fleetfile.Approval{Approvers: 2}
		f.Spec.Caps = fleetfile.Caps{MaxConcurrentClusters: 8, MaxGPUPercentInFlight: 10}
		for i := 0; i < 120; i++ {
			r, env := "prod", "prod"
			switch {
			case i < 4:
				r, env = "canary", "staging"
			case i < 20:
				r, env = "staging", "staging"
			case i >= 60:
				r = "training"
			}
			labels := map[string]string{"gpufleet.dev/ring": r, "env": env}
			if i >= 20 && i < 36 {
				labels["gpufleet.dev/dr-pair"] = fmt.Sprintf("pair-%02d", i-20)
			} else if i >= 4 && i < 20 {
				labels["gpufleet.dev/dr-pair"] = fmt.Sprintf("pair-%02d", i-4)
			}
			f.Spec.Clusters = append(f.Spec.Clusters, fleetfile.Cluster{Name: fmt.Sprintf("%s-%03d", r, i), Labels: labels})
		}
	})
	in := map[string]ClusterInfo{}
	for i, c := range f.Spec.Clusters {
		gpus := 512
		if i >= 60 {
			gpus = 4096 // training cells
		}
		in[c.Name] = ClusterInfo{Inventory: inventory("v1.36.3", "gpu-a", "v1.34.1", "gpu-b", "v1.35.2", "cpu", "v1.36.3"), GPUs: gpus}
	}
	return f, in
}

// TestRender120ObjectsUnder1MB: every object of a 120-cluster run stays
// far under the 1 MB an etcd object may hold (a Workflow per run, a
// WorkflowTemplate per cluster).
func TestRender120ObjectsUnder1MB(t *testing.T) {
	f, in := fleet120(t)
	p := mustPlan(t, f, in, monday0930)
	p.Run = "r120"
	r, err := Render(p, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	largest := RenderedObject{}
	for _, o := range r.Objects {
		if o.Bytes > largest.Bytes {
			largest = o
		}
	}
	if largest.Bytes >= 1<<20 {
		t.Errorf("%s %s is %d bytes", largest.Kind, largest.Name, largest.Bytes)
	}
	if len(r.Objects) != 120+4+1 {
		t.Errorf("%d objects", len(r.Objects))
	}
	t.Logf("%d objects, %d bytes in all, largest %s %s %d bytes", len(r.Objects), len(r.YAML), largest.Kind, largest.Name, largest.Bytes)
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
