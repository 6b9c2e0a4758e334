package nccl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realNCCL is the shared folder of real nccl-tests outputs, read in place;
// its README gives the source of every file.
var realNCCL = filepath.Join("..", "..", "..", "shared", "real-outputs", "nccl-tests")

func readRealNCCL(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(realNCCL, name))
	if os.IsNotExist(err) {
		t.Skipf("%s not present", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRealOutputs(t *testing.T) {
	cases := []struct {
		file  string
		busbw float64 // out-of-place at 8 GiB
		oob   bool
	}{
		{"all_reduce_perf_p5-48xlarge_mpirun-tagged_aws-batch.txt", 480.43, true},
		{"all_reduce_perf_2node_p5_srun_table-only.txt", 0, false},
		{"all_reduce_perf_2node_p4de_srun_table-only.txt", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			res, err := ParseString(readRealNCCL(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if res.WrongTotal() != 0 || len(res.Errors) != 0 || (res.OutOfBounds != nil) != tc.oob {
				t.Errorf("wrong %d errors %v oob %v", res.WrongTotal(), res.Errors, res.OutOfBounds)
			}
			top := res.Rows[len(res.Rows)-1]
			size := top.SizeBytes
			if tc.busbw > 0 {
				row, ok := res.Row(DefaultGateSize)
				if !ok || row.OutOfPlace.BusBW != tc.busbw {
					t.Fatalf("8G row %+v", row)
				}
				size = DefaultGateSize
			}
			bw := func() float64 { r, _ := res.Row(size); return r.OutOfPlace.BusBW }()
			pass := Gate(GateInput{Result: res, SizeBytes: size, Baseline: &Baseline{BusBW: bw, SizeBytes: size}})
			if pass.Verdict != VerdictPass {
				t.Errorf("at baseline: %+v", pass)
			}
			slow := Gate(GateInput{Result: res, SizeBytes: size, Baseline: &Baseline{BusBW: bw * 1.5, SizeBytes: size}})
			if slow.Verdict != VerdictFail || !strings.Contains(strings.Join(slow.Reasons, ";"), "below the baseline") {
				t.Errorf("under baseline: %+v", slow)
			}
			failed := Gate(GateInput{Result: res, SizeBytes: size, Baseline: &Baseline{BusBW: bw, SizeBytes: size}, Failed: true})
			if failed.Verdict != VerdictFail {
				t.Errorf("non-zero exit: %+v", failed)
			}
		})
	}
	if _, err := ParseString(readRealNCCL(t, "all_reduce_perf_1node_8xH100_cuda-init-error.txt")); !errors.Is(err, ErrNoResults) {
		t.Errorf("cuda init error: %v", err)
	}
}

// TestErrorLineWarns: a run that passes but whose output carries an error
// line (NCCL's last WARN, printed at exit by all_reduce_perf) is a warning,
// not a failure. The line is added to a real passing output.
func TestErrorLineWarns(t *testing.T) {
	out := readRealNCCL(t, "all_reduce_perf_p5-48xlarge_mpirun-tagged_aws-batch.txt")
	out += "[1,0]<stdout>:# error: NET/IB : Got async event : port error\n"
	res, err := ParseString(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 1 {
		t.Fatalf("errors %v", res.Errors)
	}
	g := Gate(GateInput{Result: res, Baseline: &Baseline{BusBW: 480, SizeBytes: DefaultGateSize}})
	if g.Verdict != VerdictWarn || !strings.Contains(strings.Join(g.Reasons, ";"), "NET/IB : Got async event") {
		t.Errorf("%+v", g)
	}
	g = Gate(GateInput{Result: res, Baseline: &Baseline{BusBW: 600, SizeBytes: DefaultGateSize}})
	if g.Verdict != VerdictFail {
		t.Errorf("under baseline with an error line: %+v", g)
	}
}

// The baseline's shape is compared, not only its size: a run on one node
// against a multi-node baseline (or the other way), other GPUs per node or
// another fabric fails as not comparable; another count of several nodes
// is compared, with a warning; without a baseline
// the --min-busbw floor judges, and without either the run only warns.
// On the real p5.48xlarge run (156.7 GB/s average bus bandwidth).
func TestGateShapeAndFloor(t *testing.T) {
	res, err := ParseString(readRealNCCL(t, "all_reduce_perf_p5-48xlarge_mpirun-tagged_aws-batch.txt"))
	if err != nil {
		t.Fatal(err)
	}
	row, ok := res.Row(DefaultGateSize)
	if !ok {
		row = res.Rows[len(res.Rows)-1]
	}
	size, bw := row.SizeBytes, row.OutOfPlace.BusBW
	base := &Baseline{BusBW: bw, SizeBytes: size, Nodes: 2, GPUsPerNode: 8, Fabric: "efa"}
	in := GateInput{Result: res, SizeBytes: size, Baseline: base, Nodes: 2, GPUsPerNode: 8, Fabric: "efa"}
	if g := Gate(in); g.Verdict != VerdictPass {
		t.Fatalf("the baseline's shape: %+v", g)
	}
	for _, tc := range []struct {
		name string
		edit func(*GateInput)
		says string
	}{
		{"one node against a multi-node baseline", func(i *GateInput) { i.Nodes = 1 }, "1 nodes, the baseline 2"},
		{"fewer GPUs per node", func(i *GateInput) { i.GPUsPerNode = 4 }, "4 GPUs per node, the baseline 8"},
		{"another fabric", func(i *GateInput) { i.Fabric = "tcp" }, "fabric tcp, the baseline efa"},
	} {
		i := in
		tc.edit(&i)
		if g := Gate(i); g.Verdict != VerdictFail || !strings.Contains(strings.Join(g.Reasons, ";"), "not comparable with the pool's baseline: "+tc.says) {
			t.Errorf("%s: %+v", tc.name, g)
		}
	}
	// More or fewer nodes, still more than one: bus bandwidth is corrected
	// for the rank count, so the baseline judges, with a warning.
	for _, n := range []int{3, 4} {
		i := in
		i.Nodes = n
		if g := Gate(i); g.Verdict != VerdictWarn || !strings.Contains(strings.Join(g.Reasons, ";"), "the baseline 2: bus bandwidth is corrected for the rank count") {
			t.Errorf("%d nodes against a 2-node baseline: %+v", n, g)
		}
		i.MinBusBW = 0
		i.Baseline = &Baseline{BusBW: bw * 2, SizeBytes: size, Nodes: 2, GPUsPerNode: 8, Fabric: "efa"}
		if g := Gate(i); g.Verdict != VerdictFail {
			t.Errorf("%d nodes under the baseline: %+v", n, g)
		}
	}
	noBase := GateInput{Result: res, SizeBytes: size}
	if g := Gate(noBase); g.Verdict != VerdictWarn || !strings.Contains(strings.Join(g.Reasons, ";"), "no --min-busbw floor") {
		t.Errorf("no baseline, no floor: %+v", g)
	}
	noBase.MinBusBW = bw * 2
	if g := Gate(noBase); g.Verdict != VerdictFail || !strings.Contains(strings.Join(g.Reasons, ";"), "below the floor") {
		t.Errorf("under the floor: %+v", g)
	}
	noBase.MinBusBW = bw / 2
	if g := Gate(noBase); g.Verdict != VerdictPass {
		t.Errorf("over the floor: %+v", g)
	}
	// The floor holds beside a baseline too.
	in.MinBusBW = bw * 2
	if g := Gate(in); g.Verdict != VerdictFail || g.MinBusBW != bw*2 {
		t.Errorf("floor above the baseline: %+v", g)
	}
}
